"""The runtime: aligned arrays and loaded kernel libraries (needs only numpy and ctypes)."""
from .kernel import Kernel
from .module import Module, load_module
from .ndarray import NDArray, array, empty, from_numpy, zeros

__all__ = ["Kernel", "Module", "NDArray", "array", "empty", "from_numpy", "load_module", "zeros"]
