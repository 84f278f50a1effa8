"""The kernel front door: schedule (or PrimFuncs) in, loaded native module out."""
from __future__ import annotations

import os
import sys
from typing import Optional, Sequence, Union

from .loop.lower import lower
from .loop.passes import default_pipeline
from .loop.schedule import Schedule
from .loop.stmt import PrimFunc


def lower_kernel(sch: Schedule, args: Sequence, name: str = "kernel", attrs: Optional[dict] = None) -> PrimFunc:
    """Lower a schedule and run the loop passes a build runs (unroll, vectorize, simplify)."""
    return default_pipeline(lower(sch, args, name, attrs))


def build(kernels: Union[Schedule, PrimFunc, Sequence], args: Optional[Sequence] = None,
          name: str = "kernel", target=None):
    """Compile kernels to native code and load them.

    ``kernels`` is a schedule (with ``args``, the tensors that become its parameters), a
    PrimFunc, or a list of PrimFuncs and ``(schedule, args, name)`` triples built into one
    module. Returns an :class:`ember.runtime.Module`; ``module[name](*arrays)`` runs a kernel.
    """
    from .codegen.llvm import build as llvm_build

    if isinstance(kernels, Schedule):
        kernels = [(kernels, args, name)]
    elif isinstance(kernels, PrimFunc):
        kernels = [kernels]
    funcs = []
    for k in kernels:
        if isinstance(k, PrimFunc):
            funcs.append(default_pipeline(k))
        else:
            s, a, n = k
            funcs.append(lower_kernel(s, a, n))
    from .kernels.common import host

    return llvm_build(funcs, target=host(target), name=funcs[0].name if len(funcs) == 1 else name)
