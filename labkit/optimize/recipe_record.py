"""Record the Recipe in effect in a notebook, where ``labkit promote`` reads it back.

:func:`record_recipe` displays the Recipe as an output of the cell that runs it, under the
MIME type :data:`RECIPE_MIME` (``application/vnd.labkit.recipe+json``) with a one-line
``text/plain`` fallback. Jupyter saves outputs in the ``.ipynb``, so the choice survives
even when it was made only by toggles in the optimize panel: ``Lab.fit`` calls it (the
Recipe that trained), and so does the panel when it applies a Recipe. Outside an IPython
kernel it does nothing.

It lives with the Recipe, below both ``train`` (``Lab.fit`` records) and ``promote``
(which reads the outputs back: :func:`labkit.promote.recipe_record.recorded_recipe`, where
these names are still importable from).
"""

from __future__ import annotations

from typing import Any

__all__ = ["RECIPE_MIME", "record_recipe"]

RECIPE_MIME = "application/vnd.labkit.recipe+json"


def record_recipe(recipe: Any, *, source: str = "", defer: bool | None = None) -> bool:
    """Display ``recipe`` as a labkit recipe output of the running cell.

    Called while a cell runs (``Lab.fit``, or a panel's ``apply()`` in a cell), the output
    belongs to that cell. Called from a widget callback (a click on "Apply" arrives as a
    comm message, with no cell running), Jupyter would not save the output in the
    notebook, so it is held and displayed by the next cell that runs (typically the
    ``lab.fit`` cell).

    Args:
        recipe: A :class:`labkit.optimize.Recipe` (or anything with ``to_dict()`` and
            ``label``).
        source: Who recorded it (``"Lab.fit"``, ``"optimize panel"``), kept in the
            output's metadata.
        defer: Hold the output for the next cell; ``None`` decides from the kernel's
            current message (deferred unless a cell is executing).

    Returns:
        True when an IPython kernel received (or holds) the output, False outside one.

    Example:
        >>> from labkit.optimize import Recipe
        >>> record_recipe(Recipe(precision="bf16-mixed"), source="Lab.fit")  # no kernel here
        False
    """
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - IPython ships with Jupyter
        return False
    shell = get_ipython()
    kernel = getattr(shell, "kernel", None)
    if shell is None or kernel is None:
        return False
    data = {
        RECIPE_MIME: recipe.to_dict(),
        "text/plain": f"labkit recipe: {getattr(recipe, 'label', recipe)}",
    }
    metadata = {RECIPE_MIME: {"source": source}} if source else None
    if defer is None:
        parent = kernel.get_parent() if hasattr(kernel, "get_parent") else {}
        defer = (parent or {}).get("header", {}).get("msg_type") != "execute_request"
    if not defer:
        _display(data, metadata)
        return True
    _PENDING[:] = [(data, metadata)]
    if not _PENDING_HOOK:

        def flush(*_: Any) -> None:
            if _PENDING:
                _display(*_PENDING.pop())

        shell.events.register("pre_run_cell", flush)
        _PENDING_HOOK.append(flush)
    return True


# the output a widget callback recorded, shown by the next cell (one at most: the latest)
_PENDING: list[tuple[dict[str, Any], dict[str, Any] | None]] = []
_PENDING_HOOK: list[Any] = []


def _display(data: dict[str, Any], metadata: dict[str, Any] | None) -> None:
    from IPython.display import display

    display(data, raw=True, metadata=metadata)
