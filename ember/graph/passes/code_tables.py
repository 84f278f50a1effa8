"""Functions of 8-bit codes as tables.

In a quantized model an activation between two quantizers is a function of one code: a QDQ
file's GELU reads ``dequantize(c)`` and is quantized again, ``quantize(gelu((c - z) * s))``;
EfficientNet's SiLU multiplies ``dequantize(c)`` by the dequantized, requantized sigmoid of
it. ``c`` takes at most 256 values, so whatever is computed from it alone (with constants) is
one of 256 values too: ONNX Runtime's quantized activations (QLinearSigmoid, QGelu's LUT) look
them up in a table, and so does Ember. Computed per element, BERT QDQ's GELU epilogue (an
erf polynomial, a division) cost its up-projection as much as the integer products did.

A *code* is a value known to be an integer in a range of at most 256: an 8-bit tensor widened,
or a rounding clamped by constants (how :mod:`.requantize` leaves a quantizer an epilogue
computes in float), moved by integer constants. The values computed from one code alone by
elementwise ops with scalar constants are its *region*; each value of a region read outside it
whose computation costs more than a lookup (:data:`WORTH`) becomes ``table[c - lo]``: a gather
from a constant table that the constant folder evaluates next, on all the code's values, with
Ember's own kernels (the table holds exactly what the elementwise code would have computed).
The table is 8-bit where the host has AVX512-VBMI's byte permutes (two ``vpermi2b`` and a
blend look up 64 lanes), and 32-bit on an AVX2 host without AVX-512 (``vpgatherdd`` reads 8
lanes; LLVM's own gather is scalarized there, ~3 instructions a lane on the vector ports,
which made BERT QDQ's saturating up-projection 19% slower than the GELU it replaced, where
``vpgatherdd`` made it no slower and EfficientNet-B0 QDQ's kernels 1.3-1.4x faster, Zen 3);
an 8-bit result is its cast. AVX-512 without VBMI is not measured: no tables there.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from ...errors import EmberError
from ...loop import dtype as dt
from ..ir import Call, Constant, Module
from ..ops import get_op
from ..ops.registry import Pattern
from ..types import TensorType
from ..visit import post_order, readers_of
from .context import PassContext, graph_pass, rewrite_main, typed_call as _call
from .integer_products import _value

CODES = 256  # the most values a table holds
WORTH = 10  # the work (below) a table replaces: a lookup costs about an index, a clamp and a gather
# per element, about the vector instructions of an op; others 1
_WORK = {"erf": 12, "nn.gelu": 14, "tanh": 10, "sigmoid": 8, "exp": 8, "log": 8, "pow": 16, "sqrt": 4,
         "rsqrt": 4, "reciprocal": 4, "divide": 4, "nn.mish": 20, "nn.softplus": 10, "nn.elu": 8,
         "nn.selu": 8, "nn.celu": 8, "sin": 10, "cos": 10, "tan": 12, "atan": 12}
_NARROW = {"uint8": (0, 255), "int8": (-128, 127)}
_FLOW = (Pattern.ELEMWISE, Pattern.BROADCAST)
_WORDS = "int32"  # a table's element on a host without byte permutes: vpgatherdd's


def is_lookup(n: Call) -> bool:
    """``n`` looks its index up in a table of bytes (what this pass writes): elementwise in
    the index, so an epilogue takes it, and tier 0 does not take it for data movement."""
    if n.op != "gather" or n.attr("axis") != 0:
        return False
    t = n.args[0].type
    return isinstance(t, TensorType) and t.ndim == 1 and (t.dtype in _NARROW or t.dtype == _WORDS) \
        and isinstance(t.shape[0], int) and t.shape[0] <= CODES


def _scalar_value(e) -> Optional[float]:
    """The value of a one-element constant (or a reshape or cast of one), else None."""
    v = _value(e)
    return v.reshape(()).item() if v is not None and v.size == 1 else None


def _interval(n: Call, known: dict) -> Optional[tuple]:
    """``(lo, hi)`` when every value of ``n`` is an integer in ``[lo, hi]`` (bounds may be
    infinite), from its operands' intervals in ``known``; else None."""
    if not n.args:
        return None
    op, a = n.op, n.args[0]
    if op == "round":
        return (-np.inf, np.inf)
    if op == "cast":
        src = a.type.dtype
        if n.type.dtype == "bool":
            return (0, 1)
        if src in _NARROW:
            return _NARROW[src]
        if n.type.dtype in _NARROW:
            return _NARROW[n.type.dtype]
        inner = known.get(a)
        if inner is not None:
            return inner
        return (-np.inf, np.inf) if dt.is_int(n.type.dtype) and dt.is_float(src) else None
    if op in ("maximum", "minimum", "add", "subtract") and len(n.args) == 2:
        inner, k = known.get(a), _scalar_value(n.args[1])
        if inner is None or k is None or k != np.floor(k):
            return None
        lo, hi = inner
        if op == "maximum":
            return (max(lo, k), max(hi, k))
        if op == "minimum":
            return (min(lo, k), min(hi, k))
        return (lo + k, hi + k) if op == "add" else (lo - k, hi - k)
    return None


