"""int8 quantization through torchao (``quantize_``), counted per Linear layer.

Importing torchao logs lines a notebook should not see when labkit is the importer: its
loader's ``Failed to load .../_C_mxfp8...so`` for kernels built for other GPUs, and
torch's ``register_constant() on Enum subclasses is deprecated`` for one of torchao's
enums. :class:`QuietImport` drops exactly those records, and only while labkit's own code
is on the stack: a user's ``import torchao`` still logs them.
"""

from __future__ import annotations

import logging
import re
import sys
from typing import Any

import torch

QUANT_FIX = "pip install torchao"


class QuietImport(logging.Filter):
    """Drops a logger's records that match ``pattern`` when labkit's code triggered them.

    Args:
        pattern: A regular expression searched in the record's message.
    """

    def __init__(self, pattern: str) -> None:
        super().__init__()
        self.pattern = re.compile(pattern)

    def __repr__(self) -> str:
        return f"QuietImport(pattern={self.pattern.pattern!r})"

    def filter(self, record: logging.LogRecord) -> bool:
        if not self.pattern.search(record.getMessage()):
            return True
        frame = sys._getframe(1)
        while frame is not None:  # labkit on the stack: labkit imported it
            if frame.f_globals.get("__name__", "").startswith("labkit."):
                return False
            frame = frame.f_back  # type: ignore[assignment]  # None ends the walk
        return True


# logger -> the messages of torchao's import that labkit's users are not meant to read
_IMPORT_NOISE = {
    "torchao": r"^Failed to load .*\.so|^Skipping import of cpp extensions",
    "torch.utils._pytree": r"register_constant\(\) on Enum subclasses is deprecated",
}


def _quiet_torchao_import() -> None:
    for name, pattern in _IMPORT_NOISE.items():
        log = logging.getLogger(name)
        if not any(isinstance(f, QuietImport) for f in log.filters):
            log.addFilter(QuietImport(pattern))


_quiet_torchao_import()


def _config(kind: str) -> Any:  # a torchao config (torchao is untyped)
    import torchao.quantization as q

    if kind == "int8-dynamic":
        return q.Int8DynamicActivationInt8WeightConfig()
    if kind == "int8-weight-only":
        return q.Int8WeightOnlyConfig()
    if kind == "int8-qat":
        from torchao.quantization.qat import IntxFakeQuantizeConfig, QATConfig

        act = IntxFakeQuantizeConfig(torch.int8, "per_token", is_symmetric=False)
        weight = IntxFakeQuantizeConfig(torch.int8, "per_channel")
        return QATConfig(activation_config=act, weight_config=weight, step="prepare")
    raise ValueError(f"unknown quantization {kind!r}")


def linear_paths(model: torch.nn.Module) -> list[str]:
    """Paths of every ``nn.Linear`` (subclasses included)."""
    return [p for p, m in model.named_modules() if isinstance(m, torch.nn.Linear)]


def is_quantized(module: torch.nn.Module) -> bool:
    """True when a Linear holds a torchao int8 weight or fake-quantizes for QAT."""
    if type(module).__name__ == "FakeQuantizedLinear":
        return True
    weight = getattr(module, "weight", None)
    return isinstance(weight, torch.Tensor) and type(weight) not in (
        torch.Tensor,
        torch.nn.Parameter,
    )


def fake_quantized(model: torch.nn.Module) -> list[str]:
    """Paths of the layers prepared for quantization-aware training (``int8-qat``)."""
    return [p for p, m in model.named_modules() if type(m).__name__ == "FakeQuantizedLinear"]


def quantize(model: torch.nn.Module, kind: str) -> tuple[int, int, int]:
    """Quantize ``model``'s Linear layers in place.

    A model trained with ``int8-qat`` is first converted back to plain Linear layers
    (keeping the trained weights), then quantized to ``kind``.

    Returns:
        (quantized Linear layers, all Linear layers, QAT layers converted first).

    On failure the original modules and weights are put back and the error re-raised.
    """
    from torchao.quantization import quantize_

    before = {p: m for p, m in model.named_modules() if isinstance(m, torch.nn.Linear)}
    saved = {p: (m.weight, getattr(m, "bias", None)) for p, m in before.items()}
    children = [(m, dict(m.named_children())) for m in model.modules()]
    converted = len(fake_quantized(model)) if kind != "int8-qat" else 0
    try:
        if converted:
            from torchao.quantization.qat import QATConfig

            quantize_(model, QATConfig(step="convert"))
        quantize_(model, _config(kind))
    except Exception:
        for parent, kids in children:  # undo module swaps (QAT prepare / convert)
            for name, child in kids.items():
                setattr(parent, name, child)
        for path, (weight, bias) in saved.items():
            mod = before[path]
            mod.weight = weight
            if bias is not None:
                mod.bias = bias
        raise
    done = sum(1 for _, m in model.named_modules() if is_quantized(m))
    return done, len(before), converted


def skipped_linears(model: torch.nn.Module) -> list[str]:
    """Linear layers that stayed in floating point after quantization (with their type)."""
    return [
        f"{p} ({type(m).__name__})"
        for p, m in model.named_modules()
        if isinstance(m, torch.nn.Linear) and not is_quantized(m)
    ]
