"""Graph passes: functions ``Module -> Module`` run by a :class:`PassContext`.

One file per pass. :func:`default_pipeline` is what ``ember.compile`` runs.
"""
from .activation_products import activation_products
from .bf16_activations import bf16_activations
from .block_layout import block_layout
from .context import (Instrument, Pass, PassContext, PassError, PassTimer, PrintAfterPass,
                      VerifyAfterPass, graph_pass)
from .code_tables import code_tables
from .cse import cse
from .dce import dce
from .drop_requantization import drop_requantization
from .fold_channel_scale import fold_channel_scale
from .fold_constant import fold_constant
from .fuse_ops import fuse_ops
from .hoist_casts import hoist_casts
from .gpu_weights import gpu_weights
from .integer_products import integer_products
from .merge_branches import merge_branches
from .pack_conv_weights import pack_conv_weights
from .pack_matmul_weights import pack_matmul_weights
from .promote_half import promote_half
from .requantize import requantize
from .simplify_inference import simplify_inference
from .sink_reshapes import sink_reshapes
from .tensor_core_products import tensor_core_products
from .trim_conv_taps import trim_conv_taps
from .verify import verify
from .weight_only import weight_only


def default_pipeline() -> list:
    """The passes ``ember.compile`` runs, in order (each gated by its opt level): fold the
    constants (weights made by ConstantOfShape, shape chains), fold batch norms into convs,
    merge parallel convs of one input that are added (RepVGG's branches) into one, fold a
    requantization's scales and offsets into one multiply-add, move reshapes below
    elementwise ops (a product's epilogue then follows it), drop the convolution taps that
    read only padding, run convolutional regions in the blocked channel layout (a squeeze-excitation's per-channel scale folded into the conv
    after it; in bf16, an activation a conv reads stored once, in bf16), pack the other constant convolution weights and the constant
    matrix-product weights for their micro-kernels, turn what is computed from one 8-bit code
    alone into a table of its values, move narrowing casts in front of the data movement
    they follow (an epilogue of the producer), fold the new scale/shift expressions, the packing and
    the tables, merge and prune, then fuse into kernels. First, codes quantized again with
    their own scale and zero point (data movement between or not) stay the codes, moved as
    bytes; quantized products by int8 weights become integer products, products of two
    activations (quantized, or in bf16) packed bf16 dots, and products by weights
    dequantized from a few bits keep their codes (both before folding makes their weights
    float), and half-precision accumulating ops are given float32 accumulation. For a GPU target,
    dense products by constant weights read them transposed and half-precision products run on
    tensor cores."""
    return [drop_requantization, integer_products, activation_products, weight_only, gpu_weights, promote_half, tensor_core_products,
            fold_constant, simplify_inference,
            merge_branches, requantize, sink_reshapes, requantize, trim_conv_taps, block_layout, fold_channel_scale,
            bf16_activations, pack_conv_weights, pack_matmul_weights, code_tables, hoist_casts, fold_constant, cse, dce, fuse_ops]


__all__ = ["activation_products", "code_tables", "gpu_weights", "tensor_core_products", "bf16_activations", "block_layout", "cse", "dce", "drop_requantization", "fold_channel_scale", "fold_constant", "hoist_casts", "integer_products", "merge_branches", "pack_conv_weights", "pack_matmul_weights", "promote_half",
           "requantize", "simplify_inference", "sink_reshapes", "trim_conv_taps", "weight_only", "Instrument", "Pass", "PassContext", "PassError", "PassTimer",
           "PrintAfterPass", "VerifyAfterPass", "default_pipeline", "fuse_ops", "graph_pass", "verify"]
