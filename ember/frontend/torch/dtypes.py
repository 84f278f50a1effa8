"""torch dtypes <-> Ember dtypes, and torch tensors <-> numpy arrays without copies.

Zero-copy both ways: a CPU tensor's memory is handed to numpy through the array interface
(``Tensor.numpy()``), and a numpy result becomes a tensor over the same memory
(``torch.from_numpy``). bfloat16, which numpy lacks, travels as its 16-bit pattern and is
relabelled (ml_dtypes on the numpy side), still without a copy.
"""
from __future__ import annotations

import numpy as np

from ...errors import DTypeError

_NAMES = {  # torch dtype name -> Ember dtype
    "float32": "float32", "float64": "float64", "float16": "float16", "bfloat16": "bfloat16",
    "int8": "int8", "int16": "int16", "int32": "int32", "int64": "int64", "uint8": "uint8",
    "uint16": "uint16", "uint32": "uint32", "uint64": "uint64", "bool": "bool",
}


def to_ember(dtype, what: str = "a tensor") -> str:
    """The Ember dtype of the torch dtype ``dtype`` (DTypeError naming ``what`` when Ember has none)."""
    name = str(dtype).replace("torch.", "")
    if name not in _NAMES:
        raise DTypeError(f"{what} has dtype {dtype}, which Ember does not support "
                         f"(supported: {', '.join(_NAMES)})")
    return _NAMES[name]


def to_torch(dtype: str):
    """The torch dtype of the Ember dtype ``dtype``."""
    import torch

    return getattr(torch, dtype)


def tensor_to_numpy(t) -> np.ndarray:
    """A numpy array over ``t``'s memory (a CPU tensor; a copy only when it must move: another
    device, or strides numpy cannot describe, such as a conjugate view)."""
    import torch

    t = t.detach()
    if t.device.type != "cpu":
        t = t.cpu()
    if t.dtype == torch.bfloat16:
        import ml_dtypes

        return t.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    to_ember(t.dtype)
    return t.resolve_conj().resolve_neg().numpy()


def numpy_to_tensor(a: np.ndarray):
    """A torch tensor over ``a``'s memory (bfloat16 through its bit pattern)."""
    import torch

    if a.dtype.kind == "V" and a.dtype.name == "bfloat16":  # (kind first: a name is built per call)
        return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
    if not a.flags.writeable:  # torch warns on read-only memory; outputs are fresh, inputs may not be
        a = a.copy()
    return torch.from_numpy(a)


__all__ = ["numpy_to_tensor", "tensor_to_numpy", "to_ember", "to_torch"]
