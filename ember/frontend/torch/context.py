"""What a converter sees of one node of an exported program: its arguments by schema name,
converted (graph values as Ember expressions, sizes as dims), its result's dtype and rank as
torch recorded them, where in the user's source it came from, and typed-call helpers.
"""
from __future__ import annotations

from typing import Any, Optional

import numpy as np

from ...errors import DTypeError, ShapeError, UnsupportedOpError
from ...graph import Constant, Dim, Expr, TensorType
from ...graph.ops import call as typed_call
from ...graph.ops import dims as D
from ...loop import dtype as dt
from .dtypes import to_ember
from .table import target_name

_MISSING = object()


def location(fx_node) -> str:
    """Where the user's code made ``fx_node``: the innermost frame of its stack trace
    (``model.py:42 in forward: x = self.fc(x)``), or '' when torch recorded none."""
    trace = (fx_node.meta.get("stack_trace") or "").strip().splitlines()
    frames = [(k, line.strip()) for k, line in enumerate(trace) if line.strip().startswith("File ")]
    if not frames:
        return ""
    k, head = frames[-1]
    code = trace[k + 1].strip() if k + 1 < len(trace) else ""
    try:  # File "/path/model.py", line 42, in forward
        path = head.split('"')[1]
        rest = head.split('"', 2)[2]
        line = rest.split("line", 1)[1].split(",")[0].strip()
        fn = rest.rsplit(" in ", 1)[1].strip()
        text = f"{path}:{line} in {fn}"
    except IndexError:
        text = head
    return f"{text}: {code}" if code else text


class Missing:
    """An output a converter does not compute (max pool indices, training statistics): using it
    is an UnsupportedOpError saying what it is."""

    def __init__(self, what: str):
        self.what = what


