"""Inference simplifications: batch normalization becomes a scale and a shift, folded into
the weights and bias of the convolution before it when there is one; ``copy`` disappears;
``power`` by a constant 2, 3 or 4 is a product (GPT-2's tanh GELU cubes its input: ``pow``
is a libm call per element, scalar, 10x the cost of the matrix product it follows), by 1
the base, by 0.5 ``sqrt``; a pad, slice, transpose, reshape, expand or cast that changes
nothing disappears, and a transpose that moves only axes of 1 is the reshape it is.

``batch_norm(x, gamma, beta, mean, var)`` with constant statistics is
``x * s + (beta - mean * s)`` with ``s = gamma / sqrt(var + eps)``. When ``x`` is a
convolution with constant weights read only here, ``s`` scales the weights per output channel
instead: ``conv(d, W * s) + shift``, and a bias already added to the convolution folds into
the shift. The new scale and shift are graph expressions over constants; ``fold_constant``
(run next) computes them.
"""
from __future__ import annotations

from ..ir import Call, Constant, Module, const, merge_spans, source_span
from ..types import TensorType
from ..visit import use_counts
from .affine_chains import CONVS as _CONVS
from .affine_chains import compose, composes, split_constant, typed as _typed
from .context import PassContext, graph_pass, rewrite_main


def _per_channel(v, ndim: int, axis: int):
    """``v`` (C,) reshaped to broadcast along ``axis`` of a rank-``ndim`` tensor."""
    shape = tuple(v.type.shape) + (1,) * (ndim - axis - 1)
    return Call("reshape", [v], {"newshape": shape}, TensorType(shape, v.type.dtype))


def _fold_bn(n: Call, get, uses: dict):
    """The replacement of batch norm ``n`` (original node; ``get`` maps an original node to its
    rewritten version), or None to keep it."""
    x, gamma, beta, mean, var = n.args
    if not all(isinstance(a, Constant) for a in (gamma, beta, mean, var)) or not isinstance(x.type, TensorType):
        return None
    dtype = x.type.dtype
    axis = n.attr("axis") % x.type.ndim
    eps = const(n.attr("epsilon"), dtype)
    scale = _typed("divide", [gamma, _typed("sqrt", [_typed("add", [var, eps])])])
    shift = _typed("subtract", [beta, _typed("multiply", [mean, scale])])
    conv, bias = x, None
    if isinstance(x, Call) and x.op == "nn.bias_add" and uses[x] == 1 and isinstance(x.args[1], Constant):
        conv, bias = x.args
    if isinstance(conv, Call) and conv.op in _CONVS and axis == 1 and isinstance(conv.args[1], Constant) \
            and uses[conv] == 1:
        w = conv.args[1]
        w2 = _typed("multiply", [w, _per_channel(scale, w.type.ndim, 0)])
        new_conv = _typed(conv.op, [get(conv.args[0]), w2], dict(conv.attrs))
        if bias is not None:
            shift = _typed("add", [shift, _typed("multiply", [bias, scale])])
        return _typed("add", [new_conv, _per_channel(shift, x.type.ndim, 1)])
    return _typed("add", [_typed("multiply", [get(x), _per_channel(scale, x.type.ndim, axis)]),
                          _per_channel(shift, x.type.ndim, axis)])


def _power(n: Call):
    """``power(x, c)`` by a constant scalar exponent 0.5, 1, 2, 3 or 4 of a float ``x``, as
    ``sqrt`` or products; None otherwise."""
    import numpy as np

    x, c = n.args
    if not isinstance(c, Constant) or np.size(c.value) != 1 or not isinstance(n.type, TensorType) \
            or n.type.dtype not in ("float32", "float64", "float16") or x.type != n.type:
        return None
    e = float(np.asarray(c.value).reshape(()))
    if e == 0.5:
        return _typed("sqrt", [x])
    if e not in (1.0, 2.0, 3.0, 4.0):
        return None
    sq = _typed("multiply", [x, x]) if e >= 2 else None
    return {1.0: x, 2.0: sq, 3.0: _typed("multiply", [sq, x]) if sq is not None else None,
            4.0: _typed("multiply", [sq, sq]) if sq is not None else None}[e]


