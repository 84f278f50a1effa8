"""Aligned arrays and their numpy interop."""
import ml_dtypes
import numpy as np
import pytest

from ember import runtime as rt


@pytest.mark.parametrize("dtype", ["float32", "float64", "int8", "bool", "float16", "bfloat16"])
@pytest.mark.parametrize("shape", [(0,), (1,), (7,), (3, 5), (2, 3, 4)])
def test_empty_is_aligned(shape, dtype):
    a = rt.empty(shape, dtype)
    assert a.shape == shape
    assert a.numpy().flags.c_contiguous
    if a.size:
        assert a.data_ptr % 64 == 0
    want = np.dtype(ml_dtypes.bfloat16) if dtype == "bfloat16" else np.dtype(dtype)
    assert a.dtype == want


def test_custom_alignment_and_zeros():
    a = rt.zeros((5, 3), "int32", align=256)
    assert a.data_ptr % 256 == 0
    assert (a.numpy() == 0).all()
    assert rt.empty(4).dtype == np.float32  # float32 by default


def test_array_copies():
    src = np.arange(10, dtype=np.float32)
    a = rt.array(src)
    assert a.data_ptr % 64 == 0
    assert not np.shares_memory(a.numpy(), src)
    src[0] = 99
    assert a.numpy()[0] == 0
    b = rt.array([[1, 2], [3, 4]], dtype="bfloat16")
    assert b.dtype == np.dtype(ml_dtypes.bfloat16)
    np.testing.assert_array_equal(b.numpy().astype(np.float32), [[1, 2], [3, 4]])


def test_numpy_view_is_zero_copy():
    a = rt.array(np.zeros(8, np.float64))
    v = a.numpy()
    v[3] = 5
    assert a.numpy()[3] == 5
    assert np.shares_memory(np.asarray(a), v)
    assert np.asarray(a, dtype=np.float32).dtype == np.float32
    assert len(a) == 8 and "NDArray" in repr(a)


def test_from_numpy_zero_copy_only_when_safe():
    aligned = rt.empty(16).numpy()
    assert np.shares_memory(rt.from_numpy(aligned).numpy(), aligned)
    shifted = rt.empty(17).numpy()[1:]  # 4 bytes past a 64-byte boundary
    moved = rt.from_numpy(shifted)
    assert not np.shares_memory(moved.numpy(), shifted) and moved.data_ptr % 64 == 0
    strided = rt.empty(32).numpy()[::2]
    copy = rt.from_numpy(strided)
    assert copy.numpy().flags.c_contiguous and not np.shares_memory(copy.numpy(), strided)


def test_copyfrom():
    a = rt.empty((2, 2))
    a.copyfrom([[1, 2], [3, 4]])
    np.testing.assert_array_equal(a.numpy(), [[1, 2], [3, 4]])


def test_large_buffers_are_writable_zeroed_and_page_aligned():
    """Past LARGE_BYTES a buffer is a mapping of its own: zero, writable, aligned to a page;
    more than the machine can map is a MemoryError (which the runtime and the compiler report
    as a ResourceError), not an OSError."""
    from ember.runtime.ndarray import LARGE_BYTES, data_pointer, raw_bytes

    a = raw_bytes(LARGE_BYTES + 3)
    assert a.size == LARGE_BYTES + 3 and a.flags.writeable and not a.any()
    assert data_pointer(a) % 64 == 0
    a[::4096] = 7
    assert int(a.sum()) == 7 * len(range(0, a.size, 4096))
    with pytest.raises(MemoryError):
        raw_bytes(1 << 60)
