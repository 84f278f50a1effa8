"""Constant folding: every call whose operands are all constants becomes a Constant.

Three kinds of folding, cheapest first:

- *shape facts*: ``shape_of``/``size`` of any statically shaped value (its data is not needed),
  and any call whose static result is empty (a zero-length past, no detections);
- *structural* ops on constants: ``constant_of_shape``, ``reshape``, ``squeeze``,
  ``unsqueeze``, ``flatten`` only create or relabel data, so they fold without computing;
- everything else (the scale of a folded batch norm, a transposed weight, ...) is *evaluated
  by Ember itself*: the constant subgraphs' results are gathered into one list, which the
  pass context's evaluator computes (:func:`ember.compiler.fold.evaluate_constants`: one
  function with no inputs, compiled with folding disabled and run once). One build for the
  whole pass; numpy never computes a model value. A value that is only another's bytes
  relabelled (a reshape of it; a per-channel vector blocked into whole channel blocks) is
  a view of that one's result, not computed by a kernel of its own.

Every value is checked against the compile's memory limit (:mod:`ember.graph.limits`) before
it is made: a ``constant_of_shape`` of 2^50 elements is a ResourceError naming the node, not
an allocation that fails. Folded values become Constants without another copy.
"""
from __future__ import annotations

import math

import numpy as np

from ...loop import dtype as dt
from ..infer import infer_types
from ..ir import Call, Constant, Module, Tuple
from ..ops.registry import Pattern, get_op
from ..limits import allocating, describe, tensor_bytes
from ..types import TensorType
from ..visit import post_order, rewrite, use_counts
from .context import PassContext, graph_pass

_RELABEL = ("reshape", "squeeze", "unsqueeze", "flatten")
_ELEMENTWISE = (Pattern.ELEMWISE, Pattern.BROADCAST)


def _static(t) -> bool:
    return isinstance(t, TensorType) and t.is_static


def _structural(n: Call):
    """The Constant ``n`` folds to without computing, or None."""
    if n.op in ("shape_of", "size") and _static(n.args[0].type):
        shape = n.args[0].type.shape
        value = np.array(shape if n.op == "shape_of" else int(np.prod(shape, dtype=np.int64)))
        return Constant(value.astype(dt.numpy_dtype(n.type.dtype)))
    if not _static(n.type):
        return None
    if 0 in n.type.shape:  # an empty result is known without its inputs (a matmul over 0 columns)
        return Constant.adopt(np.empty(n.type.shape, dt.numpy_dtype(n.type.dtype)))
    if n.op == "constant_of_shape":
        with allocating(tensor_bytes(n.type.shape, n.type.dtype), f"folding the constant {describe(n)}"):
            return Constant.adopt(np.full(n.type.shape, n.attr("value"), dt.numpy_dtype(n.type.dtype)))
    if n.op in _RELABEL and isinstance(n.args[0], Constant):
        return Constant.adopt(n.args[0].value.reshape(n.type.shape))  # a view: no new bytes
    if n.op == "bitcast" and isinstance(n.args[0], Constant):
        return Constant.adopt(np.ascontiguousarray(n.args[0].value).view(dt.numpy_dtype(n.type.dtype)))
    return None


# A range over static bounds (``torch.arange(seq)`` of a static export: position ids, a causal
# mask's rows) is a constant too; up to this many elements it folds, with whatever it feeds (a
# position embedding's rows). A longer one stays a kernel: computed in place, not stored.
SMALL_RANGE = 1 << 16


def _is_constant_call(n, const: set) -> bool:
    if not (isinstance(n, Call) and _static(n.type)):
        return False
    if not n.args:
        return n.op == "range" and int(np.prod(n.type.shape, dtype=np.int64)) <= SMALL_RANGE
    return all(isinstance(a, Constant) or a in const for a in n.args)