class NodeContext:
    """One node being converted. Converters return its value (see :mod:`.table`)."""

    def __init__(self, fx_node, env: dict, importer):
        self.fx = fx_node
        self.importer = importer
        self.target = target_name(fx_node.target)
        self.name = fx_node.name
        self.label = f"{self.target} node {fx_node.name!r}"
        self._env = env
        self._schema = getattr(fx_node.target, "_schema", None)
        self.args = self._bind()

    # -- arguments ----------------------------------------------------------------------------
    def _convert(self, v):
        import torch.fx

        if isinstance(v, torch.fx.Node):
            return self._env[v]
        if isinstance(v, (list, tuple)):
            return type(v)(self._convert(x) for x in v)
        return v

    def _bind(self) -> dict:
        """Arguments by name (schema order) with defaults; builtins get positions 0, 1, ..."""
        args = [self._convert(a) for a in self.fx.args]
        kwargs = {k: self._convert(v) for k, v in self.fx.kwargs.items()}
        if self._schema is None:
            out = dict(enumerate(args))
            out.update(kwargs)
            return out
        out = {}
        for i, a in enumerate(self._schema.arguments):
            if i < len(args) and not a.kwarg_only:
                out[a.name] = args[i]
            elif a.name in kwargs:
                out[a.name] = kwargs[a.name]
            elif a.has_default_value():
                out[a.name] = a.default_value
        return out

    def arg(self, key, default: Any = _MISSING) -> Any:
        """The argument ``key`` (its schema name, or its position)."""
        if isinstance(key, int) and self._schema is not None:
            names = [a.name for a in self._schema.arguments]
            key = names[key] if key < len(names) else key
        if key in self.args:
            return self.args[key]
        if default is _MISSING:
            raise ShapeError(f"{self.label}: argument {key!r} is missing")
        return default

    def tensor(self, key) -> Expr:
        """The argument ``key``, which must be a tensor value."""
        v = self.arg(key)
        if not isinstance(v, Expr) or not isinstance(v.type, TensorType):
            raise ShapeError(f"argument {key!r} must be a tensor, got {v!r}")
        return v

    def ints(self, key, default: Any = _MISSING) -> tuple:
        """A list argument of plain ints."""
        v = self.arg(key, default)
        if v is None:
            return None
        v = tuple(v) if isinstance(v, (list, tuple)) else (v,)
        if any(isinstance(d, Dim) for d in v):
            raise UnsupportedOpError(f"argument {key!r} ({v}) depends on a symbolic size; it must be a number")
        return tuple(int(d) for d in v)

    def dims(self, key) -> tuple:
        """A list argument of sizes (ints or symbolic dims)."""
        v = self.arg(key)
        v = tuple(v) if isinstance(v, (list, tuple)) else (v,)
        return tuple(d if isinstance(d, Dim) else int(d) for d in v)

    # -- the result as torch recorded it ------------------------------------------------------
    def val(self, i: Optional[int] = None):
        v = self.fx.meta.get("val")
        return v[i] if i is not None and isinstance(v, (list, tuple)) else v

    def out_dtype(self, i: Optional[int] = None) -> str:
        """The Ember dtype of the node's (``i``-th) tensor result."""
        v = self.val(i)
        if v is None or not hasattr(v, "dtype"):
            raise ShapeError(f"{self.label}: torch recorded no tensor result type")
        return to_ember(v.dtype, f"the result of {self.label}")

    def out_ndim(self, i: Optional[int] = None) -> int:
        return len(self.val(i).shape)

    # -- dtypes and constants -----------------------------------------------------------------
    def promote(self, *values) -> str:
        """torch's result dtype of ``values`` (tensors by dtype and rank, Python numbers as
        scalars), as an Ember dtype."""
        import torch

        probes = []
        for v in values:
            if isinstance(v, Expr):
                t = v.type
                probes.append(torch.empty(() if t.ndim == 0 else (1,), dtype=getattr(torch, t.dtype)))
            elif isinstance(v, Dim):
                probes.append(1)
            elif v is not None:
                probes.append(v)
        dtype = _result_type(probes)
        return to_ember(dtype, f"the operands of {self.label}")

    def as_tensor(self, v, dtype: str) -> Expr:
        """``v`` (an expression, a Python number or a size) as a tensor of ``dtype``."""
        if isinstance(v, Expr):
            return v if v.type.dtype == dtype else self.call("cast", v, dtype=dtype)
        if isinstance(v, Dim):
            n = typed_call("size", typed_call("constant_of_shape", shape=(v,), value=False, dtype="bool"))
            return n if dtype == "int64" else self.call("cast", n, dtype=dtype)
        if isinstance(v, (bool, int, float, np.number, np.bool_)):
            return self.scalar(v, dtype)
        raise DTypeError(f"{self.label}: {v!r} ({type(v).__name__}) is not a tensor or a number")

    @staticmethod
    def scalar(value, dtype: str) -> Constant:
        """A 0-d constant of ``dtype``."""
        return Constant(np.asarray(value, dtype=dt.numpy_dtype(dtype)))

    def call(self, op: str, *args: Expr, **attrs: Any) -> Expr:
        """A typed Ember call (type errors are raised here and name the node)."""
        return typed_call(op, *args, **attrs)


def _result_type(probes: list):
    """torch.result_type over tensors and scalars, pairwise the way torch folds them: a
    dimensioned tensor outranks a 0-d one, which outranks a Python number, within a category."""
    import torch

    out = probes[0]
    for p in probes[1:]:
        dtype = torch.result_type(out, p)
        rank = max(_rank(out), _rank(p))
        out = torch.empty((1,) if rank == 2 else (), dtype=dtype) if rank else _py(dtype)
    if isinstance(out, torch.Tensor):
        return out.dtype
    if isinstance(out, bool):
        return torch.bool
    return torch.get_default_dtype() if isinstance(out, float) else torch.int64


def _rank(v) -> int:
    import torch

    if isinstance(v, torch.Tensor):
        return 2 if v.ndim else 1
    return 0


def _py(dtype):
    """A Python number standing for a scalar of ``dtype`` (bool, int or float)."""
    if dtype.is_floating_point:
        return 1.0
    return True if str(dtype) == "torch.bool" else 1


def dim_index(d, size) -> Any:
    """A possibly negative index ``d`` into an axis of ``size`` (a dim), made non-negative."""
    if isinstance(d, int) and d < 0:
        return D.dim_add(size, d)
    return d


__all__ = ["Missing", "NodeContext", "dim_index", "location"]
