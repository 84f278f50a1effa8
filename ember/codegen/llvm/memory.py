"""Buffer addressing, loads, stores and allocations.

A multi-dimensional index is flattened with ``Buffer.row_strides()`` (strides may be symbolic).
An access whose flattened offset is ``base + lane`` (a unit-stride Ramp in some dimension, possibly
inside sums and constant multiples) becomes one vector load or store; one whose lanes all hit
the same element becomes a scalar load and a splat; any other vector offset becomes
``llvm.masked.gather``/``scatter`` -- unless only the innermost index varies, by constants per
lane that fit one vector (a grouped conv's lanes reading their group's channel,
``(lane // g) g + c``), or by a base plus such constants (a nearest upsample's
``8 i + [0, 0, 1, 1, ...]``): then one vector load and a shuffle; or unless the lanes
interleave a few runs of consecutive elements (a pixel's channels read from their planes, a
packed dot's pairs from two rows), each run's lanes holding or failing a predicate together: a
load a run (masked by the run's condition) and a shuffle (``lanes`` finds these). A predicate
becomes a masked load/store (vector) or a branch (scalar).
"""
from __future__ import annotations

import math

from llvmlite import ir

from ...errors import CompileError
from ...loop import dtype as dt
from ...loop.expr import IntImm, as_expr
from . import types as T
from . import x86
from .intrinsics import declare, llvm_intrinsic, type_suffix
from .lanes import const_int, interleaved, lane_layout, shuffled_window


