"""A compiled PyTorch model: called like the module, with torch tensors (or numpy arrays), it
returns the module's output structure (tuples, dicts, Hugging Face ``ModelOutput``) with torch
tensors, and no copies on the way in or out (see :mod:`.dtypes`)."""
from __future__ import annotations

from typing import Any

import numpy as np

from ...errors import ArgumentError
from .dtypes import numpy_to_tensor, tensor_to_numpy
from .importer import ImportedProgram


def as_array(x, what: str) -> np.ndarray:
    """``x`` (a torch tensor or anything numpy takes) as a numpy array over the same memory."""
    if isinstance(x, np.ndarray):
        return x
    if type(x).__module__.startswith("torch") and hasattr(x, "detach"):
        try:  # the common case, a CPU tensor numpy can hold, in one call
            return x.numpy()
        except (RuntimeError, TypeError):  # (requires grad, bfloat16, another device, a conjugate view)
            return tensor_to_numpy(x)
    try:
        return np.asarray(x)
    except Exception as e:  # noqa: BLE001 - anything numpy cannot read
        raise ArgumentError(f"{what} is a {type(x).__name__}, not a tensor ({e})") from None


class InputViews:
    """The numpy views of the tensors a model was last called with, one per input position,
    reused while the tensor passed there has the same address, shape, strides and dtype.

    A torch call right after a run finds torch's code evicted from the caches by the kernels:
    ``Tensor.numpy()`` then takes ~65 us (a MobileNetV3-small run is ~1.1 ms; hot it is 1.5 us),
    where the reads that key a view take ~20 us. The views hold no reference to the tensors
    (a model keeps no input alive between calls): one is used only while a tensor with its
    address is passed, and that tensor holds the memory. Only what ``Tensor.numpy()`` views
    directly is kept (plain CPU tensors of real dtypes, not subclasses)."""

    def __init__(self, n: int):
        import torch

        self._tensor = torch.Tensor
        self._last: list = [None] * n  # (key, view) per position

    def get(self, k: int, x, what: str) -> np.ndarray:
        if type(x) is not self._tensor:
            return as_array(x, what)
        key = (x.data_ptr(), x.shape, x.stride(), x.dtype, x.is_cpu)
        last = self._last[k]
        if last is not None and last[0] == key:
            return last[1]
        a = as_array(x, what)
        if key[4] and a.size and not x.dtype.is_complex and a.ctypes.data == key[0] and \
                a.dtype.kind in "biuf":
            self._last[k] = (key, _unowned(a))
        return a


def _unowned(a: np.ndarray) -> np.ndarray:
    """A view of ``a``'s memory that does not keep it alive (strides >= 0, as torch's are)."""
    import ctypes

    extent = a.itemsize + sum((n - 1) * s for n, s in zip(a.shape, a.strides))
    buf = (ctypes.c_char * extent).from_address(a.ctypes.data)
    return np.ndarray(a.shape, a.dtype, buffer=buf, strides=a.strides)


# how much memory a model may hold in output tensors made ahead of its calls
SPARE_BYTES = 4 << 20


def _child(spec, i: int):
    """Child ``i`` of a pytree spec (``child()`` in newer torch, ``children_specs`` before)."""
    return spec.child(i) if hasattr(spec, "child") else spec.children_specs[i]


