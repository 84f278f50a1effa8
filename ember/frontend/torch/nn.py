"""Converters of ATen neural-network ops: convolution, matrix products (addmm, mm, bmm, matmul,
linear), the normalizations, softmax, grid sampling, pooling and upsampling."""
from __future__ import annotations

from ...errors import ShapeError, UnsupportedOpError
from ...graph import Call
from ...graph.ops import dims as D
from .context import Missing
from .table import converter


def _spatial(n: int) -> str:
    if n not in (1, 2, 3):
        raise UnsupportedOpError(f"{n} spatial dimensions are not supported (1 to 3 are)")
    return f"{n}d"


def _per_axis(v, n: int, what: str) -> tuple:
    """A window argument with one value per spatial axis (torch also takes one for all)."""
    v = tuple(int(x) for x in (v if isinstance(v, (list, tuple)) else (v,)))
    if len(v) == 1 and n > 1:
        v = v * n
    if len(v) != n:
        raise ShapeError(f"{what} {v} must have {n} values")
    return v


# -- convolution ----------------------------------------------------------------------------------

@converter("aten.convolution.default", "aten._convolution.default")
def _convolution(node):
    x, w = node.tensor("input"), node.tensor("weight")
    n = w.type.ndim - 2
    strides = _per_axis(node.arg("stride"), n, "stride")
    pads = _per_axis(node.arg("padding"), n, "padding")
    dilation = _per_axis(node.arg("dilation"), n, "dilation")
    groups = int(node.arg("groups"))
    if x.type.ndim == n + 1:  # an unbatched input
        raise UnsupportedOpError("convolution of an unbatched input: give it a batch axis")
    common = dict(strides=strides, padding=pads + pads, dilation=dilation, groups=groups)
    if node.arg("transposed"):
        out_pad = _per_axis(node.arg("output_padding"), n, "output_padding")
        out = node.call(f"nn.conv{_spatial(n)}_transpose", x, w, output_padding=out_pad, **common)
    else:
        out = node.call(f"nn.conv{_spatial(n)}", x, w, **common)
    b = node.arg("bias", None)
    if b is not None:
        out = node.call("nn.bias_add", out, b, axis=1)
    return out


# -- matrix products ------------------------------------------------------------------------------

def _transposed(b):
    """``W`` when ``b`` is ``transpose(W)`` of a 2-D ``W`` (a Linear layer's weight as torch
    hands it to addmm), else None: the product is then ``dense(a, W)``, no transpose made."""
    if isinstance(b, Call) and b.op == "transpose" and b.type.ndim == 2 and \
            tuple(b.attrs.get("axes") or (1, 0)) == (1, 0):
        return b.args[0]
    return None


def _product(node, a, b):
    w = _transposed(b)
    return node.call("nn.dense", a, w) if w is not None else node.call("nn.matmul", a, b)


@converter("aten.addmm.default")
def _addmm(node):
    bias, a, b = node.tensor("self"), node.tensor("mat1"), node.tensor("mat2")
    out = _product(node, a, b)
    dtype = out.type.dtype
    alpha, beta = node.arg("alpha", 1), node.arg("beta", 1)
    if alpha != 1:
        out = node.call("multiply", out, node.scalar(alpha, dtype))
    if beta != 0:
        if beta != 1:
            bias = node.call("multiply", bias, node.scalar(beta, dtype))
        out = node.call("add", out, bias)
    return out


@converter("aten.mm.default")
def _mm(node):
    return _product(node, node.tensor(0), node.tensor(1))


def _by_matrix(node, a, w):
    """``a`` (..., M, K) @ ``w`` (K, N) as one (rows, K) @ (K, N) product, not a batch of small
    ones (and a dense product by the weight when ``w`` is a transposed Linear weight)."""
    lead, k = tuple(a.type.shape[:-1]), a.type.shape[-1]
    y = _product(node, node.call("reshape", a, newshape=(D.prod(lead), k)), w)
    return node.call("reshape", y, newshape=lead + (w.type.shape[-1],))


