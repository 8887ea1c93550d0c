from pathlib import Path

import pytest
import torch

from labkit.optimize import Recipe, _cpu


def proc_flags() -> set[str]:
    text = Path("/proc/cpuinfo").read_text()
    line = next(ln for ln in text.splitlines() if ln.startswith("flags"))
    return set(line.split(":", 1)[1].split())


@pytest.mark.skipif(not Path("/proc/cpuinfo").exists(), reason="reads /proc/cpuinfo")
def test_features_match_cpuinfo_and_torch():
    flags = proc_flags()
    assert _cpu.native_bf16() == bool({"avx512_bf16", "amx_bf16"} & flags)
    assert _cpu.int8_dot() == bool({"avx512_vnni", "avx_vnni", "amx_int8"} & flags)
    assert _cpu.capability() == torch.backends.cpu.get_cpu_capability()
    line = _cpu.describe()
    assert f"ATen kernels: {torch.backends.cpu.get_cpu_capability()}" in line
    assert ("int8 dot product: VNNI" in line) == _cpu.int8_dot()
    said = " ".join(_cpu.implications())
    assert ("VNNI int8 dot products" in said) == _cpu.int8_dot()
    assert ("bf16 is emulated" in said) == (not _cpu.native_bf16())


def test_why_slower_names_the_cause_and_what_would_pay():
    why = _cpu.why_slower(Recipe(quantization="int8-dynamic"), 0.5)
    assert why.startswith("measured 0.50x of the baseline here: torchao's eager int8-dynamic")
    assert ("compile='default'" in why) == _cpu.int8_dot()
    bf16 = _cpu.why_slower(Recipe(precision="bf16-mixed"), 0.7)
    assert ("emulated" in bf16) == (not _cpu.native_bf16())
    assert "without eager's fused fast paths" in _cpu.why_slower(Recipe(export="torch.export"), 0.8)
