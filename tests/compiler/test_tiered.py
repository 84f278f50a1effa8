"""The tiered executable's hand-over between the user's first run and the background build
(ember.compiler.tiered), with fake executables: no compile needed."""
import threading

from ember.compiler.tiered import TieredExecutable


class _Gated:
    """An executable whose run waits for a gate, noting the threads it was given."""

    def __init__(self, threads: int):
        self.threads_per_run, self.seen, self.gate = threads, [], threading.Event()

    def run(self, *a, **k):
        self.seen.append(self.threads_per_run)
        assert self.gate.wait(60)
        return []


def test_the_first_run_has_every_core_and_the_build_starts_after_it(monkeypatch):
    """The first result is what a user waits for: a run right after the compile takes every
    core, and the tier-1 build (which would leave it one) starts when it ends."""
    from ember.compiler import tiered
    from ember.runtime.pool import host_cores

    monkeypatch.setattr(tiered, "FIRST_RUN_MOST", 60.0)
    first, final, started = _Gated(host_cores()), _Gated(host_cores()), threading.Event()

    def steps():
        started.set()
        yield final, {"g": 1}
    exe = TieredExecutable(first, {"g": 0}, steps(), 0.0)
    runner = threading.Thread(target=exe.run)
    runner.start()
    # well past FIRST_RUN_GRACE with the run in flight: the build has not started
    assert not started.wait(4 * tiered.FIRST_RUN_GRACE) and first.seen == [host_cores()]
    first.gate.set()
    runner.join(60)
    assert started.wait(60) and exe.wait(60)
    assert first.threads_per_run == max(1, host_cores() - 1)  # (runs at tier 0 after it leave a core)


def test_without_a_run_the_build_starts_after_the_grace():
    from ember.runtime.pool import host_cores

    first, final = _Gated(host_cores()), _Gated(host_cores())
    exe = TieredExecutable(first, {"g": 0}, iter([(final, {"g": 1})]), 0.0)
    assert exe.wait(60) and exe.current is final and first.seen == []
