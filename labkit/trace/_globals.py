"""Module-level state the step reaches: watched, never put back, named when it changed.

:class:`~labkit.trace.StepState` puts back what the model, the inputs, the optimizer and
the RNGs hold. A forward can also change the globals of the Python module its code lives
in (``GLOBAL["calls"] += 1``, ``CACHE.append(x)``, ``global N; N += 1``), and every pass
labkit runs changes them again. labkit does not write module globals back (a cache the
user fills on purpose is theirs); it names what changed, with how many times the step ran.

What is watched (cheap, shallow): the globals of the modules that define the ``forward``
of each module class in the model, and of the step's ``loss`` and ``forward`` functions;
the user's code only (not torch, labkit, an installed library or the standard library:
their caches are not the user's state). Each global is pictured by identity, scalars by
value, containers (dict, list, set, deque) and plain objects by their length and what they
hold one level down (the first 256 entries, each by identity: a value replaced shows, a
list inside a dict appended to does not), tensors by their version counter unless the
snapshot puts their values back. Dunder names (``__warningregistry__``
that ``warnings.warn`` adds) are not the user's and are skipped.
"""

from __future__ import annotations

import inspect
import sys
import sysconfig
import types
from collections import deque
from collections.abc import Callable, Iterable
from itertools import islice
from pathlib import Path
from typing import Any

import torch

from labkit.trace.state import _watched

__all__ = ["ModuleGlobals"]

_SCALARS = (int, float, bool, str, bytes, complex, type(None))
_NAN = object()  # a NaN global equals itself here (nan != nan)
_CODE = (types.ModuleType, type, types.FunctionType, types.BuiltinFunctionType)
_HELD = 256  # what a container holds is compared up to this many entries (and its length)
_SKIP_ROOTS = frozenset({"torch", "labkit"})
_STDLIB = sysconfig.get_paths()["stdlib"]
_OURS: dict[str, bool] = {}  # module name -> whether its globals are the user's


def _is_users(name: str) -> bool:
    """Whether the module ``name`` is the user's code: not torch or labkit, and not
    installed library code (site-packages, dist-packages, the standard library)."""
    if name not in _OURS:
        mod = sys.modules.get(name)
        path = getattr(mod, "__file__", None) or ""
        parts = Path(path).parts
        installed = "site-packages" in parts or "dist-packages" in parts
        _OURS[name] = not (
            name.split(".")[0] in _SKIP_ROOTS or (path and (installed or path.startswith(_STDLIB)))
        )
    return _OURS[name]


def _globals_of(fn: object) -> dict[str, Any] | None:
    """The globals dict a Python function (or bound method, or decorated function) runs in."""
    fn = getattr(fn, "__func__", fn)
    try:
        fn = inspect.unwrap(fn)  # type: ignore[arg-type]  # anything callable is fine here
    except ValueError:  # a cycle of __wrapped__
        return None
    g = getattr(fn, "__globals__", None)
    return g if isinstance(g, dict) else None


def _picture(v: object, restored: Callable[[torch.Tensor], bool]) -> object:
    """One global, shallowly: scalars by value, a tensor by identity and version counter
    (identity alone when the snapshot puts its values back), containers and plain objects
    by identity, length and the first :data:`_HELD` things they hold (kept as they are, and
    compared identity first: C speed, no copy of a long list), anything else by identity."""
    if isinstance(v, _SCALARS):
        return (type(v), v if v == v else _NAN)
    if isinstance(v, _CODE):  # most of a module's globals: imports, classes, functions
        return ("object", id(v))
    if isinstance(v, torch.Tensor):
        return ("tensor", id(v), None if restored(v) else v._version)
    if isinstance(v, dict):
        return ("held", id(v), len(v), tuple(islice(v.items(), _HELD)))
    if isinstance(v, (list, set, deque)):
        return ("held", id(v), len(v), tuple(islice(v, _HELD)))
    if _watched(v):
        d = vars(v)
        return ("held", id(v), len(d), tuple(islice(d.items(), _HELD)))
    return ("object", id(v))


def _same(a: object, b: object) -> bool:
    """Pictures equal; an element whose ``==`` cannot say (a tensor put in place of
    another) counts as a change."""
    try:
        return bool(a == b)
    except Exception:
        return False


def _kind(v: object) -> str:
    if isinstance(v, (list, dict, set, deque)):
        return f"a {type(v).__name__}"
    if isinstance(v, torch.Tensor):
        return "a tensor, changed in place"
    if isinstance(v, _SCALARS):
        return f"{'an' if type(v).__name__[0] in 'aeiou' else 'a'} {type(v).__name__}"
    return f"a {type(v).__name__} object"


def _forward_of(cls: type) -> object:
    """The class's `forward` as written, read from the class dicts along its MRO: a
    descriptor's `__get__` is never called (TorchScript's `_CachedForward` raises there)."""
    for klass in cls.__mro__:
        if "forward" in vars(klass):
            return vars(klass)["forward"]
    return None


class ModuleGlobals:
    """A picture of the module-level state the step's code can reach, taken now;
    :meth:`changes` says what differs later.

    Args:
        model: The model: the modules defining its classes' ``forward`` are watched.
        functions: More of the step's code (its loss, a trainer's step function).
        restored: ``restored(tensor)``: whether the snapshot puts that tensor's values back
            (its version counter then moves without a change left behind).

    Example:
        >>> import torch
        >>> g = ModuleGlobals(torch.nn.Linear(2, 2))  # torch's own code: nothing watched
        >>> g.modules, g.changes()
        ([], [])
    """

    def __init__(
        self,
        model: torch.nn.Module,
        functions: Iterable[object] = (),
        restored: Callable[[torch.Tensor], bool] = lambda t: False,
    ) -> None:
        self._restored = restored
        code = [_forward_of(type(m)) for m in model.modules()] + [
            f for f in functions if f is not None
        ]
        spaces: dict[int, dict[str, Any]] = {}
        for fn in code:
            g = _globals_of(fn)
            if g is not None and id(g) not in spaces and _is_users(str(g.get("__name__", ""))):
                spaces[id(g)] = g
        self._spaces = list(spaces.values())
        self._before = [self._take(g) for g in self._spaces]

    def values(self) -> list[object]:
        """Every global watched (the values now)."""
        return [v for g in self._spaces for v in list(g.values())]

    @property
    def modules(self) -> list[str]:
        """Names of the modules watched."""
        return [str(g.get("__name__", "?")) for g in self._spaces]

    def __repr__(self) -> str:
        return f"ModuleGlobals(modules={self.modules})"

    def _take(self, g: dict[str, Any]) -> dict[str, object]:
        return {
            k: _picture(v, self._restored)
            for k, v in list(g.items())
            if not (k.startswith("__") and k.endswith("__"))
        }

    def changes(self) -> list[str]:
        """Globals that differ from the picture, in words: ``"mymod.GLOBAL (a dict)"``,
        ``"mymod.N (an int)"``, ``"mymod.CACHE (new)"``, ``"mymod.OLD (deleted)"``."""
        out = []
        for g, before in zip(self._spaces, self._before, strict=True):
            mod = str(g.get("__name__", "?"))
            now = self._take(g)
            for k, pic in now.items():
                if k not in before:
                    out.append(f"{mod}.{k} (new)")
                elif not _same(before[k], pic):
                    out.append(f"{mod}.{k} ({_kind(g[k])})")
            out += [f"{mod}.{k} (deleted)" for k in before if k not in now]
        return out
