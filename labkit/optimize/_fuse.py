"""Conv-BatchNorm fusion for inference: fold each BatchNorm into the convolution before it."""

from __future__ import annotations

import itertools

import torch
from torch import nn
from torch.nn.utils.fusion import fuse_conv_bn_eval

_CONVS = (nn.Conv1d, nn.Conv2d, nn.Conv3d)
_BNS = (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d)


def find_pairs(model: nn.Module) -> list[tuple[str, str]]:
    """(conv path, batchnorm path) pairs where the BatchNorm reads only that conv's output.

    Uses ``torch.fx`` to follow the real data flow; when the model cannot be traced
    symbolically, falls back to adjacent children of ``nn.Sequential`` containers.
    """
    try:
        graph = torch.fx.symbolic_trace(model).graph
    except Exception:
        return _sequential_pairs(model)
    mods = dict(model.named_modules())
    uses: dict[str, int] = {}
    for node in graph.nodes:
        if node.op == "call_module":
            uses[str(node.target)] = uses.get(str(node.target), 0) + 1
    pairs = []
    for node in graph.nodes:
        if node.op != "call_module" or not isinstance(mods.get(node.target), _BNS):
            continue
        src = node.args[0] if node.args else None
        if (
            isinstance(src, torch.fx.Node)
            and src.op == "call_module"
            and isinstance(mods.get(src.target), _CONVS)
            and len(src.users) == 1
            and uses[str(src.target)] == 1
            and uses[str(node.target)] == 1
        ):
            pairs.append((str(src.target), str(node.target)))
    return [p for p in pairs if _fusable(mods[p[0]], mods[p[1]])]


def _sequential_pairs(model: nn.Module) -> list[tuple[str, str]]:
    pairs = []
    for path, mod in model.named_modules():
        if not isinstance(mod, nn.Sequential):
            continue
        items = list(mod.named_children())
        for (a, conv), (b, bn) in itertools.pairwise(items):
            if isinstance(conv, _CONVS) and isinstance(bn, _BNS) and _fusable(conv, bn):
                prefix = f"{path}." if path else ""
                pairs.append((prefix + a, prefix + b))
    return pairs


def _fusable(conv: nn.Module, bn: nn.Module) -> bool:
    return (
        bn.running_mean is not None
        and bn.running_var is not None
        and conv.out_channels == bn.num_features
    )


def fuse(model: nn.Module, pairs: list[tuple[str, str]]) -> None:
    """Replace each conv by its fused form and its BatchNorm by ``nn.Identity`` (model in eval)."""
    for conv_path, bn_path in pairs:
        conv, bn = model.get_submodule(conv_path), model.get_submodule(bn_path)
        assert isinstance(conv, _CONVS) and isinstance(bn, _BNS)  # as fusable_pairs found them
        fused = fuse_conv_bn_eval(conv, bn)
        model.set_submodule(conv_path, fused)
        model.set_submodule(bn_path, nn.Identity())


def count_batchnorms(model: nn.Module) -> int:
    """How many BatchNorm layers the model has."""
    return sum(1 for m in model.modules() if isinstance(m, _BNS))
