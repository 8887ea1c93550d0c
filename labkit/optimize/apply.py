"""``labkit.optimize.apply``: the one place a Recipe is applied to a model."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from labkit._tensors import model_device
from labkit.optimize import _checkpoint, _cpu, _fuse, _quantize, _runtime
from labkit.optimize.recipe import Recipe, RecipeError

REPORT_ATTR = "_labkit_applied"


@dataclass(frozen=True)
class Step:
    """What happened to one toggle of a Recipe.

    Args:
        toggle: Recipe field name, e.g. ``"quantization"``.
        value: The field's value.
        applied: Whether the model was changed for it.
        note: What was done, or why it could not be (and the model left as it was).
        paths: Module paths the toggle changed (fused convolutions, checkpointed modules).
    """

    toggle: str
    value: Any
    applied: bool
    note: str
    paths: tuple[str, ...] = ()


@dataclass(frozen=True)
class Applied:
    """Report of :func:`apply`: one :class:`Step` per non-default toggle.

    Args:
        recipe: The Recipe that was applied.
        steps: Per toggle, whether it applied and a note.

    Example:
        >>> report = labkit.optimize.applied(fast)  # doctest: +SKIP
        >>> report.notes  # doctest: +SKIP
        ['quantization: 4 of 6 Linear layers quantized (int8-dynamic) ...']
    """

    recipe: Recipe
    steps: tuple[Step, ...] = ()

    @property
    def skipped(self) -> tuple[Step, ...]:
        """The toggles that could not apply."""
        return tuple(s for s in self.steps if not s.applied)

    @property
    def ok(self) -> bool:
        """True when every toggle applied."""
        return not self.skipped

    @property
    def notes(self) -> list[str]:
        """One plain sentence per toggle."""
        return [f"{s.toggle}: {s.note}" for s in self.steps]

    def __repr__(self) -> str:
        lines = [
            f"Applied({self.recipe.label}: {len(self.steps) - len(self.skipped)} applied, "
            f"{len(self.skipped)} skipped)"
        ]
        lines += [f"  {'ok  ' if s.applied else 'skip'} {s.toggle}: {s.note}" for s in self.steps]
        return "\n".join(lines)


def apply(
    model: torch.nn.Module, recipe: Recipe | dict[str, Any] | None = None, *, strict: bool = False
) -> torch.nn.Module:
    """Return an optimized copy of ``model``; the original is not touched.

    Toggles apply in this order: conv-batchnorm fusion, channels_last, quantization,
    activation checkpointing, then precision / matmul precision / compile around the
    root forward, or the export target (exported on the first call). The model's
    class, module paths and ``state_dict`` keys are kept (forwards are wrapped on the
    instance), so hooks, traces and drift checks line up with the original. A toggle
    that cannot apply (e.g. no Linear layers to quantize, fusion on a model in
    training mode) is skipped with the reason and leaves the model as it was; the
    report is :func:`applied`.

    Args:
        model: The model to optimize. It is copied with ``copy.deepcopy``.
        recipe: A :class:`Recipe` (or its ``to_dict`` form). ``None``: the default Recipe.
        strict: Raise a :class:`RecipeError` instead of skipping a toggle that cannot apply.

    Returns:
        The optimized copy, with its report readable by :func:`applied`.

    Raises:
        RecipeError: a ``checkpoint`` pattern matches no module (the nearest paths are
            named), the model cannot be copied, or (``strict``) a toggle cannot apply.

    Example:
        >>> import torch
        >>> from labkit.optimize import Recipe
        >>> from labkit.optimize.apply import apply, applied
        >>> model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU())
        >>> fast = apply(model, Recipe(precision="bf16-mixed"))
        >>> applied(fast).ok, applied(fast).notes  # doctest: +ELLIPSIS
        (True, ["precision: forward runs under torch.autocast('cpu', dtype=bfloat16)..."])
    """
    recipe = _as_recipe(recipe)
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"apply() needs a torch.nn.Module, got {type(model).__name__}")
    try:
        work = copy.deepcopy(model)
    except Exception as exc:
        raise RecipeError(
            f"apply() copies the model so the original stays untouched, but copy.deepcopy "
            f"failed for {type(model).__name__}: {exc}. Make the model deep-copyable "
            "(e.g. keep open files or locks outside it)."
        ) from exc
    steps: list[Step] = []
    if recipe.fuse_conv_bn:
        steps.append(_apply_fuse(work))
    if recipe.channels_last:
        steps.append(_apply_channels_last(work))
    if recipe.quantization:
        steps.append(_apply_quantization(work, recipe.quantization))
    if recipe.checkpoint:
        steps.append(_apply_checkpoint(work, recipe.checkpoint))
    steps.extend(_apply_runtime(work, recipe))
    if recipe.export:
        steps.append(_apply_export(work, recipe.export, dict(recipe.export_kwargs)))
    report = Applied(recipe, tuple(steps))
    if strict and report.skipped:
        raise RecipeError(
            "apply(strict=True): "
            + "; ".join(f"{s.toggle} could not apply: {s.note}" for s in report.skipped)
        )
    object.__setattr__(work, REPORT_ATTR, report)
    return work


def apply_structure(model: torch.nn.Module, recipe: Recipe) -> torch.nn.Module:
    """:func:`apply` without the runtime toggles (precision, matmul precision, compile,
    export): the model changes alone (fusion, channels_last, quantization, checkpointing).

    ``labkit.plan`` applies them to a meta copy (so the deep copy allocates nothing) and
    wraps the fake copy's forward with :func:`wrap_forward` for the planned device.

    Args:
        model: The model (copied, as by :func:`apply`).
        recipe: The Recipe whose model changes to apply.

    Returns:
        The changed copy.
    """
    return apply(
        model,
        dataclasses.replace(
            recipe, precision="32", matmul_precision="highest", compile=None, export=None
        ),
    )


def wrap_forward(
    forward: Callable[..., Any], recipe: Recipe, device_type: str
) -> Callable[..., Any]:
    """``forward`` run under ``recipe``'s autocast dtype and float32 matmul precision on
    ``device_type``, as :func:`apply` wraps a model's forward (no compile); ``forward``
    itself when the recipe sets neither.

    Args:
        forward: A module's bound forward.
        recipe: The Recipe.
        device_type: Where autocast applies (``"cpu"``, ``"cuda"``).

    Returns:
        The wrapped forward (a :class:`~labkit.optimize._runtime.RecipeForward`) or ``forward``.
    """
    dtype = _runtime.AUTOCAST_DTYPES.get(recipe.precision)
    if dtype is None and recipe.matmul_precision == "highest":
        return forward
    return _runtime.RecipeForward(
        forward, device_type=device_type, dtype=dtype, matmul_precision=recipe.matmul_precision
    )


def applied(model: torch.nn.Module) -> Applied:
    """The :class:`Applied` report of a model returned by :func:`apply`."""
    report = getattr(model, REPORT_ATTR, None)
    if report is None:
        raise ValueError(
            f"{type(model).__name__} was not made by labkit.optimize.apply(); "
            "call apply(model, recipe) first"
        )
    return report


def is_compiled(model: torch.nn.Module) -> bool:
    """True when :func:`apply` compiled the model's forward with ``torch.compile``."""
    fwd = model.__dict__.get("forward")
    return isinstance(fwd, _runtime.RecipeForward) and fwd.compile_mode is not None


