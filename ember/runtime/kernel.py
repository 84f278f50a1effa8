"""A compiled kernel as a Python callable that checks its arguments and calls into native code.

The checks are what the generated code assumes: dtype, shape (binding symbolic dimensions
consistently across arguments), layout, and the pointer alignment that LLVM was promised. A
wrong argument raises :class:`ArgumentError`/:class:`ShapeError`/:class:`DTypeError` naming the
kernel, the parameter, and what was expected; nothing is copied behind the caller's back.

Everything that can be is worked out once, when the kernel is loaded, so that a call of a
kernel over static shapes costs a few attribute reads per array plus the ctypes call.
"""
from __future__ import annotations

import ctypes

import numpy as np

from ..errors import ArgumentError, DTypeError, EmberError, ShapeError
from .call import make_call
from .ndarray import NDArray, numpy_dtype
from .shapes import compile_shapes, evaluate, text


class _BufferParam:
    """One buffer parameter, with everything a call needs precomputed."""

    __slots__ = ("name", "index", "dtype", "dtype_name", "shape", "strides", "align_mask",
                 "static_shape", "c_strides", "explicit_strides", "ndim", "output")

    def __init__(self, meta: dict, index: int):
        self.name = meta["name"]
        self.index = index
        self.dtype_name = meta["dtype"]
        self.dtype = numpy_dtype(meta["dtype"])
        self.output = bool(meta.get("output", False))
        self.shape = tuple(meta["shape"])
        self.ndim = len(self.shape)
        self.strides = None if meta.get("strides") is None else tuple(meta["strides"])
        align = int(meta.get("align", self.dtype.itemsize))
        # Alignment up to the element size is what numpy already guarantees.
        self.align_mask = align - 1 if align > self.dtype.itemsize else 0
        static = all(isinstance(s, int) for s in self.shape)
        self.static_shape = self.shape if static else None
        self.explicit_strides = self.strides is not None
        if static and not self.explicit_strides:
            acc, cs = self.dtype.itemsize, []
            for s in reversed(self.shape):
                cs.append(acc)
                acc *= max(s, 1)
            self.c_strides = tuple(reversed(cs))
        else:
            self.c_strides = None


