"""What the step's functions and the user's hooks close over: watched, never put back,
named when it changed.

A forward hook that collects features (``feats.append(out)``), a loss that keeps a
history (``history.append(loss.item())``) or a counter in an enclosing function
(``nonlocal calls``) hold their state in closure cells, not in the model or in module
globals (:mod:`labkit.trace._globals` watches those). Every pass labkit runs calls them
again, so after ``labkit.trace`` such a list holds one entry per pass. labkit does not
write them back (what a hook collects is the user's on purpose); it names what changed,
and the hooks' own module globals are watched as the step's other code is.

Watched: the closure cells of the step's loss and forward functions and of every hook on
the model's modules (forward, forward-pre, backward, backward-pre) and the global module
hooks, where the function is the user's code (not torch's, labkit's or an installed
library's). Each cell's contents are pictured as a module global is (shallowly: a list by
identity, length and first entries; a scalar by value; a tensor by version counter unless
the snapshot puts it back).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import torch
from torch.nn.modules import module as _module

from labkit.trace._generators import SavedGenerators, is_generator
from labkit.trace._globals import ModuleGlobals, _is_users, _kind, _picture, _same

__all__ = ["Closures", "SideEffects", "user_hooks"]

_HOOK_TABLES = (
    ("_forward_pre_hooks", "forward pre-hook"),
    ("_forward_hooks", "forward hook"),
    ("_backward_pre_hooks", "backward pre-hook"),
    ("_backward_hooks", "backward hook"),
)
_GLOBAL_TABLES = (
    ("_global_forward_pre_hooks", "global forward pre-hook"),
    ("_global_forward_hooks", "global forward hook"),
    ("_global_backward_pre_hooks", "global backward pre-hook"),
    ("_global_backward_hooks", "global backward hook"),
)
_EMPTY = object()  # an empty cell (a variable assigned later)


def _function(fn: object) -> Any:
    """The Python function behind ``fn`` (a bound method's, a decorated one's), or None."""
    fn = getattr(fn, "__func__", fn)
    try:
        fn = inspect.unwrap(fn)  # type: ignore[arg-type]
    except ValueError:  # a cycle of __wrapped__
        return None
    return fn if inspect.isfunction(fn) else None


def _users(fn: Any) -> bool:
    g = getattr(fn, "__globals__", None)
    return isinstance(g, dict) and _is_users(str(g.get("__name__", "")))


def user_hooks(model: torch.nn.Module) -> list[tuple[str, Callable[..., Any]]]:
    """``(label, function)`` of each hook of the user's code on ``model``'s modules and of
    the global module hooks, e.g. ``("forward hook on 'encoder.0'", fn)``."""
    out: list[tuple[str, Callable[..., Any]]] = []
    for path, m in model.named_modules():
        where = f"'{path}'" if path else "the root module"
        for attr, kind in _HOOK_TABLES:
            for hook in list(getattr(m, attr, {}).values()):
                fn = _function(hook)
                if fn is not None and _users(fn):
                    out.append((f"{kind} on {where}", fn))
    for attr, kind in _GLOBAL_TABLES:
        for hook in list(getattr(_module, attr, {}).values()):
            fn = _function(hook)
            if fn is not None and _users(fn):
                out.append((kind, fn))
    return out


def _cells(label: str, fn: Any) -> Iterator[tuple[str, Any]]:
    names = fn.__code__.co_freevars
    for name, cell in zip(names, fn.__closure__ or (), strict=False):
        yield f"{label} ({fn.__qualname__}): {name}", cell


def _contents(cell: Any) -> object:
    try:
        return cell.cell_contents
    except ValueError:
        return _EMPTY


class Closures:
    """A picture of what the step's functions and hooks close over, taken now;
    :meth:`changes` says what differs later.

    Args:
        functions: ``(label, function)`` pairs: the loss, the forward, the hooks.
        restored: ``restored(tensor)``: whether the snapshot puts that tensor back.

    Example (in a notebook, where the functions are the user's code):
        >>> def make():
        ...     seen = []
        ...     return seen, lambda out: seen.append(out) or out
        >>> seen, loss = make()
        >>> c = Closures([("loss", loss)])
        >>> seen.append(1)
        >>> c.changes()  # doctest: +SKIP
        ['loss (make.<locals>.<lambda>): seen (a list)']
    """

    def __init__(
        self,
        functions: Iterable[tuple[str, object]],
        restored: Callable[[torch.Tensor], bool] = lambda t: False,
    ) -> None:
        self._restored = restored
        seen: set[int] = set()
        self._cells: list[tuple[str, Any]] = []
        for label, f in functions:
            fn = _function(f)
            if fn is None or id(fn) in seen or not _users(fn):
                continue
            seen.add(id(fn))
            self._cells += [(where, cell) for where, cell in _cells(label, fn) if _watchable(cell)]
        self._before = [self._take(cell) for _, cell in self._cells]

    def __repr__(self) -> str:
        return f"Closures(cells={len(self._cells)})"

    @property
    def cells(self) -> list[tuple[str, Any]]:
        """``(where, cell)`` of each closure variable watched."""
        return list(self._cells)

    def _take(self, cell: Any) -> object:
        v = _contents(cell)
        return ("empty",) if v is _EMPTY else _picture(v, self._restored)

    def changes(self) -> list[str]:
        """Closure variables that differ from the picture, in words:
        ``"forward hook on '0' (<lambda>): feats (a list)"``."""
        out = []
        for (where, cell), before in zip(self._cells, self._before, strict=True):
            if not _same(before, self._take(cell)):
                v = _contents(cell)
                out.append(f"{where} ({'deleted' if v is _EMPTY else _kind(v)})")
        return out


def _watchable(cell: Any) -> bool:
    """Not a module, a function or a class: the code a closure calls, not its state (the
    model a loss closes over is the snapshot's)."""
    v = _contents(cell)
    if is_generator(v):
        return True  # put back (SideEffects), so never named as changed
    return not isinstance(v, (torch.nn.Module, type)) and not callable(v)


class SideEffects:
    """What the step's code can change that labkit does not put back, pictured now: the
    module globals (:class:`~labkit.trace._globals.ModuleGlobals`) and the closures
    (:class:`Closures`) of the model's forwards, the given functions and the user's hooks;
    :meth:`notes` names what changed later.

    Args:
        model: The model (its classes' forwards and its hooks are watched).
        functions: ``(label, function)`` pairs: the loss, a forward function.
        restored: ``restored(tensor)``: whether the snapshot puts that tensor back.
    """

    def __init__(
        self,
        model: torch.nn.Module,
        functions: Iterable[tuple[str, object]],
        restored: Callable[[torch.Tensor], bool] = lambda t: False,
    ) -> None:
        hooks = user_hooks(model)  # a hook collecting features runs once a pass too
        named = [(label, f) for label, f in functions if f is not None]
        code = [f for _, f in named] + [f for _, f in hooks]
        self.globals = ModuleGlobals(model, code, restored)
        self.closures = Closures([*named, *hooks], restored)
        # generators among them are put back, as the global ones are (they are RNG state)
        self.generators = SavedGenerators(
            [*self.globals.values(), *(_contents(c) for _, c in self.closures.cells)]
        )

    def __repr__(self) -> str:
        return f"SideEffects({self.globals!r}, {self.closures!r})"

    def notes(self, ran: str) -> list[str]:
        """Notes on what changed; ``ran`` says how often the step ran (``"the recording
        and timing passes ran the step 9 times"``)."""
        restores = "labkit restores the model, inputs, optimizer and RNGs"
        heads = (
            (
                self.globals.changes(),
                f"module-level state changed by the step and not put back ({restores}, "
                "not module globals): ",
                "",
            ),
            (
                self.closures.changes(),
                f"what your functions and hooks close over changed and was not put back "
                f"({restores}): ",
                ", and a hook runs once a pass",
            ),
        )
        out = [head + ", ".join(what) + f"; {ran}{tail}" for what, head, tail in heads if what]
        return out
