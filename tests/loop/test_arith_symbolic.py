"""Divisions by a constant whose dividend stays in one block only by symbolic reasoning: a
window partition with a dynamic batch (Swin), where the constant intervals know nothing."""
import itertools

from ember.loop import Broadcast, FloorDiv, FloorMod, IntImm, Ramp, Var
from ember.loop.arith import simplify
from ember.loop.arith.analyzer import Param

B, I, O = Var("batch"), Var("i"), Var("o")


def C(v: int) -> IntImm:
    return IntImm(v, "int64")


def _window_base(per: int = 28224):
    """The first channel a vector of 16 reads in Swin's fused window partition: the q/k/v
    third (``i // 192 // (batch * 49)``, in [0, 2]), the head, the half."""
    return FloorDiv(FloorDiv(I, C(192)), B * 49) * 96 + FloorMod(FloorDiv(I, C(64)), C(3)) * 32 + O * 16


def _ranges(per: int = 28224) -> dict:
    return {B: Param((1, 1 << 40)), I: (C(0), B * per - 1), O: (C(0), C(1))}


def test_a_vector_within_one_row_under_a_symbolic_range_is_one_row():
    lanes = Ramp(_window_base(), C(1), 16)
    assert simplify(FloorDiv(lanes, Broadcast(C(288), 16)), _ranges()) == Broadcast(C(0), 16)
    assert simplify(FloorMod(lanes, Broadcast(C(288), 16)), _ranges()) == simplify(lanes, _ranges())


def test_the_simplified_index_keeps_every_value():
    e = FloorDiv(_window_base() + Var("lane"), C(288)) * 1000 + FloorMod(_window_base() + Var("lane"), C(288))
    r = {**_ranges(), Var("lane"): (C(0), C(15))}
    s = simplify(e, r)
    for batch in (1, 2, 5):
        for i, o, lane in itertools.product(range(0, batch * 28224, 997), (0, 1), (0, 15)):
            env = {B: batch, I: i, O: o, Var("lane"): lane}
            want = ((i // 192 // (batch * 49)) * 96 + (i // 64 % 3) * 32 + o * 16 + lane)
            assert _eval(s, env) == (want // 288) * 1000 + want % 288


def test_a_range_that_reaches_the_next_block_is_left_alone():
    # i up to batch * 37632 - 1: the third is in [0, 3], the channel up to 383, past one row
    lanes = Ramp(_window_base(), C(1), 16)
    assert simplify(FloorDiv(lanes, Broadcast(C(288), 16)), _ranges(37632)) != Broadcast(C(0), 16)


def _eval(e, env: dict) -> int:
    from ember.loop.expr import Add, Mul, Sub

    if isinstance(e, IntImm):
        return e.value
    if isinstance(e, Var):
        return env[e]
    a, b = _eval(e.a, env), _eval(e.b, env)
    return {Add: a + b, Sub: a - b, Mul: a * b, FloorDiv: a // b if b else 0,
            FloorMod: a % b if b else 0}[type(e)]


def test_a_clamped_row_past_a_symbolic_count_is_in_bounds():
    """``min(i, M - 1)`` over row blocks that run past ``M`` (a product's last block): in
    [0, M) whatever the block, by the min's second side; the first alone proves nothing."""
    from ember.loop import Max, Min
    from ember.loop.arith import can_prove

    v, s = Var("v"), Var("s")
    m = B * s
    blocks = (m + 13) // 14
    r = {B: Param((1, 1 << 40)), s: Param((1, 1 << 40)), v: (C(0), simplify(blocks - 1))}
    row = Min(FloorMod(v, blocks) * 14 + 13, m - 1)
    assert can_prove(row < m, r) and can_prove(row >= 0, r)
    assert not can_prove(FloorMod(v, blocks) * 14 + 13 < m, r)
    assert can_prove(Max(v * 14 - 20, C(0)) >= 0, r)
    assert not can_prove(Min(v, m + 1) >= m + 1, r)  # (only where v, not the clamp, reaches m + 1)


def test_a_quotient_times_its_divisor_is_bounded_by_its_dividend():
    """``c*(a // c)`` lies in [a - c + 1, a]: a strided conv's last block of columns over a
    symbolic width reads within the row padded for it only by that."""
    from ember.loop.arith import can_prove

    w, x, rx = Var("w"), Var("x"), Var("rx")
    ow = FloorDiv(w + 1, C(2))  # a 3x3 stride-2 conv's output width, padding 1
    blocks = FloorDiv(ow + 6, C(7)) * 7
    r = {w: Param((1, 1 << 40)), x: (C(0), simplify(blocks - 1, {w: Param((1, 1 << 40))})), rx: (C(0), C(2))}
    width = w + 2 + (blocks - ow) * 2  # the padded row, extended for the last block
    assert can_prove(x * 2 + rx < width, r)
    assert can_prove(FloorDiv(w + 1, C(2)) * 2 <= w + 1, r) and can_prove(FloorDiv(w, C(4)) * 4 >= w - 3, r)
    assert not can_prove(blocks <= ow + 5, r)  # (ow = 1: 7 > 6)
