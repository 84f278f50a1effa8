import ctypes
import ctypes.util

import pytest


@pytest.fixture
def omp_threads():
    """Set libgomp's team size for kernels called from this thread; restored afterwards."""
    gomp = ctypes.CDLL(ctypes.util.find_library("gomp") or "libgomp.so.1")
    before = gomp.omp_get_max_threads()
    yield gomp.omp_set_num_threads
    gomp.omp_set_num_threads(before)
