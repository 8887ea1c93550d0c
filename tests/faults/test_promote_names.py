"""Fault table, promote: nothing from a file name, cell text, parameter value or recipe field
runs as code in a promoted script (issue 26, item 1).

Each hostile name is promoted next to a benign twin (the same cells, named ``benign``); the
two scripts must parse to the same code once their docstrings are set aside, hold the same
calls, carry the hostile name intact in the docstring, and run (``--check``) without the
name's payload creating a ``PWNED`` file.
"""

from __future__ import annotations

import ast
from pathlib import Path

import nbformat
import pytest

from labkit.cli import main
from labkit.promote import analyze, promote, read_notebook
from labkit.promote.execute import inject_parameters
from labkit.promote.notebook import Cell, Notebook
from labkit.promote.plain import render_plain_script
from labkit.promote.recipe_record import RECIPE_MIME
from labkit.promote.script import render_script
from tests.promote._notebooks import code, numbered, write_notebook

PAYLOAD = '__import__("os").system("touch PWNED")'
# file names a Linux filesystem holds (no "/" and no NUL)
HOSTILE = {
    "triple-double": f'n"""+str({PAYLOAD})+"""n',
    "triple-single": "n'''+str(__import__('os').system('touch PWNED'))+'''n",
    "quotes": 'a"b\'c"',
    "ends-in-quote": 'q"',
    "backslashes": "back\\slash\\",
    "N-escape": "x\\N",
    "N-named": "x\\N{BULLET}y\\u0041\\x41",
    "newline": f'a\n"""\n{PAYLOAD}\n"""\n',
    "carriage-return": f"r\r{PAYLOAD}",
    "form-feed-and-line-separator": f"f\x0c\u2028{PAYLOAD}",
    "undecodable-byte": "x\udcff",  # byte 0xff: a real name on Linux (surrogateescape)
    "shell": "$(touch PWNED) `touch PWNED`; touch PWNED",
}
# names no filesystem here holds: checked on the rendered text only
UNWRITABLE = {"nul": f'a\x00"""{PAYLOAD}"""', "lone-surrogate": f'\ud800"""{PAYLOAD}"""'}

PLAIN = numbered("import math\nx = math.sqrt(4)", "y = x + 1\nprint(y)")
HEAD = "import torch\nimport labkit\nfrom torch import nn"
MODEL = (
    "model = nn.Linear(4, 1)\n"
    "data = torch.utils.data.TensorDataset(torch.randn(8, 4), torch.randn(8, 1))"
)
LAB = "lab = labkit.Lab(model, data, loss=nn.functional.mse_loss, batch_size=4)"
FIT = "run = lab.fit(max_epochs=1, seed=0, dashboard=False)"
LAB_CELLS = (HEAD, MODEL, LAB, FIT)


