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
import sys

import numpy as np

from ..errors import ArgumentError, DTypeError, EmberError, ShapeError
from .ndarray import NDArray, numpy_dtype


def _find_data_offset():
    """Offset of the data pointer inside a numpy array object, if we can read it directly.

    ``arr.ctypes.data`` costs over a microsecond; reading the ``data`` field of numpy's
    ``PyArrayObject`` (right after the object header) costs a tenth of that. We verify the
    layout on live arrays and fall back to the public API if it does not hold.
    """
    if sys.implementation.name != "cpython":
        return None
    probe = np.arange(16, dtype=np.float64)
    for off in (16,):
        try:
            ok = all(ctypes.c_void_p.from_address(id(x) + off).value == x.ctypes.data
                     for x in (probe, probe[3:], probe.reshape(4, 4)[1:, 2:], np.empty(0)))
        except (ValueError, OSError):
            ok = False
        if ok:
            return off
    return None


_DATA_OFFSET = _find_data_offset()
_read_ptr = ctypes.c_void_p.from_address


def data_pointer(a: np.ndarray) -> int:
    if _DATA_OFFSET is not None:
        return _read_ptr(id(a) + _DATA_OFFSET).value or 0
    return a.__array_interface__["data"][0]


def eval_dim(e, env: dict):
    """Evaluate a metadata shape/stride entry (int, scalar name, ``[op, a, b]``) under ``env``."""
    if isinstance(e, int) or e is None:
        return e
    if isinstance(e, str):
        return env.get(e)
    a, b = eval_dim(e[1], env), eval_dim(e[2], env)
    if a is None or b is None:
        return None
    op = e[0]
    if op == "Add":
        return a + b
    if op == "Sub":
        return a - b
    if op == "Mul":
        return a * b
    if op == "FloorDiv":
        return a // b if b else None
    if op == "FloorMod":
        return a % b if b else None
    if op == "Min":
        return min(a, b)
    if op == "Max":
        return max(a, b)
    return None


def dim_str(e) -> str:
    if isinstance(e, (int, str)):
        return str(e)
    if e is None:
        return "?"
    sym = {"Add": "+", "Sub": "-", "Mul": "*", "FloorDiv": "//", "FloorMod": "%"}.get(e[0])
    if sym:
        return f"({dim_str(e[1])} {sym} {dim_str(e[2])})"
    return f"{e[0].lower()}({dim_str(e[1])}, {dim_str(e[2])})"


