"""The kernel of ``nn.recurrence`` (:mod:`ember.graph.ops.recurrent`): an RNN, GRU or LSTM layer
as one loop program.

Each step's state depends on the step before, which no tensor computation expresses; unrolled
into the graph, a 512-step LSTM was ~15 nodes a step, 12 s to compile and ~5 us a step to run
(two kernel calls each). Here the steps are a loop inside one kernel. The batch rows (and the
directions) are independent: tasks run in parallel, each a direction's block of ``ROWS`` rows,
or a row alone past the last whole block, stepping through the sequence; for each step,

- ``pre = xw[t] + h @ rt + rb`` (the gates' inputs; a GRU keeps ``h @ rt + rb`` apart, which
  its reset gate scales), a block of columns at a time into ``BLOCK_VECTORS`` vector
  accumulators over the block's rows, each step of the sum one multiply-add per accumulator of
  a row of ``rt``'s block (loaded once for the rows) by a broadcast ``h[k]``; ``rt`` in panels
  of columns (:mod:`..recurrent`) makes each block's rows one contiguous run;
- the gates, a vector of hidden units at a time, the state updated in place (``h`` and ``c``
  live in the outputs ``last h`` and ``last c``, and each unit reads only its own), and ``y[t]``
  written.

A GRU without ``linear_before_reset`` multiplies ``(r * h)`` by its hidden gate's weights: a
second product, after the reset gate, into the same accumulators.

Weights past the L2 (``WIDE_BYTES``: an LSTM of 1024 reads 16 MB a step) turn it around: each
step's products run in parallel over blocks of columns and its gates over units (a fork and
join a step), the tasks one after the other, a static batch of fewer than ``ROWS`` rows one task.

The activations are the elementwise ops' own element functions
(:data:`.elementwise.SCALAR`), applied along each activation's chain of steps.
"""
from __future__ import annotations

from ....loop import dtype as dt
from ....loop.expr import IntImm, Load, Var, cast, const, max_, min_, select
from ....loop.stmt import Allocate, Buffer, For, IfThenElse, PrimFunc, Store, seq
from ...ops.recurrent import GATES
from ..registry import get_op, set_kernel
from .dynamic import _buffer, _size_params
from .elementwise import SCALAR

INDEX = dt.INDEX
F32 = "float32"
BLOCK_VECTORS = 8  # accumulators of a block of the product's columns (8 vector registers: the
                   # multiply-adds of a step of its sum are independent, 8 hide their latency)
MAX_LANES = 64  # (what ember.loop.passes.vectorize takes)
STACK_PRE = 16 << 10  # the gates' inputs of a task's rows, on the stack up to this many floats
ROWS = 4  # batch rows a task steps through together
WIDE_BYTES = 1 << 20  # a direction's weights past this many bytes: each step in parallel


def activation(act: tuple, x):
    """``x`` (a loop expression) through the activation chain ``act`` (:mod:`..recurrent`)."""
    for op, attrs, k in act:
        args = (x,) if k is None else (x, const(float(k), x.dtype))
        x = SCALAR[op](get_op(op).check_attrs(dict(attrs)), *args)
    return x


def _i(v: int) -> IntImm:
    return IntImm(v, INDEX)


