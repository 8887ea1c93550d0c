"""OptimizePanel: toggles bound to a Recipe, a background "Measure" and an "Apply"."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import anywidget
import traitlets as t

from labkit._format import first_line
from labkit.optimize.recipe import Recipe, RecipeError
from labkit.panels import _optimize_fields as fields
from labkit.panels._measure_budget import loss_label
from labkit.views import KeepsPicture, bundle_path

if TYPE_CHECKING:
    import torch

    from labkit.optimize.advise import Suggestion
    from labkit.optimize.bench import Bench
    from labkit.optimize.comparison_result import Comparison
    from labkit.trace.model import Trace


class RecipeHolder(Protocol):
    """What ``OptimizePanel(target=...)`` is: an object whose ``recipe`` Apply sets (a Lab)."""

    recipe: Recipe


_NO_MODEL = "OptimizePanel needs a model and a batch to measure: OptimizePanel(model, batch)"


class OptimizePanel(KeepsPicture, anywidget.AnyWidget):
    """Edit a :class:`~labkit.optimize.Recipe`, measure it against fp32, and apply it.

    The controls are bound to ``panel.recipe`` both ways; which controls there are
    comes from Python (``choices``: one entry per Recipe field with its options and
    the modes it applies to), and a control that does nothing in the current mode, or
    with the chosen export, is disabled with the reason (``locks``). "Measure" runs
    :func:`labkit.compare` on the model and batch in a background thread (progress
    shows in the panel; the kernel stays free), then shows a table and a bar chart.
    Rows accumulate across Measure (one :class:`~labkit.optimize.Bench` per mode: the
    fp32 baseline is set up and measured once, then timed again side by side with each
    new recipe); "Clear" drops them.

    Modes: ``"train"`` times forward, backward and an optimizer step; ``"inference"``
    times the forward in eval mode, and its table has latency, samples/s, latency at
    ``batch_sizes``, export time, output deviation and the first drifting layer. An
    export (``torch.export``, or ``onnxruntime`` when its extra is installed) is a
    deployment target measured in inference mode: choosing one switches the panel to
    inference and resets the fields an export does not combine with (both said in
    ``notice``); switching back to train resets the export. A model that cannot be
    exported gives a row with the exporter's one-line reason (construct and module).

    "Apply" hands the recipe to ``on_apply`` and sets ``target.recipe`` (a Lab); without
    ``on_apply`` it records the Recipe in the notebook for ``labkit promote``. With an
    export recipe, Apply makes the deployable model instead: the model (in eval mode)
    exported on ``batch`` is put in ``panel.exported`` and ``on_apply`` is called, but
    ``target.recipe`` is not set and nothing is recorded for promote, because a Lab
    trains and an export runs inference only; ``notice`` says so. A model that cannot be
    exported fails there with the one-line reason in ``error``.

    Args:
        model: The model to measure (not changed).
        batch: Its input (tensor, tuple or dict), as for :func:`labkit.compare`.
        recipe: Starting Recipe (default: fp32 eager).
        loss: ``loss(output) -> scalar`` for train mode.
        mode: ``"train"`` or ``"inference"`` (an export recipe starts in inference).
        steps: Timed rounds per recipe before the speedup's interval is first checked.
        budget_s: Seconds of timed rounds per Measure at most (default 5): rounds go on
            after ``steps`` until the speedup's 95% interval is within ``+-speedup_target``
            or this budget is spent; the status says which, with the seconds the timed
            rounds took and those the whole Measure took (set-up, compiling, warm-up, memory
            and drift passes are outside the budget). Each step time is shown as
            a median with its IQR, each speedup with its interval, or "within noise"
            when the interval spans 1.00x.
        warmup: Warm-up steps per recipe.
        speedup_target: The interval half-width rounds continue for (default 0.03: +-3%;
            None: exactly ``steps`` rounds); ``compare(target=...)``.
        batch_sizes: Inference mode: also time each recipe at these batch sizes (the
            batch cut or repeated along dim 0); editable in the panel.
        on_apply: Called with the Recipe when "Apply" is pressed; without one, Apply
            records the Recipe in the notebook (``labkit.promote.record_recipe``) so that
            ``labkit promote`` writes it into the script.
        target: Object whose ``recipe`` attribute "Apply" sets (e.g. a Lab).
        compare_kwargs: Further keyword arguments for :func:`labkit.compare`.

    Example:
        >>> import torch
        >>> from labkit.optimize import Recipe
        >>> model, x = torch.nn.Linear(8, 4), torch.randn(16, 8)
        >>> panel = OptimizePanel(model, x, steps=3, warmup=0, memory=False)
        >>> panel.recipe = Recipe(export="torch.export")
        >>> panel.mode  # an export is measured in inference mode
        'inference'
        >>> panel.measure().join()
        >>> [row["label"] for row in panel.results]
        ['fp32', 'torch.export']
        >>> panel.comparison.result("torch.export").rel < 1e-4  # fp32 export: eager's numbers
        True
    """

    recipe_state = t.Dict().tag(sync=True)
    choices = t.Dict().tag(sync=True)
    locks = t.Dict().tag(sync=True)
    option_locks = t.Dict().tag(sync=True)
    mode = t.Unicode("train").tag(sync=True)
    batch_sizes = t.List(t.Int()).tag(sync=True)
    running = t.Bool(False).tag(sync=True)
    progress = t.Float(0.0).tag(sync=True)
    status = t.Unicode("").tag(sync=True)
    notice = t.Unicode("").tag(sync=True)
    error = t.Unicode("").tag(sync=True)
    results: t.List[dict[str, Any]] = t.List().tag(sync=True)
    measured_mode = t.Unicode("").tag(sync=True)
    applied_label = t.Unicode("").tag(sync=True)
    loss_label = t.Unicode("").tag(sync=True)
    suggestion = t.Unicode("").tag(sync=True)

    @property
    def _esm(self) -> str:  # read by AnyWidget.__init__
        return bundle_path("optimize_panel").read_text()

    def __init__(
        self,
        model: torch.nn.Module | None = None,
        batch: object = None,
        *,
        recipe: Recipe | None = None,
        loss: Callable[[Any], torch.Tensor] | None = None,
        mode: str = "train",
        steps: int = 5,
        warmup: int = 1,
        budget_s: float | None = None,
        speedup_target: float | None = 0.03,
        batch_sizes: Sequence[int] = (),
        on_apply: Callable[[Recipe], object] | None = None,
        target: RecipeHolder | None = None,
        **compare_kwargs: object,
    ) -> None:
        if mode not in fields.MODES:
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
        self.budget_s, self.speedup_target = budget_s, speedup_target
        if budget_s is not None and not (isinstance(budget_s, (int, float)) and budget_s > 0):
            raise ValueError(f"OptimizePanel(budget_s=...) must be > 0 seconds, got {budget_s}")
        self.compare_kwargs = compare_kwargs
        self.comparison: Comparison | None = None
        self._bench: Bench | None = None
        self._advice: dict[str, tuple[Trace, list[Suggestion]]] = {}
        self._suggested: Recipe | None = None
        self._bench_key: tuple[str, tuple[int, ...]] | None = None
        self.exported: torch.nn.Module | None = None
        self._thread: threading.Thread | None = None
        self._fields = fields.fields()
        self._reset_note = ""
        recipe = recipe or Recipe()
        self._last_valid = recipe.to_dict()
        notice = ""
        if recipe.export and mode != "inference":
            mode, notice = "inference", _SWITCHED.format(export=recipe.export)
        super().__init__(
            recipe_state=self._last_valid,
            choices={"fields": self._fields, "modes": list(fields.MODES)},
            locks=fields.locks(mode, recipe, self._fields),
            option_locks=fields.option_locks(mode, recipe, self._fields),
            mode=mode,
            batch_sizes=list(batch_sizes),
            notice=notice,
            loss_label=loss_label(mode, loss),
        )
        self.observe(self._on_recipe, "recipe_state")
        self.observe(self._on_mode, "mode")
        self.on_msg(self._on_custom)

    # ----------------------------------------------------------------- recipe
    @property
    def recipe(self) -> Recipe:
        """The Recipe the controls show; settable from Python."""
        return Recipe.from_dict(self.recipe_state)

    @recipe.setter
    def recipe(self, value: Recipe) -> None:
        if not isinstance(value, Recipe):
            raise TypeError(f"panel.recipe must be a Recipe, got {type(value).__name__}")
        self.recipe_state = value.to_dict()

    @t.validate("recipe_state")
    def _check_state(self, proposal: dict[str, Any]) -> dict[str, Any]:
        value = dict(proposal["value"])
        state: dict[str, Any] | None
        try:
            state = Recipe.from_dict(value).to_dict()
        except (RecipeError, TypeError) as exc:
            state = self._with_new_export(value)
            if state is None:
                self.error = str(exc)  # shown in the panel; keep the last valid recipe
                return dict(self._last_valid)
        self.error = ""
        self._last_valid = state
        return state

    def _with_new_export(self, value: dict[str, Any]) -> dict[str, Any] | None:
        """A newly chosen export with fields it does not combine with: those reset."""
        export = value.get("export")
        if export in (None, fields.NONE) or export == self._last_valid.get("export"):
            return None
        reset = fields.without_export_clash(value, self._fields)
        try:
            state = Recipe.from_dict(value).to_dict()
        except (RecipeError, TypeError):
            return None
        self._reset_note = (
            f"export={export!r} runs the exported fp32 graph as it is: "
            f"{', '.join(reset)} reset to the default"
        )
        return state

    @t.validate("mode")
    def _check_mode(self, proposal: dict[str, Any]) -> str:
        mode = str(proposal["value"])
        if mode not in fields.MODES:
            self.error = f"mode must be 'train' or 'inference', got {mode!r}"
            return self.mode
        return mode

    @t.validate("batch_sizes")
    def _check_sizes(self, proposal: dict[str, Any]) -> list[int]:
        sizes = list(proposal["value"])
        if not all(isinstance(n, int) and not isinstance(n, bool) and n >= 1 for n in sizes):
            raise t.TraitError(f"OptimizePanel.batch_sizes must be ints >= 1, got {sizes!r}")
        return sizes

    def _on_recipe(self, change: dict[str, Any]) -> None:
        recipe, notes = self.recipe, [self._reset_note]
        self._reset_note = ""
        if recipe.export and self.mode != "inference":
            notes.append(_SWITCHED.format(export=recipe.export))
        if any(notes):
            self.notice = "; ".join(n for n in notes if n)
        if recipe.export and self.mode != "inference":
            self.mode = "inference"  # _on_mode updates the locks
        else:
            self._update_locks()

    def _on_mode(self, change: dict[str, Any]) -> None:
        self.loss_label = loss_label(self.mode, self.loss)
        recipe = self.recipe
        if self.mode == "train" and recipe.export:
            self.notice = (
                f"export={recipe.export!r} is measured in inference mode only: export reset "
                "to none for training"
            )
            self.recipe = recipe.replace(export=None, export_kwargs=())
        self._update_locks()

    def _update_locks(self) -> None:
        recipe = self.recipe
        with self.hold_sync():
            self.locks = fields.locks(self.mode, recipe, self._fields)
            self.option_locks = fields.option_locks(self.mode, recipe, self._fields)

    # ----------------------------------------------------------------- actions
    def measure(self) -> threading.Thread:
        """Start :func:`labkit.compare` (fp32 vs this recipe) in a background thread.

        Returns:
            The thread; ``join()`` it to wait. ``panel.comparison`` holds the result.
        """
        self._model()
        if self.running and self._thread is not None:  # measuring now: that measurement
            return self._thread  # (a thread only refreshing the saved picture does not count)
        recipe, mode = self.recipe, self.mode
        self.running, self.progress, self.error, self.status = True, 0.0, "", "starting"
        self._thread = threading.Thread(target=self._measure, args=(recipe, mode), daemon=True)
        self._thread.start()
        return self._thread

    def apply(self) -> Recipe:
        """Hand the current recipe to ``on_apply`` / ``target.recipe``; return it.

        An export recipe instead exports the model into ``panel.exported`` (see the class
        docstring): ``target.recipe`` is left as it is and nothing is recorded.
        """
        recipe = self.recipe
        if recipe.export:
            return self._apply_export(recipe)
        if self.target is not None:
            self.target.recipe = recipe
        if self.on_apply is not None:
            self.on_apply(recipe)
        else:  # keep the choice in the notebook, where `labkit promote` reads it
            from labkit.promote.recipe_record import record_recipe

            record_recipe(recipe, source="optimize panel")
        self.applied_label = recipe.label
        return recipe

    def _apply_export(self, recipe: Recipe) -> Recipe:
        model = self._model(
            f"Apply with export={recipe.export!r} exports the model on its batch: "
            "OptimizePanel(model, batch)"
        )
        self.exported, took = fields.export_model(model, self.batch, recipe)
        if self.on_apply is not None:
            self.on_apply(recipe)
        kept = "target.recipe not changed, " if self.target is not None else ""
        self.notice = (
            f"panel.exported holds the model exported by {recipe.export} in {took:.2f} s; "
            f"{kept}nothing recorded for promote: an export is a deployment target for "
            "inference, not a training recipe"
        )
        self.applied_label = recipe.label
        return recipe

    def _measure(self, recipe: Recipe, mode: str) -> None:
        last = [0.0]

        def progress(frac: float, msg: str) -> None:
            now = time.monotonic()
            if now - last[0] >= 0.2 or frac >= 1.0:  # at most ~5 updates a second
                last[0] = now
                with self.hold_sync():
                    self.progress, self.status = frac, msg

        start = time.monotonic()
        try:
            recipes = {recipe.label: recipe} if not recipe.is_default else {}
            cmp = self._bench_for(mode).compare(recipes, progress=progress)
            took = time.monotonic() - start
            self.comparison = cmp
            suggestion = self._next_suggestion(mode, cmp)
            with self.hold_sync():
                self.results = fields.rows(cmp)
                self.suggestion = suggestion
                self.measured_mode = cmp.mode
                self.status = (
                    f"measured {recipe.label} ({cmp.mode}): {fields.ended(cmp, took, recipe.label)}"
                )
                self.progress = 1.0
        except Exception as exc:
            self.error = f"{type(exc).__name__}: {exc}"
            self.status = "failed"
        finally:
            self.running = False
            self.refresh_output()  # the saved notebook keeps the measured table

    def _model(self, why: str = _NO_MODEL) -> torch.nn.Module:
        """The model, or ``why`` raised when the panel has no model or no batch."""
        if self.model is None or self.batch is None:
            raise ValueError(why)
        return self.model

    def _bench_for(self, mode: str) -> Bench:
        """The Bench of this mode and settings: its baseline is measured once and reused,
        and its rows accumulate until :meth:`clear` (a new mode or batch sizes start a new
        one)."""
        from labkit.optimize.bench import Bench

        sizes = tuple(self.batch_sizes) if mode == "inference" else ()
        key = (mode, sizes)
        if self._bench is None or key != self._bench_key:
            extra = dict(self.compare_kwargs)
            if self.budget_s is not None:
                extra["budget_s"] = self.budget_s
            self._bench = Bench(
                self._model(),
                self.batch,
                None,
                loss=self.loss,
                mode=mode,
                steps=self.steps,
                warmup=self.warmup,
                batch_sizes=sizes,
                target=self.speedup_target,
                **extra,
            )
            self._bench_key = key
        return self._bench

    def _next_suggestion(self, mode: str, cmp: Comparison) -> str:
        """advise()'s first suggestion not measured yet, in figures, ending "Measure it"
        ("" when every suggestion was measured).

        The model is traced once per mode (``labkit.trace``, which leaves the model as it
        was) and the advice kept; the suggested Recipe waits in ``_suggested`` for the
        panel's "Measure it" button.
        """
        from labkit._tensors import split_batch
        from labkit.optimize.advise import advise
        from labkit.trace.api import trace

        if mode not in self._advice:
            try:
                args, kwargs = split_batch(self.batch)
                t = trace(
                    self._model(),
                    *args,
                    loss=self.loss,
                    backward=mode == "train",
                    repeat=1,
                    time_budget=2.0,
                    model_kwargs=kwargs or None,
                )
                self._advice[mode] = (t, list(advise(t, inference=mode == "inference")))
            except Exception as exc:  # advice is a help, never a failure of Measure
                return f"(no suggestion: {type(exc).__name__}: {first_line(str(exc))})"
        t, found = self._advice[mode]
        done = {Recipe.from_dict(r.recipe) for r in cmp.results}
        for sug in found:
            recipe = sug.recipe()
            if recipe not in done:
                self._suggested = recipe
                return f"{fields.suggestion_text(sug, t)}: Measure it"
        self._suggested = None
        return ""

    def measure_suggestion(self) -> threading.Thread | None:
        """Set the suggested Recipe (see ``suggestion``) and measure it; None without one."""
        if self._suggested is None:
            return None
        self.recipe = self._suggested
        return self.measure()

    def clear(self) -> None:
        """Drop the measured rows (the baseline stays measured for the next Measure)."""
        if self._bench is not None:
            self._bench.clear()
        self.results = []
        self.comparison = None
        self.status = "cleared"

    def _picture(self) -> dict[str, str]:
        from labkit.views import optimize_picture

        return optimize_picture(self.recipe.label, self.comparison, list(self.results), self.error)

    def _on_custom(self, _widget: object, content: dict[str, Any], _buffers: object) -> None:
        kind = content.get("type") if isinstance(content, dict) else None
        try:
            if kind == "measure":
                self.measure()
            elif kind == "apply":
                self.apply()
            elif kind == "clear":
                self.clear()
            elif kind == "measure_suggestion":
                self.measure_suggestion()
        except Exception as exc:
            self.error = f"{type(exc).__name__}: {first_line(str(exc))}"

    def __repr__(self) -> str:
        model = type(self.model).__name__ if self.model is not None else None
        return f"OptimizePanel(recipe={self.recipe!r}, mode={self.mode!r}, model={model})"


_SWITCHED = (
    "export={export!r} is a deployment target, measured in inference mode (eval, no grad): "
    "the panel switched to inference"
)