def _one_matrix(b):
    """``W`` (2-D) when ``b`` is ``expand(W)`` over batch axes: torch's matmul of a 3-D input
    whose rows it cannot flatten (a transposed activation with a symbolic batch) multiplies by
    the weight copied per batch; the copy would be a constant the size of the batch."""
    if isinstance(b, Call) and b.op == "expand":
        w = b.args[0]
        shape = tuple(w.type.shape)
        if len(shape) >= 2 and all(d == 1 for d in shape[:-2]) and tuple(shape[-2:]) == tuple(b.type.shape[-2:]):
            return w if len(shape) == 2 else _matrix(w)
    return None


def _matrix(w):
    """``w`` of shape (1, ..., 1, K, N) as (K, N)."""
    from ...graph.ops import call

    return call("reshape", w, newshape=tuple(w.type.shape[-2:]))


@converter("aten.bmm.default")
def _bmm(node):
    a, b = node.tensor(0), node.tensor(1)
    w = _one_matrix(b)
    return _by_matrix(node, a, w) if w is not None else node.call("nn.matmul", a, b)


@converter("aten.matmul.default")
def _matmul(node):
    a, b = node.tensor(0), node.tensor(1)
    if b.type.ndim == 2 and a.type.ndim > 2:
        return _by_matrix(node, a, b)
    return node.call("nn.matmul", a, b)


@converter("aten.linear.default")
def _linear(node):
    x, w, b = node.tensor(0), node.tensor(1), node.arg(2, None)
    lead = tuple(x.type.shape[:-1])
    flat = x if x.type.ndim == 2 else node.call("reshape", x, newshape=(D.prod(lead), x.type.shape[-1]))
    y = node.call("nn.dense", flat, w)
    if b is not None:
        y = node.call("add", y, b)
    return y if x.type.ndim == 2 else node.call("reshape", y, newshape=lead + (w.type.shape[0],))


# -- normalization --------------------------------------------------------------------------------

def _filled(node, v, shape, value: float, dtype: str):
    """``v``, or a constant of ``value`` in ``shape`` where the module has no affine weight."""
    if v is not None:
        return v
    return node.call("constant_of_shape", shape=tuple(shape), value=value, dtype=dtype)


@converter("aten._native_batch_norm_legit_no_training.default")
def _batch_norm(node):
    x = node.tensor("input")
    mean, var = node.tensor("running_mean"), node.tensor("running_var")
    c = mean.type.shape
    w = _filled(node, node.arg("weight", None), c, 1.0, x.type.dtype)
    b = _filled(node, node.arg("bias", None), c, 0.0, x.type.dtype)
    out = node.call("nn.batch_norm", x, w, b, mean, var, axis=1, epsilon=float(node.arg("eps")))
    return out, Missing("the saved mean (training only)"), Missing("the saved inverse std (training only)")


@converter("aten._native_batch_norm_legit.no_stats")
def _batch_statistics_norm(node):
    """Normalization by the input's own statistics over every axis but the channels (instance
    norm, or a batch norm without running statistics): nothing is updated, so inference too."""
    x = node.tensor("input")
    eps = float(node.arg("eps"))
    axes = tuple(a for a in range(x.type.ndim) if a != 1)
    mean, rstd = _statistics(node, x, axes, eps)
    y = node.call("multiply", node.call("subtract", x, mean), rstd)
    per_channel = (x.type.shape[1],) + (1,) * (x.type.ndim - 2)
    w, b = node.arg("weight", None), node.arg("bias", None)
    if w is not None:
        y = node.call("multiply", y, node.call("reshape", w, newshape=per_channel))
    if b is not None:
        y = node.call("add", y, node.call("reshape", b, newshape=per_channel))
    flat = (x.type.shape[1],)
    return y, node.call("reshape", mean, newshape=flat), node.call("reshape", rstd, newshape=flat)


