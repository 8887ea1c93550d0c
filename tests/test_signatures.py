"""``labkit.trace``, ``labkit.memory`` and ``labkit.plan`` are callable packages whose
imports are lazy; inspect.signature and help() still show the real call."""

from __future__ import annotations

import inspect
import pydoc
import subprocess
import sys

import pytest

import labkit

CALLS = {"trace": "labkit.trace.api", "memory": "labkit.memory.api", "plan": "labkit.plan.api"}


@pytest.mark.parametrize("name", list(CALLS))
def test_signature_and_help_are_the_functions(name: str) -> None:
    import importlib

    func = getattr(importlib.import_module(CALLS[name]), name)
    package = getattr(labkit, name)
    assert inspect.signature(package) == inspect.signature(func)
    assert "model" in inspect.signature(package).parameters
    text = pydoc.render_doc(package, renderer=pydoc.plaintext)
    assert f"Calling it: labkit.{name}(model" in text
    first_arg_doc = func.__doc__.split("Args:")[1].split("\n")[1].strip()
    assert first_arg_doc in text  # the function's Args, under the package's own text
    assert ">>>" not in package.__doc__.split("Calling it:")[1]  # its doctests run once


@pytest.mark.parametrize(
    "first",
    ["import labkit; labkit.{name}", "import labkit.{name}", "from labkit.{name} import api"],
)
@pytest.mark.parametrize("name", list(CALLS))
def test_every_way_of_importing_gives_the_signature(first: str, name: str) -> None:
    code = (
        first.format(name=name)
        + f"\nimport inspect, labkit\nfrom {CALLS[name]} import {name} as f\n"
        + f"assert inspect.signature(labkit.{name}) == inspect.signature(f)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
