"""Which part of its output each thread writes: read from the loop program, compared across
schedules; the tuner proposes only schedules that split the output as the default does."""
import dataclasses
import os

from ember.loop import compute as te
from ember.loop.lower import lower
from ember.loop.schedule import Schedule
from ember.tune.partition import output_partition


def _func(schedule, n=12, m=20):
    A = te.placeholder((n, m), "float32", "A")
    C = te.compute((n, m), lambda i, j: A[i, j] * 2.0, "C")
    s = Schedule([C])
    schedule(s[C])
    return lower(s, [A, C], "f")


def _rows(st):
    st.parallel(st.leaf[0])


def _columns(st):
    i, j = st.leaf
    st.reorder(j, i)
    st.parallel(j)


def _rows_in_blocks(st):
    i, j = st.leaf
    io, ii = st.split(i, factor=3)
    jo, ji = st.split(j, factor=8)  # (a ragged block: its stores are guarded)
    st.reorder(io, jo, ii, ji)
    st.parallel(io)


def test_the_split_of_each_dimension_between_the_threads():
    assert output_partition(_func(_rows), 2) == (((0, 5), (6, 11)), None)
    assert output_partition(_func(_columns), 2) == (None, ((0, 9), (10, 19)))
    assert output_partition(_func(_rows), 3) == (((0, 3), (4, 7), (8, 11)), None)


def test_the_same_split_by_other_loops_is_the_same_partition():
    assert output_partition(_func(_rows_in_blocks), 2) == output_partition(_func(_rows), 2)
    assert output_partition(_func(_rows_in_blocks), 2) != output_partition(_func(_columns), 2)


def test_nothing_to_compare_without_parallel_loops_or_threads():
    assert output_partition(_func(lambda st: None), 2) is None
    assert output_partition(_func(_rows), 1) is None


def test_the_search_proposes_only_the_defaults_split(tmp_path):
    """A depthwise conv's tasks run over channel blocks or over rows (``dw.order``): with the
    partition kept, no proposal splits the output otherwise than the default schedule."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    from ember.kernels.common import host
    from ember.tune.search import TaskSearch
    from ember.tune.tasks import extract_tasks

    target = dataclasses.replace(host(), cores=2)  # (the same on a one-core CI machine)
    rng = np.random.default_rng(0)
    w = [numpy_helper.from_array(rng.standard_normal(s).astype(np.float32) * 0.1, f"w{i}")
         for i, s in enumerate([(64, 16, 1, 1), (64, 1, 3, 3), (16, 64, 1, 1)])]
    nodes = [helper.make_node("Conv", ["x", "w0"], ["a"]), helper.make_node("Relu", ["a"], ["b"]),
             helper.make_node("Conv", ["b", "w1"], ["c"], group=64, pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["d"]), helper.make_node("Conv", ["d", "w2"], ["y"])]
    g = helper.make_graph(nodes, "block", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, 28, 28])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16, 28, 28])], w)
    path = os.path.join(tmp_path, "block.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    tasks, _ = extract_tasks(path, target, profile=False)
    (task,) = [t for t in tasks if "dw.order" in t.knobs]  # (the depthwise conv)
    kept, free = TaskSearch(task, target, 0), TaskSearch(task, target, 0, keep_partition=False)
    reference = kept.candidate({}).partition
    assert reference is not None
    proposed = [c for _ in range(3) for c in kept.propose(None, 8)]
    assert proposed and all(c.partition == reference for c in proposed)
    assert kept.split_otherwise > 0
    # the knob values that always split otherwise are no longer drawn (they were lowered for nothing)
    learned = [(k, v) for k in kept.space for v in kept.space[k].choices if kept._splits_otherwise(k, v)]
    assert learned and all(v not in kept._choices(k) for k, v in learned)
    others = [c for _ in range(3) for c in free.propose(None, 8)]
    assert any(output_partition_of(free, c) != reference for c in others)


def output_partition_of(search, c):
    from ember.loop.lower import lower as lower_
    from ember.loop.knobs import decisions

    with decisions(c.values):
        sch, args, name = search.task.builder.schedule(search.target)
    return output_partition(lower_(sch, args, name), search.target.cores)
