"""Every public name of labkit.promote is what it says, whatever was imported before it:
a submodule named like a function (``analyze``, ``verify``) would replace the function on
the package once imported, so the modules holding them are named otherwise."""

from __future__ import annotations

import importlib
import pkgutil
import subprocess
import sys

import labkit.promote


def test_no_submodule_shares_a_public_name() -> None:
    modules = {m.name for m in pkgutil.iter_modules(labkit.promote.__path__)}
    assert not modules & set(labkit.promote.__all__)


def test_functions_stay_functions_after_every_submodule_is_imported() -> None:
    code = (
        "import importlib, pkgutil, labkit.promote as p\n"
        "for m in pkgutil.iter_modules(p.__path__):\n"
        "    importlib.import_module(f'labkit.promote.{m.name}')\n"
        "from labkit.promote import analyze, verify\n"
        "assert callable(analyze) and callable(verify), (analyze, verify)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
    assert importlib.import_module("labkit.promote").analyze.__module__ == "labkit.promote.analysis"
