"""The ``onednn`` offload backend: blocked float32 convolutions (dense and depthwise) and matrix
products by weights on oneDNN's primitives.

Ember's blocked layout is oneDNN's: data ``N C/16 H W 16`` is ``nChw16c`` (and 8: ``nChw8c``),
and the packed weights ``F/16, C, kh, kw, 16`` are ``Oihw16o`` (a depthwise conv's ``C/16, 1, kh,
kw, 16`` are ``Goihw16g``), so a kernel reads and writes
the program's own buffers. Each kernel is a C function that makes a primitive on the first
call of each batch size (the batch may be a symbol, the kernel's size argument: users' exports
have one; oneDNN picks its weights' format, the packed weights are reordered into it once per
primitive) and then runs it on the calling thread's stream; oneDNN's CPU runtime is OpenMP,
the libgomp team Ember's run already holds. The epilogue becomes the primitive's: a
per-channel add right after the convolution its bias, ReLUs, clips (ReLU6), sigmoids and GELUs
``eltwise`` post-ops, one
add of a tensor of the output's shape a ``sum`` post-op (the tensor copied into the output
first). A product by weights (a Linear layer, ``nn.matmul_packed``; in bf16 too) runs oneDNN's
matmul on the data's rows in place; the packed weights are unpacked to a plain (K, N) once and reordered from
there; a bias add, ReLU/GELU and one residual add are its post-ops. The library: Debian's ``libdnnl-dev`` (oneDNN 2.x; headers ``oneapi/dnnl/dnnl.h``).
"""
from __future__ import annotations

import ctypes.util
import os
import re

from . import Backend, ExternalSource, register_backend
from .onednn_c import PRELUDE, made_c, weights_c
from .onednn_int8 import DOTS, int8_plan, int8_source
from .patterns import anchor_chain

HEADER = "/usr/include/oneapi/dnnl/dnnl.h"
BLOCKS = (4, 8, 16, 32)  # the channel blocks with a oneDNN format tag (aBcd<b>b, Abcd<b>a)


def _unavailable():
    if not ctypes.util.find_library("dnnl"):
        return "libdnnl (oneDNN) is not installed: apt install libdnnl-dev"
    if not os.path.exists(os.environ.get("EMBER_DNNL_HEADER", HEADER)):
        return f"oneDNN's headers ({HEADER}) are missing: apt install libdnnl-dev"
    return None


def _batch(t):
    """``t``'s batch: its leading size, static or one symbol (every other size static)."""
    return t.shape[0] if all(isinstance(d, int) for d in t.shape[1:]) else False


def _depthwise(conv) -> bool:
    """Whether ``conv`` is a blocked depthwise convolution: a channel per group, weights
    (C/b, 1, kh, kw, b) -- oneDNN's ``Goihw<b>g`` as it is."""
    x, w = conv.args[0].type, conv.args[1].type
    return (conv.attr("groups", 1) > 1 and x.ndim == 5 and w.shape[1] == 1 and x.shape[4] == w.shape[4]
            and isinstance(x.shape[1], int) and conv.attr("groups", 1) == x.shape[1] * x.shape[4])


