"""Measuring export recipes: per-layer drift of an export, and batches of other sizes.

Drift, layer by layer:

- ``torch.export``: ``torch.export.unflatten`` rebuilds the program as modules with
  the original paths, so :func:`~labkit.optimize.layer_drift` hooks line up.
- ``onnxruntime``: each ONNX node carries the module path it came from (the
  exporter's ``pkg.torch.onnx.name_scopes``). The last node of each module gives the
  module's output; those values are added as graph outputs of a copy of the ONNX
  model, run once by ONNX Runtime and compared with the eager module outputs.
"""

from __future__ import annotations

import ast
import warnings
from typing import Any

import torch
import torch.utils._pytree as pytree

from labkit.optimize.drift import LayerDrift, deviation, flat, layer_drift, module_outputs
from labkit.optimize.export import ExportedForward


def export_drift(
    base: torch.nn.Module,
    fwd: ExportedForward,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    *,
    seed: int = 0,
    skip: tuple[str, ...] = (),
) -> list[LayerDrift]:
    """Per-module drift of an exported model against ``base`` (both already exported/run)."""
    if fwd.target == "torch.export":
        with warnings.catch_warnings():
            # torch's own pytree deprecation inside unflatten (not the model's)
            warnings.filterwarnings("ignore", message=r".*LeafSpec.*", category=FutureWarning)
            cand = torch.export.unflatten(fwd.program)
        return layer_drift(base, cand, *args, skip=skip, seed=seed, **kwargs)
    return onnx_drift(base, fwd, args, kwargs, seed=seed, skip=skip)


def onnx_drift(
    base: torch.nn.Module,
    fwd: ExportedForward,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    *,
    seed: int = 0,
    skip: tuple[str, ...] = (),
) -> list[LayerDrift]:
    """Per-module drift of the ONNX Runtime model, from its nodes' module paths."""
    import onnx
    import onnxruntime as ort

    order, base_out, types = _eager_outputs(base, args, kwargs, seed, skip)
    last = _last_value_per_module(fwd.onnx_program.model.graph)
    wanted = {p: last[p] for p in order if p in last}
    proto = onnx.ModelProto()
    proto.CopyFrom(fwd.onnx_program.model_proto)
    have = {o.name for o in proto.graph.output}
    for name in dict.fromkeys(wanted.values()):
        if name not in have:
            proto.graph.output.append(onnx.ValueInfoProto(name=name))
    session = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    leaves = [t for t in pytree.tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)]
    feed = {
        i.name: t.detach().cpu().contiguous().numpy()
        for i, t in zip(session.get_inputs(), leaves, strict=True)
    }
    names = [o.name for o in session.get_outputs()]
    values = dict(zip(names, session.run(names, feed), strict=True))
    rows = []
    for path in order:
        if path not in wanted:
            continue
        got = torch.from_numpy(values[wanted[path]]).reshape(-1).float()
        ref = base_out[path]
        if got.shape != ref.shape:
            continue  # the module's last node is not its output (e.g. a tuple output)
        max_abs, rel, cos = deviation(ref, got)
        finite = bool(torch.isfinite(got).all())
        base_max = float(ref.abs().max()) if ref.numel() else 0.0
        rows.append(LayerDrift(path, types[path], max_abs, rel, cos, base_max, finite))
    return rows


def _eager_outputs(
    base: torch.nn.Module,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    seed: int,
    skip: tuple[str, ...],
) -> tuple[list[str], dict[str, torch.Tensor], dict[str, str]]:
    order: list[str] = []
    out: dict[str, torch.Tensor] = {}
    types: dict[str, str] = {}

    def record(path: str, module: torch.nn.Module, output: Any) -> None:
        vec = flat(output) if path not in out else None
        if vec is not None:
            out[path], types[path] = vec, type(module).__name__
            order.append(path)

    module_outputs(base, args, kwargs, record, skip=skip, seed=seed)
    return order, out, types


def _last_value_per_module(graph: Any) -> dict[str, str]:
    """module path -> name of the first output of the last ONNX node inside that module."""
    last: dict[str, str] = {}
    for node in graph:
        scopes = node.metadata_props.get("pkg.torch.onnx.name_scopes")
        if not scopes or not node.outputs or node.outputs[0] is None:
            continue
        try:
            paths = ast.literal_eval(scopes)[:-1]  # the last entry names the node itself
        except (ValueError, SyntaxError):
            continue
        for path in paths:
            last[path] = node.outputs[0].name
    return last


def resize_batch(
    args: tuple[Any, ...], kwargs: dict[str, Any], size: int, batch: int
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """Inputs with every tensor whose dim 0 is ``batch`` cut or repeated to ``size`` rows."""

    def fit(t: Any) -> Any:
        if not isinstance(t, torch.Tensor) or t.dim() == 0 or t.shape[0] != batch:
            return t
        if size <= batch:
            return t[:size].clone()
        reps = -(-size // batch)
        return torch.cat([t] * reps)[:size]

    return pytree.tree_map(fit, args), pytree.tree_map(fit, kwargs)
