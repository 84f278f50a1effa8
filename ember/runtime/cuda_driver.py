"""The CUDA driver API through NVIDIA's ``cuda-bindings`` (the optional ``cuda`` extra).

One :class:`CudaDevice` per process and GPU: the device's primary context (made current on
each thread that calls), device memory, modules loaded from PTX (the driver compiles them for
the device), launches, streams, events and CUDA graphs. Every failed call raises a
:class:`~ember.errors.DeviceError` naming the call and the driver's error; a host without the
bindings, the driver or a GPU gets a :class:`~ember.errors.TargetError` saying which.

Device pointers are plain ints; host buffers are passed by address, so nothing here copies
behind the caller's back.
"""
from __future__ import annotations

import ctypes
import threading
from typing import Optional

import numpy as np

from ..errors import CompileError, DeviceError, ResourceError, TargetError

__all__ = ["CudaDevice", "Launch", "cuda_unavailable", "device"]

_DEVICES: dict = {}
_LOCK = threading.Lock()


def _bindings():
    try:
        from cuda.bindings import driver
    except ImportError:
        try:
            from cuda import cuda as driver  # (cuda-python before 12.6 named the module so)
        except ImportError:
            raise TargetError("running on a GPU needs NVIDIA's cuda-bindings: pip install ember[cuda] "
                              "(or pip install cuda-bindings)") from None
    return driver


def cuda_unavailable() -> Optional[str]:
    """Why no GPU can run here (``None`` where one can): no bindings, no driver, no device."""
    try:
        device(0)
    except TargetError as e:
        return str(e)
    return None


def device(ordinal: int = 0) -> "CudaDevice":
    """The process's :class:`CudaDevice` for GPU ``ordinal`` (made on first use)."""
    with _LOCK:
        if ordinal not in _DEVICES:
            _DEVICES[ordinal] = CudaDevice(ordinal)
        return _DEVICES[ordinal]


