"""Half-precision ops that accumulate compute in float32.

A sum of many float16 (or bfloat16) products rounded at every step loses digits the result
keeps in float32: numpy, ONNX's reference and ONNX Runtime all accumulate in float32. So a
call of an accumulating op (matmul, conv, reductions, softmax, normalizations, average
pooling) on half-precision inputs becomes ``cast(op(cast(x, float32), ...), half)``; fusion
then folds the casts into the neighbouring kernels.
"""
from __future__ import annotations

from ...loop import dtype as dt
from ..ir import Call, Module, source_span
from ..ops import infer_type
from ..types import TensorType
from ..visit import rewrite
from .context import PassContext, graph_pass

HALF = ("float16", "bfloat16")
ACCUMULATING = {
    "nn.matmul", "nn.dense", "nn.conv1d", "nn.conv2d", "nn.conv3d", "nn.conv1d_transpose",
    "nn.conv2d_transpose", "nn.conv3d_transpose", "nn.softmax", "nn.log_softmax", "nn.layer_norm",
    "nn.instance_norm", "nn.lrn", "nn.lp_normalize", "nn.avg_pool1d", "nn.avg_pool2d", "nn.avg_pool3d",
    "nn.lp_pool1d", "nn.lp_pool2d", "nn.lp_pool3d", "nn.global_avg_pool1d", "nn.global_avg_pool2d",
    "nn.global_avg_pool3d", "sum", "mean", "prod", "l1_norm", "l2_norm", "log_sum", "log_sum_exp",
    "sum_square", "cumsum", "cumprod", "einsum", "nn.batch_norm",
}


def _cast(x, dtype: str) -> Call:
    return Call("cast", [x], {"dtype": dtype}, TensorType(x.type.shape, dtype))


def _promote(n):
    if not (isinstance(n, Call) and n.op in ACCUMULATING and isinstance(n.type, TensorType)
            and n.type.dtype in HALF):
        return None
    with source_span(*n.span):
        args = [_cast(a, "float32") if isinstance(a.type, TensorType) and a.type.dtype in HALF else a
                for a in n.args]
        wide = Call(n.op, args, n.attrs, infer_type(n.op, [a.type for a in args], n.attrs))
        return _cast(wide, n.type.dtype)


@graph_pass("promote_half", opt_level=0)
def promote_half(mod: Module, ctx: PassContext) -> Module:
    """Accumulating ops on float16/bfloat16 compute in float32 (see the module docstring)."""
    return rewrite(mod, _promote)


assert all(d in dt.SCALAR_TYPES for d in HALF)

__all__ = ["promote_half", "ACCUMULATING"]
