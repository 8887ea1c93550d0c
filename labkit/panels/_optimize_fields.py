"""What the optimize panel's controls are, which apply when, and the rows it shows.

The front end builds one control per entry of :func:`fields` (sent as the panel's
``choices`` trait): a Recipe field's name, label, kind, options and the modes it
applies to. Adding a Recipe field therefore means adding an entry here, not editing
the JavaScript. :func:`locks` says which controls are disabled now, and why, from
the panel's mode and Recipe; :func:`rows` shapes ``Comparison`` rows for the table;
:func:`export_model` makes the deployable model "Apply" gives for an export Recipe.
"""

from __future__ import annotations

import importlib.util
from typing import TYPE_CHECKING, Any

from labkit._format import first_line
from labkit.optimize.export import ONNX_FIX
from labkit.optimize.recipe import (
    COMPILE_MODES,
    EXPORTS,
    MATMUL_PRECISIONS,
    PRECISIONS,
    QUANTIZATIONS,
    Recipe,
    RecipeError,
)
from labkit.panels._measure_budget import spread

if TYPE_CHECKING:
    import torch

    from labkit.optimize.advise import Suggestion
    from labkit.optimize.comparison_result import Comparison
    from labkit.trace.model import Trace

MODES = ("train", "inference")
NONE = "none"  # the option value that stands for None

# why a control does nothing in a mode (the control is disabled with this as its reason)
_NOT_IN = {
    ("checkpoint", "inference"): (
        "checkpointing recomputes activations during backward; inference has no backward, "
        "so it changes nothing here (train mode)"
    ),
    ("fuse_conv_bn", "train"): (
        "conv-batchnorm fusion is for inference (BatchNorm still updates its statistics "
        "in training); switch to inference mode"
    ),
}
# what a control means in a mode, shown beside it
_HINTS = {
    ("precision", "inference"): (
        "16-mixed runs the forward under fp16 autocast; its GradScaler is used in training only"
    ),
    ("quantization", "train"): (
        "int8-dynamic and int8-weight-only are inference formats (skipped in training); "
        "int8-qat trains fake-quantized"
    ),
    ("export", "train"): "an export is measured in inference mode: choosing one switches to it",
}


def _missing(target: str | None) -> str:
    """Why an export target cannot run here ("" when it can)."""
    if target != "onnxruntime":
        return ""
    gone = [m for m in ("onnx", "onnxruntime", "onnxscript") if importlib.util.find_spec(m) is None]
    return f"{', '.join(gone)} not installed: {ONNX_FIX}" if gone else ""


def _select(name: str, values: tuple[Any, ...], modes: tuple[str, ...] = MODES) -> dict[str, Any]:
    options = []
    for v in values:
        why = _missing(v) if name == "export" else ""
        label = NONE if v is None else str(v)
        options.append(
            {
                "value": NONE if v is None else v,
                "label": f"{label} (not installed)" if why else label,
                "disabled": bool(why),
                "title": why,
            }
        )
    return {"name": name, "kind": "select", "options": options, "modes": list(modes)}


def fields() -> list[dict[str, Any]]:
    """One entry per Recipe field: ``name``, ``label``, ``kind``, ``options``, ``modes``,
    ``hints`` (mode -> text), ``default`` (``"none"`` for None), ``with_export``
    (combines with an export), and for ``export`` ``sets_mode`` (choosing one switches
    the panel to that mode)."""
    out = [
        _select("precision", PRECISIONS),
        _select("quantization", QUANTIZATIONS),
        _select("compile", COMPILE_MODES),
        _select("matmul_precision", MATMUL_PRECISIONS),
        {**_select("export", EXPORTS, ("inference",)), "sets_mode": "inference"},
        {"name": "channels_last", "kind": "check", "modes": list(MODES)},
        {"name": "fuse_conv_bn", "kind": "check", "modes": ["inference"]},
        {
            "name": "checkpoint",
            "kind": "list",
            "modes": ["train"],
            "placeholder": "module paths, globs or types",
        },
        {
            "name": "export_kwargs",
            "kind": "kwargs",
            "modes": ["inference"],
            "placeholder": "use_cache=False",
        },
    ]
    default = Recipe().to_dict()
    for f in out:
        f["label"] = f["name"].replace("_", " ")
        if f["name"] == "export_kwargs":
            f["label"] = "export call kwargs"
        f["default"] = NONE if default[f["name"]] is None else default[f["name"]]
        f["hints"] = {m: _HINTS[(f["name"], m)] for m in MODES if (f["name"], m) in _HINTS}
        f["with_export"] = _combines_with_export(f)
    return out


