"""The ``onednn`` offload backend: blocked float32 convolutions on oneDNN's primitives.

Ember's blocked layout is oneDNN's: data ``N C/16 H W 16`` is ``nChw16c`` (and 8: ``nChw8c``),
and the packed weights ``F/16, C, kh, kw, 16`` are ``Oihw16o``, so a kernel reads and writes
the program's own buffers. Each kernel is a C function that makes its primitive on its first
call (``pthread_once``; oneDNN picks its weights' format, the packed weights are reordered
into it once) and then runs it on the calling thread's stream; oneDNN's CPU runtime is OpenMP,
the libgomp team Ember's run already holds. The epilogue becomes the primitive's: a
per-channel add right after the convolution its bias, ReLUs ``eltwise_relu`` post-ops, one
add of a tensor of the output's shape a ``sum`` post-op (the tensor copied into the output
first). The library: Debian's ``libdnnl-dev`` (oneDNN 2.x; headers ``oneapi/dnnl/dnnl.h``).
"""
from __future__ import annotations

import ctypes.util
import os

from . import Backend, ExternalSource, register_backend
from .patterns import conv_chain

HEADER = "/usr/include/oneapi/dnnl/dnnl.h"
BLOCKS = (4, 8, 16, 32)  # the channel blocks with a oneDNN format tag (aBcd<b>b, Abcd<b>a)


def _unavailable():
    if not ctypes.util.find_library("dnnl"):
        return "libdnnl (oneDNN) is not installed: apt install libdnnl-dev"
    if not os.path.exists(os.environ.get("EMBER_DNNL_HEADER", HEADER)):
        return f"oneDNN's headers ({HEADER}) are missing: apt install libdnnl-dev"
    return None


def _plan(fn):
    """``(conv, bias param or None, post-ops [("relu",) | ("sum", param)])`` for a group oneDNN
    runs, else None."""
    found = conv_chain(fn)
    if found is None:
        return None
    conv, steps = found
    x, w, out = conv.args[0].type, conv.args[1].type, conv.type
    a = conv.attrs
    if not (all(t.is_static and t.dtype == "float32" for t in (x, w, out)) and len(conv.args) == 2
            and a.get("groups", 1) == 1 and a.get("dot") is None and a.get("pad_value", 0) == 0):
        return None
    if out.shape[4] not in BLOCKS or (x.ndim == 5 and x.shape[4] not in BLOCKS) or x.ndim not in (4, 5):
        return None
    if x.ndim == 4 and x.shape[1] > 4:  # (plain data: oneDNN's JIT reads it for a stem's few channels only)
        return None
    bias, posts = None, []
    for k, (op, other) in enumerate(steps):
        shape = tuple(other.type.shape) if other is not None else None
        if op == "relu":
            posts.append(("relu",))
        elif shape == (1, out.shape[1], 1, 1, out.shape[4]) and k == 0:
            bias = other
        elif shape == tuple(out.shape) and not any(p[0] == "sum" for p in posts):
            posts.append(("sum", other))
        else:
            return None
    return conv, bias, posts


def _matches(fn) -> bool:
    return _plan(fn) is not None