def _statistics(node, x, axes, eps):
    """(mean, 1/sqrt(var + eps)) over ``axes``, kept as size 1 (what torch's norms return)."""
    mean = node.call("mean", x, axis=axes, keepdims=True)
    c = node.call("subtract", x, mean)
    var = node.call("mean", node.call("multiply", c, c), axis=axes, keepdims=True)
    return mean, node.call("rsqrt", node.call("add", var, node.scalar(eps, x.type.dtype)))


@converter("aten.native_layer_norm.default")
def _layer_norm(node):
    x = node.tensor("input")
    shape = node.dims("normalized_shape")
    eps = float(node.arg("eps"))
    w = _filled(node, node.arg("weight", None), shape, 1.0, x.type.dtype)
    b = node.arg("bias", None)
    axis = -len(shape)
    out = node.call("nn.layer_norm", *([x, w] + ([b] if b is not None else [])), axis=axis, epsilon=eps)
    if any(u.args[1] != 0 for u in node.fx.users if len(u.args) > 1):  # the statistics are used
        mean, rstd = _statistics(node, x, tuple(range(x.type.ndim + axis, x.type.ndim)), eps)
        return out, mean, rstd
    return out, Missing("the mean"), Missing("the inverse std")


@converter("aten.layer_norm.default")
def _layer_norm_plain(node):
    x = node.tensor(0)
    shape = node.dims(1)
    w = _filled(node, node.arg("weight", None), shape, 1.0, x.type.dtype)
    b = node.arg("bias", None)
    return node.call("nn.layer_norm", *([x, w] + ([b] if b is not None else [])), axis=-len(shape),
                     epsilon=float(node.arg("eps", 1e-5)))


@converter("aten.native_group_norm.default")
def _group_norm(node):
    x = node.tensor("input")
    groups, eps = int(node.arg("group")), float(node.arg("eps"))
    shape = x.type.shape
    grouped = node.call("reshape", x, newshape=(shape[0], groups, -1))
    mean, rstd = _statistics(node, grouped, (2,), eps)
    normed = node.call("multiply", node.call("subtract", grouped, mean), rstd)
    y = node.call("reshape", normed, newshape=shape)
    trailing = (1,) * (len(shape) - 2)  # per channel: broadcast over the spatial axes
    w, b = node.arg("weight", None), node.arg("bias", None)
    if w is not None:
        y = node.call("multiply", y, node.call("reshape", w, newshape=(shape[1],) + trailing))
    if b is not None:
        y = node.call("add", y, node.call("reshape", b, newshape=(shape[1],) + trailing))
    return (y, node.call("reshape", mean, newshape=(shape[0], groups)),
            node.call("reshape", rstd, newshape=(shape[0], groups)))


@converter("aten._softmax.default", "aten.softmax.int")
def _softmax(node):
    return node.as_tensor(node.call("nn.softmax", node.tensor(0), axis=int(node.arg("dim"))), node.out_dtype())


@converter("aten._log_softmax.default", "aten.log_softmax.int")
def _log_softmax(node):
    return node.as_tensor(node.call("nn.log_softmax", node.tensor(0), axis=int(node.arg("dim"))), node.out_dtype())


# -- sampling -------------------------------------------------------------------------------------

_SAMPLING_MODES = ("linear", "nearest", "cubic")  # torch's interpolation_mode 0, 1, 2
_PADDING_MODES = ("zeros", "border", "reflection")


@converter("aten.grid_sampler_2d.default", "aten.grid_sampler_3d.default")
def _grid_sampler(node):
    from ..sampling import grid_sample

    mode, padding = int(node.arg("interpolation_mode")), int(node.arg("padding_mode"))
    if mode >= len(_SAMPLING_MODES) or padding >= len(_PADDING_MODES):
        raise UnsupportedOpError(f"grid_sample with interpolation_mode {mode}, padding_mode {padding}")
    return grid_sample(node.call, node.tensor("input"), node.tensor("grid"), _SAMPLING_MODES[mode],
                       _PADDING_MODES[padding], bool(node.arg("align_corners")))


# -- pooling --------------------------------------------------------------------------------------

