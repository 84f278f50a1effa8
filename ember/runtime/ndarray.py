"""Aligned n-d arrays that share memory with numpy.

Kernels promise LLVM that buffer pointers are aligned (64 bytes by default) so that vector
loads need no peeling; numpy only guarantees 16. :class:`NDArray` owns 64-byte-aligned memory
and hands out zero-copy numpy views; kernels accept NDArrays and plain numpy arrays alike.
"""
from __future__ import annotations

import ctypes
import math
import mmap
import sys
from typing import Any, Sequence

import numpy as np

DEFAULT_ALIGN = 64


def numpy_dtype(dtype: Any) -> np.dtype:
    """``"float32"``, ``"bfloat16"`` and the narrow types (``"float8_e4m3fn"``, ``"int4"``:
    through ml_dtypes) or any numpy dtype-like."""
    if isinstance(dtype, str) and (dtype == "bfloat16" or dtype.startswith(("float8", "float4", "int4", "uint4",
                                                                              "int2", "uint2"))):
        import ml_dtypes

        return np.dtype(getattr(ml_dtypes, dtype))
    return np.dtype(dtype)


def _find_data_offset():
    """Offset of the data pointer inside a numpy array object, if we can read it directly.

    ``arr.ctypes.data`` and ``arr.__array_interface__`` cost over a microsecond each; reading
    the ``data`` field of numpy's ``PyArrayObject`` (right after the object header) costs a
    tenth of that. The layout is verified on live arrays; otherwise the public API is used.
    """
    if sys.implementation.name != "cpython":
        return None
    probe = np.arange(16, dtype=np.float64)
    try:
        ok = all(ctypes.c_void_p.from_address(id(x) + 16).value == x.ctypes.data
                 for x in (probe, probe[3:], probe.reshape(4, 4)[1:, 2:], probe[::-1]))
    except (ValueError, OSError):
        ok = False
    return 16 if ok else None


DATA_OFFSET = _find_data_offset()


def data_pointer(a: np.ndarray) -> int:
    """The address of ``a``'s first element."""
    if DATA_OFFSET is not None:
        return ctypes.c_void_p.from_address(id(a) + DATA_OFFSET).value or 0
    return a.__array_interface__["data"][0]


# bytes from which an array's memory is a bytearray's, not numpy's: numpy advises the kernel to
# back a large allocation with huge pages, and on a host whose free memory is fragmented each
# first touch then waits for compaction (a model's folded weights, ViT-B/16's 330 MB: 0.1-0.7 s
# to fault in, 0.12 s steadily in small pages; VGG-19's weights read from its file 0.1-0.9 s)
LARGE_BYTES = 4 << 20  # (numpy advises huge pages from 4 MiB)


# (a large buffer's pages made present at once, MAP_POPULATE (Linux): one pass in the kernel,
# not a fault per 4 KiB page as a kernel's threads first write them -- ViT-B/16's folded weights,
# 330 MB: their packing run 0.33-0.81 s -> 0.21-0.24 s)
_POPULATE = getattr(mmap, "MAP_POPULATE", 0)


def raw_bytes(n: int) -> np.ndarray:
    """``n`` writable bytes (uint8), uninitialized where small: past :data:`LARGE_BYTES` an
    anonymous mapping of their own (zero pages, made present at once; unmapped when the last
    array over them goes), not numpy's huge-page-advised memory."""
    if n < LARGE_BYTES:
        return np.empty(n, dtype=np.uint8)
    if _POPULATE:
        try:
            return np.frombuffer(mmap.mmap(-1, n, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | _POPULATE), np.uint8)
        except OSError as e:  # (ENOMEM: what callers turn into a ResourceError, as a bytearray's)
            raise MemoryError(f"{n} bytes: {e}") from None
    return np.frombuffer(bytearray(n), np.uint8)


def _aligned_empty(shape: tuple, dtype: np.dtype, align: int) -> np.ndarray:
    nbytes = math.prod(shape) * dtype.itemsize  # (this runs for every output of every run: no numpy
    raw = raw_bytes(nbytes + align)  # reductions, one array made over the raw bytes)
    # The array keeps ``raw`` alive through its ``base``.
    return np.ndarray(shape, dtype, raw, (-data_pointer(raw)) % align)


class NDArray:
    """A C-contiguous array in ``align``-byte-aligned memory; ``numpy()`` views it without copying."""

    __slots__ = ("_arr", "__weakref__")

    def __init__(self, arr: np.ndarray):
        self._arr = arr

    @property
    def shape(self) -> tuple:
        return self._arr.shape

    @property
    def dtype(self) -> np.dtype:
        return self._arr.dtype

    @property
    def ndim(self) -> int:
        return self._arr.ndim

    @property
    def size(self) -> int:
        return self._arr.size

    @property
    def nbytes(self) -> int:
        return self._arr.nbytes

    @property
    def data_ptr(self) -> int:
        """Address of the first element."""
        return self._arr.ctypes.data

    def numpy(self) -> np.ndarray:
        """A numpy view of the same memory (writes through both ways)."""
        return self._arr

    def copyfrom(self, src) -> "NDArray":
        """Copy ``src`` (array-like of the same shape) into this array."""
        np.copyto(self._arr, np.asarray(src, dtype=self._arr.dtype))
        return self

    def __array__(self, dtype=None, copy=None):
        if dtype is None or np.dtype(dtype) == self._arr.dtype:
            return self._arr.copy() if copy else self._arr
        return self._arr.astype(dtype)

    def __len__(self) -> int:
        return len(self._arr)

    def __repr__(self) -> str:
        return f"ember.NDArray({self._arr!r})"


def empty(shape: Sequence[int] | int, dtype: Any = "float32", align: int = DEFAULT_ALIGN) -> NDArray:
    """An uninitialized aligned array."""
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(int(s) for s in shape)
    return NDArray(_aligned_empty(shape, numpy_dtype(dtype), align))


def zeros(shape: Sequence[int] | int, dtype: Any = "float32", align: int = DEFAULT_ALIGN) -> NDArray:
    """An aligned array of zeros."""
    out = empty(shape, dtype, align)
    out._arr.fill(0)
    return out


def array(obj: Any, dtype: Any = None, align: int = DEFAULT_ALIGN) -> NDArray:
    """Copy ``obj`` (anything numpy accepts) into a new aligned array."""
    src = np.asarray(obj, dtype=None if dtype is None else numpy_dtype(dtype))
    out = NDArray(_aligned_empty(src.shape, src.dtype, align))
    np.copyto(out._arr, src)
    return out


def from_numpy(arr: np.ndarray, align: int = DEFAULT_ALIGN) -> NDArray:
    """Wrap ``arr`` without copying when it is C-contiguous and aligned, else copy it."""
    arr = np.asarray(arr)
    if arr.flags.c_contiguous and arr.ctypes.data % align == 0:
        return NDArray(arr)
    return array(arr, align=align)
