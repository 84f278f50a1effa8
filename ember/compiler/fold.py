"""The constant folder's evaluator: the constant expressions ``fold_constant`` gathers, computed
by compiling them with Ember (numpy never computes a model value). The graph pass cannot name
the compiler, a layer above it: ``ember.compile`` gives it this function in its PassContext."""
from __future__ import annotations

from ..config import llvm_opt_level
from ..graph.ir import Constant, Function, Module, Tuple
from ..graph.limits import allocating, check_bytes, describe, format_bytes, tensor_bytes
from ..graph.passes.context import PassContext
from ..graph.visit import post_order
from .generic import generic_kernels

__all__ = ["evaluate_constants"]

# values up to this size are computed op by op (see below)
SMALL_BYTES = 1 << 18


def evaluate_constants(exprs: list, ctx: PassContext) -> list:
    """Compute the constant expressions ``exprs`` with Ember (one compiled function)."""
    from .compile import compile_model

    # the results are new memory: check each, then all of them beside the constants they are
    # computed from (both are alive while the folding program runs), before anything is built
    sizes = [tensor_bytes(e.type.shape, e.type.dtype) for e in exprs]
    for e, b in zip(exprs, sizes):
        check_bytes(b, f"folding the constant {describe(e)}")
    leaves = {n for n in post_order(Tuple(exprs)) if isinstance(n, Constant)}
    inputs = sum(int(c.value.nbytes) for c in leaves)
    big = max(range(len(exprs)), key=sizes.__getitem__)
    what = (f"folding {len(exprs)} constant value(s) ({format_bytes(sum(sizes))}; the largest: "
            f"{describe(exprs[big])}, {format_bytes(sizes[big])}) from {len(leaves)} constant(s) "
            f"({format_bytes(inputs)})")
    mod = Module({"main": Function([], Tuple(exprs))})
    # (and the passes that make a model's kernels faster or quantized ones integer: a fold runs
    # once, and they cost more than they save -- DenseNet-121's fold spent 50 ms in them)
    disabled = set(ctx.disabled) | {"fold_constant", "simplify_inference", "block_layout", "pack_conv_weights",
                                    "requantize", "sink_reshapes", "merge_branches", "fold_channel_scale",
                                    "integer_products", "activation_products", "trim_conv_taps"}
    # the folding program runs here, on the host: compiled for the model's target (another
    # CPU's instructions) it would die of an illegal instruction
    # it runs once: LLVM's optimizations would cost more than they save (O1 compiles ~3x
    # faster than O3)
    # and its kernels take their sizes as arguments (``compiler.generic``): the folds of every
    # model share a few kernels, compiled once into the cache
    # small values from small constants (a CNN's batch-norm scales) are not fused: each op is a
    # kernel of its own, the same few every model's folds share (fused, a chain of ops a model
    # of Caffe's lineage has alone -- DenseNet-121's scale layers -- was new kernels to
    # compile: 4 of them, 0.4 s of its first result with other models' kernels cached); big
    # values, or small ones from big constants (a sum over a weight), fuse: no intermediate
    # copies of large arrays
    small = max(sizes) <= SMALL_BYTES and all(c.value.nbytes <= SMALL_BYTES for c in leaves)
    opt = 0 if small else max(ctx.opt_level, 1)
    with allocating(sum(sizes) + inputs, what), llvm_opt_level(1), generic_kernels():
        exe = compile_model(mod, None, opt, disabled_passes=disabled, name="constants", wait=True)
        values = exe.run()
    # its program, arena and inputs (the constants before folding, which the caller may drop
    # next) go now, by reference count: no gc.collect() here, which in a process that has
    # imported torch and transformers (360k objects) costs ~330 ms per fold
    del exe
    return [Constant.adopt(v) for v in values]  # new arrays of the run's: no second copy
