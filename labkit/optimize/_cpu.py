"""What this machine's CPU can do natively for reduced precision, and what that implies.

Flags come from ``/proc/cpuinfo``; the ISA level ATen's kernels dispatch to from
``torch.backends.cpu.get_cpu_capability()``. :func:`implications` turns them into
sentences; :func:`why_slower` explains a recipe that ``compare`` measured slower
than its baseline and names what would be faster on this CPU.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

_FLAGS = (
    "avx512_bf16",
    "amx_bf16",
    "amx_tile",
    "avx512_fp16",
    "amx_fp16",
    "amx_int8",
    "avx512_vnni",
    "avx_vnni",
)


@functools.lru_cache(maxsize=1)
def cpu_flags() -> frozenset[str]:
    """The reduced-precision flags of this CPU that labkit cares about: the one source every
    note reads. ``/proc/cpuinfo`` on Linux; elsewhere what torch's own CPU probe says."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return _torch_flags()
    for line in text.splitlines():
        if line.startswith("flags"):
            present = set(line.split(":", 1)[1].split())
            return frozenset(f for f in _FLAGS if f in present)
    return _torch_flags()


def _torch_flags() -> frozenset[str]:
    """The same flags from ``torch.cpu``'s probes (macOS, Windows, containers without /proc)."""
    import torch

    probes = {
        "avx512_bf16": "_is_avx512_bf16_supported",
        "amx_tile": "_is_amx_tile_supported",
        "amx_fp16": "_is_amx_fp16_supported",
        "avx512_vnni": "_is_vnni_supported",
    }
    out = set()
    for flag, name in probes.items():
        probe = getattr(torch.cpu, name, None)
        try:
            if probe is not None and probe():
                out.add(flag)
        except Exception:  # a probe this build lacks or cannot run
            continue
    if "amx_tile" in out:  # torch probes the tile unit; its bf16/int8 forms come with it
        out |= {"amx_bf16", "amx_int8"}
    return frozenset(out)


@functools.lru_cache(maxsize=1)
def capability() -> str:
    """The ISA level ATen's CPU kernels use here, e.g. ``'AVX512'`` (or ``'unknown'``)."""
    import torch

    try:
        return str(torch.backends.cpu.get_cpu_capability())
    except Exception:
        return "unknown"


def bf16_unit() -> str | None:
    """What computes bf16 here, in the words every note uses: ``'AMX-BF16 tiles'``,
    ``'AVX512-BF16 (no AMX)'``, or ``None`` (emulated)."""
    flags = cpu_flags()
    if "amx_bf16" in flags:
        return "AMX-BF16 tiles"
    if "avx512_bf16" in flags:
        return "AVX512-BF16 (no AMX)"
    return None


def native_bf16() -> bool:
    """True when the CPU computes bf16 natively (AVX512-BF16 or AMX-BF16)."""
    return bf16_unit() is not None


def native_fp16() -> bool:
    """True when the CPU computes fp16 natively (AVX512-FP16 or AMX-FP16)."""
    return bool({"avx512_fp16", "amx_fp16"} & cpu_flags())


def int8_dot() -> bool:
    """True when the CPU has int8 dot-product instructions (VNNI or AMX-INT8)."""
    return bool({"avx512_vnni", "avx_vnni", "amx_int8"} & cpu_flags())


def amx() -> bool:
    """True when the CPU has AMX tile units (bf16 or int8)."""
    return bool({"amx_bf16", "amx_int8", "amx_tile"} & cpu_flags())


def describe() -> str:
    """One line for notes and benchmark headers, e.g. ``'CPU bf16: native; fp16: ...'``."""
    flags = sorted(cpu_flags())
    unit = bf16_unit()
    bf16 = f"native, {unit}" if unit else "emulated (no AVX512-BF16/AMX): slower than fp32"
    fp16 = "native" if native_fp16() else "emulated"
    return (
        f"CPU bf16: {bf16}; fp16: {fp16}; int8 dot product: "
        f"{'VNNI' if int8_dot() else 'none'}{' + AMX' if amx() else ''}; "
        f"ATen kernels: {capability()}; flags: {', '.join(flags) or 'none'}"
    )