def _calls(tree: ast.Module) -> set[str]:
    return {ast.unparse(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}


def _without_docstring(tree: ast.Module) -> str:
    body = list(tree.body)
    first = body[0]
    assert isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
    return ast.dump(ast.Module(body=body[1:], type_ignores=[]))


def _same_code(hostile: str, benign: str, name: str) -> None:
    """The hostile script is the benign one with another name in its docstring."""
    tree, twin = ast.parse(hostile), ast.parse(benign)
    assert _without_docstring(tree) == _without_docstring(twin)
    assert _calls(tree) == _calls(twin)
    doc = ast.get_docstring(tree, clean=False)
    assert doc is not None and f"promoted from {name}.ipynb" in doc
    assert all(c == "\n" or c.isprintable() for c in hostile)  # no raw control characters


@pytest.mark.parametrize("name", list(HOSTILE.values()), ids=list(HOSTILE))
def test_cli_promote_of_a_hostile_name_runs_nothing_from_it(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    notebook = write_notebook(tmp_path / f"{name}.ipynb", PLAIN)
    benign = write_notebook(tmp_path / "benign.ipynb", PLAIN)
    assert main(["promote", "--check", str(notebook)]) == 0, capsys.readouterr().err
    assert main(["promote", str(benign)]) == 0
    assert "wrote" in capsys.readouterr().out
    script = notebook.with_suffix(".py")
    _same_code(script.read_text(), benign.with_suffix(".py").read_text(), name)
    assert not (tmp_path / "PWNED").exists()


def test_lab_script_of_a_hostile_name_runs_nothing_from_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A Lab notebook's script (render_script): every name rendered, one checked by training
    one batch (``--check``)."""
    monkeypatch.chdir(tmp_path)
    benign = promote(write_notebook(tmp_path / "benign.ipynb", numbered(*LAB_CELLS)), dry_run=True)
    for name in HOSTILE.values():
        notebook = write_notebook(tmp_path / f"{name}.ipynb", numbered(*LAB_CELLS))
        _same_code(promote(notebook, dry_run=True).source, benign.source, name)
    notebook = tmp_path / f"{HOSTILE['triple-double']}.ipynb"
    assert main(["promote", "--check", str(notebook)]) == 0, capsys.readouterr().err
    assert not (tmp_path / "PWNED").exists()


@pytest.mark.parametrize("name", list(UNWRITABLE.values()), ids=list(UNWRITABLE))
def test_names_no_filesystem_holds_are_escaped_when_rendered(name: str, tmp_path: Path) -> None:
    cells = tuple(
        Cell(number=i, cell_type="code", source=c.source, execution_count=i)
        for i, c in enumerate(PLAIN, 1)
    )
    lab = tuple(
        Cell(number=i, cell_type="code", source=s, execution_count=i)
        for i, s in enumerate(LAB_CELLS, 1)
    )

    def scripts(stem: str) -> tuple[str, str]:
        plain = render_plain_script(
            analyze(Notebook(tmp_path / f"{stem}.ipynb", cells)), script_name=f"{stem}.py"
        )[0]
        fit = render_script(
            analyze(Notebook(tmp_path / f"{stem}.ipynb", lab)), script_name=f"{stem}.py"
        )
        return plain, fit

    for hostile, benign in zip(scripts(name), scripts("benign"), strict=True):
        _same_code(hostile, benign, name)
        hostile.encode("utf-8")  # a script file can hold it


@pytest.mark.parametrize("name", list(UNWRITABLE.values()), ids=list(UNWRITABLE))
def test_cli_names_a_file_name_no_filesystem_holds(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["promote", str(tmp_path / f"{name}.ipynb")]) == 1
    err = capsys.readouterr().err
    assert "not a file name" in err and ".ipynb" in err
    assert "Traceback" not in err


def test_x_backslash_N_promotes_and_runs(tmp_path: Path) -> None:
    """issue 26: ``x\\N.ipynb`` was refused with a SyntaxError about a malformed \\N."""
    notebook = write_notebook(tmp_path / "x\\N.ipynb", PLAIN)
    done = promote(notebook, check_run=True)
    assert done.script == tmp_path / "x\\N.py"
    assert "x\\N.py: promoted from x\\N.ipynb" in (ast.get_docstring(ast.parse(done.source)) or "")


def test_parameter_values_and_recipe_fields_are_data(tmp_path: Path) -> None:
    """Strings from a parameters cell and from a recorded recipe reach the script as
    literals: the same code and calls as benign values, the values read back intact."""
    evil = f'"""; {PAYLOAD}; """\\N'
    recipe = {"precision": "32-true", "note": evil, "ids": [1, 2.5, None, {"k": "\udcff"}]}

    def notebook(stem: str, value: str, fields: dict[str, object]) -> Path:
        output = {
            "output_type": "display_data",
            "metadata": {},
            "data": {RECIPE_MIME: fields, "text/plain": "labkit recipe"},
        }
        cells = [
            code(HEAD, 1),
            code(f"tag = {value!r}\nlr = 0.1", 2, tags=("parameters",)),
            code(MODEL, 3),
            code(LAB, 4, outputs=[output]),
            code(FIT, 5),
        ]
        return write_notebook(tmp_path / f"{stem}.ipynb", cells, escaped=True)

    hostile = promote(notebook("hostile", evil, recipe), dry_run=True).source
    benign = promote(notebook("benign", "plain", {**recipe, "note": "n"}), dry_run=True).source
    tree = ast.parse(hostile)
    assert _calls(tree) == _calls(ast.parse(benign))
    recorded = next(
        n.value
        for n in tree.body
        if isinstance(n, ast.Assign) and ast.unparse(n.targets[0]) == "LABKIT_RECIPE"
    )
    assert ast.literal_eval(recorded) == recipe
    assert not (tmp_path / "PWNED").exists()


def test_a_recorded_recipe_that_is_not_a_literal_is_named(tmp_path: Path) -> None:
    output = {
        "output_type": "display_data",
        "metadata": {},
        "data": {RECIPE_MIME: {"lr": float("nan")}, "text/plain": "r"},
    }
    cells = [code(HEAD, 1), code(MODEL, 2), code(LAB, 3, outputs=[output]), code(FIT, 4)]
    path = write_notebook(tmp_path / "nan.ipynb", cells, escaped=True)  # NaN, as JSON allows
    with pytest.raises(Exception, match=r"cell 3 \(In \[3\]\): the recorded Recipe holds"):
        promote(read_notebook(path).path, dry_run=True)


def test_injected_parameters_are_literals() -> None:
    """``labkit run -p tag='...'`` writes one assignment of a string, whatever it holds."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("tag = 'a'")]
    nb.cells[0].metadata["tags"] = ["parameters"]
    value = f'"""\n{PAYLOAD}\n\\N{{x}}\r'
    index = inject_parameters(nb, {"tag": value})
    tree = ast.parse(nb.cells[index].source)
    assert [type(n) for n in tree.body] == [ast.Assign]
    assert ast.literal_eval(tree.body[0].value) == value  # type: ignore[attr-defined]