class CudaDevice:
    """One GPU: its primary context, memory, modules, launches and timing."""

    def __init__(self, ordinal: int = 0):
        cu = self.cu = _bindings()
        try:
            err, = cu.cuInit(0)
        except Exception as e:  # (the bindings load libcuda lazily: no driver is an exception here)
            raise TargetError(f"no CUDA driver on this host ({type(e).__name__}: {e}); a GPU target needs "
                              f"NVIDIA's driver and a GPU") from None
        if err != cu.CUresult.CUDA_SUCCESS:
            raise TargetError(f"the CUDA driver did not start ({self._name(err)}): no usable GPU on this host")
        count = self.call("cuDeviceGetCount")
        if ordinal >= count:
            raise TargetError(f"no GPU {ordinal}: this host has {count}")
        self.ordinal = ordinal
        self.handle = self.call("cuDeviceGet", ordinal)
        self.ctx = self.call("cuDevicePrimaryCtxRetain", self.handle)
        self.call("cuCtxSetCurrent", self.ctx)
        self.name = self.call("cuDeviceGetName", 256, self.handle).split(b"\0")[0].decode()
        attr = cu.CUdevice_attribute
        major = self.call("cuDeviceGetAttribute", attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, self.handle)
        minor = self.call("cuDeviceGetAttribute", attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, self.handle)
        self.arch = f"sm_{major}{minor}"
        self.multiprocessors = self.call("cuDeviceGetAttribute", attr.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
                                         self.handle)
        self.total_memory = int(self.call("cuDeviceTotalMem", self.handle))

    # -- calls --------------------------------------------------------------------------------
    def _name(self, err) -> str:
        try:
            e, s = self.cu.cuGetErrorName(err)
            return s.decode() if isinstance(s, bytes) else str(s)
        except Exception:
            return str(err)

    def call(self, fn: str, *args):
        """Driver function ``fn`` on ``args``; its result (``None``, one value or a tuple), or a
        :class:`DeviceError` naming the call and the error."""
        out = getattr(self.cu, fn)(*args)
        err, rest = out[0], out[1:]
        if err != self.cu.CUresult.CUDA_SUCCESS:
            name = self._name(err)
            if "OUT_OF_MEMORY" in name:
                raise ResourceError(f"{fn}: the GPU {self.name} is out of memory ({name})")
            raise DeviceError(f"{fn} failed on {self.name if hasattr(self, 'name') else 'the GPU'}: {name}")
        return None if not rest else rest[0] if len(rest) == 1 else rest

    def make_current(self) -> None:
        """Make the device's context current on the calling thread (each thread needs it)."""
        self.call("cuCtxSetCurrent", self.ctx)

    # -- memory ---------------------------------------------------------------------------------
    def alloc(self, nbytes: int) -> int:
        """A device buffer of ``nbytes`` (at least 1): its address."""
        return int(self.call("cuMemAlloc", max(int(nbytes), 1)))

    def free(self, ptr: int) -> None:
        self.call("cuMemFree", ptr)

    def upload(self, ptr: int, host: np.ndarray, stream=0) -> None:
        """Copy C-contiguous ``host`` to device address ``ptr``."""
        host = np.ascontiguousarray(host)
        if host.nbytes:
            self.call("cuMemcpyHtoDAsync", ptr, host.ctypes.data, host.nbytes, stream)
            if stream == 0:
                self.call("cuStreamSynchronize", 0)

    def download(self, host: np.ndarray, ptr: int, stream=0) -> None:
        """Copy device address ``ptr`` into C-contiguous ``host`` (waits for it)."""
        if host.nbytes:
            self.call("cuMemcpyDtoHAsync", host.ctypes.data, ptr, host.nbytes, stream)
            self.call("cuStreamSynchronize", stream)

    def copy(self, dst: int, src: int, nbytes: int, stream=0) -> None:
        """Device-to-device copy of ``nbytes``."""
        if nbytes:
            self.call("cuMemcpyDtoDAsync", dst, src, nbytes, stream)

    # -- code -----------------------------------------------------------------------------------
    def load_ptx(self, ptx: str, names: list) -> dict:
        """Load PTX text (the driver compiles it for this device) and look up kernels ``names``:
        ``{name: function handle}``."""
        text = ctypes.create_string_buffer(ptx.encode())
        try:
            module = self.call("cuModuleLoadData", ctypes.addressof(text))
        except DeviceError as e:
            raise CompileError(f"the driver could not load the PTX for {self.name} ({self.arch}): {e}; "
                               f"ember.codegen.nvptx.assemble(ptx, {self.arch!r}) shows ptxas's message") from None
        return {n: self.call("cuModuleGetFunction", module, n.encode()) for n in names}

    def load_cubin(self, cubin: bytes, names: list) -> dict:
        """Load a cubin built for this device's architecture and look up kernels ``names``."""
        image = ctypes.create_string_buffer(cubin, len(cubin))
        module = self.call("cuModuleLoadData", ctypes.addressof(image))
        return {n: self.call("cuModuleGetFunction", module, n.encode()) for n in names}

    def launch(self, fn, grid: tuple, block: tuple, params: "Launch", stream=0) -> None:
        self.call("cuLaunchKernel", fn, *grid, *block, 0, stream, params.address, 0)

    # -- streams, events, graphs ----------------------------------------------------------------
    def stream(self):
        return self.call("cuStreamCreate", 0)

    def synchronize(self, stream=0) -> None:
        self.call("cuStreamSynchronize", stream)

    def event(self):
        return self.call("cuEventCreate", 0)

    def elapsed_ms(self, start, stop) -> float:
        self.call("cuEventSynchronize", stop)
        return float(self.call("cuEventElapsedTime", start, stop))

    def record(self, event, stream=0) -> None:
        self.call("cuEventRecord", event, stream)

    def capture(self, stream, body) -> object:
        """``body()``'s launches on ``stream`` captured as a CUDA graph, instantiated: launch it
        with :meth:`replay`."""
        mode = self.cu.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_THREAD_LOCAL
        self.call("cuStreamBeginCapture", stream, mode)
        try:
            body()
        finally:
            graph = self.call("cuStreamEndCapture", stream)
        return self.call("cuGraphInstantiate", graph, 0)

    def replay(self, graph_exec, stream) -> None:
        self.call("cuGraphLaunch", graph_exec, stream)


class Launch:
    """A kernel's parameters packed once as the driver reads them (an array of pointers to the
    values): device pointers as 64-bit addresses, sizes as int64, in the kernel's order."""

    def __init__(self, values: list):
        self.values = [v for _, v in values]
        self._cells = [ctypes.c_void_p(v) if kind == "ptr" else ctypes.c_int64(v) for kind, v in values]
        self._array = (ctypes.c_void_p * max(len(self._cells), 1))(
            *[ctypes.addressof(c) for c in self._cells])
        self.address = ctypes.addressof(self._array)