def _as_recipe(recipe: Recipe | dict[str, Any] | None) -> Recipe:
    if recipe is None:
        return Recipe()
    if isinstance(recipe, dict):
        return Recipe.from_dict(recipe)
    if not isinstance(recipe, Recipe):
        raise TypeError(
            f"recipe must be a labkit.optimize.Recipe or a dict of its fields, "
            f"got {type(recipe).__name__}"
        )
    return recipe


# ---------------------------------------------------------------------- toggles
def _apply_fuse(work: torch.nn.Module) -> Step:
    if work.training:
        return Step(
            "fuse_conv_bn",
            True,
            False,
            "model is in training mode; conv-batchnorm fusion is for inference: "
            "call model.eval() first",
        )
    n_bn = _fuse.count_batchnorms(work)
    if n_bn == 0:
        return Step("fuse_conv_bn", True, False, "no BatchNorm layers to fuse")
    pairs = _fuse.find_pairs(work)
    if not pairs:
        return Step(
            "fuse_conv_bn",
            True,
            False,
            f"none of {n_bn} BatchNorm layers directly follows a convolution",
        )
    _fuse.fuse(work, pairs)
    return Step(
        "fuse_conv_bn",
        True,
        True,
        f"{len(pairs)} of {n_bn} BatchNorm layers folded into their convolution",
        tuple(c for c, _ in pairs),
    )


def _apply_channels_last(work: torch.nn.Module) -> Step:
    four_d = [n for n, p in work.named_parameters() if p.dim() == 4]
    if not four_d:
        return Step(
            "channels_last",
            True,
            False,
            "no 4-D weights (Conv2d) to reorder; channels_last would change nothing",
        )
    work.to(memory_format=torch.channels_last)  # type: ignore[call-overload]  # runtime takes it; stubs omit
    return Step("channels_last", True, True, f"{len(four_d)} 4-D weights stored channels-last")