def _window(node, n: int) -> dict:
    kernel = _per_axis(node.arg("kernel_size"), n, "kernel_size")
    stride = node.arg("stride", None)
    strides = _per_axis(stride, n, "stride") if stride else kernel  # (torch: empty means the kernel)
    pads = _per_axis(node.arg("padding", 0), n, "padding")
    return {"pool_size": kernel, "strides": strides, "padding": pads + pads,
            "ceil_mode": bool(node.arg("ceil_mode", False))}


def _max_pool(n: int):
    def convert(node):
        attrs = _window(node, n)
        attrs["dilation"] = _per_axis(node.arg("dilation", 1), n, "dilation")
        out = node.call(f"nn.max_pool{n}d", node.tensor(0), **attrs)
        return out if "with_indices" not in node.target else (out, Missing("the indices of the maxima"))
    return convert


converter("aten.max_pool2d_with_indices.default")(_max_pool(2))
converter("aten.max_pool3d_with_indices.default")(_max_pool(3))
converter("aten.max_pool1d.default")(_max_pool(1))
converter("aten.max_pool2d.default")(_max_pool(2))


def _check_avg_pool(fx_node):
    args = list(fx_node.args) + [None] * 7
    override = fx_node.kwargs.get("divisor_override", args[6])
    return f"divisor_override={override} is not supported" if override is not None else None


def _avg_pool(n: int):
    def convert(node):
        attrs = _window(node, n)
        attrs["count_include_pad"] = bool(node.arg("count_include_pad", True))
        return node.call(f"nn.avg_pool{n}d", node.tensor(0), **attrs)
    return convert


converter("aten.avg_pool1d.default", check=_check_avg_pool)(_avg_pool(1))
converter("aten.avg_pool2d.default", check=_check_avg_pool)(_avg_pool(2))
converter("aten.avg_pool3d.default", check=_check_avg_pool)(_avg_pool(3))


