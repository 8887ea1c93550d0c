"""Where a real kernel's output holds more memory than its fake kernel says.

A fake tensor gets the storage its shape needs. A few CPU kernels return a result that
keeps a larger storage alive: ``mse_loss`` and ``smooth_l1_loss`` with a ``mean`` or
``sum`` reduction compute the element-wise loss into a buffer of the inputs' size and
return the 0-dim result as a view of it (seen with torch 2.13: ``F.mse_loss`` of two
8 x 4 float tensors keeps 128 bytes, not 4). The loss stays alive through backward, so
a plan that gave it 4 bytes was that buffer under the measured peak. :func:`real_layout`
gives such an output the storage the real kernel keeps.

oneDNN's LSTM layer (``mkldnn_rnn_layer``, what ``nn.LSTM`` runs on CPU) keeps a workspace
for backward whose size oneDNN decides (gates and states, each padded to a page): the fake
kernel gives it 0 bytes, and a 2-layer bidirectional LSTM's plan was 120,800 B (59%)
under the measured peak. Its size depends on the shapes only, so it is read off the real
kernel run once on zeros of the same shapes (cached by shape), unless those tensors would
pass :data:`RNN_REAL_MAX_BYTES`: then it is left out, and a note says so. Its backward's
fake kernel returns one tensor for both bias gradients, where the real one returns two.

``nn.EmbeddingBag``'s CPU kernel makes its ``offset2bag`` (saved for backward) one element
longer than it returns it (``resize_`` down keeps the storage): 8 bytes a plan missed.

``native_layer_norm_backward``'s fake kernel gives the input's gradient the layout of the
incoming gradient, where the CPU kernel always returns it contiguous. After a transposed
gradient (Swin's patch embedding: ``flatten(2).transpose(1, 2)`` then a LayerNorm) the
fake gradient was transposed, so a later ``.view`` of it copied (``clone`` +
``_unsafe_view``) where the real one did not: a tiny Swin's plan was 2,048 B (one
activation gradient) over the measured peak. The rule gives it the real, contiguous layout.
``native_batch_norm_backward``'s fake kernel does the same where the CPU kernel gives the
input's gradient the input's suggested memory format (channels-last for a channels-last
4-D input, else contiguous).
"""

from __future__ import annotations

import torch
from torch._ops import OpOverload
from torch._prims_common import suggest_memory_format
from torch._subclasses.fake_tensor import unset_fake_temporarily
from torch.utils._python_dispatch import _disable_current_modes

from labkit._format import fmt_bytes

_aten = torch.ops.aten
# op -> the index of its ``reduction`` argument (0: none, 1: mean, 2: sum)
_FULL_BUFFER_SCALARS: dict[OpOverload, int] = {
    _aten.mse_loss.default: 2,
    _aten.smooth_l1_loss.default: 2,
}


_EMBEDDING_BAG = _aten._embedding_bag.default
_RNN_LAYER = _aten.mkldnn_rnn_layer.default
_RNN_LAYER_BACKWARD = _aten.mkldnn_rnn_layer_backward.default
_LAYER_NORM_BACKWARD = _aten.native_layer_norm_backward.default
_BATCH_NORM_BACKWARD = _aten.native_batch_norm_backward.default
_LAYOUT_RULES = frozenset(
    (_EMBEDDING_BAG, _RNN_LAYER, _RNN_LAYER_BACKWARD, _LAYER_NORM_BACKWARD, _BATCH_NORM_BACKWARD)
)
RNN_REAL_MAX_BYTES = 1 << 28  # inputs an LSTM layer's workspace is measured on, at most
_WORKSPACE: dict[tuple[object, ...], int] = {}  # shapes and options -> workspace bytes
RNN_NOTE = (
    "an nn.LSTM layer's oneDNN workspace (kept for backward) is not counted: its size is "
    "read off the real kernel run on zeros, skipped above {limit} of inputs"
)


def keeps_a_buffer(func: OpOverload) -> bool:
    """Whether ``func`` is one whose real CPU result may keep a larger storage (or another
    layout) than its fake kernel gives."""
    return func in _FULL_BUFFER_SCALARS or func in _LAYOUT_RULES