def _plan(fn):
    """``(conv, bias param or None, post-ops [("relu",) | ("sum", param) | ...])`` for a group
    oneDNN runs (a dense or depthwise conv, its epilogue a bias, ReLU/clip/sigmoid/GELU and one
    residual add), else None. Every size is static but the batch, which may be a symbol (a
    primitive is then made per batch size a run brings)."""
    found = anchor_chain(fn, "nn.conv2d_nchwc")
    if found is None:
        return None
    conv, steps = found
    x, w, out = conv.args[0].type, conv.args[1].type, conv.type
    a = conv.attrs
    # (precision="bf16": data and packed weights words of two bfloat16 along the channels)
    half = a.get("dot") == "dot_bf16x2" and x.dtype == w.dtype == "int32" and out.dtype == "float32" and x.ndim == 5
    if not ((half or (all(t.dtype == "float32" for t in (x, w, out)) and a.get("dot") is None))
            and w.is_static and len(conv.args) == 2 and _batch(x) is not False and _batch(x) == _batch(out)
            and (a.get("groups", 1) == 1 or (_depthwise(conv) and not half)) and a.get("pad_value", 0) == 0):
        return None
    if out.shape[4] not in BLOCKS or (x.ndim == 5 and x.shape[4] * (2 if half else 1) not in BLOCKS) \
            or x.ndim not in (4, 5):
        return None
    if half and 2 * x.shape[4] != out.shape[4]:
        return None  # (bf16 data in another block -- a stem's 4 channels -- runs oneDNN's reference code: 1.5 s)
    if x.ndim == 4 and x.shape[1] > 4:  # (plain data: oneDNN's JIT reads it for a stem's few channels only)
        return None
    steps = _bf16_tail(steps, out, writes_bf16=half)  # (a float32 conv -- depthwise in bf16 mode -- writes float)
    got = None if steps is None else _epilogue(steps, out, lambda shape: shape == (1, out.shape[1], 1, 1, out.shape[4]))
    return None if got is None else (conv, *got)


def _bf16_tail(steps, out, writes_bf16: bool = True):
    """``steps`` less a last cast to bfloat16 (the primitive writes bf16: the next kernel's
    words); None where it cannot: a primitive that writes float only, or one with a residual
    add (a sum post-op adds to the bf16 destination, which the float residual is not)."""
    if not (steps and steps[-1][0] == "cast:bfloat16"):
        return steps
    if not writes_bf16 or any(op == "add" and other.type.shape == out.shape for op, other in steps[:-1]):
        return None
    return steps[:-1]


def _epilogue(steps, out, is_bias):
    """``(bias or None, post-ops)`` of a group's epilogue: a first add ``is_bias`` takes (by its
    operand's shape), ReLUs and GELUs, and one add of a float32 tensor of the output's shape (a
    ``sum``); None where a step is none of these."""
    bias, posts = None, []
    for k, (op, other) in enumerate(steps):
        if other is None:
            if op.startswith("cast"):
                return None
            posts.append((op,))
            continue
        shape = tuple(other.type.shape)
        if other.type.dtype != "float32":
            return None
        if k == 0 and is_bias(shape):
            bias = other
        elif shape == tuple(out.shape) and not any(p[0] == "sum" for p in posts):
            posts.append(("sum", other))
        else:
            return None
    return bias, posts


def _product_plan(fn):
    """``(product, bias param or None, post-ops)`` for a group oneDNN's matmul runs: a float32
    product by weights Ember packed (``nn.matmul_packed``; or its bf16 dot, both operands words
    of two bfloat16: ``precision="bf16"``), its rows every
    leading size of the data (static but the first, which may be a symbol), then a bias add
    (a row of the columns), ReLU/GELU post-ops and one add of a tensor of the output's shape
    (``sum``); else None."""
    found = anchor_chain(fn, "nn.matmul_packed")
    if found is None:
        return None
    mm, steps = found
    a, bp, out = mm.args[0].type, mm.args[1].type, mm.type
    dot = mm.attrs.get("dot")
    if mm.attrs.get("runtime"):
        return None  # (weights packed at run time: the reordered copy is kept per buffer, as constants)
    words = dot == "dot_bf16x2" and a.dtype == bp.dtype == "int32" and out.dtype == "float32"
    if not ((words or (all(t.dtype == "float32" for t in (a, bp, out)) and dot is None)) and bp.ndim == 3
            and bp.is_static and all(isinstance(d, int) for d in a.shape[1:]) and a.ndim == out.ndim
            and tuple(a.shape[:-1]) == tuple(out.shape[:-1])):
        return None
    first = a.shape[0]
    if not isinstance(first, int) and not (len(first.symbols) == 1 and re.fullmatch(
            rf"(\d+\*)?{re.escape(first.symbols[0])}", str(first))):
        return None  # (rows a symbol or a multiple of one: the kernel's one size argument)
    units = mm.attr("units")
    steps = _bf16_tail(steps, out)
    got = None if steps is None else _epilogue(steps, out, lambda shape: shape[-1:] == (units,)
                                               and all(d == 1 for d in shape[:-1]))
    return None if got is None else (mm, *got)


