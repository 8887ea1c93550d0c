"""The Recipe: one serializable, validated set of optimization choices.

A Recipe says *what* to do to a model (precision, quantization, compile, activation
checkpointing, memory format, conv-batchnorm fusion, float32 matmul precision); it
does nothing by itself. :func:`labkit.optimize.apply` is the one place that applies
it. The optimize panel edits a Recipe, the trainer applies it and promote writes it
into the script, so it round-trips through ``to_dict`` / ``from_dict`` and JSON.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

PRECISIONS = ("32", "bf16-mixed", "16-mixed")
QUANTIZATIONS = (None, "int8-dynamic", "int8-weight-only", "int8-qat")
COMPILE_MODES = (None, "default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
MATMUL_PRECISIONS = ("highest", "high", "medium")
EXPORTS = (None, "torch.export", "onnxruntime")

RECIPE_SCHEMA = "labkit.recipe"
RECIPE_VERSION = 1


class RecipeError(ValueError):
    """A Recipe field has a value labkit cannot use; the message names the field and the fix."""


@dataclass(frozen=True)
class Recipe:
    """Optimization choices for a model, as plain data.

    The default Recipe changes nothing (fp32 eager). Every field is validated when the
    Recipe is made, so a bad value fails here with the field's name and its choices,
    not later inside torch.

    Args:
        precision: ``"32"`` (fp32), ``"bf16-mixed"`` (autocast to bfloat16) or
            ``"16-mixed"`` (autocast to float16; training then uses a GradScaler).
        quantization: ``None``, ``"int8-dynamic"`` (int8 weights and dynamically
            quantized activations), ``"int8-weight-only"`` or ``"int8-qat"``
            (fake-quantized int8 for quantization-aware training; applying
            ``"int8-dynamic"`` to the trained model converts it), all through torchao.
        compile: ``None`` (eager) or a ``torch.compile`` mode such as ``"default"``.
        checkpoint: Modules whose activations are recomputed in backward instead of
            stored: each entry is a module path (``"encoder.layers.0"``), a glob over
            paths (``"encoder.layers.*"``) or a class name (``"TransformerEncoderLayer"``).
        channels_last: Store 4-D weights (and so conv outputs) in channels-last order.
        fuse_conv_bn: Fold each BatchNorm into the convolution before it (inference only).
        matmul_precision: ``torch.set_float32_matmul_precision`` value used while the
            model runs: ``"highest"``, ``"high"`` or ``"medium"``.
        export: A deployment target, for inference: ``None`` (the eager model),
            ``"torch.export"`` (the ``torch.export`` graph, run by PyTorch) or
            ``"onnxruntime"`` (that graph converted to ONNX and run by ONNX Runtime;
            needs ``pip install 'labkit[export]'``). The model is exported on its first
            call, with those inputs and a dynamic batch dimension. Combines with
            ``fuse_conv_bn`` and ``channels_last`` only.
        export_kwargs: Keyword arguments added to every call of the model that is
            exported (and to its eager reference in the drift check), e.g.
            ``{"use_cache": False}`` for a Hugging Face causal LM, whose KV cache
            (``DynamicCache``) in the output cannot be exported. Values are plain
            (bool, int, float, str, None); needs ``export``.

    Example:
        >>> from labkit.optimize import Recipe
        >>> r = Recipe(precision="bf16-mixed", checkpoint=("layers.*",))
        >>> r
        Recipe(precision='bf16-mixed', checkpoint=('layers.*',))
        >>> Recipe.from_json(r.to_json()) == r
        True
        >>> r.replace(compile="default").label
        'bf16-mixed + compile + ckpt(layers.*)'
    """

    precision: str = "32"
    quantization: str | None = None
    compile: str | None = None
    checkpoint: tuple[str, ...] = ()
    channels_last: bool = False
    fuse_conv_bn: bool = False
    matmul_precision: str = "highest"
    export: str | None = None
    export_kwargs: tuple[tuple[str, Any], ...] = ()

    def __post_init__(self) -> None:
        # Friendly coercions: a single checkpoint string, a list from JSON, "none" strings.
        ck = self.checkpoint
        if isinstance(ck, str):
            ck = (ck,) if ck else ()
        if isinstance(ck, list):
            ck = tuple(ck)
        object.__setattr__(self, "checkpoint", ck)
        for name in ("quantization", "compile", "export"):
            if getattr(self, name) in ("none", "None", ""):
                object.__setattr__(self, name, None)
        kw = self.export_kwargs
        if isinstance(kw, dict):
            kw = tuple(sorted(kw.items()))
        elif isinstance(kw, list):
            kw = tuple(tuple(p) if isinstance(p, list) else p for p in kw)
        object.__setattr__(self, "export_kwargs", kw)
        if isinstance(self.precision, int) and not isinstance(self.precision, bool):
            object.__setattr__(self, "precision", str(self.precision))
        self._validate()

    def _validate(self) -> None:
        _choice("precision", self.precision, PRECISIONS)
        _choice("quantization", self.quantization, QUANTIZATIONS)
        _choice("compile", self.compile, COMPILE_MODES)
        _choice("matmul_precision", self.matmul_precision, MATMUL_PRECISIONS)
        _choice("export", self.export, EXPORTS)
        if self.export is not None:
            clash = [
                f"{k}={v!r}"
                for k, v in self.changes().items()
                if k not in ("export", "export_kwargs", "fuse_conv_bn", "channels_last")
            ]
            if clash:
                raise RecipeError(
                    f"Recipe: export={self.export!r} runs the exported fp32 graph as it is, so "
                    f"{', '.join(clash)} would not apply; export combines with fuse_conv_bn and "
                    "channels_last only (compare the other choices as their own rows)"
                )
        self._validate_export_kwargs()
        if not isinstance(self.checkpoint, tuple) or not all(
            isinstance(c, str) and c for c in self.checkpoint
        ):
            raise RecipeError(
                f"Recipe.checkpoint must be a tuple of module paths, globs or class names "
                f"(non-empty strings), e.g. ('layers.*',); got {self.checkpoint!r}"
            )
        for name in ("channels_last", "fuse_conv_bn"):
            value = getattr(self, name)
            if not isinstance(value, bool):
                raise RecipeError(f"Recipe.{name} must be True or False, got {value!r}")
        if self.quantization == "int8-qat" and self.compile is not None and self.checkpoint:
            raise RecipeError(
                f"Recipe: quantization='int8-qat' with compile={self.compile!r} and "
                f"checkpoint={self.checkpoint!r} is not supported: with torchao's "
                "fake-quantized Linear layers, checkpoint's recompute under torch.compile "
                "saves other tensors than the forward did (torch.utils.checkpoint "
                "CheckpointError in backward, torch 2.13); drop one of the three"
            )
        if (self.quantization, self.precision) == ("int8-weight-only", "bf16-mixed") and (
            self.compile is not None
        ):
            raise RecipeError(
                "Recipe: quantization='int8-weight-only' with precision='bf16-mixed' and "
                f"compile={self.compile!r} is not supported: inductor's code for torchao's "
                "int8 weight-only matmul under bf16 autocast crashes the process "
                "(segmentation fault, torch 2.13 on CPU); measure it without compile, or "
                "compile it with precision='32'"
            )
        if self.quantization is not None and self.precision == "16-mixed":
            raise RecipeError(
                f"Recipe: quantization={self.quantization!r} with precision='16-mixed' is not "
                "supported (torchao's int8 kernels take fp32 or bf16 activations); "
                "use precision='32' or 'bf16-mixed'"
            )

    def _validate_export_kwargs(self) -> None:
        kw = self.export_kwargs
        ok = isinstance(kw, tuple) and all(
            isinstance(p, tuple)
            and len(p) == 2
            and isinstance(p[0], str)
            and p[0].isidentifier()
            and (p[1] is None or isinstance(p[1], (bool, int, float, str)))
            for p in kw
        )
        if not ok:
            raise RecipeError(
                "Recipe.export_kwargs must be a dict of keyword name -> plain value (bool, int, "
                f"float, str or None), e.g. {{'use_cache': False}}; got {kw!r}"
            )
        if kw and self.export is None:
            raise RecipeError(
                f"Recipe: export_kwargs={dict(kw)!r} are passed to the exported model's calls; "
                "set export='torch.export' or 'onnxruntime' too"
            )

    # ----------------------------------------------------------------- views
    @property
    def is_default(self) -> bool:
        """True when the Recipe changes nothing (fp32 eager)."""
        return self == Recipe()

    @property
    def label(self) -> str:
        """Short name for tables, e.g. ``'bf16-mixed + compile'``; ``'fp32'`` for the default."""
        parts: list[str] = []
        if self.precision != "32":
            parts.append(self.precision)
        if self.quantization:
            parts.append(self.quantization)
        if self.compile:
            parts.append("compile" if self.compile == "default" else f"compile:{self.compile}")
        if self.checkpoint:
            parts.append(f"ckpt({','.join(self.checkpoint)})")
        if self.channels_last:
            parts.append("channels_last")
        if self.fuse_conv_bn:
            parts.append("fuse_conv_bn")
        if self.matmul_precision != "highest":
            parts.append(f"matmul:{self.matmul_precision}")
        if self.export:
            kw = ", ".join(f"{k}={v!r}" for k, v in self.export_kwargs)
            parts.append(f"{self.export}({kw})" if kw else self.export)
        return " + ".join(parts) if parts else "fp32"

    def changes(self) -> dict[str, Any]:
        """The fields that differ from the default Recipe."""
        base = Recipe()
        return {
            f.name: getattr(self, f.name)
            for f in dataclasses.fields(self)
            if getattr(self, f.name) != getattr(base, f.name)
        }

    def replace(self, **changes: Any) -> Recipe:
        """A copy with some fields changed (validated like a new Recipe).

        Raises:
            RecipeError: when a name is not a Recipe field.
        """
        _check_names(changes, "Recipe.replace")
        return dataclasses.replace(self, **changes)

    # ----------------------------------------------------------------- a plan's copy
    def apply_structure(self, model: torch.nn.Module) -> torch.nn.Module:
        """This Recipe's model changes applied to a copy of ``model``, without the runtime
        toggles (:func:`labkit.optimize.apply.apply_structure`); ``labkit.plan`` calls it
        on a meta copy."""
        from labkit.optimize.apply import apply_structure

        return apply_structure(model, self)

    def wrap_forward(self, forward: Callable[..., Any], device_type: str) -> Callable[..., Any]:
        """``forward`` under this Recipe's autocast and matmul precision on ``device_type``
        (:func:`labkit.optimize.apply.wrap_forward`); ``labkit.plan`` wraps its fake copy."""
        from labkit.optimize.apply import wrap_forward

        return wrap_forward(forward, self, device_type)

    # ----------------------------------------------------------------- data
    def to_dict(self) -> dict[str, Any]:
        """Every field as JSON-ready plain data (``checkpoint`` as a list)."""
        out = dataclasses.asdict(self)
        out["checkpoint"] = list(self.checkpoint)
        out["export_kwargs"] = dict(self.export_kwargs)
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Recipe:
        """Build a Recipe from :meth:`to_dict` output; unknown keys are an error."""
        if not isinstance(data, dict):
            raise RecipeError(f"Recipe.from_dict needs a dict, got {type(data).__name__}")
        data = {k: v for k, v in data.items() if k not in ("schema", "version")}
        _check_names(data, "Recipe.from_dict")
        return cls(**data)

    def to_json(self) -> str:
        """The Recipe as a versioned JSON string."""
        payload = {"schema": RECIPE_SCHEMA, "version": RECIPE_VERSION, **self.to_dict()}
        return json.dumps(payload, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Recipe:
        """Read a Recipe written by :meth:`to_json`."""
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise RecipeError(f"Recipe.from_json: not valid JSON ({exc})") from None
        if isinstance(data, dict) and data.get("version", RECIPE_VERSION) > RECIPE_VERSION:
            raise RecipeError(
                f"Recipe.from_json: recipe version {data['version']} is newer than this "
                f"labkit understands ({RECIPE_VERSION}); upgrade labkit"
            )
        return cls.from_dict(data)

    def __repr__(self) -> str:
        shown = {k: dict(v) if k == "export_kwargs" else v for k, v in self.changes().items()}
        inner = ", ".join(f"{k}={v!r}" for k, v in shown.items())
        return f"Recipe({inner})"


def _choice(name: str, value: Any, choices: tuple[Any, ...]) -> None:
    if value not in choices or isinstance(value, bool):
        shown = ", ".join(repr(c) for c in choices)
        raise RecipeError(f"Recipe.{name} must be one of {shown}; got {value!r}")


def _check_names(data: dict[str, Any], where: str) -> None:
    names = {f.name for f in dataclasses.fields(Recipe)}
    unknown = sorted(set(data) - names)
    if unknown:
        raise RecipeError(f"{where}: unknown Recipe field(s) {unknown}; fields are {sorted(names)}")
