"""A model compiled for the ``cuda`` kind, run on a GPU (or on the CPU's emulation of one).

The program is the CPU's (:mod:`ember.compiler.program`: slots, calls, a static memory plan);
what differs is where the bytes live and what a call does. Every slot is a device address,
fixed when the executable is made: the inputs and outputs buffers of their own, the
intermediates one planned arena, the constants uploaded once, views an address inside their
base. A call is its group's device kernels launched in order (several where the group's loop
program has several grid nests, their intermediates in workspace buffers of the group), each
with its parameters packed once. A run copies the inputs in, replays the launches (captured as
a CUDA graph on the first run, so a run costs one launch of the host), and copies the outputs
out.

The device is anything with :class:`~ember.runtime.cuda_driver.CudaDevice`'s methods:
:class:`EmulatedDevice` runs the same launches on the CPU, each device kernel compiled for the
CPU with its blocks and threads as loops, so the host logic (addresses, offsets, workspace,
launch order) is tested where there is no GPU.
"""
from __future__ import annotations

import threading
import time

import numpy as np

from ..errors import ArgumentError, DTypeError, ShapeError
from .cuda_driver import Launch
from .executable import TensorInfo
from .ndarray import numpy_dtype

__all__ = ["DeviceArray", "EmulatedDevice", "GpuExecutable"]


def _nbytes(shape, dtype: str) -> int:
    n = numpy_dtype(dtype).itemsize
    for d in shape:
        n *= int(d)
    return n


class DeviceArray:
    """A tensor in GPU memory: its address, shape and dtype, readable by torch and CuPy
    through ``__cuda_array_interface__`` (no copy); ``numpy()`` copies it to the host."""

    def __init__(self, device, ptr: int, shape: tuple, dtype: str, owner=None):
        self.device, self.ptr, self.shape, self.dtype = device, ptr, tuple(shape), dtype
        self._owner = owner  # (keeps the memory alive)

    @property
    def __cuda_array_interface__(self) -> dict:
        return {"shape": self.shape, "typestr": numpy_dtype(self.dtype).str, "data": (self.ptr, False),
                "version": 3, "strides": None}

    def numpy(self) -> np.ndarray:
        out = np.empty(self.shape, numpy_dtype(self.dtype))
        self.device.download(out, self.ptr)
        return out

    def __repr__(self) -> str:
        return f"DeviceArray({self.shape}, {self.dtype}, on {getattr(self.device, 'name', 'a GPU')})"


