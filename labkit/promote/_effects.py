"""What a call can do, as far as its text tells: ``pure`` (reads and computes only),
``random`` (draws from a random number generator) or ``unknown`` (anything: a model call,
a user function, ``next(iterator)``, a method that may mutate its object).

Promote keeps every statement with an effect; a statement it drops (a plot, a ``display``,
a trace) must not hide a ``random`` or ``unknown`` call, or the script's random stream and
state would drift from the notebook's (:func:`labkit.promote.check` refuses it).

A call that changes an ``nn.Module`` in place and returns it (``model.to(device)``,
``model.double()``, ``model.eval()``: :data:`MODULE_METHODS`) is pure only on an object the
text shows to be data (:func:`is_data`): ``torch.randn(2).double()`` changes nothing,
``model.double()`` changes the model.

Example:
    >>> import ast
    >>> [call_effect(c, {"torch": "torch"}) for c in _calls("torch.randn(2).mean().item()")]
    ['pure', 'pure', 'random']
    >>> [call_effect(c, {}) for c in _calls("model.double()")]
    ['unknown']
    >>> [call_effect(c, {"torch": "torch"}) for c in _calls("torch.ones(2).double()")]
    ['pure', 'pure']
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from collections.abc import Set as AbstractSet

__all__ = [
    "MODULE_METHODS",
    "PURE_FUNCTIONS",
    "PURE_METHODS",
    "RANDOM_FUNCTIONS",
    "RANDOM_METHODS",
    "call_effect",
    "calls_in",
    "data_uses",
    "is_data",
    "qualname",
]

PURE_FUNCTIONS = frozenset(
    {
        # builtins that only read and compute
        *("abs", "all", "any", "bool", "chr", "dict", "divmod", "enumerate", "float", "format"),
        *("frozenset", "getattr", "hasattr", "hash", "hex", "id", "int", "isinstance", "len"),
        *("list", "max", "min", "oct", "ord", "pow", "range", "repr", "reversed", "round", "set"),
        *("slice", "sorted", "str", "sum", "tuple", "type", "zip", "bin", "complex", "callable"),
        # tensors and arrays made from data, and elementwise math
        *("torch.tensor", "torch.as_tensor", "torch.stack", "torch.cat", "torch.arange"),
        *("torch.linspace", "torch.zeros", "torch.ones", "torch.zeros_like", "torch.ones_like"),
        *("torch.full", "torch.eye", "torch.exp", "torch.log", "torch.sqrt", "torch.abs"),
        *("torch.tanh", "torch.sigmoid", "torch.softmax", "torch.argmax", "torch.mean"),
        *("torch.sum", "torch.max", "torch.min", "torch.no_grad", "torch.inference_mode"),
        *("torch.nn.functional.softmax", "torch.nn.functional.log_softmax"),
        *("torch.nn.functional.one_hot", "torch.nn.functional.cross_entropy"),
        *("torch.nn.functional.mse_loss", "torch.nn.functional.relu", "torch.nn.functional.tanh"),
        *("numpy.array", "numpy.asarray", "numpy.arange", "numpy.linspace", "numpy.mean"),
        *("numpy.log", "numpy.log10", "numpy.exp", "numpy.sqrt", "numpy.abs", "numpy.stack"),
        *("numpy.concatenate", "numpy.zeros", "numpy.ones", "numpy.convolve", "numpy.cumsum"),
    }
)
PURE_MODULES = ("math.", "operator.", "string.", "os.path.", "labkit.")  # labkit: never changes
PURE_METHODS = frozenset(
    {
        # tensors / arrays: conversions, views, reductions
        *("item", "tolist", "numpy", "cpu", "detach", "clone", "float", "double", "half"),
        *("long", "int", "bool", "view", "view_as", "reshape", "flatten", "squeeze", "unsqueeze"),
        *("permute", "transpose", "t", "contiguous", "mean", "sum", "std", "var", "min", "max"),
        *("argmax", "argmin", "abs", "exp", "log", "log10", "sqrt", "pow", "softmax", "size"),
        *("dim", "numel", "norm", "round", "cumsum", "sort", "topk", "eq", "ne", "gt", "lt"),
        *("ge", "le", "any", "all", "to", "type", "astype", "copy", "nelement", "element_size"),
        *("log_softmax", "tanh", "sigmoid", "relu", "allclose", "isfinite", "isnan", "count"),
        # containers and text
        *("keys", "values", "items", "get", "index", "format", "join", "upper", "lower", "strip"),
        *("split", "replace", "startswith", "endswith", "rjust", "ljust", "center", "zfill"),
        # frames and modules: reading
        *("head", "tail", "describe", "to_numpy", "parameters", "named_parameters", "buffers"),
        *("named_buffers", "modules", "named_modules", "children", "named_children"),
        *("state_dict", "extra_repr"),
    }
)
RANDOM_FUNCTIONS = frozenset(
    {
        *("torch.rand", "torch.randn", "torch.randint", "torch.randperm", "torch.multinomial"),
        *("torch.bernoulli", "torch.normal", "torch.poisson", "torch.rand_like"),
        *("torch.randn_like", "torch.randint_like", "torch.nn.functional.dropout"),
        *("torch.nn.functional.gumbel_softmax", "torch.nn.functional.dropout2d"),
    }
)
RANDOM_MODULES = ("random.", "numpy.random.", "torch.random.", "torch.distributions.")
RANDOM_METHODS = frozenset(
    {
        *("normal_", "uniform_", "bernoulli_", "random_", "exponential_", "geometric_"),
        *("cauchy_", "log_normal_", "multinomial", "bernoulli", "sample", "rsample"),
        *("generate", "shuffle", "choice", "permutation", "randn", "rand", "randint"),
    }
)
# on an nn.Module these change it in place (device, dtype, mode, gradients) and most return
# it; on a tensor they return a new tensor: an effect unless the object is known to be data
MODULE_METHODS = frozenset(
    {
        *("to", "cuda", "cpu", "double", "float", "half", "bfloat16", "type", "train"),
        *("eval", "requires_grad_", "apply", "share_memory"),
    }
)
# methods only data has (a module has none of them): what they are called on, and what
# they return, is data
DATA_METHODS = (
    PURE_METHODS
    - MODULE_METHODS
    - frozenset(
        {
            *("keys", "values", "items", "get", "index", "format", "join", "upper", "lower"),
            *("strip", "split", "replace", "startswith", "endswith", "rjust", "ljust", "center"),
            *("zfill", "copy", "count", "head", "tail", "describe", "parameters"),
            *("named_parameters", "buffers", "named_buffers", "modules", "named_modules"),
            *("children", "named_children", "state_dict", "extra_repr"),
        }
    )
) | (
    RANDOM_METHODS
    & {
        *("normal_", "uniform_", "bernoulli_", "random_", "bernoulli"),
        *("exponential_", "geometric_", "cauchy_", "log_normal_"),
    }
)
DATA_ATTRIBUTES = frozenset({"grad", "data", "T", "mT", "H", "real", "imag"})
_DATA_BUILTINS = frozenset(
    {
        *("abs", "bool", "float", "int", "len", "round", "sum", "str", "repr", "complex"),
        *("divmod", "pow", "hash", "id", "ord", "chr", "hex", "oct", "bin", "format", "range"),
    }
)
_NOT_TENSORS = frozenset({"torch.no_grad", "torch.inference_mode"})


def qualname(node: ast.expr, aliases: dict[str, str]) -> str | None:
    """``plt.plot`` -> ``'matplotlib.pyplot.plot'`` through the notebook's imports (a call
    inside the chain resolves through its function: ``plt.figure().add_subplot``)."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Call):
        inner = qualname(node.func, aliases)
        return None if inner is None else ".".join([inner, *reversed(parts)])
    if not isinstance(node, ast.Name):
        return None
    root = aliases.get(node.id, node.id)
    return ".".join([root, *reversed(parts)])


