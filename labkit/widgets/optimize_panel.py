"""OptimizePanel: toggles bound to a Recipe, a background "Measure" and an "Apply"."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import anywidget
import traitlets as t

from labkit.optimize.recipe import (
    COMPILE_MODES,
    MATMUL_PRECISIONS,
    PRECISIONS,
    QUANTIZATIONS,
    Recipe,
    RecipeError,
)
from labkit.widgets._assets import bundle_path
from labkit.widgets._keep import KeepsPicture
from labkit.widgets._measure_budget import loss_label, probe_step_s, spread, steps_for_budget

_CHOICES = {
    "precision": list(PRECISIONS),
    "quantization": [q or "none" for q in QUANTIZATIONS],
    "compile": [c or "none" for c in COMPILE_MODES],
    "matmul_precision": list(MATMUL_PRECISIONS),
}


class OptimizePanel(KeepsPicture, anywidget.AnyWidget):
    """Edit a :class:`~labkit.optimize.Recipe`, measure it against fp32, and apply it.

    The toggles and dropdowns are bound to ``panel.recipe`` both ways. "Measure" runs
    :func:`labkit.compare` on the model and batch in a background thread (progress
    shows in the panel; the kernel stays free), then shows a table and a bar chart.
    "Apply" hands the recipe to ``on_apply`` and/or sets ``target.recipe`` (a Lab).

    Args:
        model: The model to measure (not changed).
        batch: Its input (tensor, tuple or dict), as for :func:`labkit.compare`.
        recipe: Starting Recipe (default: fp32 eager).
        loss: ``loss(output) -> scalar`` for train mode.
        mode: ``"train"`` or ``"inference"``.
        steps: Timed steps per recipe (ignored when ``budget_s`` is given).
        budget_s: Seconds of timed steps for the whole measurement: the panel times the
            model's forward on the batch first and picks the steps per recipe from it
            (:func:`steps_for_budget`), so a big model is not run 5 times only and a small
            one not thousands. Each step time is shown as a median with its IQR.
        warmup: Warm-up steps per recipe.
        on_apply: Called with the Recipe when "Apply" is pressed; without one, Apply
            records the Recipe in the notebook (``labkit.promote.record_recipe``) so that
            ``labkit promote`` writes it into the script.
        target: Object whose ``recipe`` attribute "Apply" sets (e.g. a Lab).
        compare_kwargs: Further keyword arguments for :func:`labkit.compare`.

    Example:
        >>> panel = OptimizePanel(model, x, mode="inference")  # doctest: +SKIP
        >>> panel.recipe = Recipe(precision="bf16-mixed")      # doctest: +SKIP
        >>> panel.measure().join()                              # doctest: +SKIP
        >>> panel.comparison.result("bf16-mixed").speedup       # doctest: +SKIP
    """

    recipe_state = t.Dict().tag(sync=True)
    choices = t.Dict(_CHOICES).tag(sync=True)
    mode = t.Unicode("train").tag(sync=True)
    running = t.Bool(False).tag(sync=True)
    progress = t.Float(0.0).tag(sync=True)
    status = t.Unicode("").tag(sync=True)
    error = t.Unicode("").tag(sync=True)
    results: t.List[dict[str, Any]] = t.List().tag(sync=True)
    applied_label = t.Unicode("").tag(sync=True)
    loss_label = t.Unicode("").tag(sync=True)

    @property
    def _esm(self) -> str:  # read by AnyWidget.__init__
        return bundle_path("optimize_panel").read_text()

    def __init__(
        self,
        model: Any = None,
        batch: Any = None,
        *,
        recipe: Recipe | None = None,
        loss: Callable[[Any], Any] | None = None,
        mode: str = "train",
        steps: int = 5,
        warmup: int = 1,
        budget_s: float | None = None,
        on_apply: Callable[[Recipe], Any] | None = None,
        target: Any = None,
        **compare_kwargs: Any,
    ) -> None:
        if mode not in ("train", "inference"):
            raise ValueError(
                f"OptimizePanel(mode=...) must be 'train' or 'inference', got {mode!r}"
            )
        if recipe is not None and not isinstance(recipe, Recipe):
            raise TypeError(
                f"OptimizePanel(recipe=...) must be a Recipe, got {type(recipe).__name__}"
            )
        if target is not None and not hasattr(target, "recipe"):
            raise TypeError(
                f"OptimizePanel(target=...) needs an object with a 'recipe' attribute "
                f"(e.g. a Lab); {type(target).__name__} has none"
            )
        self.model, self.batch, self.loss = model, batch, loss
        self.steps, self.warmup, self.on_apply, self.target = steps, warmup, on_apply, target
        self.budget_s = budget_s
        if budget_s is not None:
            steps_for_budget(budget_s, 1.0, 1)  # fails now, naming the argument
        self.compare_kwargs = compare_kwargs
        self.comparison: Any = None
        self._thread: threading.Thread | None = None
        self._last_valid = (recipe or Recipe()).to_dict()
        super().__init__(
            recipe_state=self._last_valid, mode=mode, loss_label=loss_label(mode, loss)
        )
        self.on_msg(self._on_custom)

    # ----------------------------------------------------------------- recipe
    @property
    def recipe(self) -> Recipe:
        """The Recipe the toggles show; settable from Python."""
        return Recipe.from_dict(self.recipe_state)

    @recipe.setter
    def recipe(self, value: Recipe) -> None:
        if not isinstance(value, Recipe):
            raise TypeError(f"panel.recipe must be a Recipe, got {type(value).__name__}")
        self.recipe_state = value.to_dict()

    @t.validate("recipe_state")
    def _check_state(self, proposal: dict[str, Any]) -> dict[str, Any]:
        try:
            state = Recipe.from_dict(dict(proposal["value"])).to_dict()
        except (RecipeError, TypeError) as exc:
            self.error = str(exc)  # shown in the panel; keep the last valid recipe
            return dict(self._last_valid)
        self.error = ""
        self._last_valid = state
        return state

    # ----------------------------------------------------------------- actions
    def measure(self) -> threading.Thread:
        """Start :func:`labkit.compare` (fp32 vs this recipe) in a background thread.

        Returns:
            The thread; ``join()`` it to wait. ``panel.comparison`` holds the result.
        """
        if self.model is None or self.batch is None:
            raise ValueError(
                "OptimizePanel needs a model and a batch to measure: OptimizePanel(model, batch)"
            )
        if self._thread is not None and self._thread.is_alive():
            return self._thread
        recipe = self.recipe
        self.running, self.progress, self.error, self.status = True, 0.0, "", "starting"
        self._thread = threading.Thread(target=self._measure, args=(recipe,), daemon=True)
        self._thread.start()
        return self._thread

    def apply(self) -> Recipe:
        """Hand the current recipe to ``on_apply`` / ``target.recipe``; return it."""
        recipe = self.recipe
        if self.target is not None:
            self.target.recipe = recipe
        if self.on_apply is not None:
            self.on_apply(recipe)
        else:  # keep the choice in the notebook, where `labkit promote` reads it
            from labkit.promote.recipe_record import record_recipe

            record_recipe(recipe, source="optimize panel")
        self.applied_label = recipe.label
        return recipe

    def _measure(self, recipe: Recipe) -> None:
        from labkit.optimize.compare import compare

        last = [0.0]

        def progress(frac: float, msg: str) -> None:
            now = time.monotonic()
            if now - last[0] >= 0.2 or frac >= 1.0:  # at most ~5 updates a second
                last[0] = now
                with self.hold_sync():
                    self.progress, self.status = frac, msg

        try:
            recipes = {recipe.label: recipe} if not recipe.is_default else {}
            steps = self.steps
            if self.budget_s is not None:
                per_step = probe_step_s(self.model, self.batch, self.mode)
                steps = steps_for_budget(self.budget_s, per_step, 1 + len(recipes))
            cmp = compare(
                self.model,
                self.batch,
                recipes,
                loss=self.loss,
                mode=self.mode,
                steps=steps,
                warmup=self.warmup,
                progress=progress,
                **self.compare_kwargs,
            )
            self.comparison = cmp
            with self.hold_sync():
                self.results = _rows(cmp)
                self.status = f"measured {len(cmp.results)} recipes ({cmp.mode}, {cmp.steps} steps)"
                self.progress = 1.0
        except Exception as exc:
            self.error = f"{type(exc).__name__}: {exc}"
            self.status = "failed"
        finally:
            self.running = False
            self.refresh_output()  # the saved notebook keeps the measured table

    def _picture(self) -> dict[str, str]:
        from labkit.widgets._final_state import optimize_picture

        return optimize_picture(self.recipe.label, self.comparison, list(self.results), self.error)

    def _on_custom(self, _widget: Any, content: dict[str, Any], _buffers: Any) -> None:
        kind = content.get("type") if isinstance(content, dict) else None
        try:
            if kind == "measure":
                self.measure()
            elif kind == "apply":
                self.apply()
        except Exception as exc:
            self.error = f"{type(exc).__name__}: {exc}"

    def __repr__(self) -> str:
        model = type(self.model).__name__ if self.model is not None else None
        return f"OptimizePanel(recipe={self.recipe!r}, mode={self.mode!r}, model={model})"


def _rows(cmp: Any) -> list[dict[str, Any]]:
    keys = (
        "label",
        "step_time",
        "speedup",
        "throughput",
        "compile_time",
        "break_even",
        "peak_memory",
        "max_abs",
        "rel",
        "cosine",
        "loss",
        "drift_path",
        "error",
    )
    out = []
    for row in cmp.rows():
        item = {k: row.get(k) for k in keys}
        item["notes"] = row["notes"]
        item.update(spread(row.get("step_times") or ()))
        out.append(item)
    return out
