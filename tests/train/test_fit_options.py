"""One set of fit options: Lab.fit's keywords, the scripts' command line and the README
table all come from FitOptions; ``--ckpt-path last`` resumes from the logdir."""

from __future__ import annotations

import dataclasses
import inspect
import re
from pathlib import Path

import pytest

from labkit.train import Lab, fit_from_args
from labkit.train.fit_options import (
    SCRIPT_OPTIONS,
    FitOptions,
    fit_argument_parser,
    fit_options_markdown,
    parse_fit_args,
)
from tests.train._helpers import LOSS, datasets, mlp

README = Path(__file__).resolve().parents[2] / "README.md"
FIELDS = [f.name for f in dataclasses.fields(FitOptions)]


def test_lab_fit_signature_and_docs_are_the_dataclass():
    params = inspect.signature(Lab.fit).parameters
    assert list(params)[2:] == FIELDS
    for f in dataclasses.fields(FitOptions):
        assert params[f.name].default == f.default
        assert params[f.name].kind is inspect.Parameter.KEYWORD_ONLY
        assert f"            {f.name}: " in (Lab.fit.__doc__ or "")
    assert "{fit_options}" not in (Lab.fit.__doc__ or "")


def test_unknown_option_names_the_closest():
    lab = Lab(mlp(), datasets(), loss=LOSS)
    with pytest.raises(TypeError, match=r"unknown option 'max_epoch'; did you mean 'max_epochs'"):
        lab.fit(max_epoch=2)
    with pytest.raises(TypeError, match="unknown option 'colour'"):
        FitOptions().replace(colour=1)
    assert repr(FitOptions(max_epochs=2).replace(seed=3)) == "FitOptions(max_epochs=2, seed=3)"
    assert FitOptions().to_kwargs()["log_every"] == 10
    built = FitOptions.build(FitOptions(max_epochs=2), {"seed": 1})
    assert (built.max_epochs, built.seed) == (2, 1)  # lab.fit(FitOptions(...), seed=1)
    with pytest.raises(TypeError, match="takes keyword arguments"):
        lab.fit({"max_epochs": 2})


def test_every_command_line_option_comes_from_the_dataclass():
    parser = fit_argument_parser({"max_epochs": 7})
    flags = {a.dest: a.option_strings for a in parser._actions if a.dest != "help"}
    on_cli = [f.name for f in dataclasses.fields(FitOptions) if f.metadata["cli"]]
    assert sorted(flags) == sorted(on_cli + list(SCRIPT_OPTIONS))
    assert "(here: 7)" in parser.format_help()  # the script's own value is shown
    fit, script = parse_fit_args(
        [
            "--devices",
            "0,1",
            "--strategy",
            "ddp",
            "--no-dry-run",
            "--resume",
            "--limit-train-batches",
            "0.5",
            "--limit-batches",
            "2",
            "--precision",
            "bf16-mixed",
            "--ckpt-path",
            "last",
        ]
    )
    assert fit == {
        "devices": [0, 1],
        "strategy": "ddp",
        "dry_run": False,
        "resume": True,
        "limit_train_batches": 0.5,
        "limit_val_batches": 2,
        "ckpt_path": "last",
    }
    assert script == {"precision": "bf16-mixed"}
    assert parse_fit_args([]) == ({}, {})  # options left out keep the script's values
    with pytest.raises(SystemExit):
        parse_fit_args(["--devices", "two"])


def test_readme_table_is_generated():
    text = README.read_text(encoding="utf-8")
    found = re.search(
        r"<!-- fit-options:start -->\n(.*?)\n<!-- fit-options:end -->", text, re.DOTALL
    )
    assert found, "README.md lacks the fit-options table markers"
    assert found.group(1) == fit_options_markdown(), (
        "README.md's fit options table is stale: paste "
        "labkit.train.fit_options.fit_options_markdown() between the markers"
    )


def test_ckpt_path_last_resumes_like_an_uninterrupted_run(tmp_path: Path):
    data = datasets()

    def lab(logdir: Path) -> Lab:
        return Lab(mlp(dropout=0.2), data, loss=LOSS, batch_size=16, logdir=logdir)

    full = fit_from_args(lab(tmp_path / "full"), ["--max-epochs", "3"], seed=1)
    # the first job stops after one epoch; the second starts a fresh process's Lab
    first = fit_from_args(lab(tmp_path / "part"), ["--max-epochs", "1"], seed=1)
    again = lab(tmp_path / "part")
    second = fit_from_args(again, ["--max-epochs", "3", "--ckpt-path", "last"], seed=1)
    assert second.config["ckpt_path"] == str(tmp_path / "part" / "checkpoints" / "last.ckpt")
    assert len(first.losses) == 6 and len(second.losses) == 12  # 6 batches an epoch
    assert first.losses + second.losses == full.losses  # bitwise, fp32 on CPU


def test_ckpt_path_last_without_a_checkpoint_starts_fresh(tmp_path: Path):
    lab = Lab(mlp(), datasets(), loss=LOSS, batch_size=32, logdir=tmp_path)
    run = lab.fit(max_epochs=1, ckpt_path="last", dashboard=False)
    assert run.status == "finished" and run.config["ckpt_path"] is None
    assert any("ckpt_path='last' but" in n and "starting fresh" in n for n in run.notes)
