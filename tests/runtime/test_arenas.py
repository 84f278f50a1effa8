"""The process-wide arena cache: runs borrow an arena and give it back, executables share them.

Sharing matters for speed (two executables compared in one process run on the same memory) and
must never cost an answer: runs of different models that take turns on one arena, or run at
once on several, give the answers each gives alone.
"""
import threading

import numpy as np
import pytest

import ember
from ember.runtime.arenas import ARENAS, ArenaCache


def make(n):
    return lambda size: np.empty(max(n, size), np.uint8)


def test_take_prefers_the_arena_a_state_had_then_the_last_given_back():
    c = ArenaCache(keep=3)
    a, b = c.take(100, make(100)), c.take(200, make(200))
    assert c.made == 2
    c.give(a)
    c.give(b)
    assert c.take(50, make(50), prefer=a) is a  # its own, though b came back later
    assert c.take(50, make(50)) is b
    c.give(a)
    bigger = c.take(150, make(150), prefer=a)
    assert bigger is not a  # too small: a new one, and a is dropped
    assert c.made == 3 and c.free == 0


def test_an_outgrown_arena_is_replaced_with_room_to_grow():
    # a decoder's past grows by one position a run: its next runs fit the new arena
    c = ArenaCache(keep=3)
    a = c.take(1000, make(1000))
    c.give(a)
    b = c.take(1010, make(1010), prefer=a)
    assert b.nbytes == 1500
    c.give(b)
    assert c.take(1400, make(1400), prefer=b) is b and c.made == 2


def test_the_cache_keeps_the_largest_free_arenas():
    c = ArenaCache(keep=2)
    for n in (10, 30, 20):
        c.give(np.empty(n, np.uint8))
    assert c.free == 2 and c.free_bytes == 50
    c.clear()
    assert c.free == 0


def conv_chain(path: str, width: int, seed: int, batch="1") -> str:
    """x -> three 3x3 convs with ReLUs: the values between them live in the arena."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)
    inits, nodes, h, c = [], [], "x", 3
    for k in range(3):
        w = (rng.standard_normal((width, c, 3, 3)) * 0.3).astype(np.float32)
        inits.append(numpy_helper.from_array(w, f"w{k}"))
        nodes += [helper.make_node("Conv", [h, f"w{k}"], [f"c{k}"], pads=[1, 1, 1, 1]),
                  helper.make_node("Relu", [f"c{k}"], [f"h{k}"])]
        h, c = f"h{k}", width
    n = int(batch) if batch.isdigit() else batch
    g = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [n, 3, 32, 32])],
                          [helper.make_tensor_value_info(h, TensorProto.FLOAT, [n, width, 32, 32])], inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


@pytest.fixture(scope="module")
def two_models(tmp_path_factory):
    d = tmp_path_factory.mktemp("arenas")
    return (ember.compile(conv_chain(str(d / "wide.onnx"), 32, 0)),
            ember.compile(conv_chain(str(d / "narrow.onnx"), 8, 1)))


def test_executables_taking_turns_share_one_arena_and_keep_their_answers(two_models):
    a, b = two_models
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal((1, 3, 32, 32)).astype(np.float32) for _ in range(4)]
    want = [(a.run(x), b.run(x)) for x in xs]
    made = ARENAS.made
    for _ in range(3):
        for x, (wa, wb) in zip(xs, want):
            for got, w in ((a.run(x), wa), (b.run(x), wb)):
                assert all(np.array_equal(g, v) for g, v in zip(got, w))
    assert ARENAS.made == made  # no run needed a new arena
    assert a.program["arena_bytes"] > b.program["arena_bytes"] > 0
    assert a._pool._free[0].had[0] is b._pool._free[0].had[0]  # one arena served both


def test_different_models_running_at_once_keep_their_answers(two_models):
    a, b = two_models
    rng = np.random.default_rng(1)
    xs = [rng.standard_normal((1, 3, 32, 32)).astype(np.float32) for _ in range(40)]
    want = {id(e): [e.run(x) for x in xs] for e in (a, b)}
    errors, wrong = [], []
    a.max_concurrent_runs = b.max_concurrent_runs = 4
    start = threading.Barrier(4)

    def work(e):
        start.wait()
        try:
            for x, w in zip(xs, want[id(e)]):
                if not all(np.array_equal(g, v) for g, v in zip(e.run(x), w)):
                    wrong.append(e)
        except BaseException as err:  # reported below
            errors.append(err)

    try:
        ts = [threading.Thread(target=work, args=(e,)) for e in (a, b, a, b)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
    finally:
        a.max_concurrent_runs = b.max_concurrent_runs = None
    assert not errors and not wrong


def test_a_growing_dynamic_model_keeps_one_arena(tmp_path):
    exe = ember.compile(conv_chain(str(tmp_path / "dyn.onnx"), 8, 2, batch="N"))
    ARENAS.clear()
    rng = np.random.default_rng(3)
    for n in (1, 2, 4, 8, 16):
        x = rng.standard_normal((n, 3, 32, 32)).astype(np.float32)
        exe.run(x)
    assert ARENAS.free == 1  # each outgrown arena was dropped, not kept beside the next
    assert ARENAS.free_bytes >= exe.memory_info.arena_per_run
