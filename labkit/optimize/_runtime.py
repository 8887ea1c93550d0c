"""The root forward wrapper: autocast, float32 matmul precision and torch.compile.

:func:`labkit.optimize.apply` replaces the model's ``forward`` (on the instance, so
the class, module paths and ``state_dict`` keys stay as they were) with a
:class:`RecipeForward` that enters the Recipe's runtime contexts around the original
forward. Compilation wraps the original forward *inside* those contexts, so dynamo
sees autocast as global state it guards on rather than code it traces.
"""

from __future__ import annotations

import contextlib
import copy
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import torch

AUTOCAST_DTYPES = {"bf16-mixed": torch.bfloat16, "16-mixed": torch.float16}


class RecipeForward:
    """Callable that runs ``fn`` under autocast and a float32 matmul precision.

    With ``compile_mode`` set, ``fn`` is compiled with ``torch.compile`` (lazily, on
    the first call). ``copy.deepcopy`` of the model gives the copy its own compiled
    forward bound to the copied module, never the original's.

    Args:
        fn: The module's original bound forward.
        device_type: ``"cpu"`` or ``"cuda"``: where autocast applies.
        dtype: Autocast dtype, or ``None`` for no autocast.
        matmul_precision: Value for ``torch.set_float32_matmul_precision`` while running.
        compile_mode: A ``torch.compile`` mode, or ``None`` to run eagerly.
    """

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        device_type: str,
        dtype: torch.dtype | None,
        matmul_precision: str = "highest",
        compile_mode: str | None = None,
    ) -> None:
        self.fn = fn
        self.device_type = device_type
        self.dtype = dtype
        self.matmul_precision = matmul_precision
        self.compile_mode = compile_mode
        self._run = compile_fn(fn, compile_mode) if compile_mode else fn

    def __deepcopy__(self, memo: dict[int, Any]) -> RecipeForward:
        return RecipeForward(
            copy.deepcopy(self.fn, memo),  # a bound method: rebinds to the copied module
            device_type=self.device_type,
            dtype=self.dtype,
            matmul_precision=self.matmul_precision,
            compile_mode=self.compile_mode,
        )

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        with contextlib.ExitStack() as stack:
            if self.matmul_precision != "highest":
                stack.enter_context(_matmul_precision(self.matmul_precision))
            if self.dtype is not None:
                stack.enter_context(torch.autocast(self.device_type, dtype=self.dtype))
            return self._run(*args, **kwargs)

    def __repr__(self) -> str:
        dtype = str(self.dtype).replace("torch.", "") if self.dtype is not None else None
        return (
            f"RecipeForward(device_type={self.device_type!r}, autocast={dtype!r}, "
            f"matmul_precision={self.matmul_precision!r}, compile={self.compile_mode!r})"
        )


@contextlib.contextmanager
def _matmul_precision(value: str) -> Iterator[None]:
    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision(value)
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(before)


def compile_fn(fn: Callable[..., Any], mode: str) -> Callable[..., Any]:
    """``torch.compile(fn, mode=mode)``, importing inductor first with one known warning muted."""
    with warnings.catch_warnings():
        # Importing torch._inductor imports torch.utils.mkldnn, whose class bodies use
        # the deprecated torch.jit.script_method (torch's own code, not ours or the user's).
        warnings.filterwarnings(
            "ignore",
            message=r".*torch\.jit\.script_method.*deprecated",
            category=DeprecationWarning,
        )
        import torch._inductor.compile_fx

    return torch.compile(fn, mode=mode)