class GpuExecutable:
    """``exe.run(*inputs)`` -> list of numpy arrays, on ``device``.

    ``program``: the CPU program format (static: a memory plan, no symbols); ``launches``:
    kernel name -> ``{"kernels": [{"name", "params", "grid", "block"}], "workspace": [bytes]}``
    where a param is ``["arg", i]`` (the call's i-th slot), ``["ws", j]`` or ``["size", n]``;
    ``functions``: device kernel name -> the device's handle."""

    def __init__(self, program: dict, launches: dict, constants: list, device, functions: dict,
                 ptx: str = "", target=None):
        self.program, self.launches, self.device, self.ptx, self.target = program, launches, device, ptx, target
        self.constants = constants  # (what an export writes)
        self.input_names = [i["name"] for i in program["inputs"]]
        self.output_names = [o["name"] for o in program["outputs"]]
        self._lock = threading.Lock()  # (one run at a time: the arena and the buffers are the executable's)
        self._graph = None
        self._stream = None
        device.make_current()
        self._owned: list = []
        self._const = []
        for c in constants:
            c = np.ascontiguousarray(c)
            p = self._alloc(c.nbytes)
            device.upload(p, c)
            self._const.append(p)
        arena = self._alloc(program["arena_bytes"] or 0)
        ptr: list = [0] * len(program["slots"])
        for s, info in enumerate(program["slots"]):
            kind = info["kind"]
            if kind in ("input", "output"):
                ptr[s] = self._alloc(_nbytes(info["shape"], info["dtype"]))
            elif kind == "arena":
                ptr[s] = arena + info["offset"]
            elif kind == "const":
                ptr[s] = self._const[info["index"]]
        for s, info in enumerate(program["slots"]):  # (views after their bases)
            if info["kind"] == "view":
                ptr[s] = ptr[info["base"]] + info.get("offset", 0)
        self._ptr = ptr
        self._steps = []  # (name of the call, device function, grid, block, Launch)
        for call in program["calls"]:
            entry = launches[call["kernel"]]
            ws = [self._alloc(n) for n in entry["workspace"]]
            for k in entry["kernels"]:
                values = []
                for kind, v in k["params"]:
                    if kind == "arg":
                        values.append(("ptr", ptr[call["args"][v]]))
                    elif kind == "ws":
                        values.append(("ptr", ws[v]))
                    else:
                        values.append(("int", int(v)))
                self._steps.append((k["name"], functions[k["name"]], tuple(k["grid"]), tuple(k["block"]),
                                    Launch(values)))

    def _alloc(self, nbytes: int) -> int:
        p = self.device.alloc(nbytes)
        self._owned.append(p)
        return p

    def __del__(self):
        try:
            for p in self._owned:
                self.device.free(p)
        except Exception:
            pass

    # -- runs -----------------------------------------------------------------------------------
    def _inputs(self, args: tuple, kwargs: dict) -> list:
        spec = self.program["inputs"]
        if kwargs:
            unknown = set(kwargs) - set(self.input_names)
            if unknown:
                raise ArgumentError(f"unknown inputs {sorted(unknown)}: the model takes {self.input_names}")
            args = tuple(args) + tuple(kwargs[n] for n in self.input_names[len(args):] if n in kwargs)
        if len(args) != len(spec):
            raise ArgumentError(f"the model takes {len(spec)} inputs ({', '.join(self.input_names)}), got {len(args)}")
        return list(args)

    def _copy_in(self, args: list, stream) -> None:
        for a, info in zip(args, self.program["inputs"]):
            want = tuple(int(d) for d in info["shape"])
            if hasattr(a, "__cuda_array_interface__") and not isinstance(a, np.ndarray):
                cai = a.__cuda_array_interface__
                if tuple(cai["shape"]) != want:
                    raise ShapeError(f"input {info['name']!r}: expected shape {want}, got {tuple(cai['shape'])}")
                if np.dtype(cai["typestr"]) != numpy_dtype(info["dtype"]):
                    raise DTypeError(f"input {info['name']!r}: expected {info['dtype']}, got {np.dtype(cai['typestr'])}")
                if cai.get("strides") not in (None, ()):
                    raise ArgumentError(f"input {info['name']!r}: a device tensor must be contiguous")
                self.device.copy(self._ptr[info["slot"]], cai["data"][0], _nbytes(want, info["dtype"]), stream)
                continue
            a = np.asarray(a)
            if a.shape != want:
                raise ShapeError(f"input {info['name']!r}: expected shape {want}, got {a.shape}")
            if a.dtype != numpy_dtype(info["dtype"]):
                raise DTypeError(f"input {info['name']!r}: expected {info['dtype']}, got {a.dtype}")
            self.device.upload(self._ptr[info["slot"]], a, stream)

    def _launch_all(self, stream) -> None:
        for _, fn, grid, block, params in self._steps:
            self.device.launch(fn, grid, block, params, stream)

    def _replay(self, stream) -> None:
        if self._graph is None and getattr(self.device, "graphs", True):
            self._graph = self.device.capture(stream, lambda: self._launch_all(stream))
        if self._graph is not None:
            self.device.replay(self._graph, stream)
        else:
            self._launch_all(stream)

    def run(self, *args, device_outputs: bool = False, **kwargs) -> list:
        """Run on the inputs (numpy arrays, or device tensors: torch/CuPy CUDA tensors by
        ``__cuda_array_interface__``); the outputs as numpy arrays, or with ``device_outputs``
        as :class:`DeviceArray` s that stay on the GPU (valid until the next run)."""
        args = self._inputs(args, kwargs)
        with self._lock:
            self.device.make_current()
            if self._stream is None:
                self._stream = self.device.stream()
            self._copy_in(args, self._stream)
            self._replay(self._stream)
            outs = []
            for o in self.program["outputs"]:
                shape = tuple(int(d) for d in o["shape"])
                if device_outputs:
                    outs.append(DeviceArray(self.device, self._ptr[o["slot"]], shape, o["dtype"], owner=self))
                else:
                    h = np.empty(shape, numpy_dtype(o["dtype"]))
                    self.device.download(h, self._ptr[o["slot"]], self._stream)
                    outs.append(h)
            self.device.synchronize(self._stream)
            return outs

    __call__ = run

    def time(self, *args, number: int = 20, warmup: int = 3) -> list:
        """Milliseconds of each of ``number`` replays of the whole program on the device, the
        inputs already there (CUDA events), after ``warmup`` runs."""
        for _ in range(warmup):
            self.run(*args, device_outputs=True)
        with self._lock:
            self.device.make_current()
            s = self._stream
            times = []
            for _ in range(number):
                e0, e1 = self.device.event(), self.device.event()
                self.device.record(e0, s)
                self._replay(s)
                self.device.record(e1, s)
                times.append(self.device.elapsed_ms(e0, e1))
            return times

    def profile(self, *args, number: int = 10) -> list:
        """``[(device kernel, median ms)]``: each launch timed alone with events, in program
        order, after a run on ``args``."""
        self.run(*args, device_outputs=True)
        with self._lock:
            self.device.make_current()
            s = self._stream
            rows = []
            for name, fn, grid, block, params in self._steps:
                ms = []
                for _ in range(number):
                    e0, e1 = self.device.event(), self.device.event()
                    self.device.record(e0, s)
                    self.device.launch(fn, grid, block, params, s)
                    self.device.record(e1, s)
                    ms.append(self.device.elapsed_ms(e0, e1))
                rows.append((name, float(np.median(ms))))
            return rows

    def export(self, path) -> None:
        from ..errors import TargetError

        raise TargetError("this executable was loaded from an export; export the model compiled by "
                          "ember.compile(..., target='cuda') instead")

    @property
    def input_info(self) -> list:
        return [TensorInfo(i["name"], tuple(i["shape"]), i["dtype"]) for i in self.program["inputs"]]

    @property
    def output_info(self) -> list:
        return [TensorInfo(o["name"], tuple(o["shape"]), o["dtype"]) for o in self.program["outputs"]]

    @property
    def kernel_calls(self) -> list:
        """The program's calls (a group each; :attr:`num_launches` counts its device kernels)."""
        return list(self.program["calls"])

    module = None  # (no CPU library)

    def memory_summary(self) -> str:
        arena, total = self.program["arena_bytes"] or 0, self.program["intermediate_bytes"] or 0
        consts = sum(np.asarray(c).nbytes for c in self.constants)
        return (f"on the GPU: arena {arena / 2**20:.2f} MiB for intermediates of {total / 2**20:.2f} MiB, "
                f"constants {consts / 2**20:.2f} MiB, {self.num_launches} launches a run")

    def __repr__(self) -> str:
        ins = ", ".join(f"{i.name}: {i.shape} {i.dtype}" for i in self.input_info)
        return f"<GpuExecutable on {getattr(self.device, 'name', 'a GPU')} ({ins}) -> {len(self.output_info)} output(s)>"

    @property
    def num_launches(self) -> int:
        return len(self._steps)


