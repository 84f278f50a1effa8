"""Converters of ATen view and layout ops: view/reshape, permute, expand, squeeze/unsqueeze,
cat, split, slice/select/narrow/unfold, pads, flip, repeat, and the functional forms of in-place
writes into a slice (slice_scatter, select_scatter). Sizes may be symbolic dims."""
from __future__ import annotations

from ...errors import ShapeError, UnsupportedOpError
from ...graph import Dim, TupleGetItem
from ...graph.ops import dims as D
from ...graph.ops.registry import norm_axis
from .context import dim_index
from .table import converter

_BIG = 1 << 62  # a slice end past any size (torch writes 9223372036854775807)


def _sizes(node, key) -> tuple:
    return tuple(d if isinstance(d, Dim) else int(d) for d in node.arg(key))


@converter("aten.view.default", "aten._unsafe_view.default", "aten.reshape.default", "aten.view_copy.default")
def _view(node):
    x, shape = node.tensor(0), _sizes(node, 1)
    if tuple(shape) == tuple(x.type.shape):
        return x
    return node.call("reshape", x, newshape=shape, allowzero=0 in shape)


@converter("aten.flatten.using_ints")
def _flatten(node):
    x = node.tensor(0)
    nd = max(x.type.ndim, 1)
    a, b = norm_axis(node.arg("start_dim", 0), nd), norm_axis(node.arg("end_dim", -1), nd)
    s = x.type.shape
    return node.call("reshape", x, newshape=tuple(s[:a]) + (D.prod(s[a:b + 1]),) + tuple(s[b + 1:]))


@converter("aten.permute.default")
def _permute(node):
    x = node.tensor(0)
    axes = tuple(norm_axis(a, x.type.ndim) for a in node.ints(1))
    return x if axes == tuple(range(x.type.ndim)) else node.call("transpose", x, axes=axes)


@converter("aten.transpose.int")
def _transpose(node):
    x = node.tensor(0)
    nd = x.type.ndim
    a, b = norm_axis(node.arg(1), nd), norm_axis(node.arg(2), nd)
    axes = list(range(nd))
    axes[a], axes[b] = axes[b], axes[a]
    return x if a == b else node.call("transpose", x, axes=tuple(axes))


@converter("aten.t.default")
def _t(node):
    x = node.tensor(0)
    return x if x.type.ndim < 2 else node.call("transpose", x, axes=(1, 0))


@converter("aten.expand.default", "aten.expand_copy.default")
def _expand(node):
    x, sizes = node.tensor(0), _sizes(node, 1)
    lead = len(sizes) - x.type.ndim
    shape = tuple(x.type.shape[i - lead] if (isinstance(d, int) and d == -1) else d for i, d in enumerate(sizes))
    return x if shape == tuple(x.type.shape) else node.call("expand", x, shape=shape)


@converter("aten.squeeze.dim", "aten.squeeze.dims", "aten.squeeze.default")
def _squeeze(node):
    x = node.tensor(0)
    dims = node.arg(1, None)
    nd = x.type.ndim
    if dims is None:
        axes = tuple(range(nd))
    else:
        axes = tuple(norm_axis(a, max(nd, 1)) for a in (dims if isinstance(dims, (list, tuple)) else (dims,)))
    # torch squeezes only the named axes that have size 1
    axes = tuple(a for a in axes if a < nd and x.type.shape[a] == 1)
    return node.call("squeeze", x, axis=axes) if axes else x


@converter("aten.unsqueeze.default")
def _unsqueeze(node):
    x = node.tensor(0)
    return node.call("unsqueeze", x, axes=(norm_axis(node.arg(1), x.type.ndim + 1),))


@converter("aten.cat.default", "aten.concat.default")
def _cat(node):
    dtype = node.out_dtype()
    parts = [node.as_tensor(t, dtype) for t in node.arg(0)]
    # torch's legacy rule: a 1-D empty tensor joins anything
    parts = [t for t in parts if not (t.type.ndim == 1 and t.type.shape[0] == 0)] or parts[:1]
    if len(parts) == 1:
        return parts[0]
    return node.call("concat", *parts, axis=norm_axis(node.arg("dim", 0), parts[0].type.ndim))


@converter("aten.stack.default")
def _stack(node):
    dtype = node.out_dtype()
    parts = [node.as_tensor(t, dtype) for t in node.arg(0)]
    axis = norm_axis(node.arg("dim", 0), parts[0].type.ndim + 1)
    parts = [node.call("unsqueeze", t, axes=(axis,)) for t in parts]
    return parts[0] if len(parts) == 1 else node.call("concat", *parts, axis=axis)


