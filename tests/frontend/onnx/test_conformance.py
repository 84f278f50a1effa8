"""The conformance runner's child processes: same results as in this process, in the cases'
order, and a case that kills its process is recorded as a crash while the rest still run."""
import ctypes
import dataclasses
import signal
import time

import numpy as np

from ember.frontend.onnx.conformance import ember_runner, run_cases, run_cases_in_processes

from .helpers import model, node, vi


@dataclasses.dataclass
class Case:  # the fields of onnx's node TestCase that the runner reads
    name: str
    model: object
    data_sets: list
    rtol: float = 1e-3
    atol: float = 1e-7


def tiny_cases(pattern=None) -> list:
    """Five one-node models, quick to collect (onnx's 1,884 take ~9 s per process)."""
    x = np.linspace(-2, 2, 12, dtype="float32").reshape(3, 4)
    out = []
    for k, (op, f) in enumerate([("Abs", np.abs), ("Neg", np.negative), ("Relu", lambda v: np.maximum(v, 0)),
                                 ("Exp", np.exp), ("Sigmoid", lambda v: 1 / (1 + np.exp(-v)))]):
        m = model([node(op, ["x"], ["y"])], [vi("x", [3, 4])], [vi("y", [3, 4])])
        out.append(Case(f"case{k}_{op.lower()}", m, [([x], [f(x).astype("float32")])]))
    return [c for c in out if pattern is None or pattern in c.name]


def segfault_on_neg():
    """A runner that dies (SIGSEGV) on the Neg case and runs the others with Ember."""
    run = ember_runner()

    def run_model(m, inputs):
        if m.graph.node[0].op_type == "Neg":
            ctypes.string_at(0)
        return run(m, inputs)
    return run_model


def hang_on_relu():
    """A runner that prints to stdout, and hangs in native code (no SIGALRM gets through) on
    the Relu case."""
    run = ember_runner()

    def run_model(m, inputs):
        print("noise from the model's runner", flush=True)
        if m.graph.node[0].op_type == "Relu":  # (as a wait on a lock that never comes: the alarm
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})  # does not end it)
            ctypes.CDLL(None).sleep(3600)
        return run(m, inputs)
    return run_model


def slow_to_start():
    """The runner of a child that starts slowly (its imports on a loaded machine): 22 s, longer
    than the test's patience, which must itself outlast a real case under CI's load."""
    time.sleep(22)
    return ember_runner()


def test_a_child_slow_to_start_is_not_taken_for_a_hung_case():
    """``patience`` bounds a case, not a child's start: one that needs longer than that before
    its first case (CI once saw it, under load) runs its cases; it used to be killed, and every
    case it had left recorded as a crash."""
    res = run_cases_in_processes(runner=f"{__name__}:slow_to_start", cases=f"{__name__}:tiny_cases", processes=1,
                                 timeout=30, patience=20.0)
    assert [r.name for r in res] == [c.name for c in tiny_cases()] and all(r.passed for r in res), \
        [r.reason for r in res if not r.passed]


def test_child_processes_give_the_same_results_in_order():
    here = run_cases(tiny_cases(), ember_runner())
    seen = []
    there = run_cases_in_processes(cases=f"{__name__}:tiny_cases", processes=2,
                                   progress=lambda k, r: seen.append((k, r.name)))
    assert sorted(k for k, _ in seen) == list(range(5)) and {n for _, n in seen} == {r.name for r in here}
    assert [(r.name, r.op_type, r.passed) for r in there] == [(r.name, r.op_type, r.passed) for r in here]
    assert all(r.passed for r in there)


def test_a_crash_is_recorded_and_the_rest_still_run():
    res = run_cases_in_processes(runner=f"{__name__}:segfault_on_neg", cases=f"{__name__}:tiny_cases", processes=1)
    by = {r.name: r for r in res}
    assert [r.name for r in res] == [c.name for c in tiny_cases()]
    crash = by["case1_neg"]
    assert not crash.passed and crash.reason.startswith("crash: the process died (signal 11)"), crash.reason
    assert crash.op_type == "Neg"
    assert all(r.passed for n, r in by.items() if n != "case1_neg")  # the cases after it ran in a new child


def test_a_hung_case_is_killed_and_recorded():
    # patience must outlast a real case: the first compile in a fresh child (LLVM's start, a
    # cold kernel) took over 5 s under CI's load, and that case was killed as hung too
    res = run_cases_in_processes(runner=f"{__name__}:hang_on_relu", cases=f"{__name__}:tiny_cases", processes=1,
                                 timeout=30, patience=25.0)
    by = {r.name: r for r in res}
    assert by["case2_relu"].reason.startswith("crash: the process hung"), by["case2_relu"].reason
    # stdout noise did not get in the way
    assert all(r.passed for n, r in by.items() if n != "case2_relu"), [(r.name, r.reason) for r in res]
