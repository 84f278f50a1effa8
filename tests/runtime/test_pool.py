"""The run pool's gate admits runs first come, first served (ember.runtime.pool.FairGate)."""
import threading
import time

from ember.runtime.pool import FairGate


def _wait_until(cond, seconds=5.0):
    end = time.monotonic() + seconds
    while not cond():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.001)


def test_waiters_get_their_turns_in_arrival_order_and_a_releaser_cannot_barge():
    gate = FairGate(1)
    gate.acquire()  # the main thread holds the only turn
    order = []

    def client(k):
        gate.acquire()
        order.append(k)
        gate.release()

    threads = []
    for k in range(5):  # queue up one at a time, so arrival order is known
        th = threading.Thread(target=client, args=(k,))
        th.start()
        threads.append(th)
        _wait_until(lambda: gate.waiting == k + 1)
    gate.release()
    gate.acquire()  # the releaser asks again at once: it comes after all five
    order.append("main")
    gate.release()
    for th in threads:
        th.join()
    assert order == [0, 1, 2, 3, 4, "main"]


def test_turns_are_counted():
    gate = FairGate(2)
    gate.acquire()
    gate.acquire()
    got = threading.Event()
    th = threading.Thread(target=lambda: (gate.acquire(), got.set()))
    th.start()
    _wait_until(lambda: gate.waiting == 1)
    assert not got.is_set()
    gate.release()
    th.join(5)
    assert got.is_set() and gate.waiting == 0
    gate.release()
    gate.release()
    for _ in range(2):
        gate.acquire()  # two turns free again: neither blocks