def _product_source(fn, func, name: str) -> ExternalSource:
    mm, bias, posts = _product_plan(fn)
    at = {p: f"p{i}" for i, p in enumerate(fn.params)}
    a = mm.args[0].type.shape
    panels, K, NR = mm.args[1].type.shape
    N = mm.attr("units")
    half = mm.attrs.get("dot") == "dot_bf16x2"
    dtype = "dnnl_bf16" if half else "dnnl_f32"
    out_dtype = "dnnl_bf16" if fn.body.type.dtype == "bfloat16" else "dnnl_f32"
    if half:  # (words of two bfloat16 along K: A (rows, K/2), B (N/NR, K/2, NR) -> (.., NR, 2))
        K *= 2
    R = 1
    for d in a[1:-1]:
        R *= d
    init = f"""dnnl_dims_t bd = {{1, {N}}}, wd = {{{K}, {N}}};
    failed = dnnl_engine_create(&eng, dnnl_cpu, 0) != dnnl_success
        || dnnl_memory_desc_init_by_tag(&wuser, 2, wd, {dtype}, dnnl_ab) != dnnl_success
        || dnnl_memory_desc_init_by_tag(&bia_md, 2, bd, dnnl_f32, dnnl_ab) != dnnl_success;"""
    desc = f"""dnnl_dims_t sd = {{n * {R}, {K}}}, wd = {{{K}, {N}}}, dd = {{n * {R}, {N}}};
    dnnl_memory_desc_t wany;
    dnnl_matmul_desc_t md;
    int ok = dnnl_memory_desc_init_by_tag(&q->src_md, 2, sd, {dtype}, dnnl_ab) == dnnl_success
        && dnnl_memory_desc_init_by_tag(&wany, 2, wd, {dtype}, dnnl_format_tag_any) == dnnl_success
        && dnnl_memory_desc_init_by_tag(&q->dst_md, 2, dd, {out_dtype}, dnnl_ab) == dnnl_success
        && dnnl_matmul_desc_init(&md, &q->src_md, &wany, {'&bia_md' if bias is not None else 'NULL'}, &q->dst_md) == dnnl_success;"""
    # Ember's panels (N/NR, K, NR) as the plain (K, N) oneDNN reorders from
    if half:
        unpack = (f"for (int64_t kk = 0; kk < {K}; kk++) for (int64_t j = 0; j < {N}; j++) "
                  f"((uint16_t *)u)[kk * {N} + j] = ((const uint16_t *)w)[((j / {NR}) * {K // 2} + kk / 2) * "
                  f"{2 * NR} + (j % {NR}) * 2 + kk % 2];")
    else:
        unpack = (f"for (int64_t kk = 0; kk < {K}; kk++) for (int64_t j = 0; j < {N}; j++) "
                  f"((float *)u)[kk * {N} + j] = w[(j / {NR}) * {K * NR} + kk * {NR} + j % {NR}];")
    return _kernel(name, fn, init=init, desc=desc, op_desc="&md", unpack=unpack,
                   batch=_sizes(func, name, a[0]), nsizes=len(func.scalars), x=at[mm.args[0]], w=at[mm.args[1]],
                   bias=at[bias] if bias is not None else None, posts=posts,
                   row_bytes=R * N * (2 if out_dtype == "dnnl_bf16" else 4))


def _matches(fn) -> bool:
    return _plan(fn) is not None or _product_plan(fn) is not None or int8_plan(fn) is not None