def _source(fn, func, name: str) -> ExternalSource:
    conv, bias, posts = _plan(fn)
    params = list(fn.params)
    at = {p: f"p{i}" for i, p in enumerate(params)}
    x, w = conv.args[0].type.shape, conv.args[1].type.shape
    N, FO, OH, OW, FB = conv.type.shape
    C, KH, KW = w[1], w[2], w[3]
    H, W = x[2], x[3]
    src_tag = f"dnnl_aBcd{x[4]}b" if len(x) == 5 else "dnnl_nchw"
    sh, sw = conv.attr("strides") or (1, 1)
    dh, dw = conv.attr("dilation") or (1, 1)
    pt, pl, pb, pr = conv.attr("padding") or (0, 0, 0, 0)
    args = [f"const float *p{i}" for i in range(len(params))] + ["float *out"]
    post_c = []
    for p in posts:
        post_c.append("CHECK(dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_relu, 0.0f, 0.0f));" if p[0] == "relu"
                      else "CHECK(dnnl_post_ops_append_sum(po, 1.0f));")
    summed = next((at[p[1]] for p in posts if p[0] == "sum"), None)
    dst_bytes = N * FO * OH * OW * FB * 4
    text = f"""#include <oneapi/dnnl/dnnl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(e) do {{ if ((e) != dnnl_success) {{ failed = 1; return; }} }} while (0)

static dnnl_engine_t eng;
static dnnl_primitive_t conv;
static dnnl_memory_desc_t src_md, dst_md, bia_md, wuser;
static const dnnl_memory_desc_t *wmd;  /* the weights' format the primitive chose */
static int failed;
static pthread_once_t once = PTHREAD_ONCE_INIT;
/* the weights reordered into that format, per weights buffer (an executable's constant): two
   executables of one library (the same architecture, other weights) each get theirs, and an
   executable's finalizer forgets its buffers ({name}__forget) before their memory is reused */
#define SLOTS 64
static struct {{ const void *w; dnnl_memory_t m; }} slot[SLOTS];
static int slots;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

static void init(void) {{
    CHECK(dnnl_engine_create(&eng, dnnl_cpu, 0));
    dnnl_dims_t sd = {{{N}, {C}, {H}, {W}}}, wd = {{{FO * FB}, {C}, {KH}, {KW}}}, dd = {{{N}, {FO * FB}, {OH}, {OW}}};
    dnnl_dims_t bd = {{{FO * FB}}};
    dnnl_memory_desc_t wany;
    CHECK(dnnl_memory_desc_init_by_tag(&src_md, 4, sd, dnnl_f32, {src_tag}));
    CHECK(dnnl_memory_desc_init_by_tag(&wany, 4, wd, dnnl_f32, dnnl_format_tag_any));
    CHECK(dnnl_memory_desc_init_by_tag(&wuser, 4, wd, dnnl_f32, dnnl_Abcd{FB}a));
    CHECK(dnnl_memory_desc_init_by_tag(&dst_md, 4, dd, dnnl_f32, dnnl_aBcd{FB}b));
    CHECK(dnnl_memory_desc_init_by_tag(&bia_md, 1, bd, dnnl_f32, dnnl_x));
    dnnl_dims_t st = {{{sh}, {sw}}}, dil = {{{dh - 1}, {dw - 1}}}, padl = {{{pt}, {pl}}}, padr = {{{pb}, {pr}}};
    dnnl_convolution_desc_t cd;
    CHECK(dnnl_dilated_convolution_forward_desc_init(&cd, dnnl_forward_inference, dnnl_convolution_direct,
        &src_md, &wany, {'&bia_md' if bias is not None else 'NULL'}, &dst_md, st, dil, padl, padr));
    dnnl_primitive_attr_t attr;
    dnnl_post_ops_t po;
    CHECK(dnnl_primitive_attr_create(&attr));
    CHECK(dnnl_post_ops_create(&po));
    {' '.join(post_c)}
    CHECK(dnnl_primitive_attr_set_post_ops(attr, po));
    dnnl_primitive_desc_t pd;
    CHECK(dnnl_primitive_desc_create(&pd, &cd, attr, eng, NULL));
    wmd = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    CHECK(dnnl_primitive_create(&conv, pd));
    CHECK(dnnl_primitive_get_primitive_desc(conv, (const_dnnl_primitive_desc_t *)&pd));
    wmd = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);  /* (the primitive's own copy) */
    if (getenv("EMBER_DNNL_VERBOSE")) {{
        const char *impl = NULL;
        dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl);
        fprintf(stderr, "ember onednn {name}: %s\\n", impl ? impl : "?");
    }}
    dnnl_post_ops_destroy(po); dnnl_primitive_attr_destroy(attr);
}}

/* the weights at w in the primitive's format: reordered on first sight (NULL on failure) */
static dnnl_memory_t weights(const void *w) {{
    dnnl_memory_t m = NULL;
    pthread_mutex_lock(&mu);
    for (int i = 0; i < slots; i++)
        if (slot[i].w == w) {{ m = slot[i].m; break; }}
    if (!m) {{
        dnnl_memory_t wu = NULL, wp = NULL;
        dnnl_primitive_desc_t rpd = NULL;
        dnnl_primitive_t r = NULL;
        dnnl_stream_t s = NULL;
        dnnl_exec_arg_t ra[2];
        if (dnnl_memory_create(&wu, &wuser, eng, (void *)w) == dnnl_success
                && dnnl_memory_create(&wp, wmd, eng, DNNL_MEMORY_ALLOCATE) == dnnl_success
                && dnnl_reorder_primitive_desc_create(&rpd, &wuser, eng, wmd, eng, NULL) == dnnl_success
                && dnnl_primitive_create(&r, rpd) == dnnl_success
                && dnnl_stream_create(&s, eng, dnnl_stream_default_flags) == dnnl_success) {{
            ra[0].arg = DNNL_ARG_FROM; ra[0].memory = wu; ra[1].arg = DNNL_ARG_TO; ra[1].memory = wp;
            if (dnnl_primitive_execute(r, s, 2, ra) == dnnl_success && dnnl_stream_wait(s) == dnnl_success) {{
                m = wp;
                wp = NULL;
                if (slots == SLOTS) {{ dnnl_memory_destroy(slot[0].m); slot[0] = slot[--slots]; }}
                slot[slots].w = w; slot[slots].m = m; slots++;
            }}
        }}
        if (s) dnnl_stream_destroy(s);
        if (r) dnnl_primitive_destroy(r);
        if (rpd) dnnl_primitive_desc_destroy(rpd);
        if (wu) dnnl_memory_destroy(wu);
        if (wp) dnnl_memory_destroy(wp);
    }}
    pthread_mutex_unlock(&mu);
    return m;
}}

void {name}__forget(const void *w) {{
    pthread_mutex_lock(&mu);
    for (int i = 0; i < slots; i++)
        if (slot[i].w == w) {{ dnnl_memory_destroy(slot[i].m); slot[i] = slot[--slots]; break; }}
    pthread_mutex_unlock(&mu);
}}

int32_t {name}({', '.join(args)}) {{
    pthread_once(&once, init);
    if (failed) return 1;
    dnnl_memory_t wei = weights({at[conv.args[1]]});
    if (!wei) return 1;
    static _Thread_local dnnl_stream_t s;
    if (!s && dnnl_stream_create(&s, eng, dnnl_stream_default_flags) != dnnl_success) return 1;
    {f'memcpy(out, {summed}, {dst_bytes});  /* (the sum post-op adds to what dst holds) */' if summed else ''}
    dnnl_memory_t src, dst{', bia' if bias is not None else ''};
    if (dnnl_memory_create(&src, &src_md, eng, (void *){at[conv.args[0]]}) != dnnl_success) return 1;
    if (dnnl_memory_create(&dst, &dst_md, eng, out) != dnnl_success) return 1;
    {f'if (dnnl_memory_create(&bia, &bia_md, eng, (void *){at[bias]}) != dnnl_success) return 1;' if bias is not None else ''}
    dnnl_exec_arg_t a[4] = {{{{DNNL_ARG_SRC, src}}, {{DNNL_ARG_WEIGHTS, wei}}, {{DNNL_ARG_DST, dst}}{', {DNNL_ARG_BIAS, bia}' if bias is not None else ''}}};
    int ok = dnnl_primitive_execute(conv, s, {4 if bias is not None else 3}, a) == dnnl_success
             && dnnl_stream_wait(s) == dnnl_success;
    dnnl_memory_destroy(src); dnnl_memory_destroy(dst);{' dnnl_memory_destroy(bia);' if bias is not None else ''}
    return ok ? 0 : 1;
}}
"""
    return ExternalSource(text, cflags=("-pthread",), links=("-ldnnl",))


def _block(target):
    # oneDNN's fast (JIT) convolutions read blocks of one vector: nChw16c on AVX-512, nChw8c on
    # AVX2 (blocks of 32 ran its reference implementation, "ref:any")
    from ..kernels.common import vector_lanes

    return vector_lanes(target, "float32")


ONEDNN = register_backend(Backend("onednn", _matches, _source, unavailable=_unavailable, version="2",
                                  doc="blocked float32 convolutions on oneDNN's primitives (libdnnl)",
                                  block=_block, stateful=True))