class EmulatedDevice:
    """The CPU standing in for a GPU: memory is host memory, a kernel a CPU function that runs
    the whole grid (see :mod:`ember.loop.passes.threads_on_cpu`). Streams, events and graphs are
    trivial; launches run at once."""

    name = "the CPU (emulated GPU)"
    graphs = False

    def __init__(self):
        self._bufs: dict = {}

    def make_current(self) -> None:
        pass

    def alloc(self, nbytes: int) -> int:
        buf = np.zeros(max(int(nbytes), 1) + 64, np.uint8)
        p = buf.ctypes.data
        aligned = (p + 63) // 64 * 64
        self._bufs[aligned] = buf
        return aligned

    def free(self, ptr: int) -> None:
        self._bufs.pop(ptr, None)

    def upload(self, ptr: int, host: np.ndarray, stream=0) -> None:
        import ctypes

        host = np.ascontiguousarray(host)
        ctypes.memmove(ptr, host.ctypes.data, host.nbytes)

    def download(self, host: np.ndarray, ptr: int, stream=0) -> None:
        import ctypes

        ctypes.memmove(host.ctypes.data, ptr, host.nbytes)

    def copy(self, dst: int, src: int, nbytes: int, stream=0) -> None:
        import ctypes

        ctypes.memmove(dst, src, nbytes)

    def launch(self, fn, grid, block, params: Launch, stream=0) -> None:
        status = fn(*params.values)
        if status:
            raise ArgumentError(f"the emulated kernel returned status {status}")

    def stream(self):
        return 0

    def synchronize(self, stream=0) -> None:
        pass

    def event(self):
        return [0.0]

    def record(self, event, stream=0) -> None:
        event[0] = time.perf_counter()

    def elapsed_ms(self, start, stop) -> float:
        return (stop[0] - start[0]) * 1e3
