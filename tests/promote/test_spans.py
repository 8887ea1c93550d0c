"""Statement-exact source: every statement of a cell appears in the script exactly once,
cut by its ``ast`` span (``;``, continuations, decorators, strings, comments, magics)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from labkit.promote import analyze, read_notebook, strip_magics
from labkit.promote._spans import indent_code, statement_spans
from tests.promote._notebooks import numbered, write_notebook

CELLS = {
    "semicolons": "lr = 0.1\nlr *= 10; tag = 1\nx = [lr]; x.append(2); x",
    "trailing semicolon": "a = 1;\nb = a + 1;  # two",
    "continuation": "total = 1 + \\\n    2; other = (3,\n  4)",
    "decorators": (
        "import functools\n\n@functools.lru_cache(maxsize=None)\n"
        "@functools.wraps(len)\ndef f(n):\n    return n\nf(1); f"
    ),
    "strings": 's = """a; b\n  c = 1; d\n"""; t = \'x;y\'\nu = f"""{s}\n;"""',
    "comments": "# head\nx = 1  # one; not a statement\n# about y\n\ny = 2 # two\n# tail",
    "magics": (
        "%load_ext autoreload\nx = 1; y = 2\n!echo hi\nfor i in range(2):\n    %time x += i\nx"
    ),
    "unicode": 'name = "héllo"; n = len(name)  # ünïcode\nπ = 3.14; π',
    "all exploration": "x_demo = 1\nprint(x_demo); x_demo",
}


def _statements(tmp_path: Path, source: str):
    nb = write_notebook(tmp_path / "nb.ipynb", numbered(source))
    return analyze(read_notebook(nb)).statements


@pytest.mark.parametrize("name", list(CELLS))
def test_each_statement_source_is_that_statement(tmp_path: Path, name: str):
    statements = [s for s in _statements(tmp_path, CELLS[name]) if s.source]
    tree = ast.parse(strip_magics(CELLS[name])[0])
    assert len(statements) == len(tree.body)
    for s in statements:
        # the text cut for a statement parses back to exactly that one statement
        alone = ast.parse(s.text).body
        assert len(alone) == 1, s.text
        assert ast.dump(alone[0]) == ast.dump(s.node), s.text


def test_semicolon_statements_appear_once(tmp_path: Path):
    statements = _statements(tmp_path, CELLS["semicolons"])
    assert [s.source for s in statements] == [
        "lr = 0.1",
        "lr *= 10",
        "tag = 1",
        "x = [lr]",
        "x.append(2)",
        "x",
    ]
    roles = [s.role for s in statements]
    assert roles == ["code"] * 5 + ["explore"]  # only the display expression is dropped
    kept = "\n".join(s.text for s in statements if s.role == "code")
    namespace: dict = {}
    exec(kept, namespace)
    assert namespace["lr"] == pytest.approx(1.0) and namespace["x"] == [1.0, 2]


def test_comments_and_decorators_travel_with_their_statement(tmp_path: Path):
    by_source = {s.source: s for s in _statements(tmp_path, CELLS["comments"])}
    assert by_source["x = 1"].prefix == "# head\n"
    assert by_source["x = 1"].suffix == "  # one; not a statement"
    assert by_source["y = 2"].prefix == "# about y\n\n" and by_source["y = 2"].suffix == "  # two"
    deco = [s for s in _statements(tmp_path, CELLS["decorators"]) if s.source.startswith("@")]
    assert len(deco) == 1 and deco[0].source.splitlines()[:2] == [
        "@functools.lru_cache(maxsize=None)",
        "@functools.wraps(len)",
    ]


def test_spans_use_characters_not_bytes():
    code = 'π = "é"; tau = π * 2  # ü'
    spans = statement_spans(code, ast.parse(code).body)
    assert [s.source for s in spans] == ['π = "é"', "tau = π * 2"]
    assert spans[1].suffix == "  # ü"


def test_indent_leaves_multiline_strings_alone():
    code = 'x = 1\ns = """a\n  b\nc"""\nif x:\n    y = f"""{x}\nz"""'
    indented = indent_code(code, "    ")
    namespace: dict = {}
    exec(code, namespace)
    wrapped: dict = {}
    exec("def main():\n    global x, s, y\n" + indented + "\nmain()", wrapped)
    assert (wrapped["s"], wrapped["y"]) == (namespace["s"], namespace["y"])