def _apply_quantization(work: torch.nn.Module, kind: str) -> Step:
    linears = _quantize.linear_paths(work)
    if not linears:
        return Step("quantization", kind, False, "no nn.Linear layers to quantize")
    if kind != "int8-qat" and work.training:
        return Step(
            "quantization",
            kind,
            False,
            f"{kind} is an inference format and the model is in training mode: "
            "call model.eval() first, or use 'int8-qat' to train with quantization",
        )
    try:
        import torchao  # noqa: F401
    except ImportError:
        return Step(
            "quantization", kind, False, f"torchao is not installed ({_quantize.QUANT_FIX})"
        )
    if kind == "int8-qat" and _quantize.fake_quantized(work):
        return Step("quantization", kind, False, "the model is already prepared for QAT")
    try:
        done, total, converted = _quantize.quantize(work, kind)
    except Exception as exc:
        return Step(
            "quantization",
            kind,
            False,
            f"torchao failed ({type(exc).__name__}: {exc}); model left in fp32",
        )
    verb = "fake-quantized for QAT" if kind == "int8-qat" else f"quantized ({kind})"
    note = f"{done} of {total} Linear layers {verb}"
    if converted:
        note = f"{converted} QAT layers converted to Linear, then " + note
    left = _quantize.skipped_linears(work)
    if left:
        more = f" (+{len(left) - 3} more)" if len(left) > 3 else ""
        note += f"; left in float: {', '.join(left[:3])}{more}"
    return Step("quantization", kind, done > 0, note)


def _apply_checkpoint(work: torch.nn.Module, patterns: tuple[str, ...]) -> Step:
    paths, missing = _checkpoint.select(work, patterns)
    if missing:  # a pattern that checkpoints nothing is a typo, never a silent no-op
        raise RecipeError(_checkpoint.unmatched_message(work, missing))
    _checkpoint.wrap(work, paths)
    shown = ", ".join(paths[:4]) + (f" (+{len(paths) - 4} more)" if len(paths) > 4 else "")
    note = f"{len(paths)} modules recompute in backward: {shown}"
    return Step("checkpoint", patterns, True, note, tuple(paths))


def _apply_export(work: torch.nn.Module, target: str, call_kwargs: dict[str, Any]) -> Step:
    from labkit.optimize.export import ExportedForward

    if work.training:
        return Step(
            "export",
            target,
            False,
            f"{target} is a deployment target for inference and the model is in training "
            "mode: call model.eval() first (labkit.compare(..., mode='inference') does)",
        )
    work.forward = ExportedForward(work, target, call_kwargs)
    how = "the torch.export graph" if target == "torch.export" else "ONNX Runtime"
    note = f"exported on the first call, then run by {how}"
    if call_kwargs:
        note += "; every call gets " + ", ".join(f"{k}={v!r}" for k, v in call_kwargs.items())
    return Step("export", target, True, note)


def _apply_runtime(work: torch.nn.Module, recipe: Recipe) -> list[Step]:
    steps: list[Step] = []
    device_type = model_device(work).type
    dtype = _runtime.AUTOCAST_DTYPES.get(recipe.precision)
    if dtype is not None:
        if device_type not in ("cpu", "cuda", "xpu", "mps"):
            steps.append(
                Step(
                    "precision",
                    recipe.precision,
                    False,
                    f"autocast does not support device {device_type!r}",
                )
            )
            dtype = None
        else:
            steps.append(
                Step(
                    "precision",
                    recipe.precision,
                    True,
                    _precision_note(recipe.precision, device_type),
                )
            )
    if recipe.matmul_precision != "highest":
        steps.append(
            Step(
                "matmul_precision",
                recipe.matmul_precision,
                True,
                f"float32 matmuls run at precision {recipe.matmul_precision!r}",
            )
        )
    fn = work.forward
    if recipe.compile:
        note = f"forward compiled lazily on first call (mode={recipe.compile!r})"
        if (
            device_type == "cuda"
            and recipe.precision == "32"
            and recipe.matmul_precision == "highest"
        ):
            note += "; fp32 matmuls skip TF32 tensor cores: matmul_precision='high' enables them"
        if recipe.compile == "reduce-overhead" and device_type != "cuda":
            note += "; reduce-overhead uses CUDA graphs, so on CPU it acts like 'default'"
        steps.append(Step("compile", recipe.compile, True, note))
    if dtype is not None or recipe.matmul_precision != "highest" or recipe.compile:
        work.forward = _runtime.RecipeForward(
            fn,
            device_type=device_type,
            dtype=dtype,
            matmul_precision=recipe.matmul_precision,
            compile_mode=recipe.compile,
        )
    return steps


def _precision_note(precision: str, device_type: str) -> str:
    dtype = "bfloat16" if precision == "bf16-mixed" else "float16"
    note = f"forward runs under torch.autocast({device_type!r}, dtype={dtype})"
    if device_type == "cpu":
        if precision == "bf16-mixed" and not _cpu.native_bf16():
            note += "; no native bf16 on this CPU (no AVX512-BF16/AMX): expect it slower than fp32"
        if precision == "16-mixed" and not _cpu.native_fp16():
            note += "; no native fp16 on this CPU: expect it slower than fp32"
    if precision == "16-mixed":
        note += "; training needs a GradScaler (labkit.optimize.grad_scaler(recipe))"
    return note


def grad_scaler(recipe: Recipe, device_type: str = "cpu") -> torch.amp.GradScaler | None:
    """The GradScaler a training loop needs for ``recipe`` (``16-mixed`` only), else None."""
    if recipe.precision != "16-mixed":
        return None
    return torch.amp.GradScaler(device_type)