def _load_interleaved(e, buf, ptr, bases, starts, preds, dtype: str) -> ir.Value:
    b = e.builder
    lanes, groups = dt.lanes(dtype), len(starts)
    run = lanes // groups
    rt = T.mem_type(dt.with_lanes(dt.element(dtype), run))
    base = _flat_offset(e, buf, bases)
    parts = []
    for start, pred in zip(starts, preds):
        if start is None:  # (every lane of the run predicated off: a masked load's zeros)
            parts.append(ir.Constant(rt, None))
            continue
        addr = b.gep(ptr, [b.add(base, ir.Constant(base.type, start)) if start else base],
                     source_etype=T.mem_type(buf.dtype))
        if pred is True:
            parts.append(b.load(addr, typ=rt, align=T.elem_align(buf.dtype)))
        else:  # (a run whose lanes hold or fail together: a masked load of the run)
            mask = T.broadcast(b, e.expr(pred), run)
            parts.append(llvm_intrinsic(b, "masked.load", [addr, ir.Constant(T.I32, T.elem_align(buf.dtype)), mask,
                                                            ir.Constant(rt, None)], ret=rt, overload=[rt, T.PTR]))
    while len(parts) > 1:  # (runs concatenated in order, then one shuffle interleaves)
        n = parts[0].type.count
        parts = [b.shuffle_vector(x, y, ir.Constant(ir.VectorType(T.I32, 2 * n), list(range(2 * n))))
                 for x, y in zip(parts[::2], parts[1::2])]
    whole = parts[0]
    mask = [(k % groups) * run + k // groups for k in range(lanes)]
    v = b.shuffle_vector(whole, ir.Constant(whole.type, None), ir.Constant(ir.VectorType(T.I32, lanes), mask))
    return _from_mem(b, v, dtype)


def _flat_offset(e, buffer, indices) -> ir.Value:
    """``sum(index_k * stride_k)`` as int64 (a vector when any index is one)."""
    b = e.builder
    n = max((dt.lanes(i.dtype) for i in indices), default=1)
    total = None
    for idx, stride in zip(indices, buffer.row_strides()):
        v = e.index(idx)
        if n > 1 and T.lanes_of(v) == 1:
            v = T.broadcast(b, v, n)
        if not (isinstance(stride, IntImm) and stride.value == 1):
            s = e.index(stride)
            v = b.mul(v, T.broadcast(b, s, n))
        total = v if total is None else b.add(total, v)
    if total is None:  # zero-dimensional buffer
        total = ir.Constant(T.I64, 0)
        total = T.broadcast(b, total, n)
    return total


def _check_rank(e, buffer, indices):
    if len(indices) != len(buffer.shape):
        raise CompileError(f"kernel {e.func_name!r}: buffer {buffer.name!r} has {len(buffer.shape)} "
                           f"dimension(s) but is indexed with {len(indices)}")


def _mask(e, predicate, lanes):
    m = e.expr(predicate)
    return T.broadcast(e.builder, m, lanes) if T.lanes_of(m) == 1 else m


def load(e, node) -> ir.Value:
    """Emit a Load node; bool comes back as i1 lanes."""
    buf, b = node.buffer, e.builder
    node = node.replace(indices=tuple(as_expr(i) for i in node.indices))
    _check_rank(e, buf, node.indices)
    ptr = e.buffer_ptr(buf)
    dtype = node.dtype
    lanes = dt.lanes(dtype)
    mt = T.mem_type(dtype)
    ealign = T.elem_align(buf.dtype)
    if lanes == 1:
        return load_scalar_at(e, buf, ptr, node.indices, node.predicate)
    layout = lane_layout(buf, node.indices)
    vector_pred = node.predicate is not None and dt.lanes(node.predicate.dtype) > 1
    if layout is not None and layout[1] == 0 and not vector_pred:
        # Every lane reads the same element: one scalar load, splatted.
        return T.broadcast(b, load_scalar_at(e, buf, ptr, layout[0], node.predicate), lanes)
    if layout is not None and layout[1] == 1:
        addr = b.gep(ptr, [_flat_offset(e, buf, layout[0])], source_etype=T.mem_type(buf.dtype))
        if node.predicate is None:
            v = b.load(addr, typ=mt, align=ealign)
        elif _local_whole(buf, layout[0], lanes):
            # a register-sized local (an accumulator): a plain load and a select, which SROA
            # keeps in a register, where the masked load kept it in memory
            v = b.select(_mask(e, node.predicate, lanes), b.load(addr, typ=mt, align=ealign), ir.Constant(mt, None))
        else:
            mask = _mask(e, node.predicate, lanes)
            v = llvm_intrinsic(b, "masked.load", [addr, ir.Constant(T.I32, ealign), mask,
                                                   ir.Constant(mt, None)],
                               ret=mt, overload=[mt, T.PTR])
        return _from_mem(b, v, dtype)
    window = shuffled_window(buf, node.indices, lanes) if node.predicate is None else None
    if window is not None:
        rows, start, mask, width = window
        wt = T.mem_type(dt.with_lanes(dt.element(dtype), width))
        addr = b.gep(ptr, [_flat_offset(e, buf, [*rows, start])], source_etype=T.mem_type(buf.dtype))
        v = b.load(addr, typ=wt, align=ealign)
        v = b.shuffle_vector(v, ir.Constant(wt, ir.Undefined), ir.Constant(ir.VectorType(T.I32, lanes), mask))
        return _from_mem(b, v, dtype)
    runs = interleaved(buf, node.indices, node.predicate, lanes)
    if runs is not None:
        return _load_interleaved(e, buf, ptr, *runs, dtype)
    # A gather: a vector of addresses.
    offs = _flat_offset(e, buf, node.indices)
    size = _static_size(buf)
    if node.predicate is None and dt.bits(buf.dtype) == 8 and size is not None:
        v = x86.byte_table(b, ptr, size, offs, e.features)  # (a small table: permutes)
        if v is not None:
            return _from_mem(b, v, dtype)
    if node.predicate is None and dt.bits(buf.dtype) == 32 and len(buf.shape) == 1 and size is not None \
            and size <= x86.TABLE_WORDS:
        v = x86.dword_gather(b, ptr, offs, e.features)  # (a code's table on AVX2)
        if v is not None:
            return _from_mem(b, b.bitcast(v, mt) if mt != v.type else v, dtype)
    addrs = b.gep(ptr, [offs], source_etype=T.mem_type(buf.dtype))
    addrs.type = ir.VectorType(T.PTR, lanes)  # llvmlite does not infer vector GEP types
    mask = _mask(e, node.predicate, lanes) if node.predicate is not None else \
        T.const(dt.with_lanes("bool", lanes), True)
    v = llvm_intrinsic(b, "masked.gather", [addrs, ir.Constant(T.I32, ealign), mask,
                                             ir.Constant(mt, None)],
                       ret=mt, overload=[mt, addrs.type])
    return _from_mem(b, v, dtype)


def _static_size(buf):
    """Elements of ``buf`` when its shape is static, else None."""
    sizes = [const_int(as_expr(d)) for d in buf.shape]
    return None if None in sizes else math.prod(sizes)


def load_scalar_at(e, buf, ptr, indices, predicate) -> ir.Value:
    b = e.builder
    mt = T.mem_type(buf.dtype)
    addr = b.gep(ptr, [_flat_offset(e, buf, indices)], source_etype=mt)
    if predicate is None:
        return _from_mem(b, b.load(addr, typ=mt, align=T.elem_align(buf.dtype)), buf.dtype)
    # A scalar predicate guards the access itself: the address may be out of bounds when false.
    cond = e.expr(predicate)
    if T.lanes_of(cond) != 1:
        # one value broadcast to lanes guarded one by one (a select's branch over a 0-d
        # constant, vectorized): read it where any lane needs it; the others ignore it
        cond = llvm_intrinsic(b, "vector.reduce.or", [cond], ret=T.I1, overload=[cond.type])
    start = b.block
    with b.if_then(cond):
        v = b.load(addr, typ=mt, align=T.elem_align(buf.dtype))
        then_end = b.block
    phi = b.phi(mt)
    phi.add_incoming(v, then_end)
    phi.add_incoming(ir.Constant(mt, None), start)
    return _from_mem(b, phi, buf.dtype)


def _from_mem(b, v, dtype):
    if dt.is_bool(dtype):
        return b.icmp_unsigned("!=", v, ir.Constant(v.type, None))
    return v


def _to_mem(b, v, dtype):
    if dt.is_bool(dtype):
        return b.zext(v, T.mem_type(dtype))
    return v


def store(e, node) -> None:
    """Emit a Store statement."""
    buf, b = node.buffer, e.builder
    node = node.replace(indices=tuple(as_expr(i) for i in node.indices))
    _check_rank(e, buf, node.indices)
    ptr = e.buffer_ptr(buf)
    idx_lanes = max((dt.lanes(i.dtype) for i in node.indices), default=1)
    val_lanes = dt.lanes(node.value.dtype)
    if val_lanes > 1 and idx_lanes == 1:
        raise CompileError(f"kernel {e.func_name!r}: vector value of {node.value.dtype} stored to "
                           f"{buf.name!r} at a scalar index (use a Ramp index)")
    value = e.expr(node.value)
    if dt.element(node.value.dtype) != dt.element(buf.dtype):
        raise CompileError(f"kernel {e.func_name!r}: storing {node.value.dtype} into {buf.name!r} "
                           f"of dtype {buf.dtype} (cast the value first)")
    lanes = idx_lanes
    if val_lanes == 1 and lanes > 1:
        value = T.broadcast(b, value, lanes)
    dtype = dt.with_lanes(buf.dtype, lanes)
    mv = _to_mem(b, value, dtype)
    ealign = T.elem_align(buf.dtype)
    et = T.mem_type(buf.dtype)
    layout = lane_layout(buf, node.indices) if lanes > 1 else None
    if lanes == 1 or (layout is not None and layout[1] == 1):
        scalars = node.indices if lanes == 1 else layout[0]
        addr = b.gep(ptr, [_flat_offset(e, buf, scalars)], source_etype=et)
        if node.predicate is None:
            b.store(mv, addr, align=ealign)
        elif lanes > 1 and _local_whole(buf, scalars, lanes):
            # (as in ``load``: the masked store as load, select, store, exactly)
            old = b.load(addr, typ=mv.type, align=ealign)
            b.store(b.select(_mask(e, node.predicate, lanes), mv, old), addr, align=ealign)
        elif lanes == 1:
            cond = e.expr(node.predicate)
            with b.if_then(cond):
                b.store(mv, addr, align=ealign)
        else:
            mask = _mask(e, node.predicate, lanes)
            llvm_intrinsic(b, "masked.store", [mv, addr, ir.Constant(T.I32, ealign), mask],
                           ret=ir.VoidType(), overload=[mv.type, T.PTR])
        return
    offs = _flat_offset(e, buf, node.indices)
    addrs = b.gep(ptr, [offs], source_etype=et)
    addrs.type = ir.VectorType(T.PTR, lanes)
    mask = _mask(e, node.predicate, lanes) if node.predicate is not None else \
        T.const(dt.with_lanes("bool", lanes), True)
    llvm_intrinsic(b, "masked.scatter", [mv, addrs, ir.Constant(T.I32, ealign), mask],
                   ret=ir.VoidType(), overload=[mv.type, addrs.type])


# --- allocations -------------------------------------------------------------------------------

STACK_SCRATCH_BYTES = 64 << 10  # local scratch of a symbolic size up to this goes on the stack

def allocate(e, node) -> None:
    """Emit an Allocate: a stack slot in the entry block, or heap memory freed after the body."""
    buf, b = node.buffer, e.builder
    et = T.mem_type(buf.dtype)
    align = max(buf.align, T.elem_align(buf.dtype))
    dims = list(buf.shape) + (list(buf.strides) if buf.strides is not None else [])
    if buf.scope == "local" and all(isinstance(d, IntImm) for d in dims):
        # In the entry block, so that SROA/mem2reg can turn it into registers.
        slot = e.entry_alloca(ir.ArrayType(et, max(_static_footprint(buf), 1)), align, buf.name)
        with e.bind_buffer(buf, slot):
            e.stmt(node.body)
        return
    nbytes = b.mul(_footprint(e, buf), ir.Constant(T.I64, dt.nbytes(buf.dtype)))
    # aligned_alloc wants a size that is a multiple of the alignment (and nonzero).
    a = ir.Constant(T.I64, align)
    nbytes = b.select(b.icmp_signed("<=", nbytes, ir.Constant(T.I64, 0)), ir.Constant(T.I64, 1), nbytes)
    nbytes = b.mul(b.udiv(b.add(nbytes, ir.Constant(T.I64, align - 1)), a), a)
    alloc = declare(b.module, "aligned_alloc", T.PTR, [T.I64, T.I64])
    free = declare(b.module, "free", ir.VoidType(), [T.PTR])
    if buf.scope == "local":
        # scratch whose size is a symbolic size (a row of a softmax over seq): on the stack
        # when small, reclaimed when the block ends (so a loop does not grow the stack), else
        # on the heap -- an allocator call per iteration of the loop it is computed in costs
        # more than the row itself
        small = b.icmp_unsigned("<=", nbytes, ir.Constant(T.I64, STACK_SCRATCH_BYTES))
        sp = b.call(declare(b.module, "llvm.stacksave.p0", T.PTR, []), [])
        with b.if_else(small, likely=True) as (on_stack, on_heap):
            with on_stack:
                slot = b.alloca(ir.IntType(8), size=nbytes)
                slot.align = max(align, 16)
                slot.type = T.PTR
                stack_block = b.block
            with on_heap:
                heap = b.call(alloc, [a, nbytes])
                heap_block = b.block
        mem = b.phi(T.PTR)
        mem.add_incoming(slot, stack_block)
        mem.add_incoming(heap, heap_block)
        e.check_alloc(mem, buf)
        with e.bind_buffer(buf, mem):
            e.stmt(node.body)
        with b.if_then(b.not_(small), likely=False):
            b.call(free, [mem])
        b.call(declare(b.module, "llvm.stackrestore.p0", ir.VoidType(), [T.PTR]), [sp])
        return
    mem = b.call(alloc, [a, nbytes])
    e.check_alloc(mem, buf)
    with e.bind_buffer(buf, mem):
        e.stmt(node.body)
    b.call(free, [mem])


def _local_whole(buf, bases, lanes: int) -> bool:
    """Whether ``lanes`` contiguous elements from ``bases`` (constant indices) lie inside a
    local buffer of constant shape (an entry-block alloca): a masked access there can be a
    plain one and a select. A tier-0 product's accumulator over a symbolic column count
    (attention's at tier 0: ViT-B/16's P.V) was a masked load and store a step, through memory."""
    if buf.scope != "local" or buf.strides is not None or not all(isinstance(d, IntImm) for d in buf.shape):
        return False
    off = 0
    for idx, d in zip(bases, buf.shape):
        if not isinstance(idx, IntImm) or not 0 <= idx.value < d.value:
            return False
        off = off * d.value + idx.value
    return off + lanes <= _static_footprint(buf)


def _static_footprint(buf) -> int:
    """Elements spanned by a buffer whose shape and strides are constants."""
    if any(s.value <= 0 for s in buf.shape):
        return 0
    if buf.strides is None:
        n = 1
        for s in buf.shape:
            n *= s.value
        return n
    return 1 + sum((s.value - 1) * abs(st.value) for s, st in zip(buf.shape, buf.strides))


def _footprint(e, buf) -> ir.Value:
    """Elements spanned by ``buf`` (shape product, or the last strided offset plus one)."""
    b = e.builder
    zero, one = ir.Constant(T.I64, 0), ir.Constant(T.I64, 1)
    if buf.strides is None:
        n = one
        for s in buf.shape:
            n = b.mul(n, e.index(s))
        return b.select(b.icmp_signed("<", n, zero), zero, n)
    n = one
    for s, st in zip(buf.shape, buf.strides):
        n = b.add(n, b.mul(b.sub(e.index(s), one), e.index(st)))
    return b.select(b.icmp_signed("<", n, zero), zero, n)


__all__ = ["load", "store", "allocate", "type_suffix"]