def _product(acc_out, rows, weight, hidden: int, cols: int, lanes: int, n_rows: int, init, name: str,
             panel=None, kind: str = "serial"):
    """For each of ``n_rows`` rows ``r`` and ``j < cols``: ``acc_out(r, j,
    value)`` stores ``init(r, j) + sum_k rows(r, k) * weight(k, j)`` (``k < hidden``). A block
    of columns at a time, ``BLOCK_VECTORS`` vector accumulators over the rows (each row of
    ``weight`` loaded once for all of them), the last block masked; with ``panel`` (the
    weights in panels of that many columns) a vector chunk is one panel's row."""
    width = lanes * min(max(1, BLOCK_VECTORS // n_rows), -(-cols // lanes))
    chunk = min(width, panel or MAX_LANES)  # (a vectorized loop's lanes at most; the chunks unrolled)
    width = -(-width // chunk) * chunk
    blocks = -(-cols // width)
    jo, jc, v, k, r = (Var(f"{name}_{s}", INDEX) for s in ("jo", "jc", "v", "k", "r"))
    acc = Buffer(f"{name}_acc", (_i(n_rows), _i(width)), F32, scope="local")
    at = jc * chunk + v
    j = jo * width + at
    tail = blocks * width != cols

    def over_block(stmt):
        stmt = IfThenElse(j < cols, stmt) if tail else stmt
        stmt = For(jc, _i(0), _i(width // chunk), "unrolled", For(v, _i(0), _i(chunk), "vectorized", stmt))
        return For(r, _i(0), _i(n_rows), "unrolled", stmt)

    start = over_block(Store(acc, init(r, j), (r, at)))
    step = over_block(Store(acc, Load(acc, (r, at)) + rows(r, k) * weight(k, j), (r, at)))
    end = over_block(acc_out(r, j, Load(acc, (r, at))))
    body = Allocate(acc, seq(start, For(k, _i(0), _i(hidden), "serial", step), end))
    return For(jo, _i(0), _i(blocks), kind, body)


def _vectors(var: Var, extent: int, lanes: int, body, kind: str = "serial"):
    """``for var in range(extent): body``, two vectors of lanes at a time (the last masked)."""
    from ....loop.visit import substitute

    vec = lanes * min(2, -(-extent // lanes))
    n = -(-extent // vec)
    outer, inner = Var(f"{var.name}o", INDEX), Var(f"{var.name}v", INDEX)
    if n * vec != extent:
        body = IfThenElse(var < extent, body)
    body = substitute(body, {var: outer * vec + inner})
    return For(outer, _i(0), _i(n), kind, For(inner, _i(0), _i(vec), "vectorized", body))


def _recurrence(attrs, param_types, out_type, name: str) -> PrimFunc:
    from ....kernels.common import vector_lanes

    cell = attrs["cell"]
    lstm = cell == "LSTM"
    params = [_buffer(f"p{k}", t) for k, t in enumerate(param_types)]
    n_state = 2 if lstm else 1
    XW, H0, C0 = params[0], params[1], (params[2] if lstm else None)
    RT, RB = params[1 + n_state], params[2 + n_state]
    LENS = params[3 + n_state] if len(params) > 3 + n_state else None
    fields = out_type.fields
    Y = _buffer(f"{name}_y", fields[0])
    HL = _buffer(f"{name}_h", fields[1])
    CL = _buffer(f"{name}_c", fields[2]) if lstm else None
    dirs, hidden = int(RT.shape[0].value), int(RT.shape[-2].value)
    seq_len, batch = XW.shape[0], XW.shape[1]
    n_acts = len(attrs["acts"]) // dirs
    # a task steps through ROWS batch rows together (their products share each load of the
    # weights), the rows past the last whole block one at a time (a row alone keeps all the
    # accumulators on its columns: a symbolic batch of one at 2 of 8 ran 1.7x slower)
    # weights past the L2 (a step streams them from the L3 or memory): each step's product and
    # gates in parallel over columns and units instead, the tasks one after the other and a
    # static batch of fewer than ROWS rows one task (each weight read once a step for all)
    wide = hidden * GATES[cell] * hidden * 4 > WIDE_BYTES
    static = batch.value if isinstance(batch, IntImm) else None
    n_rows = min(ROWS, static) if wide and static else ROWS
    if static is not None:
        blocks, per_dir = _i(static // n_rows), _i(static // n_rows + static % n_rows)
    else:
        blocks = batch // n_rows
        per_dir = blocks + (batch - blocks * n_rows)  # (the whole blocks, then the rows left alone)
    task = Var("task", INDEX)
    lanes = vector_lanes(None, F32)
    bodies = []
    for d in range(dirs):
        reverse = attrs["direction"] == "reverse" or d == 1
        local = task - per_dir * d if d else task

        def rows(b0, n):
            return _direction(attrs, d, reverse, b0, n, hidden, seq_len, lanes, attrs["acts"][d * n_acts:(d + 1) * n_acts],
                              XW, H0, C0, RT, RB, LENS, Y, HL, CL, wide)
        if static is not None and static % n_rows == 0:
            bodies.append(rows(local * n_rows, n_rows))
        elif static is not None and static < n_rows:
            bodies.append(rows(local, 1))
        else:
            bodies.append(IfThenElse(local < blocks, rows(local * n_rows, n_rows), rows(blocks * (n_rows - 1) + local, 1)))
    body = bodies[0] if dirs == 1 else IfThenElse(task < per_dir, bodies[0], bodies[1])
    one = dirs == 1 and static == 1
    # (the rows of every direction are independent: a bidirectional layer's two run at once)
    body = For(task, _i(0), per_dir * dirs, "serial" if one or wide else "parallel", body)
    bufs = tuple(params) + (Y, HL) + ((CL,) if lstm else ())
    return PrimFunc(name, bufs + _size_params(bufs), body)


def _direction(attrs, d: int, reverse: bool, b0, n_rows: int, hidden: int, seq_len, lanes: int, acts: tuple,
               XW, H0, C0, RT, RB, LENS, Y, HL, CL, wide: bool = False):
    """Direction ``d``'s loop over the steps of the ``n_rows`` batch rows from ``b0`` (``wide``:
    each step's products and gates in parallel)."""
    cell = attrs["cell"]
    kind = "parallel" if wide else "serial"
    panel = int(RT.shape[3].value) if RT.ndim == 4 else None  # (the weights in panels of columns)
    lstm, gru = cell == "LSTM", cell == "GRU"
    gh = GATES[cell] * hidden
    clip = float(attrs["clip"] or 0.0)
    lbr = bool(attrs["linear_before_reset"])
    t, u, r = Var(f"t{d}", INDEX), Var(f"u{d}", INDEX), Var(f"r{d}", INDEX)
    tt = (seq_len - 1 - t) if reverse else t
    pre = Buffer(f"pre{d}", (_i(n_rows), _i(gh)), F32, scope="local" if n_rows * gh <= STACK_PRE else "global")

    def clipped(x):
        return x if clip <= 0 else min_(max_(x, const(-clip, F32)), const(clip, F32))

    def xw(row, j):
        return Load(XW, (tt, b0 + row, j + d * gh))

    def weight(col0):
        if panel:  # (a block's chunks are whole panels: j // panel and j % panel simplify away)
            return lambda k, j: Load(RT, (_i(d), (j + col0) // panel, k, (j + col0) % panel))
        return lambda k, j: Load(RT, (_i(d), k, j + col0))

    def rb(j):
        return Load(RB, (_i(d), j))

    def state(buf, row, k):
        return Load(buf, (_i(d), b0 + row, k))

    # the gates' inputs: a GRU keeps its state's product apart (its reset gate scales the
    # hidden gate's part); without linear_before_reset that part is a product of its own
    cols = 2 * hidden if gru and not lbr else gh
    products = [_product(lambda row, j, val: Store(pre, val, (row, j)), lambda row, k: state(HL, row, k), weight(0),
                         hidden, cols, lanes, n_rows,
                         (lambda row, j: rb(j)) if gru else (lambda row, j: xw(row, j) + rb(j)), f"hr{d}", panel,
                         kind)]
    rh = None
    if gru and not lbr:
        # rh[u] = r[u] * h[u], then pre[2H + j] = (rh @ rt[:, 2H:])[j] + rb[2H + j]
        rh = Buffer(f"rh{d}", (_i(n_rows), _i(hidden)), F32,
                    scope="local" if n_rows * hidden <= STACK_PRE else "global")
        r_gate = activation(acts[0], clipped(xw(r, u + hidden) + Load(pre, (r, u + hidden))))
        products.append(For(r, _i(0), _i(n_rows), "serial",
                            _vectors(u, hidden, lanes, Store(rh, r_gate * state(HL, r, u), (r, u)), kind)))
        products.append(_product(lambda row, j, val: Store(pre, val, (row, j + 2 * hidden)),
                                 lambda row, k: Load(rh, (row, k)), weight(2 * hidden), hidden, hidden, lanes, n_rows,
                                 lambda row, j: rb(j + 2 * hidden), f"rh{d}", panel, kind))

    def g(k):  # gate k's input at row r, unit u
        return Load(pre, (r, u + k * hidden))

    at = (_i(d), b0 + r, u)
    if LENS is not None:  # (past a row's length its state stays and its output is 0)
        alive = tt < cast(INDEX, Load(LENS, (b0 + r,)))

        def keep(buf, new):
            return Store(buf, select(alive, new, Load(buf, at)), at)

        def out():
            return Store(Y, select(alive, Load(HL, at), const(0.0, F32)), (tt, _i(d), b0 + r, u))
    else:
        def keep(buf, new):
            return Store(buf, new, at)

        def out():
            return Store(Y, Load(HL, at), (tt, _i(d), b0 + r, u))
    if cell == "RNN":
        h_new = activation(acts[0], clipped(g(0)))
    elif gru:
        z = activation(acts[0], clipped(xw(r, u) + g(0)))
        r_g = activation(acts[0], clipped(xw(r, u + hidden) + g(1)))
        cand = xw(r, u + 2 * hidden) + (r_g * g(2) if lbr else g(2))
        hh = activation(acts[1], clipped(cand))
        h_new = (const(1.0, F32) - z) * hh + z * Load(HL, at)
    if lstm:
        i_g, f_g = (activation(acts[0], clipped(g(k))) for k in (0, 2))
        c_new = f_g * Load(CL, at) + i_g * activation(acts[1], clipped(g(3)))
        o_g = activation(acts[0], clipped(g(1)))
        # (the new c kept in the input gate's place until h is made of it: a frozen row's c stays)
        gates = _vectors(u, hidden, lanes, seq(Store(pre, c_new, (r, u)),
                                               keep(HL, o_g * activation(acts[2], Load(pre, (r, u)))),
                                               keep(CL, Load(pre, (r, u))), out()), kind)
    else:
        gates = _vectors(u, hidden, lanes, seq(keep(HL, h_new), out()), kind)
    step = seq(*products, For(r, _i(0), _i(n_rows), "serial", gates))
    k = Var(f"k{d}", INDEX)
    copy = [_vectors(k, hidden, lanes, Store(HL, Load(H0, (_i(d), b0 + r, k)), (_i(d), b0 + r, k)))]
    if lstm:
        copy.append(_vectors(k, hidden, lanes, Store(CL, Load(C0, (_i(d), b0 + r, k)), (_i(d), b0 + r, k))))
    body = seq(For(r, _i(0), _i(n_rows), "serial", seq(*copy)), For(t, _i(0), seq_len, "serial", step))
    for buf in (rh, pre):  # (the steps' scratch, once for them all)
        if buf is not None:
            body = Allocate(buf, body)
    return body


set_kernel("nn.recurrence", _recurrence)

__all__ = ["activation"]
