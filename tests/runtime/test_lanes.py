"""Lanes: a finished run leaves nothing of itself behind on the lane that ran it."""
import gc
import weakref

from ember.runtime.lanes import Lanes


class Payload:  # stands for a run's executable and arrays
    pass


def test_a_lane_does_not_keep_the_last_runs_closure_or_result():
    lanes = Lanes()
    held, result = Payload(), Payload()
    ref_held, ref_result = weakref.ref(held), weakref.ref(result)
    got = lanes.execute(1, lambda: (held, result)[1])
    assert got is result
    del held, result, got
    gc.collect()
    assert ref_held() is None and ref_result() is None


def test_an_exception_is_handed_back_and_not_kept():
    lanes = Lanes()
    held = Payload()
    ref = weakref.ref(held)

    def fail():
        raise ValueError(repr(held))

    try:
        lanes.execute(1, fail)
    except ValueError:
        pass
    else:
        raise AssertionError("the lane's exception was not raised")
    del held, fail
    gc.collect()
    assert ref() is None
