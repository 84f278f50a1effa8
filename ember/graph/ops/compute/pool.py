"""Computes of the pooling ops: ``nn.{max,avg,lp}_pool{1,2,3}d`` and
``nn.global_{avg,max}_pool{1,2,3}d``, through ``ember.kernels.pool``.

Windows follow ONNX: ``padding`` lists all leading pads then all trailing ones, the padding
never wins a max, ``ceil_mode`` keeps a partial last window (unless it would start past the
input and its leading padding), an average divides by the taps inside the input -- or, with
``count_include_pad``, inside the explicitly padded input (not the ceil-mode overhang).
"""
from __future__ import annotations

from ....errors import UnsupportedOpError
from ....loop import dtype as dt
from ...types import Dim
from ....kernels.pool import global_pool_compute, pool_compute
from ..nn import _NDIM_NAME
from .common import register_compute, stage_name, te_shape


def _check(op: str, kind: str, x) -> None:
    if kind != "max" and not dt.is_float(x.dtype):
        raise UnsupportedOpError(f"{op}: computed for float tensors only, got {x.dtype}")


def _exprs(v):
    """A window attribute's values, its sizes (a tier-0 kernel's) as their int64 expressions."""
    return None if v is None else tuple(d.expr if isinstance(d, Dim) else d for d in v)


def _pool(kind: str, n: int):
    op = f"nn.{kind}_pool{_NDIM_NAME[n]}"

    def compute_fn(attrs, inputs, out_type):
        x = inputs[0]
        _check(op, kind, x)
        w = {k: _exprs(attrs[k]) for k in ("pool_size", "strides", "padding", "dilation")}
        out = pool_compute(x, kind, w["pool_size"], w["strides"], w["padding"], w["dilation"],
                           attrs["ceil_mode"], attrs.get("count_include_pad", False), attrs.get("p", 2),
                           out_spatial=te_shape(out_type)[2:2 + n], name=stage_name(op),
                           blocked=attrs.get("blocked", False))
        return out

    register_compute(op, compute_fn)


def _global_pool(kind: str, n: int):
    op = f"nn.global_{kind}_pool{_NDIM_NAME[n]}"

    def compute_fn(attrs, inputs, out_type):
        x = inputs[0]
        _check(op, kind, x)
        return global_pool_compute(x, kind, name=stage_name(op))

    register_compute(op, compute_fn)


for _n in _NDIM_NAME:
    for _kind in ("max", "avg", "lp"):
        _pool(_kind, _n)
    for _kind in ("max", "avg"):
        _global_pool(_kind, _n)
