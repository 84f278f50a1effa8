"""Store once, in bfloat16, an activation that a bf16 convolution reads (``precision="bf16"``).

``block_layout`` gives a bf16 conv the bfloat16 cast of its float32 input, which fuses into the
input's producer as an epilogue -- unless the input has other readers. A residual block's
output does: the next block's first conv and its residual add. Then the cast is a kernel of its
own, a pass over the float32 activation (read 4 bytes, write 2 an element: 0.43 ms of
ResNet-50's 10.9 in bf16, its largest cost after the convs). Here the other readers, where they
are elementwise, read the bf16 values widened instead (``cast(cast(x, bf16), f32)``, the same
cast, which ``cse`` then makes one): the producer writes bf16 alone and the add widens it as it
reads, as bf16 inference stores activations in PyTorch's autocast and OpenVINO's bf16 mode.
The skip connection then carries bf16-rounded values (ResNet-50's error against fp32: measured
in ``bench/precision.py``). Model outputs stay float32.
"""
from __future__ import annotations

from ..ir import Call, Module, Tuple
from ..ops import Pattern, get_op
from ..types import TensorType
from ..visit import readers_of
from .context import PassContext, graph_pass, rewrite_main, typed_call


def _feeds_bf16_conv(c: Call, readers: dict) -> bool:
    """``c`` is ``cast(x, bfloat16)`` read (as int32 words) by packed bf16 dots."""
    if not (isinstance(c, Call) and c.op == "cast" and _dtype(c) == "bfloat16"):
        return False
    words = readers.get(c, [])
    return bool(words) and all(
        isinstance(w, Call) and w.op == "bitcast"
        and all(isinstance(r, Call) and r.op == "nn.conv2d_nchwc" and r.attrs.get("dot") == "dot_bf16x2"
                for r in readers.get(w, []))
        for w in words)


def _dtype(n) -> str | None:
    return n.type.dtype if isinstance(n.type, TensorType) else None


def _elementwise(n) -> bool:
    return isinstance(n, Call) and get_op(n.op).pattern in (Pattern.ELEMWISE, Pattern.BROADCAST)


@graph_pass("bf16_activations", opt_level=2)
def bf16_activations(mod: Module, ctx: PassContext) -> Module:
    """Elementwise readers of a bf16 conv's float32 input read its bf16 cast widened (see the
    module docstring)."""
    if getattr(ctx.config.get("options"), "precision", "fp32") != "bf16":
        return mod
    body = mod.main.body
    outputs = set(map(id, body.fields)) if isinstance(body, Tuple) else {id(body)}
    readers = readers_of(body)
    shared = set()
    for x, rs in readers.items():
        if not (isinstance(x, Call) and _dtype(x) == "float32") or id(x) in outputs:
            continue
        casts = [r for r in rs if _feeds_bf16_conv(r, readers)]
        others = [r for r in rs if r not in casts]
        if casts and others and all(_elementwise(r) and not (r.op == "cast" and _dtype(r) == "bfloat16")
                                    for r in others):
            shared.add(x)

    def step(new, old, get):
        if not (isinstance(new, Call) and _elementwise(old)) or _feeds_bf16_conv(old, readers) \
                or not any(a in shared for a in old.args):
            return None
        args = [typed_call("cast", [typed_call("cast", [get(a)], {"dtype": "bfloat16"}, a.span)],
                           {"dtype": "float32"}, a.span) if a in shared else b
                for a, b in zip(old.args, new.args)]
        return new.replace(args=tuple(args))

    return rewrite_main(mod, step, original=True) if shared else mod


__all__ = ["bf16_activations"]
