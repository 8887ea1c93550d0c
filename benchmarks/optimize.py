"""What each optimization buys on this machine, as ratios measured in one run.

The tables print time ratios (below 1 is faster); the lines after them print speed-ups.

1. int8 dynamic quantization / fp32: Transformer encoder inference on one thread
   (anchor: 1.78x for BERT in PyTorch's dynamic quantization tutorial, F1 -0.6%).
2. bf16-mixed / fp32: one training step (anchor: 1.4-1.6x only with native bf16).
3. torch.compile / eager: steady-state inference, plus compile time and break-even
   (anchor: TorchInductor CPU inference geomean 1.2-1.7x).
4. activation checkpointing: peak memory saved / time added for a training step, on
   an encoder with dropout 0.1: the deviation column must be ~0 for checkpointing and
   an fp32 control row (dropout is held off for deviation, on for timing).
6. Deployment (``--deploy`` runs only this): encoder inference, eager vs torch.export
   vs ONNX Runtime (CPU execution provider), latency ratios per batch size and the fp32
   output deviation (target <= 1e-4 relative). Anchor: ONNX Runtime's published BERT
   speed-ups come from fused Attention / SkipLayerNorm / Gelu kernels (Microsoft,
   Jan 2020: 17x on a distilled 3-layer BERT, against their previous serving stack).

5. On a CUDA device (``--cuda``): fp16-mixed with a GradScaler, bf16-mixed and
   compile, training and inference, and torch.export / ONNX Runtime for inference.

Run: ``python -m benchmarks.optimize`` (``--quick`` for fewer rounds, ``--cuda`` on a GPU,
``--deploy`` for section 6 only).
"""

from __future__ import annotations

import importlib.util
import os
import sys
import time

import torch
from torch import nn

from benchmarks._harness import Bench, report
from labkit.optimize import Recipe, RecipeStep, apply, compare
from labkit.optimize._cpu import describe
from labkit.optimize.comparison_result import speedup_text
from labkit.optimize.drift import deviation


def encoder(d: int = 256, layers: int = 4, dropout: float = 0.0) -> nn.Module:
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(d, 4, 4 * d, dropout=dropout, batch_first=True)
    return nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)


def infer(model: nn.Module, x: torch.Tensor):  # type: ignore[no-untyped-def]
    """labkit's inference step (no_grad forward), the same code compare times."""
    step = RecipeStep(model, Recipe(), mode="inference")
    return lambda: step(x)[0]


def train_step(model: nn.Module, x: torch.Tensor, recipe: Recipe | None = None):  # type: ignore[no-untyped-def]
    """labkit's one step of a recipe (the same code compare times)."""
    step = RecipeStep(
        model, recipe or Recipe(), mode="train", loss=lambda out: out.float().pow(2).mean(), lr=1e-3
    )
    return lambda: step(x)


def main(quick: bool = False) -> None:
    rounds = 5 if quick else 11
    print(describe())
    load = ", ".join(f"{v:.1f}" for v in os.getloadavg())
    print(
        f"torch {torch.__version__}, threads {torch.get_num_threads()}, "
        f"load average {load} on {os.cpu_count()} CPUs (other work shares this machine)\n"
    )
    x = torch.randn(8, 128, 256)

    if importlib.util.find_spec("torchao") is not None:
        int8_section(x, rounds)
    else:
        print("torchao is not installed: int8 section skipped\n")
    rest(x, rounds)
    print()
    if importlib.util.find_spec("onnxruntime") is not None:
        deploy(rounds)
    else:
        print("onnxruntime is not installed (pip install 'labkit[export]'): deploy skipped")