class _BufferParam:
    """One buffer parameter, with everything a call needs precomputed."""

    __slots__ = ("name", "index", "dtype", "dtype_name", "shape", "strides", "align_mask",
                 "static_shape", "c_strides", "explicit_strides", "ndim")

    def __init__(self, meta: dict, index: int):
        self.name = meta["name"]
        self.index = index
        self.dtype_name = meta["dtype"]
        self.dtype = numpy_dtype(meta["dtype"])
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
        self._static = not scalars and all(b.static_shape is not None and not b.explicit_strides
                                           for b in self._bufs)
        argtypes = [ctypes.c_void_p] * len(self._bufs)
        argtypes += [ctypes.c_double if p["abi"] == "double" else ctypes.c_int64 for p in scalars]
        cfunc.argtypes = argtypes
        cfunc.restype = ctypes.c_int32

    @property
    def param_names(self) -> list:
        return [p["name"] for p in self.meta["params"]]

    def signature(self) -> str:
        args = [f"{b.name}: {b.dtype_name}[{', '.join(dim_str(s) for s in b.shape)}]" for b in self._bufs]
        args += [f"{n}: {t}" for n, t, inferred in self._scalars if not inferred]
        return f"{self.name}({', '.join(args)})"

    def __repr__(self) -> str:
        return f"<ember Kernel {self.signature()}>"

    # --- calling --------------------------------------------------------------------------
    def __call__(self, *args):
        if len(args) != self._nargs:
            raise ArgumentError(f"kernel {self.name!r} takes {self._nargs} argument(s) "
                                f"{self.signature()}, got {len(args)}")
        if self._static:
            ptrs = []
            for p, a in zip(self._bufs, args):
                if type(a) is not np.ndarray:
                    a = self._coerce(p, a)
                if a.dtype is not p.dtype and a.dtype != p.dtype:
                    self._bad_dtype(p, a)
                if a.shape != p.static_shape:
                    self._bad_shape(p, a, {})
                if a.strides != p.c_strides and not a.flags.c_contiguous:
                    self._bad_layout(p, a, "must be C-contiguous")
                ptr = data_pointer(a)
                if ptr & p.align_mask:
                    self._bad_align(p, ptr)
                ptrs.append(ptr)
            return self._run(ptrs)
        return self._run(self._marshal_dynamic(args))

    def _run(self, cargs: list):
        try:
            rc = self._cfunc(*cargs)
        except ctypes.ArgumentError as exc:
            raise ArgumentError(f"kernel {self.name!r}: bad scalar argument: {exc}") from None
        if rc != 0:
            raise EmberError(f"kernel {self.name!r} failed (status {rc}): a scratch allocation "
                             f"ran out of memory")

    def _marshal_dynamic(self, args) -> list:
        env: dict = {}
        arrays = []
        for p, a in zip(self._bufs, args):
            if type(a) is not np.ndarray:
                a = self._coerce(p, a)
            if a.dtype is not p.dtype and a.dtype != p.dtype:
                self._bad_dtype(p, a)
            if a.ndim != p.ndim:
                self._bad_shape(p, a, env)
            for k, s in enumerate(p.shape):
                got = a.shape[k]
                if isinstance(s, int):
                    if got != s:
                        self._bad_shape(p, a, env)
                elif isinstance(s, str):
                    bound = env.setdefault(s, got)
                    if bound != got:
                        self._bad_shape(p, a, env, f"{s} = {bound} from an earlier argument")
            arrays.append((p, a))
        for name, value in zip(self._explicit, args[len(self._bufs):]):
            if isinstance(value, (np.ndarray, NDArray)):
                raise ArgumentError(f"kernel {self.name!r}: scalar parameter {name!r} got an array; "
                                    f"the signature is {self.signature()}")
            env[name] = value
        ptrs = []
        for p, a in arrays:
            for k, s in enumerate(p.shape):  # dimensions that are expressions of the scalars
                if isinstance(s, list):
                    want = eval_dim(s, env)
                    if want is not None and want != a.shape[k]:
                        self._bad_shape(p, a, env)
            if p.explicit_strides:
                item = p.dtype.itemsize
                for k, s in enumerate(p.strides):
                    want = eval_dim(s, env)
                    if want is not None and a.shape[k] > 1 and a.strides[k] != want * item:
                        self._bad_layout(p, a, f"needs strides (in elements) "
                                               f"({', '.join(dim_str(x) for x in p.strides)})")
            elif not a.flags.c_contiguous:
                self._bad_layout(p, a, "must be C-contiguous")
            ptr = data_pointer(a)
            if ptr & p.align_mask:
                self._bad_align(p, ptr)
            ptrs.append(ptr)
        out = ptrs
        for name, dtype, _ in self._scalars:
            v = env[name]
            out.append(float(v) if _is_float(dtype) else int(v))
        return out

    # --- errors -----------------------------------------------------------------------------
    def _where(self, p: _BufferParam) -> str:
        return f"kernel {self.name!r}: argument {p.name!r} (#{p.index})"

    def _coerce(self, p: _BufferParam, a) -> np.ndarray:
        if isinstance(a, NDArray):
            return a._arr
        raise ArgumentError(f"{self._where(p)} must be a numpy array or ember NDArray, got "
                            f"{type(a).__name__}")

    def _bad_dtype(self, p, a):
        raise DTypeError(f"{self._where(p)} has dtype {a.dtype}, expected {p.dtype_name}")

    def _bad_shape(self, p, a, env, why: str = ""):
        bound = ", ".join(f"{k}={v}" for k, v in env.items() if isinstance(k, str))
        want = "(" + ", ".join(dim_str(s) for s in p.shape) + ("," if p.ndim == 1 else "") + ")"
        extra = f" with {bound}" if bound else ""
        raise ShapeError(f"{self._where(p)} has shape {tuple(a.shape)}, expected {want}{extra}"
                         + (f" ({why})" if why else ""))

    def _bad_layout(self, p, a, what: str):
        raise ArgumentError(f"{self._where(p)} {what} (got strides {a.strides} in bytes); pass "
                            f"np.ascontiguousarray(x) or ember.runtime.array(x)")

    def _bad_align(self, p, ptr: int):
        align = p.align_mask + 1
        raise ArgumentError(f"{self._where(p)} is not {align}-byte aligned (address {ptr:#x} is "
                            f"{ptr % align} bytes off); allocate it with ember.runtime.empty/"
                            f"array, which align to {align} bytes")


def _is_float(dtype: str) -> bool:
    return dtype.startswith(("float", "bfloat"))