class TorchModel:
    """An :class:`~ember.runtime.executable.Executable` compiled from a PyTorch module, called
    the way the module is: ``model(x)``, ``model(input_ids=ids, attention_mask=mask)``.

    ``exe`` is the executable (numpy in, numpy out), ``graph`` the imported graph Module.
    Inputs the export specialized (ints, flags) must be passed with the same values.
    """

    def __init__(self, exe, program: ImportedProgram, name: str = "model"):
        self.exe = exe
        self.graph = program.module
        self.name = name
        self._inputs = program.inputs
        self._outputs = program.outputs
        self._in_spec = program.in_spec
        self._out_spec = program.out_spec
        self.dim_names = dict(program.dim_names)
        # positional tensors in, one tensor or a flat tuple out (most models): no pytree walk per call
        from torch.utils import _pytree as pytree

        n = len(self._inputs)
        self._plain_in = self._in_spec == pytree.tree_structure((tuple(range(n)), {})) and \
            all(kind == "tensor" for kind, _ in self._inputs)
        self._plain_out = None
        if all(kind == "tensor" for kind, _ in self._outputs):
            if self._out_spec == pytree.tree_structure(0):
                self._plain_out = "one"
            elif self._out_spec == pytree.tree_structure(tuple(range(len(self._outputs)))):
                self._plain_out = "tuple"
        # what a call's error would name, made once: a run's caches are cold after its kernels,
        # where every step of the call costs several times its hot price
        self._labels = [f"input {v!r}" for _, v in self._inputs]
        self._views = InputViews(len(self._inputs))
        # The output tensors are made before the run, right after the inputs' conversion: a
        # torch call after the run finds torch's code evicted by it (torch.from_numpy then takes
        # ~15 us after MobileNetV3-small, ~58 us after GPT-2, 0.6 us hot), one just after
        # another torch call does not; several calls' worth are made at once (_spare_outputs).
        # Static shapes and numpy's dtypes only (else: after the run).
        self._premade = None
        if exe._single and all(all(isinstance(d, int) for d in o.shape) for o in exe.output_info):
            import torch

            try:
                self._premade = [(tuple(o.shape), torch.from_numpy(np.empty(0, o.dtype)).dtype)
                                 for o in exe.output_info]
            except (TypeError, ValueError):  # (bfloat16 and the narrow types: not numpy dtypes)
                self._premade = None
        self._spares: list = []
        if self._premade is not None:  # (sets made at a time: up to 16 and SPARE_BYTES, at least one)
            nbytes = sum(int(np.prod(o.shape)) * np.dtype(o.dtype).itemsize for o in exe.output_info)
            self._spare_sets = max(1, min(16, SPARE_BYTES // max(1, nbytes)))

    def _spare_outputs(self) -> tuple:
        """A set of new output tensors and their numpy views. They are made several sets at a
        time (up to 16 sets and ``SPARE_BYTES``, at least one set): the first torch.empty after
        a run costs ~35 us with torch's code evicted from the caches, the next ones ~1.5 us."""
        while True:
            try:
                return self._spares.pop()
            except IndexError:  # (another thread may have taken the last one since)
                import torch

                for _ in range(self._spare_sets):
                    made = [torch.empty(shape, dtype=dtype) for shape, dtype in self._premade]
                    self._spares.append((made, [t.numpy() for t in made]))

    @property
    def input_info(self) -> list:
        return self.exe.input_info

    @property
    def output_info(self) -> list:
        return self.exe.output_info

    def _flatten(self, args: tuple, kwargs: dict) -> list:
        from torch.utils import _pytree as pytree

        flat, spec = pytree.tree_flatten((args, kwargs))
        if spec != self._in_spec and kwargs:
            # the same keyword arguments in another order: the export's order
            spec_kw = _child(self._in_spec, 1) if self._in_spec.num_children == 2 else None
            keys = list(spec_kw.context or ()) if spec_kw is not None else []
            if sorted(keys) == sorted(kwargs):
                flat, spec = pytree.tree_flatten((args, {k: kwargs[k] for k in keys}))
        if spec != self._in_spec:
            raise ArgumentError(f"{self.name} was exported for arguments structured as {self._in_spec}, "
                                f"got {spec}")
        return flat

    def run_flat(self, flat: list) -> list:
        """The flat outputs (torch tensors and exported values) of the flat inputs."""
        arrays = []
        for k, ((kind, v), x, label) in enumerate(zip(self._inputs, flat, self._labels)):
            if kind == "tensor":
                arrays.append(self._views.get(k, x, label))
            elif x != v:
                raise ArgumentError(f"input {k} of {self.name} was {v!r} when the model was exported and is "
                                    f"{x!r} now: export again with this value (Ember compiled it in)")
        if self._premade is not None:
            made, views = self._spare_outputs()
            outs = self.exe._run_into(views, *arrays)
            return [(made[v] if outs[v] is views[v] else numpy_to_tensor(outs[v])) if kind == "tensor" else v
                    for kind, v in self._outputs]
        outs = self.exe.run(*arrays)
        return [numpy_to_tensor(outs[v]) if kind == "tensor" else v for kind, v in self._outputs]

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self._plain_in and not kwargs and len(args) == len(self._inputs):
            flat = list(args)
        else:
            flat = self._flatten(args, kwargs)
        out = self.run_flat(flat)
        if self._plain_out == "one":
            return out[0]
        if self._plain_out == "tuple":
            return tuple(out)
        from torch.utils import _pytree as pytree

        return pytree.tree_unflatten(out, self._out_spec)

    def __repr__(self) -> str:
        ins = ", ".join(f"{i.name}: {i.shape} {i.dtype}" for i in self.exe.input_info)
        return f"<ember.TorchModel {self.name}({ins})>"


__all__ = ["InputViews", "TorchModel", "as_array"]
