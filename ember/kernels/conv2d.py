"""2-D convolution, NCHW, direct: a register block of output channels x output columns.

``out[n, f, y, x] = sum_{c, ry, rx} pad(data)[n, c, y*s + ry*d, x*s + rx*d] * w[f, c, ry, rx]``

The weights are packed as ``Wp[fo, c, ry, rx, fi]`` so the ``FB`` weights of a channel block
are adjacent; the input is zero-padded once. The micro-kernel accumulates ``FB`` output
channels x ``XB`` output columns (``XB / lanes`` vectors each) in registers, reducing over
input channels and the kernel window, and writes the block back once. Output channel blocks
and rows run in parallel. (The blocked NCHWc layout of the graph compiler does better; this
kernel works on plain NCHW tensors.)
"""
from __future__ import annotations

from ..loop import compute as te
from ..loop.expr import IntImm, logical_and, select
from ..loop.schedule import Schedule
from .common import host, vector_lanes


def conv2d_compute(data: te.Tensor, weight: te.Tensor, stride=(1, 1), padding=(0, 0, 0, 0),
                   dilation=(1, 1), fb: int = 4, groups: int = 1):
    """The computation, with the weight packed in blocks of ``fb`` output channels."""
    N, C, H, W = [s.value for s in data.shape]
    F, Cg, KH, KW = [s.value for s in weight.shape]
    if groups != 1 or Cg != C:
        raise NotImplementedError("grouped convolution lands with the graph compiler")
    pt, pl, pb, pr = padding
    sh, sw = stride
    dh, dw = dilation
    OH = (H + pt + pb - dh * (KH - 1) - 1) // sh + 1
    OW = (W + pl + pr - dw * (KW - 1) - 1) // sw + 1
    zero = 0.0
    if any(padding):
        def pad(n, c, y, x):
            inside = logical_and(y >= pt, y < H + pt, x >= pl, x < W + pl)
            return select(inside, data[n, c, y - pt, x - pl], zero)
        padded = te.compute((N, C, H + pt + pb, W + pl + pr), pad, "pad")
    else:
        padded = data
    nfo = -(-F // fb)
    Wp = te.compute((nfo, C, KH, KW, fb),
                    lambda fo, c, ry, rx, fi: weight[fo * fb + fi, c, ry, rx] if F % fb == 0 else
                    select(fo * fb + fi < F, weight[fo * fb + fi, c, ry, rx], zero), "Wp")
    rc, ry, rx = te.reduce_axis(C, "rc"), te.reduce_axis(KH, "ry"), te.reduce_axis(KW, "rx")
    out = te.compute(
        (N, F, OH, OW),
        lambda n, f, y, x: te.sum(padded[n, rc, y * sh + ry * dh, x * sw + rx * dw]
                                  * Wp[f // fb, rc, ry, rx, f % fb], axis=(rc, ry, rx)), "conv")
    return out, {"pad": padded if any(padding) else None, "Wp": Wp}


def register_block(F: int, OW: int, lanes: int, accumulators: int) -> tuple[int, int]:
    """(FB, XB): output channels x output columns kept in registers. Maximizes useful
    accumulators, discounting the work wasted on padded channels and column tails."""
    best, best_score = (1, lanes), 0.0
    for xv in range(1, 5):
        xb = xv * lanes
        if xv > 1 and xb > OW:
            break
        fb = max(1, min(accumulators // xv, F))
        waste = (-(-OW // xb) * xb / OW) * (-(-F // fb) * fb / F)
        score = fb * xv / waste
        if score > best_score:
            best, best_score = (fb, xb), score
    return best


def schedule_conv2d_nchw(s: Schedule, out: te.Tensor, parts: dict, fb: int, xb: int, target=None):
    target = host(target)
    lanes = vector_lanes(target, out.dtype)
    CL = s.cache_write(out, "local")
    n, f, y, x = s[out].leaf
    fo, fi = s[out].split(f, factor=fb)
    xo, xi = s[out].split(x, factor=xb)
    s[out].reorder(n, fo, y, xo, fi, xi)
    s[out].parallel(s[out].fuse(n, fo, y))
    s[out].unroll(fi)
    xio, xii = s[out].split(xi, factor=lanes)
    s[out].vectorize(xii)
    st = s[CL]
    st.compute_at(s[out], xo)
    cn, cf, cy, cx, rc, ry, rx = st.leaf
    st.reorder(rc, ry, rx, cn, cy, cf, cx)
    st.unroll(cf)
    cxo, cxi = st.split(cx, factor=lanes)
    st.unroll(cxo)
    st.vectorize(cxi)
    sw = s[parts["Wp"]]
    sw.parallel(sw.leaf[0])
    if parts["pad"] is not None:
        sp = s[parts["pad"]]
        sp.parallel(sp.fuse(sp.leaf[0], sp.leaf[1]))
        xo2, xi2 = sp.split(sp.leaf[-1], factor=lanes)
        sp.vectorize(xi2)
    return s


def conv2d_nchw(data_shape, weight_shape, stride=(1, 1), padding=(0, 0, 0, 0), dilation=(1, 1),
                dtype: str = "float32", target=None):
    """NCHW conv2d with the default schedule; returns (schedule, [data, weight, out])."""
    target = host(target)
    data = te.placeholder(tuple(data_shape), dtype, "data")
    weight = te.placeholder(tuple(weight_shape), dtype, "weight")
    lanes = vector_lanes(target, dtype)
    regs = 32 if lanes * 32 >= 512 else 16
    ow = (data_shape[3] + padding[1] + padding[3] - dilation[1] * (weight_shape[3] - 1) - 1) // stride[1] + 1
    fb, xb = register_block(weight_shape[0], ow, lanes, regs - 4)
    out, parts = conv2d_compute(data, weight, stride, padding, dilation, fb)
    s = Schedule(out)
    schedule_conv2d_nchw(s, out, parts, fb, xb, target)
    return s, [data, weight, out]