def call_effect(
    call: ast.Call,
    aliases: dict[str, str],
    tensors: AbstractSet[str] = frozenset(),
    data: AbstractSet[ast.Call] = frozenset(),
) -> str:
    """``"pure"``, ``"random"`` or ``"unknown"`` for one call (its arguments aside).

    Args:
        call: The call.
        aliases: Import aliases of the notebook.
        tensors: Names known to hold data (:func:`labkit.promote._tensor_values.tensor_names`).
        data: Calls whose result the code uses as data (:func:`data_uses`): a
            :data:`MODULE_METHODS` call among them is on data.
    """
    name = qualname(call.func, aliases)
    if name is not None:
        if name in RANDOM_FUNCTIONS or name.startswith(RANDOM_MODULES):
            return "random"
        if name in PURE_FUNCTIONS or name.startswith(PURE_MODULES):
            return "pure"
    if isinstance(call.func, ast.Attribute):
        if call.func.attr in RANDOM_METHODS:
            return "random"
        if call.func.attr in MODULE_METHODS:
            on_data = call in data or is_data(call.func.value, aliases, tensors)
            return "pure" if on_data else "unknown"
        if call.func.attr in PURE_METHODS and not (
            name is not None and name.split(".")[0] in ("random", "numpy")
        ):
            return "pure"
    return "unknown"


