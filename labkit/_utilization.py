"""Achieved FLOP/s and model FLOPs utilization (MFU) against a device's peak.

One definition for every figure labkit states: ``labkit.tune``'s pick, every ``compare``
row and ``Lab.fit``'s run summary (a shared helper, so each layer can use it).

Peaks are dense tensor-core (or FP32 core) figures from NVIDIA's data sheets, without
sparsity, in FLOP/s; ``"tf32"`` is what fp32 matmuls reach with
``matmul_precision='high'`` or ``'medium'``. A device not in the table gets no MFU and
says so: a guessed peak would make a figure that is not the model's.
"""

from __future__ import annotations

from labkit._format import fmt_count

# device name fragment (as torch.cuda.get_device_name reports it) -> dtype -> peak FLOP/s
PEAKS: dict[str, dict[str, float]] = {
    "H200": {"bf16": 989e12, "fp16": 989e12, "tf32": 494e12, "fp32": 67e12},
    "H100 PCIe": {"bf16": 756e12, "fp16": 756e12, "tf32": 378e12, "fp32": 51e12},
    "H100": {"bf16": 989e12, "fp16": 989e12, "tf32": 494e12, "fp32": 67e12},
    "A100": {"bf16": 312e12, "fp16": 312e12, "tf32": 156e12, "fp32": 19.5e12},
    "L40S": {"bf16": 362e12, "fp16": 362e12, "tf32": 183e12, "fp32": 91.6e12},
    "L4": {"bf16": 121e12, "fp16": 121e12, "tf32": 60e12, "fp32": 30.3e12},
    "A10G": {"bf16": 70e12, "fp16": 70e12, "tf32": 35e12, "fp32": 31.2e12},
    "A10": {"bf16": 125e12, "fp16": 125e12, "tf32": 62.5e12, "fp32": 31.2e12},
    "V100": {"fp16": 125e12, "fp32": 15.7e12},
    "T4": {"fp16": 65e12, "fp32": 8.1e12},
    "RTX 4090": {"bf16": 165e12, "fp16": 165e12, "tf32": 82.6e12, "fp32": 82.6e12},
    "RTX A6000": {"bf16": 155e12, "fp16": 155e12, "tf32": 77e12, "fp32": 38.7e12},
}


def dtype_of(precision: str, matmul_precision: str) -> str:
    """The dtype a Recipe's matmuls run in: ``"bf16"``, ``"fp16"``, ``"tf32"`` or ``"fp32"``.

    ``precision`` is a Recipe's (``"bf16-mixed"``, ``"16-mixed"``, ``"32"``) or a Lightning
    Trainer's (``"bf16-true"``, ``"16-true"``, ``"32-true"`` too).
    """
    if precision.startswith("bf16"):
        return "bf16"
    if precision.startswith("16"):
        return "fp16"
    return "fp32" if matmul_precision == "highest" else "tf32"


def peak(device_name: str, dtype: str) -> float | None:
    """The table's peak for ``device_name`` (longest matching fragment first), or None."""
    for key in sorted(PEAKS, key=len, reverse=True):
        if key in device_name:
            return PEAKS[key].get(dtype)
    return None


def utilization(
    flops: int,
    seconds: float,
    device: str,
    device_name: str,
    dtype: str,
    note: str = "",
    counted: str = "the planned step",
    over: str = "its median step time",
) -> tuple[float | None, float | None, str]:
    """``(FLOP/s, MFU, sentence)`` for a step of ``flops`` taking ``seconds`` (median).

    Args:
        flops: FLOPs of one step (``FlopCounterMode``'s formulas).
        seconds: The step's median time.
        device: ``"cpu"``, ``"cuda:0"``, ...
        device_name: ``torch.cuda.get_device_name`` on CUDA (the table's key).
        dtype: What the matmuls ran in (:func:`dtype_of`).
        note: Added inside the sentence's parenthesis (``", recompute ... included"``).
        counted: Where the FLOPs were counted, for the sentence.
        over: Which time they are divided by, for the sentence.

    Example:
        >>> rate, mfu, text = utilization(2 * 10**9, 0.5, "cpu", "cpu", "fp32")
        >>> rate, mfu
        (4000000000.0, None)
        >>> text.split(":")[0]
        'achieved 4.00 GFLOP/s'
    """
    if not flops or not seconds:
        return None, None, "no FLOPs counted for the step (no op FlopCounterMode counts)"
    rate = flops / seconds
    how = (
        f"achieved {fmt_count(rate)}FLOP/s: {fmt_count(flops)} FLOPs counted in {counted} "
        f"(FlopCounterMode's formulas{note}) over {over}"
    )
    if not device.startswith("cuda"):
        return rate, None, how + f"; no MFU on {device} (peaks are tabled for CUDA devices only)"
    top = peak(device_name, dtype)
    if top is None:
        return (
            rate,
            None,
            how
            + (
                f"; MFU unknown: {device_name!r} ({dtype}) is not in labkit's table of device peaks"
            ),
        )
    mfu = rate / top
    return (
        rate,
        mfu,
        how + f"; MFU {mfu:.1%} of {device_name}'s {fmt_count(top)}FLOP/s {dtype} peak",
    )
