"""Code generation for NVIDIA GPUs: a GPU kernel's loop program -> LLVM IR for NVPTX -> PTX.

The CPU's emitter (:mod:`ember.codegen.llvm.codegen`) writes the statements and expressions;
this one changes what differs on a GPU (:class:`CudaEmitter`):

- a loop bound to ``block_x``/``thread_x`` (...) is no loop: its variable is the block's or the
  thread's index (``%ctaid.x``, ``%tid.x``) plus the loop's start, and its body runs where that
  index is below the extent (a block's threads may be more than one loop uses);
- ``barrier()`` is ``bar.sync 0`` (``llvm.nvvm.barrier0``);
- a ``shared`` buffer is an array in the block's shared memory (address space 3); ``local``
  scratch stays a stack slot (registers, once unrolled);
- the kernel returns nothing and is marked a kernel (``nvvm.annotations``).

:func:`ptx` compiles kernels to PTX text with llvmlite's NVPTX back end; :func:`assemble`
checks it with ``ptxas`` (from the ``nvidia-cuda-nvcc`` wheel) for an architecture, which is
how CI checks GPU code without a GPU. :mod:`ember.loop.passes.verify_threads` checks each
kernel against the target's limits first.
"""
from __future__ import annotations

from .emit import CudaEmitter, emit_kernel, ptx
from .ptxas import assemble, ptxas_path

__all__ = ["CudaEmitter", "assemble", "emit_kernel", "ptx", "ptxas_path"]