def is_data(
    node: ast.expr, aliases: dict[str, str], tensors: AbstractSet[str] = frozenset()
) -> bool:
    """Whether the text shows ``node`` to be data (a tensor, an array, a number), never a
    module: a name in ``tensors``, a literal, arithmetic, a tensor-making call
    (``torch.ones(2)``), a method only data has (``x.detach()``), ``.grad``/``.data``, or a
    :data:`MODULE_METHODS` call or subscript on data.

    Example:
        >>> import ast
        >>> [is_data(ast.parse(t).body[0].value, {"torch": "torch"}, {"x"})
        ...  for t in ("x.float()", "torch.ones(2)", "y.detach()", "model", "model.fc[0]")]
        [True, True, True, False, False]
    """
    if isinstance(node, ast.Name):
        return node.id in tensors
    if isinstance(node, ast.Constant | ast.BinOp | ast.UnaryOp | ast.Compare | ast.JoinedStr):
        return True
    if isinstance(node, ast.List | ast.Tuple | ast.Set | ast.Dict | ast.ListComp | ast.SetComp):
        return True
    if isinstance(node, ast.Subscript):
        return is_data(node.value, aliases, tensors)
    if isinstance(node, ast.Attribute):
        return node.attr in DATA_ATTRIBUTES
    if isinstance(node, ast.Call):
        name = qualname(node.func, aliases)
        if (
            name is not None
            and name not in _NOT_TENSORS
            and (
                name in _DATA_BUILTINS
                or name.startswith(("numpy.", "math."))
                or (
                    name.startswith("torch.")
                    and (name in PURE_FUNCTIONS or name in RANDOM_FUNCTIONS)
                )
            )
        ):
            return True
        if isinstance(node.func, ast.Attribute):
            if node.func.attr in DATA_METHODS:
                return True
            if node.func.attr in MODULE_METHODS:
                return is_data(node.func.value, aliases, tensors)
    return False


def data_uses(node: ast.AST, also: Iterable[ast.expr] = ()) -> frozenset[ast.Call]:
    """Calls in ``node`` whose result the code uses as data: the object of a method only
    data has (``x.cpu().numpy()``), an operand of arithmetic (``x.float() * 2``), or one of
    ``also`` (a plot call's arguments); through a chain of :data:`MODULE_METHODS` calls
    (``x.cpu().float().numpy()``: both are on data)."""
    found: list[ast.expr] = list(also)
    for sub in ast.walk(node):
        if isinstance(sub, ast.Attribute) and sub.attr in DATA_METHODS | DATA_ATTRIBUTES:
            found.append(sub.value)
        elif isinstance(sub, ast.BinOp):
            found += [sub.left, sub.right]
        elif isinstance(sub, ast.UnaryOp):
            found.append(sub.operand)
        elif isinstance(sub, ast.Compare):
            found += [sub.left, *sub.comparators]
    out: set[ast.Call] = set()
    for value in found:
        while (
            isinstance(value, ast.Call)
            and isinstance(value.func, ast.Attribute)
            and value.func.attr in MODULE_METHODS
        ):
            out.add(value)
            value = value.func.value
    return frozenset(out)


def calls_in(node: ast.AST) -> Iterator[ast.Call]:
    """Every call in ``node``, outermost first, not entering function or lambda bodies
    (they run only when called)."""
    todo: list[ast.AST] = [node]
    while todo:
        current = todo.pop(0)
        if isinstance(current, ast.Call):
            yield current
        for child in ast.iter_child_nodes(current):
            if not isinstance(child, ast.Lambda | ast.FunctionDef | ast.AsyncFunctionDef):
                todo.append(child)


def _calls(source: str) -> list[ast.Call]:
    return list(calls_in(ast.parse(source)))