def fold_expr(body, ctx: PassContext):
    """``body`` with every constant subexpression replaced by its value."""
    body = rewrite(body, lambda n: _structural(n) if isinstance(n, Call) else None)
    const: set = set()
    for n in post_order(body):
        if _is_constant_call(n, const):
            const.add(n)
    if not const:
        return body
    uses = use_counts(body)
    readers: dict = {}
    for n in post_order(body):
        for a in (n.args if isinstance(n, Call) else getattr(n, "fields", ())):
            readers.setdefault(a, []).append(n)
    # the values to compute: constant calls read by something that is not a constant call
    frontier = [n for n in post_order(body) if n in const and
                (n is body or any(r not in const for r in readers.get(n, ())) or uses[n] == 0)]
    # small elementwise values that larger constant computations read (a batch norm's scale,
    # which its conv's weights are multiplied by, 53 of them in ResNet-50) are computed first,
    # together (:func:`evaluate_batched`): each larger one then reads a constant, not a few
    # more ops of its own to compile
    small = _small_elementwise(body, const)
    in_small = set(small)
    first = [n for n in small if any(r in const and r not in in_small for r in readers.get(n, ()))]
    if len(first) > 1:
        done = dict(zip(first, evaluate_batched(first, ctx)))
        # the rest folds as the constant subgraphs alone (the frontier's values, a tuple), then
        # the body takes them in one rewrite: rewriting the whole body per round rebuilt every
        # node after the first conv each time (DenseNet-121: 9 rewrites of 3k nodes per fold)
        folded = fold_expr(rewrite(Tuple(frontier), lambda n: done.get(n)), ctx)
        mapping = dict(zip(frontier, folded.fields))
        return rewrite(body, lambda n: mapping.get(n))
    # a value that is another's bytes relabelled (a reshape, a per-channel vector in the blocked
    # layout: DenseNet-121's 426 blocked batch-norm scales and shifts) is a view of that one's
    # result: computed once, not copied by a kernel of its own
    inner = {n: _relabelled(n) for n in frontier}
    todo = [e for e in dict.fromkeys(inner.values()) if not isinstance(e, Constant)]
    values = dict(zip(todo, evaluate_batched(todo, ctx)) if todo else ())
    values.update((e, e) for e in inner.values() if isinstance(e, Constant))
    mapping = {n: Constant.adopt(values[inner[n]].value.reshape(n.type.shape)) if inner[n] is not n else values[n]
               for n in frontier}
    return rewrite(body, lambda n: mapping.get(n))


def _small_elementwise(body, const: set) -> list:
    """The constant calls of ``body`` that :func:`_batch_key` takes (elementwise over constants
    of their shape and scalars, small), in dataflow order: found bottom-up in one walk."""
    small: dict = {}
    for n in post_order(body):
        if n not in const or get_op(n.op).pattern not in _ELEMENTWISE or math.prod(n.type.shape) > BATCH_ELEMENTS:
            continue
        shape = n.type.shape
        if all(a in small and a.type.shape == shape if isinstance(a, Call) else
               isinstance(a, Constant) and _batchable(a, shape) for a in n.args):
            small[n] = True
    return list(small)


def _relabelled(n):
    """The expression whose bytes ``n``'s are, in the same order (``n`` itself if none)."""
    while isinstance(n, Call) and n.args and _static(n.args[0].type):
        x = n.args[0].type
        if n.op in _RELABEL or n.op == "block_channels" and _channels_only(x, n.attr("block")):
            n = n.args[0]
            continue
        break
    return n


def _channels_only(x: TensorType, block) -> bool:
    """Whether blocking ``x``'s channels by ``block`` only relabels its bytes: every other dim is
    1 and the channels fill whole blocks (``(1, C, 1, 1)`` -> ``(1, C/b, 1, 1, b)``)."""
    return (isinstance(block, int) and x.ndim >= 2 and x.shape[1] % block == 0
            and all(d == 1 for i, d in enumerate(x.shape) if i != 1))


# A small value's fold costs its compile's per-node work, not its arithmetic: a CNN's batch
# norms are each the same few elementwise ops over vectors of its channels (DenseNet-121: 121
# shifts of 5 ops, 62 scales of 3), and compiling them one by one took most of its fold (0.8 s
# of Python for 1207 ops). Values of one such shape of expression are computed together, over
# their leaves laid end to end; each takes its slice of the result. Up to this many elements
# each (large ones: their arithmetic is the cost, and laying them end to end a copy).
BATCH_ELEMENTS = 1 << 16