def implications() -> list[str]:
    """What the CPU features found mean for the recipes, one sentence each."""
    out = []
    if amx():
        out.append(
            "AMX tile units: oneDNN runs bf16 and int8 GEMMs several times faster than fp32; "
            "bf16-mixed and int8 (compiled) should pay on GEMM-heavy models"
        )
    elif native_bf16():
        out.append(
            "AVX512-BF16 without AMX: bf16 dot products at up to 2x the fp32 rate, but "
            "autocast casts every op's inputs, so bf16-mixed pays on large GEMMs only"
        )
    else:
        out.append("no AVX512-BF16/AMX: bf16 is emulated (converted to fp32), slower than fp32")
    if int8_dot():
        out.append(
            "VNNI int8 dot products: int8 pays when one fused kernel runs the GEMM (ONNX "
            "Runtime's quantized ops, or torchao int8 under torch.compile, which inductor "
            "lowers to oneDNN); torchao's eager int8 path quantizes and dequantizes in "
            "separate ops"
        )
    else:
        out.append("no VNNI/AMX-INT8: int8 GEMMs have no hardware dot product here")
    return out


def why_slower(recipe: Any, speedup: float) -> str:
    """Why ``recipe`` ran at ``speedup`` (< 1) of its baseline on this CPU, and what would pay."""
    at = f"measured {speedup:.2f}x of the baseline here"
    if recipe.quantization in ("int8-dynamic", "int8-weight-only") and not recipe.compile:
        fix = (
            "try it with compile='default' (inductor fuses it into oneDNN int8 GEMMs)"
            if int8_dot()
            else "this CPU has no int8 dot product (VNNI/AMX): keep fp32"
        )
        what = (
            "int8-weight-only dequantizes every weight on every call: it pays when loading "
            "weights dominates (batch 1, large layers)"
            if recipe.quantization == "int8-weight-only"
            else "torchao's eager int8-dynamic quantizes each activation and runs the "
            "int8 matmul as separate ops"
        )
        return f"{at}: {what}; {fix}, or export to onnxruntime"
    if recipe.precision == "bf16-mixed":
        if not native_bf16():
            return f"{at}: no AVX512-BF16/AMX on this CPU, so bf16 is emulated; keep fp32"
        return (
            f"{at}: autocast casts every op's inputs to bf16 and the GEMMs are too small "
            f"for bf16 dot products ({bf16_unit()}) to win it back; it pays for "
            "larger layers or batches, or compiled (compile='default' fuses the casts)"
        )
    if recipe.precision == "16-mixed":
        return f"{at}: this CPU has no native fp16 compute; use bf16-mixed or fp32"
    if recipe.export == "torch.export":
        return (
            f"{at}: the exported graph runs the same ATen kernels as eager but without "
            "eager's fused fast paths (e.g. nn.TransformerEncoderLayer's native kernel); "
            "its use is portability, or onnxruntime for speed"
        )
    if recipe.export == "onnxruntime":
        return (
            f"{at}: eager already runs fused native kernels where PyTorch has them (e.g. "
            "nn.TransformerEncoderLayer's fast path in eval), and ONNX Runtime's Attention "
            "fusion does not match torch.export's graph; it pays where eager runs many "
            "small ops one by one, and for serving without Python"
        )
    if recipe.compile:
        return (
            f"{at}: compiled code did not beat eager; graph breaks split the graph or the "
            "model is dominated by large GEMMs that eager already runs in oneDNN"
        )
    if recipe.checkpoint:
        return f"{at}: checkpointing recomputes forward in backward: it trades time for memory"
    return at