# a non-default value of a control of each kind, to try against Recipe
_TRY: dict[str, Any] = {"check": True, "list": ["x"], "kwargs": {"use_cache": False}}


def _combines_with_export(field: dict[str, Any]) -> bool:
    """Whether a non-default value of this field is allowed in an export Recipe."""
    name = field["name"]
    if name == "export":
        return True
    value: Any = _TRY.get(field["kind"])
    if field["kind"] == "select":
        default = Recipe().to_dict()[name]
        value = next(o["value"] for o in field["options"] if o["value"] not in (default, NONE))
    try:
        Recipe(export=EXPORTS[1], **{name: value})
    except RecipeError:
        return False
    return True


def locks(mode: str, recipe: Recipe, specs: list[dict[str, Any]]) -> dict[str, str]:
    """Control name -> why it does nothing now (mode, or an export in the Recipe).

    The front end disables such a control while it holds its default value; one set
    before (checkpointing, then inference mode) stays editable so it can be cleared.

    Example:
        >>> specs = fields()
        >>> sorted(locks("inference", Recipe(export="torch.export"), specs))
        ['checkpoint', 'compile', 'matmul_precision', 'precision', 'quantization']
        >>> locks("train", Recipe(), specs)["fuse_conv_bn"][:28]
        'conv-batchnorm fusion is for'
    """
    out = {}
    own = ("export", "export_kwargs")
    pals = " and ".join(g["name"] for g in specs if g["with_export"] and g["name"] not in own)
    for f in specs:
        name = f["name"]
        if mode not in f["modes"] and "sets_mode" not in f:
            out[name] = _NOT_IN.get((name, mode), f"applies in {' and '.join(f['modes'])} only")
        elif recipe.export and not f["with_export"]:
            out[name] = (
                f"export={recipe.export!r} runs the exported fp32 graph as it is; it combines "
                f"with {pals} only"
            )
    return out


def option_locks(
    mode: str, recipe: Recipe, specs: list[dict[str, Any]]
) -> dict[str, dict[str, str]]:
    """Control name -> {option value: why Recipe refuses it with the rest of ``recipe``}.

    Every value a control offers is tried against the current Recipe: one that
    :class:`~labkit.optimize.Recipe` refuses (int8 with fp16 autocast, a precision with an
    export, ...) is locked in the panel with Recipe's own reason, so the panel offers only
    combinations that run. A check box or list is tried as "on" (key ``"on"``). Controls
    already locked whole (:func:`locks`) are left out.

    Example:
        >>> got = option_locks("train", Recipe(quantization="int8-dynamic"), fields())
        >>> sorted(got["precision"]), got["precision"]["16-mixed"][:40]
        (['16-mixed'], "Recipe: quantization='int8-dynamic' with")
    """
    whole = locks(mode, recipe, specs)
    current = recipe.to_dict()
    out: dict[str, dict[str, str]] = {}
    for f in specs:
        name = f["name"]
        if name in whole or name == "export":
            continue
        if f["kind"] == "select":
            tries = {o["value"]: (None if o["value"] == NONE else o["value"]) for o in f["options"]}
        else:
            tries = {"on": _TRY[f["kind"]]}
        for key, value in tries.items():
            if value == current[name]:
                continue
            try:
                Recipe.from_dict({**current, name: value})
            except RecipeError as exc:
                out.setdefault(name, {})[str(key)] = str(exc)
    return out


def without_export_clash(state: dict[str, Any], specs: list[dict[str, Any]]) -> list[str]:
    """Reset (in ``state``) the fields an export does not combine with; their names."""
    default = Recipe().to_dict()
    reset = []
    for f in specs:
        if not f["with_export"] and state.get(f["name"], default[f["name"]]) != default[f["name"]]:
            state[f["name"]] = default[f["name"]]
            reset.append(f["name"])
    return reset


_KEYS = (
    "label",
    "step_time",
    "speedup",
    "speedup_low",
    "speedup_high",
    "within_noise",
    "rounds",
    "throughput",
    "compile_time",
    "break_even",
    "export_time",
    "peak_memory",
    "max_abs",
    "rel",
    "cosine",
    "loss",
    "drift_path",
    "drift_rel",
)


def rows(cmp: Comparison) -> list[dict[str, Any]]:
    """The table's rows: figures, the step-time spread, per-batch latency, a one-line error."""
    out = []
    for row in cmp.rows():
        item = {k: row.get(k) for k in _KEYS}
        error = row.get("error")
        item["error"] = first_line(error, 400) if error else None
        item["notes"] = row["notes"]
        item["per_batch"] = [
            {**b, "error": first_line(b["error"]) if b.get("error") else None}
            for b in row.get("per_batch") or []
        ]
        breaks = sum(b["count"] for b in row.get("graph_breaks") or [])
        item["graph_breaks"] = breaks if row.get("graphs") is not None else None
        item.update(spread(row.get("step_times") or ()))
        out.append(item)
    return out


