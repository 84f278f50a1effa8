"""Half-precision matrix products on a GPU's tensor cores.

After :mod:`.promote_half`, a product of float16 or bfloat16 operands reads them widened,
``nn.matmul(cast(a, float32), cast(b, float32))``, and is cast back where its result is half.
For a ``cuda`` target such a product of static shapes becomes ``nn.matmul_mma(a, b)``: the half
operands as they are, float32 sums on tensor cores (:mod:`ember.kernels.gpu_mma`), and the cast
back folded into its stores. ``nn.dense`` (a weight stored (N, K)) becomes it with ``trans_b``.
With ``precision="bf16"`` or ``"fp16"`` (a cuda compile's option) float32 products of static
shapes run there too, their operands cast to that type (constant weights once, at compile time)
and their result float32. On other targets the pass changes nothing.
"""
from __future__ import annotations

from ..ir import Call, Module
from ..types import TensorType
from .context import PassContext, graph_pass, rewrite_main, typed_call

HALF = ("float16", "bfloat16")


def _half_operand(x):
    """``x``'s half-precision source where ``x`` is it widened to float32, else None."""
    if isinstance(x, Call) and x.op == "cast" and x.type.dtype == "float32" and len(x.args) == 1:
        src = x.args[0]
        if isinstance(src.type, TensorType) and src.type.dtype in HALF:
            return src
    return None


def _mma(n, out_dtype: str = "float32"):
    """``nn.matmul_mma`` for product ``n`` (a Call), or None where it does not qualify."""
    if not (isinstance(n, Call) and n.op in ("nn.matmul", "nn.dense") and len(n.args) == 2):
        return None
    a, b = (_half_operand(x) for x in n.args)
    if a is None or b is None or a.type.dtype != b.type.dtype:
        return None
    ta, tb = a.type, b.type
    if not (ta.is_static and tb.is_static) or ta.ndim < 2 or tb.ndim < 2:
        return None
    if tb.ndim > 2 and tb.shape[:-2] != ta.shape[:-2]:
        return None  # (a broadcast batch: the plain product)
    return typed_call("nn.matmul_mma", [a, b], {"out_dtype": out_dtype, "trans_b": n.op == "nn.dense"}, span=n.span)


def _narrowed(n, half: str):
    """Float32 product ``n`` on tensor cores with its operands rounded to ``half``, or None."""
    if not (isinstance(n, Call) and n.op in ("nn.matmul", "nn.dense") and len(n.args) == 2
            and getattr(n.type, "dtype", None) == "float32"):
        return None
    a, b = n.args
    if not all(isinstance(x.type, TensorType) and x.type.dtype == "float32" and x.type.is_static and x.type.ndim >= 2
               for x in (a, b)) or (b.type.ndim > 2 and b.type.shape[:-2] != a.type.shape[:-2]):
        return None
    args = [typed_call("cast", [x], {"dtype": half}, span=n.span) for x in (a, b)]
    return typed_call("nn.matmul_mma", args, {"out_dtype": "float32", "trans_b": n.op == "nn.dense"}, span=n.span)


def _rewrite(n):
    # (operands first: a product is already nn.matmul_mma when the cast back reaches here)
    if isinstance(n, Call) and n.op == "cast" and getattr(n.type, "dtype", None) in HALF and len(n.args) == 1:
        p = n.args[0]
        if (isinstance(p, Call) and p.op == "nn.matmul_mma" and p.attrs["out_dtype"] == "float32"
                and p.args[0].type.dtype == n.type.dtype):
            # (the cast back folded into the product's stores)
            return typed_call("nn.matmul_mma", list(p.args), {**dict(p.attrs), "out_dtype": n.type.dtype}, span=n.span)
        return None
    return _mma(n, "float32") if isinstance(n, Call) and getattr(n.type, "dtype", None) == "float32" else None


@graph_pass("tensor_core_products", opt_level=1)
def tensor_core_products(mod: Module, ctx: PassContext) -> Module:
    """Half-precision products on a GPU's tensor cores (see the module docstring)."""
    target = ctx.config.get("target")
    if getattr(target, "kind", None) != "cuda":
        return mod
    mod = rewrite_main(mod, _rewrite)
    half = {"bf16": "bfloat16", "fp16": "float16"}.get(getattr(ctx.config.get("options"), "precision", "fp32"))
    return rewrite_main(mod, lambda n: _narrowed(n, half)) if half else mod


__all__ = ["tensor_core_products"]