def _split_call(node, x, axis, sizes):
    call = node.call("split", x, axis=axis, sizes=tuple(sizes))
    return tuple(TupleGetItem(call, i) for i in range(len(sizes)))


@converter("aten.split_with_sizes.default", "aten.split_with_sizes_copy.default")
def _split_with_sizes(node):
    x = node.tensor(0)
    return _split_call(node, x, norm_axis(node.arg("dim", 0), x.type.ndim), _sizes(node, 1))


@converter("aten.split.Tensor", "aten.split_copy.Tensor")
def _split(node):
    x = node.tensor(0)
    axis = norm_axis(node.arg("dim", 0), x.type.ndim)
    size, total = node.arg(1), x.type.shape[axis]
    if not isinstance(size, int) or not isinstance(total, int):
        count = len(node.val())  # (torch knows how many parts it made)
        if count == 1:
            return (x,)
        sizes = [size] * (count - 1)
        sizes.append(D.dim_sub(total, D.dim_mul(size, count - 1)))
        return _split_call(node, x, axis, sizes)
    sizes = [size] * (total // size) + ([total % size] if total % size else [])
    return _split_call(node, x, axis, sizes or [0])


@converter("aten.unbind.int")
def _unbind(node):
    x = node.tensor(0)
    axis = norm_axis(node.arg("dim", 0), x.type.ndim)
    n = x.type.shape[axis]
    if not isinstance(n, int):
        raise UnsupportedOpError(f"unbind along a symbolic axis ({x.type})")
    parts = _split_call(node, x, axis, [1] * n)
    return tuple(node.call("squeeze", p, axis=(axis,)) for p in parts)


def _slice(node, x, axis, start, end, step):
    size = x.type.shape[axis]
    start = 0 if start is None else start
    end = size if end is None or (isinstance(end, int) and end >= _BIG) else end
    if isinstance(start, int) and start == 0 and (end is size or end == size) and step == 1:
        return x
    return node.call("strided_slice", x, begin=(start,), end=(end,), axes=(axis,), strides=(int(step),))


@converter("aten.slice.Tensor", "aten.slice_copy.Tensor")
def _slice_tensor(node):
    x = node.tensor(0)
    axis = norm_axis(node.arg("dim", 0), x.type.ndim)
    return _slice(node, x, axis, node.arg("start", None), node.arg("end", None), node.arg("step", 1))


@converter("aten.unfold.default")
def _unfold(node):
    """``x.unfold(dim, size, step)``: the windows along ``dim`` as a new last axis -- one strided
    slice per tap of the window (windows are short: patches of a series, of an image)."""
    x = node.tensor(0)
    axis = norm_axis(node.arg("dimension"), x.type.ndim)
    size, step = int(node.arg("size")), int(node.arg("step"))
    count = D.dim_add(D.dim_floordiv(D.dim_sub(x.type.shape[axis], size), step), 1)
    span = D.dim_add(D.dim_mul(D.dim_sub(count, 1), step), 1)
    taps = [node.call("unsqueeze", _slice(node, x, axis, k, D.dim_add(span, k), step), axes=(x.type.ndim,))
            for k in range(size)]
    return taps[0] if size == 1 else node.call("concat", *taps, axis=x.type.ndim)


@converter("aten.narrow.default")
def _narrow(node):
    x = node.tensor(0)
    axis = norm_axis(node.arg("dim"), x.type.ndim)
    start = dim_index(node.arg("start"), x.type.shape[axis])
    return _slice(node, x, axis, start, D.dim_add(start, node.arg("length")), 1)


@converter("aten.select.int", "aten.select_copy.int")
def _select(node):
    x = node.tensor(0)
    axis = norm_axis(node.arg("dim"), x.type.ndim)
    index = node.arg("index")
    if isinstance(index, Dim):
        index = node.as_tensor(index, "int64")
    else:
        index = node.scalar(int(index), "int64")  # (a negative index counts from the end)
    return node.call("gather", x, index, axis=axis)


# -- pads -----------------------------------------------------------------------------------------

def _pad_width(x, pad) -> tuple:
    """torch's pads (last axis first, begin then end) as Ember's (all begins, then all ends)."""
    nd = x.type.ndim
    if len(pad) % 2 or len(pad) // 2 > nd:
        raise ShapeError(f"pad {tuple(pad)} must have an even count of values, two per axis at most {nd} axes")
    begins, ends = [0] * nd, [0] * nd
    for i in range(len(pad) // 2):
        begins[nd - 1 - i], ends[nd - 1 - i] = pad[2 * i], pad[2 * i + 1]
    return tuple(begins + ends)


@converter("aten.constant_pad_nd.default")
def _constant_pad(node):
    x = node.tensor(0)
    value = node.arg("value", 0)
    return node.call("pad", x, pad_width=_pad_width(x, _sizes(node, 1)), mode="constant",
                     pad_value=bool(value) if x.type.dtype == "bool" else float(value))


def _mode_pad(mode):
    return lambda node: node.call("pad", node.tensor(0), pad_width=_pad_width(node.tensor(0), _sizes(node, 1)),
                                  mode=mode)


for _n in (1, 2, 3):
    converter(f"aten.reflection_pad{_n}d.default")(_mode_pad("reflect"))
    converter(f"aten.replication_pad{_n}d.default")(_mode_pad("edge"))


# -- flip, repeat, roll ---------------------------------------------------------------------------

@converter("aten.flip.default")
def _flip(node):
    x = node.tensor(0)
    axes = tuple(sorted({norm_axis(a, x.type.ndim) for a in node.ints(1)}))
    if not axes:
        return x
    return node.call("strided_slice", x, begin=(-1,) * len(axes), end=(-_BIG,) * len(axes), axes=axes,
                     strides=(-1,) * len(axes))


@converter("aten.repeat.default")
def _repeat(node):
    x, reps = node.tensor(0), _sizes(node, 1)
    if len(reps) > x.type.ndim:
        x = node.call("reshape", x, newshape=(1,) * (len(reps) - x.type.ndim) + tuple(x.type.shape))
    return node.call("tile", x, reps=reps)


@converter("aten.roll.default")
def _roll(node):
    x = node.tensor(0)
    shifts, dims = node.ints(1), node.ints("dims", ())
    if not dims:  # over the flattened tensor
        flat = node.call("reshape", x, newshape=(-1,))
        return node.call("reshape", _roll_axis(node, flat, 0, shifts[0]), newshape=x.type.shape)
    for s, a in zip(shifts, dims):
        x = _roll_axis(node, x, norm_axis(a, x.type.ndim), s)
    return x


def _roll_axis(node, x, axis, shift):
    n = x.type.shape[axis]
    if not isinstance(n, int):
        raise UnsupportedOpError(f"roll along a symbolic axis ({x.type})")
    shift %= max(n, 1)
    if not shift:
        return x
    tail = node.call("strided_slice", x, begin=(n - shift,), end=(n,), axes=(axis,))
    head = node.call("strided_slice", x, begin=(0,), end=(n - shift,), axes=(axis,))
    return node.call("concat", tail, head, axis=axis)


@converter("aten.as_strided.default", "aten.as_strided_copy.default")
def _as_strided(node):
    """Only the strides of a contiguous tensor of the new sizes (a reshape): a general strided
    view reads memory a value-semantics graph does not have."""
    x = node.tensor(0)
    sizes, strides = _sizes(node, 1), _sizes(node, 2)
    offset = node.arg("storage_offset", None) or 0
    src = node.fx.args[0].meta.get("val")
    contiguous_src = src is None or src.is_contiguous()
    expect, acc = [], 1
    for s in reversed(sizes):
        expect.append(acc)
        acc = D.dim_mul(acc, s)
    expect.reverse()
    same = all(s == 1 or st == e for s, st, e in zip(sizes, strides, expect))
    numel_ok = D.prod(x.type.shape) == acc
    if not (offset == 0 and same and numel_ok and contiguous_src):
        raise UnsupportedOpError(f"as_strided with sizes {sizes}, strides {strides} and offset {offset} is not "
                                 "a reshape of a contiguous tensor; only such views are supported")
    return node.call("reshape", x, newshape=sizes)


# -- writes into a slice, as values -------------------------------------------------------------------

@converter("aten.slice_scatter.default")
def _slice_scatter(node):
    x = node.tensor(0)
    src = node.as_tensor(node.arg(1), x.type.dtype)
    axis = norm_axis(node.arg("dim", 0), x.type.ndim)
    size = x.type.shape[axis]
    start, end, step = node.arg("start", None), node.arg("end", None), node.arg("step", 1)
    start = 0 if start is None else dim_index(start, size)
    end = size if end is None or (isinstance(end, int) and end >= _BIG) else dim_index(end, size)
    if step != 1:
        return _scatter_strided(node, x, src, axis, start, step)
    parts = []
    if not (isinstance(start, int) and start == 0):
        parts.append(node.call("strided_slice", x, begin=(0,), end=(start,), axes=(axis,)))
    parts.append(src)
    if not (end is size or end == size):
        parts.append(node.call("strided_slice", x, begin=(end,), end=(size,), axes=(axis,)))
    return parts[0] if len(parts) == 1 else node.call("concat", *parts, axis=axis)


def _scatter_strided(node, x, src, axis, start, step):
    """``x`` with ``src`` written at start, start + step, ... along ``axis``."""
    n = src.type.shape[axis]
    idx = node.call("range", start=start, stop=D.dim_add(start, D.dim_mul(n, step)), step=step, dtype="int64")
    shape = [1] * src.type.ndim
    shape[axis] = n
    idx = node.call("expand", node.call("reshape", idx, newshape=tuple(shape)), shape=src.type.shape)
    return node.call("scatter_elements", x, idx, src, axis=axis)


@converter("aten.select_scatter.default")
def _select_scatter(node):
    x = node.tensor(0)
    axis = norm_axis(node.arg("dim"), x.type.ndim)
    src = node.call("unsqueeze", node.as_tensor(node.arg(1), x.type.dtype), axes=(axis,))
    size = x.type.shape[axis]
    i = dim_index(node.arg("index"), size)
    parts = []
    if not (isinstance(i, int) and i == 0):
        parts.append(node.call("strided_slice", x, begin=(0,), end=(i,), axes=(axis,)))
    parts.append(src)
    after = D.dim_add(i, 1)
    if not (after is size or after == size):
        parts.append(node.call("strided_slice", x, begin=(after,), end=(size,), axes=(axis,)))
    return parts[0] if len(parts) == 1 else node.call("concat", *parts, axis=axis)


@converter("aten.tril.default", "aten.triu.default")
def _trilu(node):
    return node.call("trilu", node.tensor(0), upper=node.target == "aten.triu.default",
                     k=int(node.arg("diagonal", 0)))


@converter("aten.pixel_shuffle.default")
def _pixel_shuffle(node):
    return node.call("depth_to_space", node.tensor(0), block_size=int(node.arg(1)), mode="CRD")


@converter("aten.pixel_unshuffle.default")
def _pixel_unshuffle(node):
    x = node.tensor(0)
    r = int(node.arg(1))
    n, c, h, w = x.type.shape
    y = node.call("reshape", x, newshape=(n, c, D.dim_floordiv(h, r), r, D.dim_floordiv(w, r), r))
    y = node.call("transpose", y, axes=(0, 1, 3, 5, 2, 4))
    return node.call("reshape", y, newshape=(n, D.dim_mul(c, r * r), D.dim_floordiv(h, r), D.dim_floordiv(w, r)))


@converter("aten.diagonal.default", "aten.diagonal_copy.default")
def _diagonal(node):
    """The diagonal (``offset`` above the main one) of axes ``dim1``, ``dim2``, as the last axis:
    the two axes moved last and flattened, then every ``(n2 + 1)``-th element from the start."""
    x = node.tensor(0)
    nd = x.type.ndim
    offset = int(node.arg("offset", 0))
    a, b = norm_axis(node.arg("dim1", 0), nd), norm_axis(node.arg("dim2", 1), nd)
    n1, n2 = x.type.shape[a], x.type.shape[b]
    if not (isinstance(n1, int) and isinstance(n2, int)):
        raise UnsupportedOpError(f"the diagonal of symbolic axes ({x.type})")
    rest = [k for k in range(nd) if k not in (a, b)]
    y = node.call("transpose", x, axes=tuple(rest) + (a, b)) if (a, b) != (nd - 2, nd - 1) else x
    y = node.call("reshape", y, newshape=tuple(x.type.shape[k] for k in rest) + (n1 * n2,))
    start = offset if offset >= 0 else -offset * n2
    count = max(0, min(n1, n2 - offset) if offset >= 0 else min(n1 + offset, n2))
    return node.call("strided_slice", y, begin=(start,), end=(start + count * (n2 + 1) - n2 if count else start,),
                     axes=(y.type.ndim - 1,), strides=(n2 + 1,))