def _adaptive(kind: str, n: int):
    def convert(node):
        x = node.tensor(0)
        out = _per_axis(node.arg("output_size"), n, "output_size")
        sizes = x.type.shape[-n:]
        if all(o == 1 for o in out):
            axes = tuple(range(x.type.ndim - n, x.type.ndim))
            return node.call("mean" if kind == "avg" else "max", x, axis=axes, keepdims=True)
        if not all(isinstance(s, int) for s in sizes):
            raise UnsupportedOpError(f"adaptive pooling of {x.type} to {out} needs static input sizes")
        if any(s % o for s, o in zip(sizes, out)):
            return _adaptive_bins(node, x, kind, out)
        k = tuple(s // o for s, o in zip(sizes, out))
        extra = {"count_include_pad": False} if kind == "avg" else {}
        return node.call(f"nn.{kind}_pool{n}d", x, pool_size=k, strides=k, padding=(0,) * (2 * n), **extra)
    return convert


def _adaptive_bins(node, x, kind: str, out: tuple):
    """Adaptive pooling whose bins differ in size (UperNet's 2x2 of a 7x7 map): bin ``i`` of ``o``
    over ``s`` covers ``[floor(i s / o), ceil((i + 1) s / o))``. A mean or maximum over a box is
    one over each axis in turn (every bin of an axis spans the same other axes), so each axis is
    reduced bin by bin and the bins concatenated."""
    reduce = "mean" if kind == "avg" else "max"
    n = len(out)
    for k, o in enumerate(out):
        axis = x.type.ndim - n + k
        size = x.type.shape[axis]
        if o == size:
            continue
        bins = [node.call(reduce, node.call("strided_slice", x, begin=(i * size // o,), end=(-(-(i + 1) * size // o),),
                                            axes=(axis,)), axis=(axis,), keepdims=True) for i in range(o)]
        x = bins[0] if o == 1 else node.call("concat", *bins, axis=axis)
    return x


converter("aten.adaptive_avg_pool1d.default")(_adaptive("avg", 1))
for _n in (2, 3):
    converter(f"aten._adaptive_avg_pool{_n}d.default", f"aten.adaptive_avg_pool{_n}d.default")(_adaptive("avg", _n))
converter("aten.adaptive_max_pool2d.default")(lambda node: (_adaptive("max", 2)(node),
                                                            Missing("the indices of the maxima")))


# -- upsampling -----------------------------------------------------------------------------------

def _upsample(method: str, n: int):
    def convert(node):
        x = node.tensor(0)
        size = node.arg("output_size", None)
        scales = node.arg("scale_factors", None)
        if scales is None and not size:  # (the .default overloads: one scale argument per axis)
            keys = {1: ("scales",), 2: ("scales_h", "scales_w"), 3: ("scales_d", "scales_h", "scales_w")}[n]
            got = [node.arg(k, None) for k in keys]
            scales = got if all(g is not None for g in got) else None
        attrs = {"method": "linear" if method != "nearest" else "nearest"}
        if method == "nearest":
            attrs.update(coordinate_transformation_mode="asymmetric", nearest_mode="floor")
        else:
            align = bool(node.arg("align_corners", False))
            attrs["coordinate_transformation_mode"] = "align_corners" if align else "half_pixel"
        lead = tuple(x.type.shape[:-n])
        if size:
            sizes = tuple(d for d in node.dims("output_size"))
            return node.call("resize", x, sizes=lead + sizes, **attrs)
        if scales is None:
            raise ShapeError("upsampling needs output_size or scale_factors")
        return node.call("resize", x, scales=(1.0,) * len(lead) + tuple(float(s) for s in scales), **attrs)
    return convert


for _n, _name in ((1, "linear1d"), (2, "bilinear2d"), (3, "trilinear3d")):
    converter(f"aten.upsample_{_name}.vec", f"aten.upsample_{_name}.default")(_upsample("linear", _n))
for _n in (1, 2, 3):
    converter(f"aten.upsample_nearest{_n}d.vec", f"aten.upsample_nearest{_n}d.default")(_upsample("nearest", _n))


# -- distances ------------------------------------------------------------------------------------

def _norm(node, diff, p: float, axis: int):
    """The p-norm of ``diff`` along ``axis`` (p = 0 counts the nonzeros, p = inf the largest)."""
    d = diff.type.dtype
    a = node.call("abs", diff)
    if p == 1:
        return node.call("sum", a, axis=(axis,))
    if p == 2:
        return node.call("sqrt", node.call("sum", node.call("multiply", diff, diff), axis=(axis,)))
    if p == float("inf"):
        return node.call("max", a, axis=(axis,))
    if p == 0:
        return node.call("sum", node.call("cast", node.call("not_equal", a, node.scalar(0, d)), dtype=d), axis=(axis,))
    total = node.call("sum", node.call("power", a, node.scalar(p, d)), axis=(axis,))
    return node.call("power", total, node.scalar(1.0 / p, d))


@converter("aten._cdist_forward.default")
def _cdist(node):
    """Distances between the rows of x1 (..., P, M) and x2 (..., R, M): (..., P, R)."""
    x1, x2 = node.tensor(0), node.tensor(1)
    a = node.call("unsqueeze", x1, axes=(x1.type.ndim - 1,))  # (..., P, 1, M)
    b = node.call("unsqueeze", x2, axes=(x2.type.ndim - 2,))  # (..., 1, R, M)
    return _norm(node, node.call("subtract", a, b), float(node.arg("p")), -1)


@converter("aten._pdist_forward.default")
def _pdist(node):
    """Distances between every pair i < j of the rows of x (N, M), in row-major pair order."""
    import numpy as np

    from ...graph import Constant

    x = node.tensor(0)
    n = x.type.shape[0]
    if not isinstance(n, int):
        raise UnsupportedOpError(f"pdist of a symbolic number of rows ({x.type})")
    i, j = np.triu_indices(n, 1)
    a = node.call("gather", x, Constant(i.astype(np.int64)), axis=0)
    b = node.call("gather", x, Constant(j.astype(np.int64)), axis=0)
    return _norm(node, node.call("subtract", a, b), float(node.arg("p")), -1)
