from __future__ import annotations

import torch
import torch._C._autograd as _autograd
from torch import nn


def hook_count(model: nn.Module) -> int:
    """Module hooks of every kind left on the model."""
    return sum(
        len(m._forward_hooks)
        + len(m._forward_pre_hooks)
        + len(m._backward_hooks)
        + len(m._backward_pre_hooks)
        for m in model.modules()
    )


def assert_clean(model: nn.Module) -> None:
    """Nothing of the recorder left on the model or in torch's global state."""
    assert hook_count(model) == 0
    assert torch._C._len_torch_function_stack() == 0
    assert torch._C._len_torch_dispatch_stack() == 0
    assert _autograd._top_saved_tensors_default_hooks(False) is None
    from torch.optim import optimizer

    assert not optimizer._global_optimizer_pre_hooks
    assert not optimizer._global_optimizer_post_hooks
    assert not any(getattr(p, "_post_accumulate_grad_hooks", None) for p in model.parameters())