def _sizes(func, name: str, batch) -> str:
    """The C expression of a kernel's ``batch`` (static, or the one symbolic size it takes)."""
    # the sizes Ember's kernel takes after its buffers (int64 each): a symbolic batch alone
    sizes = [str(v.name) for v in func.scalars]
    if isinstance(batch, int):
        return str(batch)
    if sizes == [str(batch)]:
        return "sz0"
    # (a product's rows: the batch times a static row count, 16*N, flattened by the exporter)
    if len(sizes) == 1 and re.fullmatch(rf"(\d+)\*{re.escape(sizes[0])}", str(batch)):
        return f"({str(batch).split('*')[0]} * sz0)"
    raise ValueError(f"{name}: the oneDNN backend takes a symbolic batch alone, got sizes {sizes}")


def _eltwise(step: str) -> tuple:
    """``(oneDNN eltwise kind, alpha, beta)`` of an epilogue step (``anchor_chain``'s names)."""
    if step.startswith("clip:"):
        lo, hi = (float(v) if v != "None" else None for v in step.split(":")[1:])
        return "dnnl_eltwise_clip", "-FLT_MAX" if lo is None else f"{lo!r}f", "FLT_MAX" if hi is None else f"{hi!r}f"
    kinds = {"relu": "dnnl_eltwise_relu", "gelu:none": "dnnl_eltwise_gelu_erf", "gelu:tanh": "dnnl_eltwise_gelu_tanh",
             "sigmoid": "dnnl_eltwise_logistic"}
    return kinds[step], "0.0f", "0.0f"


def _post_ops(posts) -> str:
    """C appending ``posts`` (``("relu",)``, ``("clip:0.0:6.0",)``, ``("sum", _)``, ...) to ``po``."""
    out = []
    for p in posts:
        if p[0] == "sum":
            out.append("ok = ok && dnnl_post_ops_append_sum(po, 1.0f) == dnnl_success;")
        else:
            kind, alpha, beta = _eltwise(p[0])
            out.append(f"ok = ok && dnnl_post_ops_append_eltwise(po, 1.0f, {kind}, {alpha}, {beta}) == dnnl_success;")
    return " ".join(out)


def _source(fn, func, name: str) -> ExternalSource:
    conv = _plan(fn)
    if conv is not None:
        return _conv_source(fn, func, name, *conv)
    q = int8_plan(fn)
    if q is not None:
        return ExternalSource(int8_source(fn, func, name, q, _sizes(func, name, q[0].args[0].type.shape[0])),
                              cflags=("-pthread",), links=("-ldnnl",))
    return _product_source(fn, func, name)