def _work(n: Call) -> int:
    return _WORK.get(n.op, 1)


def _regions(body) -> tuple:
    """(each node -> the code its value is a function of; each code's bounds; the integer
    intervals of the nodes known to hold integers)."""
    known: dict = {}
    source: dict = {}
    bounds: dict = {}
    for n in post_order(body):
        if not isinstance(n, Call) or not isinstance(n.type, TensorType):
            continue
        if get_op(n.op).pattern in _FLOW:
            iv = _interval(n, known)
            if iv is not None:
                known[n] = iv
            srcs = {source.get(a, a if a in bounds else None) for a in n.args if _scalar_value(a) is None}
            if len(srcs) == 1 and None not in srcs:
                s = next(iter(srcs))
                if n.type.shape == s.type.shape:
                    source[n] = s
                    continue
            if iv is not None and np.isfinite(iv).all() and iv[1] - iv[0] < CODES:
                bounds[n] = (int(iv[0]), int(iv[1]))
    return source, bounds, known


def _table(n: Call, code: Call, lo: int, hi: int, dtype: str):
    """The graph of ``n`` computed on every value of ``code`` (a 1-D constant), as ``dtype``."""
    values = Constant(np.arange(lo, hi + 1).astype(dt.numpy_dtype(code.type.dtype)))
    memo = {code: values}

    def build(e):
        if e in memo:
            return memo[e]
        if not isinstance(e, Call):
            return e
        out = _call(e.op, [build(a) for a in e.args], dict(e.attrs), e.span)
        memo[e] = out
        return out

    t = build(n)
    if t.type.shape != (hi - lo + 1,):
        t = _call("reshape", [t], {"newshape": (hi - lo + 1,)}, n.span)
    return t if t.type.dtype == dtype else _call("cast", [t], {"dtype": dtype}, n.span)


def _byte_kind(n: Call, interval) -> Optional[str]:
    """The 8-bit type a table of ``n``'s values is: its own, or one that holds the integers
    it is known to take (a code quantized again, read as floats or bf16 words); else None."""
    if n.type.dtype in _NARROW:
        return n.type.dtype
    if interval is None:
        return None
    return next((k for k, (lo, hi) in _NARROW.items() if lo <= interval[0] and interval[1] <= hi), None)


def _lookup(n: Call, code: Call, index, lo: int, hi: int, kind: str) -> Call:
    """``table[index - lo]`` in place of ``n`` (``index``: what ``code`` was rewritten to), the
    table's bytes of type ``kind`` widened to ``n``'s type."""
    idx = index if index.type.dtype == "int32" else _call("cast", [index], {"dtype": "int32"}, n.span)
    if lo:
        idx = _call("subtract", [idx, Constant(np.int32(lo))], {}, n.span)
    out = _call("gather", [_table(n, code, lo, hi, kind), idx], {"axis": 0}, n.span)
    return out if kind == n.type.dtype else _call("cast", [out], {"dtype": n.type.dtype}, n.span)


def _cone_work(n: Call, code: Call, source: dict) -> int:
    """The work of computing ``n`` from ``code`` (each node of its region once)."""
    seen, stack, total = set(), [n], 0
    while stack:
        e = stack.pop()
        if e is code or e in seen or source.get(e) is not code:
            continue
        seen.add(e)
        total += _work(e)
        stack.extend(e.args)
    return total


def _features(ctx: PassContext) -> frozenset:
    from ...target import as_target  # (a GPU target's kind has no x86 features: no tables)

    return getattr(as_target(ctx.config.get("target")), "feature_set", frozenset())


@graph_pass("code_tables", opt_level=2)
def code_tables(mod: Module, ctx: PassContext) -> Module:
    """Values computed from one 8-bit code alone, at a cost above a lookup, become lookups in
    a table of the code's values (see the module docstring)."""
    features = _features(ctx)
    permutes = {"avx512vbmi", "avx512bw"} <= features
    # (AVX2 alone: int32 tables read by vpgatherdd. AVX-512 without VBMI is not measured)
    if not (permutes or ("avx2" in features and "avx512f" not in features)):
        return mod
    body = mod.main.body
    source, bounds, known = _regions(body)
    if not source:
        return mod
    readers = readers_of(body)
    outputs = set(body.fields) if hasattr(body, "fields") else {body}
    chosen: dict = {}
    for n, code in source.items():
        kind = _byte_kind(n, known.get(n))
        # the last value of a path that bytes hold: read outside the region, or by a step that
        # leaves the integers (a dequantization, computed from the looked-up code)
        last = n in outputs or any(source.get(r) is not code or _byte_kind(r, known.get(r)) is None
                                   for r in readers.get(n, ()))
        if kind and last and _cone_work(n, code, source) >= WORTH:
            chosen[n] = (code, kind)

    def step(new, old, get):
        if old not in chosen:
            return None
        code, kind = chosen[old]
        lo, hi = bounds[code]
        try:
            return _lookup(old, code, get(code), lo, hi, kind if permutes else _WORDS)
        except EmberError:  # (an op whose attributes need the data's rank: left as it is)
            return None

    return rewrite_main(mod, step, original=True)