def real_layout(
    func: OpOverload,
    args: tuple[object, ...],
    kwargs: dict[str, object],
    out: object,
    notes: list[str] | None = None,
) -> object:
    """``out`` (a fake result of ``func``), or where the real CPU kernel keeps more: the
    same 0-dim loss as a view of a fake buffer the size of its element-wise buffer, or an
    LSTM layer's outputs with a workspace of the real kernel's size (``notes`` gets a note
    where it was too big to measure)."""
    if func is _RNN_LAYER:
        return _rnn_workspace(args, out, notes)
    if func is _RNN_LAYER_BACKWARD:
        return _distinct_bias_grads(out)
    if func is _EMBEDDING_BAG:
        return _offset2bag_one_longer(out)
    if func is _LAYER_NORM_BACKWARD:
        return _input_grad_in(out, torch.contiguous_format)
    if func is _BATCH_NORM_BACKWARD:
        x = args[1] if len(args) > 1 else kwargs.get("input")
        if not isinstance(x, torch.Tensor):
            return out
        return _input_grad_in(out, suggest_memory_format(x))
    at = _FULL_BUFFER_SCALARS[func]
    reduction = args[at] if len(args) > at else kwargs.get("reduction", 1)
    x = args[0] if args else None
    if (
        reduction == 0
        or not isinstance(out, torch.Tensor)
        or out.dim() != 0
        or not isinstance(x, torch.Tensor)
        or out.device.type != "cpu"
    ):
        return out
    with torch._C.DisableTorchFunction():  # made here, not a call of the user's step
        buffer = torch.empty(x.numel(), dtype=out.dtype, device=out.device)
        return buffer.as_strided((), (), 0)


def _offset2bag_one_longer(out: object) -> object:
    """``_embedding_bag``'s outputs with ``offset2bag`` in a storage one element longer."""
    if not (isinstance(out, tuple) and len(out) == 4 and isinstance(out[1], torch.Tensor)):
        return out
    o2b = out[1]
    if not o2b.numel() or o2b.dim() != 1 or o2b.device.type != "cpu":
        return out
    with torch._C.DisableTorchFunction():  # made here, not a call of the user's step
        longer = torch.empty(o2b.numel() + 1, dtype=o2b.dtype, device=o2b.device)
        return (out[0], longer.as_strided(o2b.shape, (1,), 0), *out[2:])


def _input_grad_in(out: object, layout: torch.memory_format) -> object:
    """A norm backward's outputs with the input's gradient in ``layout``, as the CPU kernel
    returns it whatever the incoming gradient's layout."""
    if not (isinstance(out, tuple) and len(out) == 3 and isinstance(out[0], torch.Tensor)):
        return out
    grad = out[0]
    if grad.is_contiguous(memory_format=layout) or grad.device.type != "cpu":
        return out
    with torch._C.DisableTorchFunction():  # made here, not a call of the user's step
        made = torch.empty(grad.shape, dtype=grad.dtype, device=grad.device, memory_format=layout)
        return (made, *out[1:])


def _distinct_bias_grads(out: object) -> object:
    """The backward's outputs with the two bias gradients apart: the fake kernel returns
    one tensor for both, the real one two (one 4 * hidden vector short at its peak)."""
    if not (isinstance(out, tuple) and len(out) == 7 and out[3] is out[4]):
        return out
    with torch._C.DisableTorchFunction():  # made here, not a call of the user's step
        return (*out[:4], torch.empty_like(out[4]), *out[5:])


def _rnn_workspace(args: tuple[object, ...], out: object, notes: list[str] | None) -> object:
    """The fake outputs of ``mkldnn_rnn_layer`` with the real kernel's workspace size."""
    if not (isinstance(out, tuple) and len(out) == 4 and len(args) == 16 and args[15]):
        return out  # not training: no workspace is kept
    ws = out[3]
    if not isinstance(ws, torch.Tensor) or ws.numel() or ws.device.type != "cpu":
        return out
    tensors = [a for a in args[:7] if isinstance(a, torch.Tensor)]
    key = (
        tuple((tuple(t.shape), t.dtype) for t in tensors),
        tuple(repr(a) for a in args[7:]),
    )
    if key not in _WORKSPACE:
        size = sum(t.numel() * t.element_size() for t in tensors)
        if size > RNN_REAL_MAX_BYTES:
            note = RNN_NOTE.format(limit=fmt_bytes(RNN_REAL_MAX_BYTES))
            if notes is not None and note not in notes:
                notes.append(note)
            return out
        _WORKSPACE[key] = _measured_workspace(args)
    with torch._C.DisableTorchFunction():  # made here, not a call of the user's step
        workspace = torch.empty(_WORKSPACE[key], dtype=ws.dtype, device=ws.device)
    return (*out[:3], workspace)


def _measured_workspace(args: tuple[object, ...]) -> int:
    """Bytes of the workspace the real CPU kernel returns for these shapes (zeros in)."""
    with unset_fake_temporarily(), _disable_current_modes(), torch._C.DisableTorchFunction():
        real = [
            torch.zeros(a.shape, dtype=a.dtype) if isinstance(a, torch.Tensor) else a for a in args
        ]
        ws = _RNN_LAYER(*real)[3]  # zeros need no grad: no graph (under no_grad: no workspace)
        return ws.untyped_storage().nbytes() if isinstance(ws, torch.Tensor) else 0
