"""Computes of the remaining NN ops: ``nn.bias_add``, ``nn.batch_norm`` (inference),
``nn.softmax``, ``nn.log_softmax``, ``nn.layer_norm``, ``nn.instance_norm``, ``nn.lrn`` and
``nn.lp_normalize`` (``nn.hardmax`` is in ``index.py``).

``bias_add`` and ``batch_norm`` are one broadcasting stage each (they fuse as elementwise
epilogues). The ops that normalize by a statistic of a slice are row computations
(``ember.kernels.norm``): keep-dims statistics computed per row, then one elementwise stage;
softmax subtracts the slice's max before ``exp``, the normalizations take the variance of the
centered values (two passes, no ``E[x^2] - E[x]^2`` cancellation).
"""
from __future__ import annotations

from ....errors import UnsupportedOpError
from ....kernels.common import host, vector_lanes
from ....kernels.elementwise import broadcast_index
from ....kernels.norm import axis_stat, normalize_compute, softmax_compute, stat_index
from ....loop import compute as te
from ....loop import dtype as dt
from ....loop import intrinsics as intr
from ....loop.expr import cast, const, eq, logical_and, select
from ..registry import norm_axis
from .common import register_compute, stage_name, te_shape


def _like(v, x: te.Tensor):
    """``v`` (a parameter's element) in ``x``'s dtype."""
    return v if v.dtype == x.dtype else cast(x.dtype, v)


def _float_only(op: str, x: te.Tensor) -> None:
    if not dt.is_float(x.dtype):
        raise UnsupportedOpError(f"{op}: computed for float tensors only, got {x.dtype}")


def _bias_add(attrs, inputs, out_type):
    x, b = inputs
    axis = norm_axis(attrs["axis"], x.ndim)
    return te.compute(te_shape(out_type), lambda *i: x[i] + b[i[axis]], stage_name("nn.bias_add"))


def _batch_norm(attrs, inputs, out_type):
    x, gamma, beta, mean, var = inputs
    axis = norm_axis(attrs["axis"], x.ndim)
    eps = const(float(attrs["epsilon"]), x.dtype)

    def body(*i):
        c = i[axis]
        scale = _like(gamma[c], x) * intr.rsqrt(_like(var[c], x) + eps)
        return (x[i] - _like(mean[c], x)) * scale + _like(beta[c], x)

    return te.compute(te_shape(out_type), body, stage_name("nn.batch_norm"))


def _softmax(log: bool):
    op = "nn.log_softmax" if log else "nn.softmax"

    def compute_fn(attrs, inputs, out_type):
        x = inputs[0]
        _float_only(op, x)
        return softmax_compute(x, norm_axis(attrs["axis"], x.ndim), log, name=stage_name(op))

    register_compute(op, compute_fn)


def _rows(stats, nrows: int, inner: int) -> dict:
    """The ``attrs`` of a row computation (see ``kernels.norm.schedule_rows``)."""
    return {"kind": "rows", "nrows": nrows, "inner": inner, "at_row": [s for s, _ in stats],
            "partials": [p for _, p in stats if p is not None]}


def _layer_norm(attrs, inputs, out_type):
    x, gamma, *rest = inputs
    _float_only("nn.layer_norm", x)
    axis = norm_axis(attrs["axis"], x.ndim)
    beta = rest[0] if rest else None

    def param(p):
        return lambda *i: _like(p[broadcast_index(p, i[axis:])], x)

    return normalize_compute(x, axis, attrs["epsilon"], param(gamma), param(beta) if beta is not None else None,
                             name=stage_name("nn.layer_norm"))


def _instance_norm(attrs, inputs, out_type):
    x, gamma, beta = inputs
    _float_only("nn.instance_norm", x)
    return normalize_compute(x, 2, attrs["epsilon"], lambda n, c, *_: _like(gamma[c], x),
                             lambda n, c, *_: _like(beta[c], x), name=stage_name("nn.instance_norm"))


def _lp_normalize(attrs, inputs, out_type):
    x = inputs[0]
    _float_only("nn.lp_normalize", x)
    axis = norm_axis(attrs["axis"], x.ndim)
    p = attrs["p"]
    lanes = vector_lanes(host(None), x.dtype)
    name = stage_name("nn.lp_normalize")
    S = axis_stat(lambda *i: intr.abs(x[i]) if p == 1 else x[i] * x[i], tuple(x.shape), axis, False, "sum",
                  lanes, f"{name}_sum", x.dtype)
    s = S[0]

    def body(*i):
        norm = s[stat_index(i, s)]
        zero = const(0.0, x.dtype)
        # a zero vector stays zero (ONNX's reference), not 0/0 = nan
        return select(eq(norm, zero), zero, x[i] / (norm if p == 1 else intr.sqrt(norm)))

    return te.compute(tuple(x.shape), body, name, attrs=_rows([S], axis, x.ndim - 1 - axis))


def _lrn(attrs, inputs, out_type):
    # ONNX: x / (bias + alpha / size * sum of squares over the channel window)^beta, the window
    # [c - floor((size-1)/2), c + ceil((size-1)/2)] clipped to the channels
    x = inputs[0]
    _float_only("nn.lrn", x)
    axis = norm_axis(attrs["axis"], x.ndim)
    size = attrs["size"]
    C = x.shape[axis]
    lo = (size - 1) // 2
    r = te.reduce_axis(size, "lrn_r")
    name = stage_name("nn.lrn")

    def square_sum(*i):
        c = i[axis] - lo + r.var
        v = x[(*i[:axis], c, *i[axis + 1:])]
        return te.sum(select(logical_and(c >= 0, c < C), v * v, const(0, x.dtype)), axis=r)

    shape = tuple(x.shape)
    sq = te.compute(shape, square_sum, f"{name}_sq")
    bias, scale = const(float(attrs["bias"]), x.dtype), const(float(attrs["alpha"]) / size, x.dtype)
    return te.compute(shape, lambda *i: x[i] * _inverse_power(bias + scale * sq[i], float(attrs["beta"])),
                      name, attrs={"kind": "lrn", "sq": sq})


def _inverse_power(base, beta: float):
    """``base ** -beta`` for a positive base (LRN's: a sum of squares times alpha plus a positive
    bias). A whole number of quarters (0.75, the usual beta, is three) is a product of square
    roots, a few correctly rounded vector instructions; otherwise exp(-beta * log(base)), inline
    vector code where pow would call libm lane by lane."""
    quarters = 4 * beta
    if quarters != int(quarters) or not 1 <= quarters <= 8:
        return intr.exp(const(-beta, base.dtype) * intr.log(base))
    k = int(quarters)
    root, n = (intr.sqrt(base), k // 2) if k % 2 == 0 else (intr.sqrt(intr.sqrt(base)), k)
    power = root
    for _ in range(n - 1):
        power = power * root
    return const(1, base.dtype) / power


register_compute("nn.bias_add", _bias_add)
register_compute("nn.batch_norm", _batch_norm)
_softmax(False)
_softmax(True)
register_compute("nn.layer_norm", _layer_norm)
register_compute("nn.instance_norm", _instance_norm)
register_compute("nn.lp_normalize", _lp_normalize)
register_compute("nn.lrn", _lrn)