def _batch_key(e):
    """``(what e computes without its constants, its constants in order)`` where ``e`` is an
    elementwise expression over constants of its shape and scalars, else None. A scalar is a
    leaf like the others (laid end to end as a vector of its value, which the elementwise ops
    compute with as they would with the scalar): the requantized lookup tables of a quantized
    model differ only in their scales and zero points, so EfficientNet-B0's 65 are 3 batches
    (they were 65 expressions of 15-29 ops, each op a kernel call: 0.4 s of its fold)."""
    shape, leaves, at, parts = e.type.shape, {}, {}, []
    if math.prod(shape) > BATCH_ELEMENTS:
        return None
    for n in post_order(e):
        at[n] = len(parts)
        if isinstance(n, Constant):
            if not _batchable(n, shape):
                return None
            parts.append(("leaf", leaves.setdefault(n, len(leaves)), n.type.dtype))
        elif isinstance(n, Call) and get_op(n.op).pattern in _ELEMENTWISE and n.type.shape == shape:
            parts.append((n.op, n.attrs, n.type.dtype, tuple(at[a] for a in n.args)))
        else:
            return None
    return (tuple(parts), tuple(leaves)) if leaves else None  # (no leaf: nothing to lay end to end)


def _laid(c: Constant, shape) -> np.ndarray:
    """Leaf ``c`` of an expression of ``shape``, flat, a scalar repeated to that shape."""
    v = c.value
    return np.ravel(v) if v.shape == tuple(shape) else np.full(math.prod(shape), v.reshape(()), v.dtype)


def _batchable(c: Constant, shape) -> bool:
    """Whether an elementwise expression of ``shape`` batches its constant ``c``: one of its
    shape, or of one element (repeated to the shape, :func:`_laid`)."""
    return c.type.shape == shape or (c.value.size == 1 and c.type.ndim <= 1)


def evaluate_batched(exprs: list, ctx: PassContext) -> list:
    """:func:`evaluate` of ``exprs``, those of one shape of small elementwise expression
    (:func:`_batch_key`) computed together over their leaves laid end to end."""
    keyed: dict = {}
    alone: list = []
    for i, e in enumerate(exprs):
        k = _batch_key(e)
        if k is None:
            alone.append(i)
        else:
            keyed.setdefault(k[0], []).append((i, k[1]))
    run, parts = [exprs[i] for i in alone], [[(i, None)] for i in alone]
    for members in keyed.values():
        if len(members) == 1:
            run.append(exprs[members[0][0]])
            parts.append([(members[0][0], None)])
            continue
        # leaf j of the batch: leaf j of every member, flattened and laid end to end
        cut = np.cumsum([0] + [math.prod(exprs[i].type.shape) for i, _ in members])
        first = members[0][1]
        ends = {leaf: Constant.adopt(np.concatenate([_laid(m[j], exprs[i].type.shape) for i, m in members]))
                for j, leaf in enumerate(first)}
        batched = infer_types(rewrite(exprs[members[0][0]], lambda n: ends.get(n)))
        run.append(batched)
        parts.append([(i, (int(cut[k]), int(cut[k + 1]))) for k, (i, _) in enumerate(members)])
    out: list = [None] * len(exprs)
    for value, where in zip(evaluate(run, ctx), parts):
        for i, span in where:
            v = value if span is None else Constant.adopt(value.value[span[0]:span[1]].reshape(exprs[i].type.shape))
            out[i] = v
    return out


def evaluate(exprs: list, ctx: PassContext) -> list:
    """Compute the constant expressions ``exprs`` with the evaluator the context gives
    (``ctx.config["evaluate"]``: the compiler's, :func:`ember.compiler.fold.evaluate_constants`,
    which ``ember.compile`` installs; this layer cannot name it)."""
    fn = ctx.config.get("evaluate")
    if fn is None:
        from ...errors import CompileError

        raise CompileError("fold_constant computes constants by compiling them: its PassContext needs an "
                           "evaluator, config={'evaluate': ember.compiler.fold.evaluate_constants} "
                           "(ember.compile gives it one)")
    return fn(exprs, ctx)


@graph_pass("fold_constant", opt_level=1)
def fold_constant(mod: Module, ctx: PassContext) -> Module:
    """Replace constant subexpressions by their values (see the module docstring)."""
    main = mod.main
    body = fold_expr(main.body, ctx)
    return mod if body is main.body else mod.with_function("main", main.replace(body=body))


__all__ = ["evaluate", "fold_constant", "fold_expr"]