class Kernel:
    """A native kernel: ``kernel(*arrays, *scalars)``.

    Arrays come in parameter order; scalar parameters that appear as a dimension of some buffer
    are inferred from the arrays, the others follow the arrays as Python numbers.
    """

    def __init__(self, module, cfunc, meta: dict):
        self.module = module
        self.name = meta["name"]
        self.meta = meta
        self._cfunc = cfunc
        self._bufs = []
        scalars = []
        for p in meta["params"]:
            if p["kind"] == "buffer":
                self._bufs.append(_BufferParam(p, len(self._bufs)))
            else:
                scalars.append(p)
        # A scalar that some buffer has as a whole dimension is bound from that array's shape.
        dims = {s for b in self._bufs for s in b.shape if isinstance(s, str)}
        self._scalars = [(p["name"], p["dtype"], p["name"] in dims) for p in scalars]
        self._explicit = [name for name, _, inferred in self._scalars if not inferred]
        self._nargs = len(self._bufs) + len(self._explicit)
        self._buffer_shapes = None  # (compiled when a layout first checks a call of this kernel)
        argtypes = [ctypes.c_void_p] * len(self._bufs)
        argtypes += [ctypes.c_double if p["abi"] == "double" else ctypes.c_int64 for p in scalars]
        cfunc.argtypes = argtypes
        cfunc.restype = ctypes.c_int32
        # Calls go straight to the generated checker: a per-kernel subclass whose __call__ *is*
        # that function saves a Python frame (about 0.1 us) per call.
        self._call = make_call(self)
        self.__class__ = type("Kernel", (Kernel,), {"__call__": staticmethod(self._call),
                                                    "__module__": Kernel.__module__})

    @property
    def param_names(self) -> list:
        return [p["name"] for p in self.meta["params"]]

    def signature(self) -> str:
        args = [f"{b.name}: {b.dtype_name}[{', '.join(text(s) for s in b.shape)}]" for b in self._bufs]
        args += [f"{n}: {t}" for n, t, inferred in self._scalars if not inferred]
        return f"{self.name}({', '.join(args)})"

    def __repr__(self) -> str:
        return f"<ember Kernel {self.signature()}>"

    # --- calling --------------------------------------------------------------------------
    def __call__(self, *args):
        """Check ``args`` against the parameters and run the kernel (see the class docstring)."""
        return self._call(*args)

    def prepare(self, *args) -> tuple:
        """Check ``args`` as a call would and return the native function's arguments:
        ``kernel.run_prepared(kernel.prepare(*args))`` is ``kernel(*args)`` without the checks'
        few microseconds in the call (what a profiler times)."""
        if "_prepare" not in self.__dict__:
            self._prepare = make_call(self, prepare=True)
        return self._prepare(*args)

    def run_prepared(self, cargs: tuple) -> None:
        """Run the kernel on arguments from :meth:`prepare`."""
        rc = self._cfunc(*cargs)
        if rc:
            self._failed(rc)

    def _check_extra(self, arrays: tuple, env: dict) -> None:
        """Checks that need every scalar: dimensions that are expressions, explicit strides."""
        for p, a in zip(self._bufs, arrays):
            for k, s in enumerate(p.shape):
                if isinstance(s, list):
                    want = evaluate(s, env)
                    if want is not None and want != a.shape[k]:
                        self._bad_shape(p.index, a, env)
            if p.explicit_strides:
                item = p.dtype.itemsize
                for k, s in enumerate(p.strides):
                    want = evaluate(s, env)
                    if want is not None and a.shape[k] > 1 and a.strides[k] != want * item:
                        self._bad_layout(p.index, a, f"needs strides (in elements) "
                                                     f"({', '.join(text(x) for x in p.strides)})")

    # --- errors -----------------------------------------------------------------------------
    def _where(self, index: int) -> str:
        return f"kernel {self.name!r}: argument {self._bufs[index].name!r} (#{index})"

    def _bad_count(self, args):
        raise ArgumentError(f"kernel {self.name!r} takes {self._nargs} argument(s) "
                            f"{self.signature()}, got {len(args)}")

    def _coerce(self, index: int, a) -> np.ndarray:
        if isinstance(a, NDArray):
            return a._arr
        if isinstance(a, np.ndarray):  # a subclass (memmap, ...): same memory layout
            return a
        raise ArgumentError(f"{self._where(index)} must be a numpy array or ember NDArray, got "
                            f"{type(a).__name__}")

    def _bad_dtype(self, index: int, a):
        raise DTypeError(f"{self._where(index)} has dtype {a.dtype}, expected "
                         f"{self._bufs[index].dtype_name}")

    def _bad_shape(self, index: int, a, env: dict, name: str = ""):
        p = self._bufs[index]
        bound = ", ".join(f"{k}={v}" for k, v in env.items())
        want = "(" + ", ".join(text(s) for s in p.shape) + ("," if p.ndim == 1 else "") + ")"
        extra = f" with {bound}" if bound else ""
        why = f" ({name} was bound by an earlier argument)" if name else ""
        raise ShapeError(f"{self._where(index)} has shape {tuple(a.shape)}, expected {want}{extra}{why}")

    def _bad_layout(self, index: int, a, what: str = "must be C-contiguous"):
        raise ArgumentError(f"{self._where(index)} {what} (got strides {a.strides} in bytes); "
                            f"pass np.ascontiguousarray(x) or ember.runtime.array(x)")

    def _read_only(self, index: int):
        raise ArgumentError(f"{self._where(index)} is written by the kernel but is read-only")

    def _aliased(self, index: int, ptrs: tuple):
        other = next(k for k, p in enumerate(ptrs) if k != index and p == ptrs[index])
        raise ArgumentError(f"{self._where(index)} is the same memory as argument "
                            f"{self._bufs[other].name!r} (#{other}); kernels assume their buffers "
                            f"do not overlap, so pass a separate output array")

    def buffer_shapes(self, sizes: dict) -> list:
        """Each buffer parameter's shape at the kernel's size parameters ``sizes`` (by name)."""
        if self._buffer_shapes is None:
            self._buffer_shapes = compile_shapes([p.shape for p in self._bufs])
        return self._buffer_shapes(sizes)

    def _bad_scalars(self, values, exc):
        names = ", ".join(self._explicit)
        raise ArgumentError(f"kernel {self.name!r}: bad scalar argument for ({names}): got "
                            f"{tuple(values)!r} ({exc})") from None

    def failure(self) -> str:
        """Why this kernel returned non-zero: Ember's own kernels only when a scratch allocation
        fails; an offloaded one when its library refused or failed."""
        backend = self.meta.get("backend")
        if backend:
            return f"its offload backend {backend!r} failed (the library refused the primitive or ran out of memory)"
        return "a scratch allocation ran out of memory"

    def _failed(self, rc: int):
        raise EmberError(f"kernel {self.name!r} failed (status {rc}): {self.failure()}")

    def _bad_align(self, index: int, ptr: int):
        p = self._bufs[index]
        align = p.align_mask + 1
        raise ArgumentError(f"{self._where(index)} is not {align}-byte aligned (address {ptr:#x} is "
                            f"{ptr % align} bytes off); allocate it with ember.runtime.empty/"
                            f"array, which align to {align} bytes")


