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


AMX_CPU = frozenset({"amx_bf16", "amx_tile", "amx_int8", "avx512_bf16", "avx512_vnni"})
AVX512_BF16_CPU = frozenset({"avx512_bf16", "avx512_vnni"})


@pytest.mark.parametrize(
    ("flags", "unit"),
    [(AMX_CPU, "AMX-BF16 tiles"), (AVX512_BF16_CPU, "AVX512-BF16 (no AMX)"), (frozenset(), None)],
)
def test_every_note_reads_one_feature_source(monkeypatch, flags, unit):
    """The bf16 reason, the description and the implications agree with the flags: a CPU
    listing amx_bf16/amx_tile is never told it has no AMX."""
    monkeypatch.setattr(_cpu, "cpu_flags", lambda: flags)
    assert _cpu.bf16_unit() == unit
    assert _cpu.native_bf16() == (unit is not None)
    assert _cpu.amx() == ("amx_tile" in flags)
    why = _cpu.why_slower(Recipe(precision="bf16-mixed"), 0.7)
    said = " ".join([why, _cpu.describe(), *_cpu.implications()])
    if unit is None:
        assert "emulated" in why
    else:
        assert f"({unit})" in why
    assert ("no AMX" in said) == (flags == AVX512_BF16_CPU)
    assert ("AMX tile units" in said) == (flags == AMX_CPU)


def test_features_come_from_torch_where_there_is_no_cpuinfo():
    flags = _cpu._torch_flags()
    assert ("avx512_bf16" in flags) == torch.cpu._is_avx512_bf16_supported()
    assert ("amx_tile" in flags) == torch.cpu._is_amx_tile_supported()
    assert ("amx_bf16" in flags) == ("amx_tile" in flags)