def ended(cmp: Comparison, took: float | None = None, label: str | None = None) -> str:
    """What ended the last Measure's timed rounds (the interval target, the budget of
    timed rounds, or the fixed number of steps), how long the timed rounds took, and how
    long measuring took in all (``took``: set-up, compiling, warm-up, memory and drift
    passes included), in a sentence. ``label``: the recipe measured last (its rounds and
    the baseline's last as many are the ones timed now; default: every row).

    Example:
        >>> from types import SimpleNamespace as NS
        >>> base, row = NS(label="fp32", rounds=None, step_times=[0.05] * 60), NS(
        ...     label="bf16", rounds=40, step_times=[0.05] * 40)
        >>> cmp = NS(results=[base, row], ended_by="budget", budget_s=5.0, target=0.03, steps=5)
        >>> ended(cmp, took=128.0, label="bf16")  # doctest: +NORMALIZE_WHITESPACE
        '40 rounds: the 5 s budget of timed rounds (4.00 s spent) ran out before every
        interval was within +-3%; measuring took 128.00 s in all'
    """
    from labkit._format import fmt_time

    now = [r for r in cmp.results[1:] if label is None or r.label == label]
    rounds = max((r.rounds or 0 for r in now), default=0)
    timed = (
        sum(sum((r.step_times or ())[-rounds:]) for r in [*cmp.results[:1], *now]) if rounds else 0
    )
    spent = f" ({fmt_time(timed)} spent)" if timed else ""
    aim = f"+-{cmp.target * 100:g}%" if cmp.target is not None else "the target"
    if cmp.ended_by == "target":
        why = f"{rounds} rounds: every interval within {aim}, the target{spent}"
    elif cmp.ended_by == "budget":
        why = (
            f"{rounds} rounds: the {cmp.budget_s:g} s budget of timed rounds{spent} ran out "
            f"before every interval was within {aim}"
        )
    else:
        why = f"{rounds or cmp.steps} rounds: steps={cmp.steps}, no interval target{spent}"
    if took is not None:
        why += f"; measuring took {fmt_time(took)} in all"
    return why


def suggestion_text(sug: Suggestion, trace: Trace) -> str:
    """One advise() suggestion in figures from its trace: a checkpointing one reads
    "checkpointing Block (blocks.0, blocks.1) would cut the peak by ~308 KiB at ~+12% step
    time" (the saved activations of those modules; one more forward of them); any other
    its title."""
    from labkit._format import fmt_bytes

    ck = sug.change.get("checkpoint")
    if not ck or not sug.where:
        return str(sug.title)
    rows = {r["path"]: r for r in trace.rows()}
    picked = [rows[p] for p in sug.where if p in rows]
    saved = sum(r["saved_bytes"] or 0 for r in picked)
    recompute = sum(r["fwd_time"] or 0.0 for r in picked)
    step = (trace.meta.forward_time or 0.0) + (trace.meta.backward_time or 0.0)
    where = ", ".join(sug.where[:3]) + (
        f" +{len(sug.where) - 3} more" if len(sug.where) > 3 else ""
    )
    cost = f" at ~+{recompute / step:.0%} step time" if step > 0 else ""
    return (
        f"checkpointing {', '.join(ck)} ({where}) would cut the peak by ~{fmt_bytes(saved)}"
        f"{cost} (one more forward of them in backward)"
    )


def export_model(
    model: torch.nn.Module, batch: object, recipe: Recipe
) -> tuple[torch.nn.Module, float]:
    """``model`` (in eval mode, copied) applied with an export ``recipe`` and exported on
    ``batch`` now, so that a model that cannot be exported fails here; and the seconds
    the export took. ``model`` is left in the mode it was in."""
    import torch

    from labkit._tensors import split_batch
    from labkit.optimize.apply import apply
    from labkit.optimize.export import exported

    args, kwargs = split_batch(batch, strict="OptimizePanel(batch=...)")
    was = model.training
    model.eval()  # an export is for inference; apply() copies the model
    try:
        deployed = apply(model, recipe)
    finally:
        model.train(was)
    with torch.no_grad():
        deployed(*args, **kwargs)  # exports now: a failure names construct and module
    fwd = exported(deployed)
    return deployed, fwd.export_time if fwd is not None and fwd.export_time else 0.0