def int8_section(x: torch.Tensor, rounds: int) -> None:
    """int8 dynamic / weight-only vs fp32 inference on one thread (as the anchor was measured)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    base = encoder().eval()
    q = apply(base, Recipe(quantization="int8-dynamic"))
    wo = apply(base, Recipe(quantization="int8-weight-only"))
    qc = apply(base, Recipe(quantization="int8-dynamic", compile="default"))
    infer(qc, x)()  # compile outside the timed rounds
    with torch.no_grad():
        ref = base(x).reshape(-1)
        dq = deviation(ref, q(x).reshape(-1))
        dw = deviation(ref, wo(x).reshape(-1))
    b = Bench("optimize_int8", warmup=2, rounds=rounds)
    b.add("fp32", infer(base, x), anchor="1.00x")
    b.add("int8-dynamic", infer(q, x), anchor="0.56x time = 1.78x faster (BERT tutorial, 1 thread)")
    b.add("int8-weight-only", infer(wo, x), anchor="-")
    b.add("int8-dynamic+compile", infer(qc, x), anchor="torchao's CPU int8 path expects compile")
    res1 = b.run()
    report(res1)
    torch.set_num_threads(threads)
    with torch.no_grad():
        dqc = deviation(ref, qc(x).reshape(-1))
    for name, d in (("int8-dynamic", dq), ("int8-weight-only", dw), ("int8-dynamic+compile", dqc)):
        speed = 1 / res1.row(name).ratio
        print(
            f"{name}: {speed:.2f}x speed (1 thread); output max abs {d[0]:.2e}, "
            f"rel {d[1]:.2e}, cosine {d[2]:.6f}"
        )


def rest(x: torch.Tensor, rounds: int) -> None:
    """bf16-mixed training, compile, checkpointing."""
    # 2. bf16-mixed training step
    model = encoder().train()
    b = Bench("optimize_bf16_train", warmup=2, rounds=rounds)
    b.add("fp32", train_step(apply(model), x), anchor="1.00x")
    b.add(
        "bf16-mixed",
        train_step(apply(model, Recipe(precision="bf16-mixed")), x, Recipe(precision="bf16-mixed")),
        anchor="0.63-0.71x time = 1.4-1.6x faster (native bf16)",
    )
    res2 = b.run()
    report(res2)
    print(f"bf16-mixed train step: {1 / res2.row('bf16-mixed').ratio:.2f}x speed ({describe()})")

    # 3. compiled vs eager inference, compile time and break-even
    base = encoder().eval()
    comp = apply(base, Recipe(compile="default"))
    t0 = time.perf_counter()
    infer(comp, x)()
    first = time.perf_counter() - t0
    b = Bench("optimize_compile", warmup=2, rounds=rounds)
    b.add("eager", infer(base, x), anchor="1.00x")
    b.add("compiled", infer(comp, x), anchor="0.59-0.83x time = 1.2-1.7x faster (Inductor CPU)")
    res3 = b.run()
    report(res3)
    eager, compiled = res3.row("eager").median_s, res3.row("compiled").median_s
    compile_time = first - compiled
    saved = eager - compiled
    even = f"{compile_time / saved:.0f} steps" if saved > 0 else "never (not faster)"
    print(
        f"compiled: {eager / compiled:.2f}x speed; compile time {compile_time:.1f} s "
        f"(first call {first:.1f} s); break-even after {even}"
    )

    # 4. checkpointing: memory saved / time added (training step), dropout 0.1
    model = encoder(layers=4, dropout=0.1).train()
    ck = Recipe(checkpoint=("TransformerEncoderLayer",))
    recipes = {
        "checkpoint": ck,
        "fp32 control": Recipe(),
        "bf16-mixed": Recipe(precision="bf16-mixed"),
    }
    cmp = compare(model, x, recipes, steps=max(3, rounds // 2), warmup=1)
    print()
    print(cmp.summary())
    base_r, ck_r = cmp.result("fp32"), cmp.result("checkpoint")
    if base_r.peak_memory and ck_r.peak_memory:
        mem_saved = 1 - ck_r.peak_memory / base_r.peak_memory
        time_added = 1 / ck_r.speedup - 1 if ck_r.speedup else 0.0
        per = f"{mem_saved / time_added:.2f}" if time_added > 0 else "inf"
        print(
            f"checkpointing: peak memory -{mem_saved:.0%} for +{time_added:.0%} step time "
            f"(memory saved / time added = {per}; speed {speedup_text(ck_r)}, 95% interval)"
        )
    for label in ("checkpoint", "fp32 control", "bf16-mixed"):
        r = cmp.result(label)
        print(
            f"deviation with dropout 0.1 held off: {label}: rel {_num(r.rel)}, "
            f"loss after {len(r.losses)} controlled steps {_num(r.loss)} vs fp32 "
            f"{_num(base_r.loss)} (target: 0 for checkpoint and control)"
        )


def _num(x: float | None) -> str:
    return "-" if x is None else f"{x:.3g}"


def deploy(rounds: int, d: int = 256, layers: int = 4, seq: int = 128, rows: bool = True) -> None:
    """Encoder inference: eager vs torch.export vs ONNX Runtime (``rows``: and int8, bf16)."""
    model = encoder(d=d, layers=layers, dropout=0.1).eval()
    x = torch.randn(8, seq, d)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # one thread each (ONNX Runtime takes torch's count): robust to load
    recipes = {
        "torch.export": Recipe(export="torch.export"),
        "onnxruntime": Recipe(export="onnxruntime"),
    }
    if rows:
        recipes["int8-dynamic"] = Recipe(quantization="int8-dynamic")
        recipes["bf16-mixed"] = Recipe(precision="bf16-mixed")
    cmp = compare(model, x, recipes, mode="inference", steps=rounds, warmup=2, batch_sizes=(1, 32))
    torch.set_num_threads(threads)
    print(cmp.summary())
    print()
    for label in ("torch.export", "onnxruntime"):
        r = cmp.result(label)
        if r.error:
            print(f"{label}: ERROR {r.error}")
            continue
        per = ", ".join(
            f"batch {b['batch_size']}: {b['speedup']:.2f}x" for b in r.per_batch if b["speedup"]
        )
        ok = "ok" if r.rel <= 1e-4 else "MISSED"
        print(
            f"{label} / eager: {speedup_text(r)} speed at batch 8 ({per}); fp32 output "
            f"deviation rel {r.rel:.1e} (target <= 1e-4: {ok}); export {r.export_time:.1f} s"
        )


def cuda_main(quick: bool = False) -> None:
    """fp16-mixed (GradScaler), bf16-mixed and compile on CUDA, measured by labkit.compare."""
    steps = 5 if quick else 20
    print(f"CUDA: {torch.cuda.get_device_name()}, torch {torch.__version__}\n")
    model = encoder(d=1024, layers=6).cuda()
    x = torch.randn(32, 256, 1024, device="cuda")
    recipes = {
        "16-mixed": Recipe(precision="16-mixed"),
        "bf16-mixed": Recipe(precision="bf16-mixed"),
        "compile": Recipe(compile="default"),
        "bf16-mixed+compile": Recipe(precision="bf16-mixed", compile="default"),
    }
    train = compare(model.train(), x, recipes, steps=steps, warmup=3)
    print(train.summary())
    print()
    deploy_rows = {
        "torch.export": Recipe(export="torch.export"),
        # ONNX Runtime's CUDA execution provider needs the onnxruntime-gpu wheel; with
        # the CPU wheel the row runs on the CPU provider and its note says so
        "onnxruntime": Recipe(export="onnxruntime"),
    }
    infer_cmp = compare(
        model.eval(), x, {**recipes, **deploy_rows}, mode="inference", steps=steps, warmup=3
    )
    print(infer_cmp.summary())


if __name__ == "__main__":
    if "--cuda" in sys.argv:
        cuda_main(quick="--quick" in sys.argv)
    elif "--deploy" in sys.argv:
        print(describe())
        deploy(5 if "--quick" in sys.argv else 11)
    else:
        main(quick="--quick" in sys.argv)