def _is_identity(n: Call) -> bool:
    """Whether ``n`` returns its first operand unchanged: a pad of no widths (Swin pads its
    rows to a multiple of its window, by nothing at 224x224), a slice of everything, a
    transpose of no axes, a reshape, expand or cast to what it has. Each would be a kernel and
    a copy."""
    if not n.args or not isinstance(n.type, TensorType) or n.type != getattr(n.args[0], "type", None):
        return False
    if n.op == "pad":
        return n.attr("mode", "constant") == "constant" and all(w == 0 for w in n.attr("pad_width"))
    if n.op == "strided_slice":
        shape = n.type.shape
        axes = n.attr("axes", None)
        begin = n.attr("begin")
        axes = axes if axes is not None else tuple(range(len(begin)))
        steps = n.attr("strides", None) or (1,) * len(axes)
        return all(isinstance(shape[a], int) and isinstance(b, int) and st == 1 and (b == 0 or b <= -shape[a])
                   for a, b, st in zip(axes, begin, steps))
    if n.op == "transpose":
        axes = n.attr("axes", None)
        return tuple(range(n.type.ndim)) == (tuple(axes) if axes is not None else tuple(reversed(range(n.type.ndim))))
    return n.op in ("reshape", "expand", "cast") and n.type.is_static


def _moves_only_ones(n: Call) -> bool:
    """Whether transpose ``n`` keeps the order of its operand's axes other than those of 1: a
    reshape then (ViT's class token, (197, 1, 768) -> (1, 197, 768)), which views its operand
    where a transpose copies it."""
    x = n.args[0].type if n.args else None
    if not (isinstance(x, TensorType) and x.is_static and isinstance(n.type, TensorType)):
        return False
    axes = n.attr("axes", None)
    axes = tuple(axes) if axes is not None else tuple(reversed(range(x.ndim)))
    kept = [a for a in axes if x.shape[a] != 1]
    return kept == sorted(kept) and axes != tuple(range(x.ndim))


@graph_pass("simplify_inference", opt_level=1)
def simplify_inference(mod: Module, ctx: PassContext) -> Module:
    """Batch norm into scale/shift (into the preceding conv when possible); chains of products
    and sums by constants composed (:mod:`.affine_chains`); drop ``copy`` and ops that return
    their operand as it is; small constant powers as products."""
    uses = use_counts(mod.main.body)
    once: dict = {}  # a rewritten value -> whether the value it stands for is read once

    def single(v) -> bool:
        return once.get(v, True)  # (a value made here, by a batch norm or a chain, is read once)

    def simplify(m, n, get):
        r = _simplify(m, n, get)
        if isinstance(n, Call):
            once[m if r is None else r] = uses.get(n, 0) == 1
        return r

    def _simplify(m, n, get):
        if not isinstance(n, Call):
            return None
        if n.op == "copy" or _is_identity(n):
            return m.args[0]
        if n.op == "transpose" and _moves_only_ones(n):
            return Call("reshape", [m.args[0]], {"newshape": tuple(n.type.shape)}, n.type, span=n.span)
        if n.op == "power":
            with source_span(*merge_spans(n)):
                return _power(m)
        if n.op == "nn.batch_norm":
            # the new calls stand for the conv, its bias and the batch norm together
            x = n.args[0]
            inner = [x, *(x.args[:1] if isinstance(x, Call) and x.op == "nn.bias_add" else [])]
            with source_span(*merge_spans(*reversed(inner), n)):
                return _fold_bn(n, get, uses)
        if n.op in ("multiply", "add"):
            split = split_constant(m)
            if split is not None and composes(m.op, split[0]) and single(split[0]):
                with source_span(*merge_spans(n)):
                    return compose(m.op, *split, single)
        return None

    return rewrite_main(mod, simplify, original=True)


__all__ = ["simplify_inference"]
