"""The ``reference`` offload backend: a direct convolution in plain C, written from scratch.

It takes a float32 ``nn.conv2d_nchwc`` group of static shapes (groups 1, plain or blocked
data, Ember's packed weights ``F/FB, C, kh, kw, FB``) whose epilogue is any chain of ReLUs and
adds of a per-channel bias or of a tensor of the output's shape (a residual), and writes the
kernel as loops over the output with the window's sums in a local array. It is slow; it is the
example of a backend (docs/external_kernels.md) and what the tests offload to.
"""
from __future__ import annotations

from ..graph.types import TensorType
from . import Backend, ExternalSource, register_backend
from .patterns import conv_chain


def _matches(fn) -> bool:
    found = conv_chain(fn)
    if found is None:
        return False
    conv, steps = found
    a = conv.attrs
    x, w = conv.args[0].type, conv.args[1].type
    out = conv.type
    static = all(isinstance(t, TensorType) and t.is_static and t.dtype == "float32" for t in (x, w, out))
    if not (static and len(conv.args) == 2 and a.get("groups", 1) == 1 and a.get("dot") is None
            and a.get("pad_value", 0) == 0 and x.ndim in (4, 5)):
        return False
    for op, other in steps:  # a per-channel bias (1, FO, 1, 1, FB) or a tensor of the output's shape
        if op == "add" and tuple(other.type.shape) not in ((1, out.shape[1], 1, 1, out.shape[4]), tuple(out.shape)):
            return False
    return True


def _source(fn, func, name: str) -> ExternalSource:
    conv, steps = conv_chain(fn)
    params = list(fn.params)
    x, w = conv.args[0].type.shape, conv.args[1].type.shape
    N, FO, OH, OW, FB = conv.type.shape
    _, C, KH, KW, _ = w
    blocked = len(x) == 5
    H, W = x[2], x[3]
    cb = x[4] if blocked else 1
    sh, sw = conv.attr("strides") or (1, 1)
    dh, dw = conv.attr("dilation") or (1, 1)
    pt, pl = (conv.attr("padding") or (0, 0, 0, 0))[:2]
    # the kernel's parameters: the group's inputs in order, then its output
    args = [f"const float *restrict p{i}" for i in range(len(params))] + ["float *restrict out"]
    at = {p: f"p{i}" for i, p in enumerate(params)}
    xi = (f"(((size_t)n * {C // cb} + c / {cb}) * {H} + iy) * {W} * {cb} + (size_t)ix * {cb} + c % {cb}"
          if blocked else f"(((size_t)n * {C} + c) * {H} + iy) * {W} + ix")
    epilogue = []
    for op, other in steps:
        if op == "relu":
            epilogue.append("r = r < 0.0f ? 0.0f : r;")
        elif tuple(other.type.shape) == tuple(conv.type.shape):
            epilogue.append(f"r += {at[other]}[o];")
        else:
            epilogue.append(f"r += {at[other]}[fo * {FB} + f];")
    text = f"""#include <stddef.h>
#include <stdint.h>

int32_t {name}({', '.join(args)}) {{
    const float *x = {at[conv.args[0]]}, *w = {at[conv.args[1]]};
    for (long n = 0; n < {N}; n++)
    for (long fo = 0; fo < {FO}; fo++)
    for (long oy = 0; oy < {OH}; oy++)
    for (long ox = 0; ox < {OW}; ox++) {{
        float acc[{FB}] = {{0}};
        for (long c = 0; c < {C}; c++)
        for (long ky = 0; ky < {KH}; ky++) {{
            long iy = oy * {sh} - {pt} + ky * {dh};
            if (iy < 0 || iy >= {H}) continue;
            for (long kx = 0; kx < {KW}; kx++) {{
                long ix = ox * {sw} - {pl} + kx * {dw};
                if (ix < 0 || ix >= {W}) continue;
                float v = x[{xi}];
                const float *wv = w + (((size_t)fo * {C} + c) * {KH} + ky) * {KW} * {FB} + (size_t)kx * {FB};
                for (long f = 0; f < {FB}; f++) acc[f] += v * wv[f];
            }}
        }}
        for (long f = 0; f < {FB}; f++) {{
            size_t o = (((size_t)n * {FO} + fo) * {OH} + oy) * {OW} * {FB} + (size_t)ox * {FB} + f;
            float r = acc[f];
            {' '.join(epilogue)}
            out[o] = r;
        }}
    }}
    return 0;
}}
"""
    return ExternalSource(text)


REFERENCE = register_backend(Backend("reference", _matches, _source,
                                     doc="a direct convolution in plain C (the example backend)"))
