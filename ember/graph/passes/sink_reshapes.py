"""Move reshapes below the elementwise ops that follow them, and merge reshape chains.

A Linear layer on a 3-D or 4-D activation is imported as ``reshape(matmul(reshape(x)))``:
the product runs on the flattened rows. The bias add, the activation and the residual add
that follow read the reshaped result, so they could not be the product's epilogue (it must
have the product's shape) and ran as a pass of their own over memory. An elementwise op
does not care about the shape its operands are viewed in, as long as the others broadcast
the same way in both views: so ``f(reshape(x), c)`` becomes ``reshape(f(x, c'))`` when the
reshape keeps the last axis and ``c`` varies along that axis at most (a bias), or when the
other operands have the result's whole (static) shape (a residual add: viewed in ``x``'s
shape, which costs nothing -- BERT's residual adds after its attention and its MLP were
kernels of their own, 8 a 4-layer model). Then ``reshape(reshape(x))`` is one
reshape, and a reshape back to the shape it started from disappears: the next layer's
flattening cancels the previous one's unflattening.
"""
from __future__ import annotations

from ..ir import Call, Module
from ..ops import get_op, infer_type
from ..ops.registry import Pattern
from ..types import TensorType
from .context import PassContext, graph_pass, rewrite_main

_FLOW = (Pattern.ELEMWISE, Pattern.BROADCAST)
# elementwise ops whose attributes name a shape or an axis of their operands' view: moving
# the reshape would change what they mean
VIEWED = frozenset({"expand", "constant_of_shape", "nn.batch_norm", "nn.bias_add"})


def _reshape(x, shape, span) -> Call:
    attrs = {"newshape": tuple(shape)}
    return Call("reshape", [x], attrs, infer_type("reshape", [x.type], attrs), span=span)


def _is_reshape(e) -> bool:
    return isinstance(e, Call) and e.op == "reshape" and len(e.args) == 1 and isinstance(e.type, TensorType) \
        and isinstance(e.args[0].type, TensorType)


def _merge(n: Call):
    """``reshape(reshape(x))`` -> ``reshape(x)``; a reshape to its input's own shape -> its input."""
    x = n.args[0]
    if _is_reshape(x):
        x = x.args[0]
    if tuple(x.type.shape) == tuple(n.type.shape):
        return x
    return _reshape(x, n.type.shape, n.span) if x is not n.args[0] else None


def _sink(n: Call):
    """``f(reshape(x), ...)`` -> ``reshape(f(x, ...))`` where the other operands broadcast the
    same way against ``x`` (see the module docstring), else None."""
    if get_op(n.op).pattern not in _FLOW or n.op in VIEWED or not isinstance(n.type, TensorType):
        return None
    views = [a for a in n.args if _is_reshape(a) and tuple(a.type.shape) == tuple(n.type.shape)]
    if not views:
        return None
    src = tuple(views[0].args[0].type.shape)
    if not src or not n.type.shape or src[-1] != n.type.shape[-1]:  # (a scalar result: nothing to sink past)
        return None
    args = []
    for a in n.args:
        if a in views and tuple(a.args[0].type.shape) == src:
            args.append(a.args[0])
        elif isinstance(a.type, TensorType) and all(d == 1 for d in a.type.shape[:-1]):
            args.append(_reshape(a, a.type.shape[-1:], n.span) if a.type.ndim > 1 else a)
        elif isinstance(a.type, TensorType) and tuple(a.type.shape) == tuple(n.type.shape) \
                and all(isinstance(d, int) for d in src + tuple(n.type.shape)):
            args.append(_reshape(a, src, n.span))  # (a residual: viewed in the product's shape, free)
        else:
            return None
    inner = Call(n.op, args, dict(n.attrs), infer_type(n.op, [a.type for a in args], dict(n.attrs)), span=n.span)
    if tuple(inner.type.shape) != src or inner.type.dtype != n.type.dtype:
        return None
    return _reshape(inner, n.type.shape, n.span)


@graph_pass("sink_reshapes", opt_level=2)
def sink_reshapes(mod: Module, ctx: PassContext) -> Module:
    """Reshapes below elementwise ops, chains merged (see the module docstring)."""
    def visit(n):
        if not isinstance(n, Call):
            return None
        if _is_reshape(n):
            return _merge(n)
        return _sink(n)

    return rewrite_main(mod, visit)


__all__ = ["sink_reshapes"]
