"""benchmarks/optimize.py's deploy section runs end to end (tiny encoder, one round)."""

import pytest

pytest.importorskip("onnxruntime", reason="the export extra: pip install 'labkit[export]'")


def test_deploy_section_prints_ratios_and_deviation(capsys):
    from benchmarks.optimize import deploy

    deploy(1, d=32, layers=1, seq=8, rows=False)
    out = capsys.readouterr().out
    assert "latency per batch" in out
    for label in ("torch.export", "onnxruntime"):
        line = next(ln for ln in out.splitlines() if ln.startswith(f"{label} / eager: "))
        assert " speed at batch 8 (batch 1: " in line and "x" in line.split(" speed")[0]
        assert "(target <= 1e-4: ok)" in line  # fp32 export keeps eager's numbers
