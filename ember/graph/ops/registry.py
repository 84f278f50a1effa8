"""The operator registry: every graph op is registered once, here, with everything about it.

An :class:`OpDef` holds an op's name (``"nn.conv2d"``, ``"add"``, ``"reshape"``), its attribute
schema, its type-inference function, its fusion pattern, and the two hooks the kernel layer
fills in later: ``compute`` (op -> tensor computation) and ``schedule`` (per target).

    >>> op = get_op("nn.relu")
    >>> op.pattern is Pattern.ELEMWISE
    True
    >>> infer_type("add", [TensorType((Dim("n"), 1), "float32"), TensorType((4,), "float32")])
    Tensor[(n, 4), float32]

Type inference functions take ``(arg_types, attrs)`` (attrs as a dict with schema defaults
filled in) and return the result :class:`~ember.graph.types.Type`. They raise ``ShapeError`` or
``DTypeError``; :func:`infer_type` prefixes the message with the op name, so every error names
the op without each rule repeating it.

Kernel hook: a later step plugs kernels in with :func:`set_compute` (a function
``(call, input_tensors) -> output tensor(s)`` in ``ember.loop.compute`` terms) and
:func:`set_schedule` (``target kind -> (call, schedule, outputs) -> None``). Until then both
are None and nothing in the graph layer depends on them.
"""
from __future__ import annotations

import dataclasses
import difflib
import enum
from typing import Any, Callable, Mapping, Optional, Sequence, Union

from ...errors import ArgumentError, DTypeError, ShapeError, UnsupportedOpError
from ...loop import dtype as dt
from ..types import Dim, TensorType, Type


class Pattern(str, enum.Enum):
    """How an op fuses with its neighbours (the fusion pass reads this, nothing else).

    ELEMWISE: out[i] = f(in[i]). BROADCAST: elementwise after numpy broadcasting of inputs.
    INJECTIVE: each output element reads one input element (reshape, transpose, gather).
    REDUCTION: combines input elements along axes. OUT_ELEMWISE_FUSABLE: a complex op
    (conv, matmul) that accepts an elementwise epilogue. OPAQUE: fuses with nothing.
    """

    ELEMWISE = "elementwise"
    BROADCAST = "broadcast"
    INJECTIVE = "injective"
    REDUCTION = "reduction"
    OUT_ELEMWISE_FUSABLE = "out_elementwise_fusable"
    OPAQUE = "opaque"


_REQUIRED = object()

# attribute kinds: the predicate a normalized value (see graph.attrs.normalize) must satisfy
_KINDS: dict[str, Callable[[Any], bool]] = {
    "int": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "float": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "bool": lambda v: isinstance(v, bool),
    "str": lambda v: isinstance(v, str),
    "dtype": lambda v: isinstance(v, str) and v in dt.SCALAR_TYPES,
    "ints": lambda v: isinstance(v, tuple) and all(_KINDS["int"](x) for x in v),
    "floats": lambda v: isinstance(v, tuple) and all(_KINDS["float"](x) for x in v),
    "dim": lambda v: _KINDS["int"](v) or isinstance(v, Dim),
    "dims": lambda v: isinstance(v, tuple) and all(_KINDS["int"](x) or isinstance(x, Dim) for x in v),
    "any": lambda v: True,
}


@dataclasses.dataclass(frozen=True)
class Attr:
    """One attribute in a schema: its kind (a key of the kinds above, or a tuple of kinds that
    are all accepted, ``None`` always accepted when the default is None) and its default."""

    kind: Union[str, tuple]
    default: Any = _REQUIRED

    @property
    def required(self) -> bool:
        return self.default is _REQUIRED

    def accepts(self, value: Any) -> bool:
        if value is None and self.default is None:
            return True
        kinds = (self.kind,) if isinstance(self.kind, str) else self.kind
        return any(_KINDS[k](value) for k in kinds)


def attr(kind: Union[str, tuple], default: Any = _REQUIRED) -> Attr:
    """Schema entry: ``attr("ints", (1, 1))``; without a default the attribute is required."""
    kinds = (kind,) if isinstance(kind, str) else kind
    for k in kinds:
        if k not in _KINDS:
            raise ValueError(f"unknown attribute kind {k!r}; known: {', '.join(_KINDS)}")
    return Attr(kind, default)


InferFn = Callable[[list, dict], Type]


@dataclasses.dataclass(eq=False)
class OpDef:
    """Everything the compiler knows about one op. Created by :func:`register_op` only."""

    name: str
    infer: InferFn
    pattern: Pattern
    attrs_schema: Optional[Mapping[str, Attr]] = None  # None: no attributes allowed
    num_args: Union[int, tuple] = 1  # exact count, or (min, max) with max None for variadic
    doc: str = ""
    compute: Optional[Callable] = None  # kernel hook: filled by the kernel layer (set_compute)
    schedule: dict = dataclasses.field(default_factory=dict)  # target kind -> schedule function
    # kernel hook for ops a tensor computation cannot express (a compaction: each output's place
    # depends on the elements before it): fn(attrs, param_types, out_type, name) -> PrimFunc
    kernel: Optional[Callable] = None
    kernel_kind: str = "llvm"  # the target kind the kernel hook's loop program runs on

    def check_attrs(self, attrs: Mapping) -> dict:
        """The call's attributes checked against the schema, defaults filled in."""
        schema = self.attrs_schema or {}
        unknown = [k for k in attrs if k not in schema]
        if unknown:
            known = ", ".join(schema) or "none"
            raise UnsupportedOpError(f"{self.name}: unknown attribute(s) {', '.join(map(repr, unknown))} "
                                     f"(it takes: {known})")
        out = {}
        for k, spec in schema.items():
            if k in attrs:
                v = attrs[k]
                if not spec.accepts(v):
                    raise ArgumentError(f"{self.name}: attribute {k!r} must be {spec.kind}, got {v!r}")
                out[k] = v
            elif spec.required:
                raise ArgumentError(f"{self.name}: attribute {k!r} is required")
            else:
                out[k] = spec.default
        return out

    def check_arity(self, n: int) -> None:
        lo, hi = (self.num_args, self.num_args) if isinstance(self.num_args, int) else self.num_args
        if n < lo or (hi is not None and n > hi):
            want = str(lo) if lo == hi else f"{lo} to {hi}" if hi is not None else f"at least {lo}"
            raise ArgumentError(f"{self.name}: takes {want} argument(s), got {n}")


