"""Every public name of a labkit package is what it says, whatever was imported before it.

A lazily exported function named like its submodule (``labkit.promote.analyze``) is replaced
on the package by the module once anything imports the submodule, so ``from labkit.promote
import analyze`` would give a module depending on import order. Such modules are named
otherwise (``analysis.py``); an eager ``from .compare import compare`` in ``__init__`` is
safe, and the callable packages ``labkit.trace``, ``labkit.memory`` and ``labkit.plan`` are
callable themselves by design.
"""

from __future__ import annotations

import subprocess
import sys

CHECK = """
import importlib, pkgutil, types, labkit
subpackages = [m.name for m in pkgutil.iter_modules(labkit.__path__) if m.ispkg]
packages = ["labkit"] + [f"labkit.{name}" for name in subpackages]
for name in packages:  # import every module first, as a long session may have
    for m in pkgutil.walk_packages(importlib.import_module(name).__path__, name + "."):
        importlib.import_module(m.name)
bad = []
for name in packages:
    package = importlib.import_module(name)
    for public in getattr(package, "__all__", ()):
        value = getattr(package, public)
        if isinstance(value, types.ModuleType) and not callable(value):
            bad.append(f"{name}.{public}")
assert not bad, f"public names that became modules: {bad}"
"""


def test_public_names_stay_what_they_are_after_every_module_is_imported() -> None:
    done = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