def _conv_source(fn, func, name: str, conv, bias, posts) -> ExternalSource:
    at = {p: f"p{i}" for i, p in enumerate(fn.params)}
    x, w = conv.args[0].type.shape, conv.args[1].type.shape
    N, FO, OH, OW, FB = conv.type.shape
    C, KH, KW = w[1], w[2], w[3]
    H, W = x[2], x[3]
    half = conv.attrs.get("dot") == "dot_bf16x2"
    dtype = "dnnl_bf16" if half else "dnnl_f32"
    out_dtype = "dnnl_bf16" if fn.body.type.dtype == "bfloat16" else "dnnl_f32"
    unpack = None
    if half:  # (words of two bfloat16 along C: data blocks of 2 x[4] channels; weights (F/FB, C/2, kh, kw, FB) words)
        C *= 2
        x = (*x[:4], 2 * x[4])
        unpack = (f"for (int64_t f = 0; f < {FO * FB}; f++) for (int64_t c = 0; c < {C}; c++) "
                  f"for (int64_t k = 0; k < {KH * KW}; k++) ((uint16_t *)u)[(f * {C} + c) * {KH * KW} + k] = "
                  f"((const uint16_t *)w)[(((f / {FB}) * {C // 2} + c / 2) * {KH * KW} + k) * {2 * FB} "
                  f"+ (f % {FB}) * 2 + c % 2];")
    src_tag = f"dnnl_aBcd{x[4]}b" if len(x) == 5 else "dnnl_nchw"
    sh, sw = conv.attr("strides") or (1, 1)
    dh, dw = conv.attr("dilation") or (1, 1)
    pt, pl, pb, pr = conv.attr("padding") or (0, 0, 0, 0)
    if _depthwise(conv):  # (groups of one channel: weights G 1 1 kh kw, Ember's blocks Goihw<b>g)
        C = FO * FB
        wdims, wtag = f"{{{C}, 1, 1, {KH}, {KW}}}", f"dnnl_Goihw{FB}g"
    else:  # (Ember's packing Oihw<b>o as it is; bf16 words unpacked to a plain oihw first)
        wdims, wtag = f"{{{FO * FB}, {C}, {KH}, {KW}}}", "dnnl_oihw" if half else f"dnnl_Abcd{FB}a"
    nw = wdims.count(",") + 1
    init = f"""dnnl_dims_t bd = {{{FO * FB}}}, wd = {wdims};
    failed = dnnl_engine_create(&eng, dnnl_cpu, 0) != dnnl_success
        || dnnl_memory_desc_init_by_tag(&wuser, {nw}, wd, {dtype}, {wtag}) != dnnl_success
        || dnnl_memory_desc_init_by_tag(&bia_md, 1, bd, dnnl_f32, dnnl_x) != dnnl_success;"""
    desc = f"""dnnl_dims_t sd = {{n, {C}, {H}, {W}}}, wd = {wdims}, dd = {{n, {FO * FB}, {OH}, {OW}}};
    dnnl_dims_t st = {{{sh}, {sw}}}, dil = {{{dh - 1}, {dw - 1}}}, padl = {{{pt}, {pl}}}, padr = {{{pb}, {pr}}};
    dnnl_memory_desc_t wany;
    dnnl_convolution_desc_t cd;
    int ok = dnnl_memory_desc_init_by_tag(&q->src_md, 4, sd, {dtype}, {src_tag}) == dnnl_success
        && dnnl_memory_desc_init_by_tag(&wany, {nw}, wd, {dtype}, dnnl_format_tag_any) == dnnl_success
        && dnnl_memory_desc_init_by_tag(&q->dst_md, 4, dd, {out_dtype}, dnnl_aBcd{FB}b) == dnnl_success
        && dnnl_dilated_convolution_forward_desc_init(&cd, dnnl_forward_inference, dnnl_convolution_direct,
               &q->src_md, &wany, {'&bia_md' if bias is not None else 'NULL'}, &q->dst_md, st, dil, padl, padr) == dnnl_success;"""
    return _kernel(name, fn, init=init, desc=desc, op_desc="&cd", unpack=unpack,
                   batch=_sizes(func, name, N), nsizes=len(func.scalars), x=at[conv.args[0]], w=at[conv.args[1]],
                   bias=at[bias] if bias is not None else None, posts=posts,
                   row_bytes=FO * OH * OW * FB * (2 if out_dtype == "dnnl_bf16" else 4))