_REGISTRY: dict[str, OpDef] = {}


def register_op(name: str, *, infer: InferFn, pattern: Union[Pattern, str],
                attrs_schema: Optional[Mapping[str, Attr]] = None, num_args: Union[int, tuple] = 1,
                doc: str = "") -> OpDef:
    """Register the op ``name`` (once: a second registration is a bug and raises ValueError)."""
    if name in _REGISTRY:
        raise ValueError(f"op {name!r} is registered twice")
    for k, v in (attrs_schema or {}).items():
        if not isinstance(v, Attr):
            raise TypeError(f"{name}: schema entry {k!r} must be made with attr(), got {v!r}")
    op = OpDef(name, infer, Pattern(pattern), dict(attrs_schema) if attrs_schema else None, num_args, doc)
    _REGISTRY[name] = op
    return op


_LOADED: list = []


def _ensure_loaded() -> None:
    # the families register on import; importing the package (not this module alone) loads them
    # (once: an import statement per get_op cost a compile ~10 us a call, thousands of calls)
    if _LOADED:
        return
    from . import control, creation, dynamic, elementwise, index, layout, nn, reduce  # noqa: F401
    _LOADED.append(True)


def get_op(name: str) -> OpDef:
    """The registered op ``name``; ``UnsupportedOpError`` (with near matches) if there is none."""
    _ensure_loaded()
    try:
        return _REGISTRY[name]
    except KeyError:
        close = difflib.get_close_matches(name, _REGISTRY, n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise UnsupportedOpError(f"no graph op named {name!r}{hint}") from None


def list_ops() -> list:
    """Names of all registered ops, sorted."""
    _ensure_loaded()
    return sorted(_REGISTRY)


def set_compute(name: str, fn: Callable) -> None:
    """Kernel hook: the tensor computation of op ``name`` (see the module docstring)."""
    get_op(name).compute = fn


def set_kernel(name: str, fn: Callable, kind: str = "llvm") -> None:
    """Kernel hook: a loop program written directly, for op ``name`` alone in its group, for
    targets of kind ``kind``."""
    get_op(name).kernel = fn
    get_op(name).kernel_kind = kind


def set_schedule(name: str, target: str, fn: Callable) -> None:
    """Kernel hook: the default schedule of op ``name`` on targets of kind ``target``
    (``"llvm"``, ``"cuda"``)."""
    from ...target import KINDS

    if target not in KINDS:
        raise ArgumentError(f"set_schedule({name!r}, {target!r}): no target kind {target!r} (kinds: {', '.join(KINDS)})")
    get_op(name).schedule[target] = fn


def infer_type(name: str, arg_types: Sequence[Optional[Type]], attrs: Optional[Mapping] = None) -> Type:
    """The result type of op ``name`` applied to ``arg_types`` with ``attrs``.

    Errors are ShapeError/DTypeError (bad inputs) or UnsupportedOpError/ArgumentError (unknown
    op, bad attributes, wrong argument count), each naming the op.
    """
    op = get_op(name)
    op.check_arity(len(arg_types))
    for i, t in enumerate(arg_types):
        if t is None:
            raise ShapeError(f"{name}: the type of argument {i} is unknown (infer its producer first)")
    filled = op.check_attrs(attrs or {})
    try:
        return op.infer(list(arg_types), filled)
    except (ShapeError, DTypeError) as e:
        msg = str(e)
        if msg.startswith(f"{name}:"):
            raise
        raise type(e)(f"{name}: {msg}") from None


# -- helpers for inference rules ------------------------------------------------------------------

def tensor(t: Type, what: str = "the input") -> TensorType:
    """``t`` if it is a TensorType, else a ShapeError naming ``what``."""
    if not isinstance(t, TensorType):
        raise ShapeError(f"{what} must be a tensor, got {t}")
    return t


def norm_axis(axis: int, ndim: int, what: str = "axis") -> int:
    """``axis`` in ``[-ndim, ndim)`` made non-negative; ShapeError otherwise."""
    if not -ndim <= axis < max(ndim, 1):
        raise ShapeError(f"{what} {axis} is out of range for rank {ndim}")
    return axis % ndim if ndim else 0


def same_dtype(types: Sequence[TensorType], what: str = "inputs") -> str:
    """The common dtype of ``types``; DTypeError listing them when they differ."""
    dts = [t.dtype for t in types]
    if len(set(dts)) > 1:
        raise DTypeError(f"{what} must have one dtype, got {', '.join(dts)}")
    return dts[0]


__all__ = ["Attr", "OpDef", "Pattern", "attr", "get_op", "infer_type", "list_ops", "norm_axis",
           "register_op", "same_dtype", "set_compute", "set_schedule", "tensor"]
