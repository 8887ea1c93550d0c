"""What this machine's CPU can do natively for reduced precision (read from /proc/cpuinfo)."""

from __future__ import annotations

import functools
from pathlib import Path

_FLAGS = (
    "avx512_bf16",
    "amx_bf16",
    "avx512_fp16",
    "amx_fp16",
    "amx_int8",
    "avx512_vnni",
    "avx_vnni",
)


@functools.lru_cache(maxsize=1)
def cpu_flags() -> frozenset[str]:
    """The reduced-precision flags of this CPU that labkit cares about (empty off Linux)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return frozenset()
    for line in text.splitlines():
        if line.startswith("flags"):
            present = set(line.split(":", 1)[1].split())
            return frozenset(f for f in _FLAGS if f in present)
    return frozenset()


def native_bf16() -> bool:
    """True when the CPU computes bf16 natively (AVX512-BF16 or AMX-BF16)."""
    return bool({"avx512_bf16", "amx_bf16"} & cpu_flags())


def native_fp16() -> bool:
    """True when the CPU computes fp16 natively (AVX512-FP16 or AMX-FP16)."""
    return bool({"avx512_fp16", "amx_fp16"} & cpu_flags())


def describe() -> str:
    """One line for notes and benchmark headers, e.g. ``'CPU bf16: native; fp16: ...'``."""
    flags = sorted(cpu_flags())
    bf16 = "native" if native_bf16() else "emulated (no AVX512-BF16/AMX): slower than fp32"
    fp16 = "native" if native_fp16() else "emulated"
    return f"CPU bf16: {bf16}; fp16: {fp16}; flags: {', '.join(flags) or 'none'}"