def _kernel(name: str, fn, *, init: str, desc: str, op_desc: str, unpack, batch: str, nsizes: int, x: str, w: str,
            bias, posts, row_bytes: int) -> ExternalSource:
    """The C of a kernel running one oneDNN primitive (its ``desc`` made into ``op_desc`` for the
    batch ``n``), a primitive per batch size a run brings, the weights reordered into its
    format once per (weights buffer, primitive): from the user format ``wuser`` (``init``), or
    from Ember's packing through ``unpack`` (C filling ``float *u`` from ``const float *w``)."""
    at = {p: f"p{i}" for i, p in enumerate(fn.params)}
    args = ([f"const float *p{i}" for i in range(len(fn.params))] + ["float *out"]
            + [f"int64_t sz{i}" for i in range(nsizes)])
    summed = next((at[p[1]] for p in posts if p[0] == "sum"), None)
    text = f"""{PRELUDE}
static dnnl_memory_desc_t wuser, bia_md;

/* a primitive per batch size (one where the batch is static): made on the first run of that
   size, with the data descriptors of that size and the weights' format it chose */
#define PRIMS 32
typedef struct {{ int64_t n; dnnl_primitive_t p; dnnl_memory_desc_t src_md, dst_md; const dnnl_memory_desc_t *wmd; }} prim_t;
static prim_t prim[PRIMS];
static int prims;

static void init(void) {{
    {init}
}}

/* the primitive for batch n into *q (0 on success; the caller holds mu) */
static int make(int64_t n, prim_t *q) {{
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t po = NULL;
    dnnl_primitive_desc_t pd = NULL;
    const_dnnl_primitive_desc_t own;
    q->n = n;
    {desc}
    ok = ok && dnnl_primitive_attr_create(&attr) == dnnl_success
        && dnnl_post_ops_create(&po) == dnnl_success;
    {_post_ops(posts)}
    ok = ok && dnnl_primitive_attr_set_post_ops(attr, po) == dnnl_success
        && dnnl_primitive_desc_create(&pd, {op_desc}, attr, eng, NULL) == dnnl_success
        && dnnl_primitive_create(&q->p, pd) == dnnl_success
        && dnnl_primitive_get_primitive_desc(q->p, &own) == dnnl_success;
    {made_c(name)}
    return ok ? 0 : 1;
}}

{weights_c(name, unpack)}
int32_t {name}({', '.join(args)}) {{
    int64_t n = {batch};
    pthread_once(&once, init);
    if (failed || n < 0) return 1;
    if (n == 0) return 0;
    /* the primitive of this batch and the weights in its format (kept: each made once) */
    int k = -1;
    pthread_mutex_lock(&mu);
    for (int i = 0; i < prims; i++)
        if (prim[i].n == n) {{ k = i; break; }}
    if (k < 0 && prims < PRIMS && make(n, &prim[prims]) == 0) k = prims++;
    dnnl_memory_t wei = k < 0 ? NULL : weights({w}, k);
    pthread_mutex_unlock(&mu);
    if (!wei) return 1;  /* (more batch sizes than PRIMS, or oneDNN failed) */
    static _Thread_local dnnl_stream_t s;
    if (!s && dnnl_stream_create(&s, eng, dnnl_stream_default_flags) != dnnl_success) return 1;
    {f'memcpy(out, {summed}, (size_t)n * {row_bytes});  /* (the sum post-op adds to what dst holds) */' if summed else ''}
    dnnl_memory_t src = NULL, dst = NULL, bia = NULL;
    int ok = dnnl_memory_create(&src, &prim[k].src_md, eng, (void *){x}) == dnnl_success
        && dnnl_memory_create(&dst, &prim[k].dst_md, eng, out) == dnnl_success
        {f'&& dnnl_memory_create(&bia, &bia_md, eng, (void *){bias}) == dnnl_success' if bias else ''};
    if (ok) {{
        dnnl_exec_arg_t a[4] = {{{{DNNL_ARG_SRC, src}}, {{DNNL_ARG_WEIGHTS, wei}}, {{DNNL_ARG_DST, dst}}, {{DNNL_ARG_BIAS, bia}}}};
        ok = dnnl_primitive_execute(prim[k].p, s, {4 if bias else 3}, a) == dnnl_success
             && dnnl_stream_wait(s) == dnnl_success;
    }}
    if (src) dnnl_memory_destroy(src);
    if (dst) dnnl_memory_destroy(dst);
    if (bia) dnnl_memory_destroy(bia);
    return ok ? 0 : 1;
}}
"""
    return ExternalSource(text, cflags=("-pthread",), links=("-ldnnl",))


def _block(target):
    # oneDNN's fast (JIT) convolutions read blocks of one vector: nChw16c on AVX-512, nChw8c on
    # AVX2 (blocks of 32 ran its reference implementation, "ref:any")
    from ..kernels.common import vector_lanes

    return vector_lanes(target, "float32")


ONEDNN = register_backend(Backend("onednn", _matches, _source, unavailable=_unavailable, version="6",
                                  doc="blocked float32 and bf16 convolutions and products by weights, and "
                                      "quantized ones (int8), on oneDNN's primitives (libdnnl)",
                                  block=_block, stateful=True, int8_channels_last=DOTS))
