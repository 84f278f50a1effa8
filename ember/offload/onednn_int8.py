"""The ``onednn`` backend's quantized convolutions: Ember's integer conv groups on oneDNN's int8
primitive (uint8 data, int8 weights, int32 sums).

A QDQ conv reaches the fused groups as ``integer_products``, ``requantize`` and
``block_layout`` leave it: ``nn.conv2d_nchwc`` with ``dot="dot_u8i8x4"`` over the blocked
uint8 data read as int32 words, Ember's packed weights (``F/FB, C/4, kh, kw, FB, 4`` int8 as
int32 words), then an epilogue of per-channel and scalar arithmetic::

    (cast(conv - corr, float32) * m + s)  round  [* c]  [max/min c]  [round  cast(int32)  + zp
    max/min c  cast(uint8)]          (a uint8 result, or a float32 one)

where ``corr`` is the zero point of the data times the weights' column sums. oneDNN computes
the same: the sums into its output scales ``m`` (per channel), ``s - corr * m`` a per-channel
binary add post-op (``s`` where the conv pads: there the data's zero point is oneDNN's source
zero point, which pads as Ember does), each later step an ``eltwise`` post-op (``round``,
``linear``, ``clip``; integer steps on exact integers in float), and the last cast the
destination's type. A residual add stays on Ember's kernel: oneDNN 2.6's brgemm convolutions
computed a ``sum`` post-op after an eltwise ``linear`` wrongly (up to 25 codes off its own
reference implementation on the same inputs), and the quantized residuals need one there.
Only channels-last data (``nhwc``, Ember's one block of all the channels: see
``Backend.int8_channels_last``) runs on oneDNN's JIT code; blocked int8 data ran its reference.
The values (scales, shifts, scalars) are the group's parameters, which differ between the
convs that share a kernel: a primitive is made per batch size and per those values, kept, and
found again by comparing them (a few kilobytes, each run).

Sums are exact on both sides; the float steps are the same operations but for the shift,
``(acc - corr) * m + s`` against ``acc * m + (s - corr * m)``, whose last-bit differences can
move a value that lies within a rounding of a half to the next code (ONNX Runtime's optimized
and plain sessions differ so too).
"""
from __future__ import annotations

import struct

from ..graph.ir import Call, Var

__all__ = ["int8_conv_plan", "int8_conv_source"]

_SCALAR_STEPS = {"maximum": "max", "minimum": "min", "multiply": "mul", "add": "add"}


def _param(e) -> bool:
    return isinstance(e, Var)


def _chain(fn):
    """``(conv, [(step, param or None, ...)])``: ``fn``'s body as the conv then one op at a
    time on the previous value, else None."""
    steps = []
    e = fn.body
    while isinstance(e, Call) and e.op != "nn.conv2d_nchwc":
        if e.op in ("round", "cast") and len(e.args) == 1:
            steps.append((e.op if e.op == "round" else f"cast:{e.attr('dtype')}", None))
            e = e.args[0]
            continue
        if e.op not in ("subtract", "multiply", "add", "maximum", "minimum") or len(e.args) != 2:
            return None
        a, b = e.args
        if e.op != "subtract" and _param(a) and isinstance(b, Call):
            a, b = b, a  # (the chain's value first)
        if not isinstance(a, Call):
            return None
        if _param(b):
            steps.append((e.op, b))
        else:
            return None
        e = a
    if not (isinstance(e, Call) and len(e.args) == 2 and all(_param(a) for a in e.args)):
        return None
    return e, steps[::-1]


def int8_conv_plan(fn):
    """``(conv, head, posts)`` for a quantized conv group oneDNN runs, else None: ``head`` is
    ``(corr, m, s or None)``, the per-channel params of the sums' scaling; ``posts`` the later
    steps as ``("round",)``, ``("linear", a, b)``, ``("clip", lo, hi)`` (each of ``a``, ``b``,
    ``lo``, ``hi`` a float, or ``(scalar param, sign)``: ``(p, -1)`` is its negation)."""
    found = _chain(fn)
    if found is None:
        return None
    conv, steps = found
    x, w, out = conv.args[0].type, conv.args[1].type, conv.type
    a = conv.attrs
    if not (a.get("dot") == "dot_u8i8x4" and not a.get("pairs") and a.get("groups", 1) == 1
            and x.dtype == w.dtype == out.dtype == "int32" and x.ndim == 5 and w.ndim == 5
            and w.is_static and all(isinstance(d, int) for d in x.shape[1:])
            and all(isinstance(d, int) for d in out.shape[1:]) and x.shape[0] == out.shape[0]):
        return None
    if x.shape[1] != 1 or out.shape[1] != 1 or w.shape[1] != x.shape[4]:
        return None  # (channels last, nhwc, only: oneDNN 2 runs int8 data in blocks on its reference code)
    pad = a.get("pad_value", 0)
    if pad and len(set(struct.pack("<I", pad & 0xFFFFFFFF))) != 1:
        return None  # (a pad value not one zero point's four bytes)
    channel = (1, out.shape[1], 1, 1, out.shape[4])

    def per_channel(p, dtype):
        return p.type.dtype == dtype and (tuple(p.type.shape) == channel or p.type.ndim == 0)

    # the head: subtract(corr) cast(float32) multiply(m) [add(s)]
    if len(steps) < 3 or steps[0][0] != "subtract" or steps[1][0] != "cast:float32" or steps[2][0] != "multiply":
        return None
    corr, m = steps[0][1], steps[2][1]
    if not (per_channel(corr, "int32") and per_channel(m, "float32")):
        return None
    rest = steps[3:]
    s = None
    if rest and rest[0][0] == "add" and per_channel(rest[0][1], "float32"):
        s, rest = rest[0][1], rest[1:]
    posts, integral, dtype = [], False, "float32"

    def scalar(p):
        return p.type.ndim == 0 and p.type.dtype == dtype

    for k, step in enumerate(rest):
        op = step[0]
        last = k == len(rest) - 1
        if op == "round":
            posts.append(("round",))
            integral = True
        elif op in ("maximum", "minimum") and scalar(step[1]):
            p = step[1]
            posts.append(("clip", (p, 1), None) if op == "maximum" else ("clip", None, (p, 1)))
        elif op in ("multiply", "add") and dtype == "float32" and step[1].type.ndim \
                and per_channel(step[1], "float32"):
            posts.append(("binary", op, step[1]))  # (the param itself, read at each run)
            integral = False
        elif op == "multiply" and scalar(step[1]) and dtype == "float32":
            posts.append(("linear", (step[1], 1), 0.0))
            integral = False
        elif op == "add" and scalar(step[1]):
            posts.append(("linear", 1.0, (step[1], 1)))
            integral = integral and dtype == "int32"
        elif op == "cast:int32" and integral and dtype == "float32":
            dtype = "int32"  # (exact: the value is a whole number already)
        elif op == "cast:uint8" and last and integral and dtype == "int32":
            dtype = "uint8"
        else:
            return None
    if dtype not in ("uint8", "float32") or fn.body.type.dtype != dtype:
        return None
    return conv, (corr, m, s), posts


def int8_conv_source(fn, func, name: str, plan, sizes) -> tuple:
    """``(C text, batch expression)`` of the kernel running ``plan`` (:func:`int8_conv_plan`)
    on oneDNN. ``sizes``: ``onednn._sizes``."""
    conv, (corr, m, s), posts = plan
    at = {p: f"p{i}" for i, p in enumerate(fn.params)}
    x, w, out = conv.args[0].type.shape, conv.args[1].type.shape, conv.type.shape
    N, FO, OH, OW, FB = out
    OC = FO * FB
    CB = 4 * x[4]
    C, KH, KW = x[1] * CB, w[2], w[3]
    H, W = x[2], x[3]
    pad = conv.attrs.get("pad_value", 0)
    zp = struct.pack("<I", pad & 0xFFFFFFFF)[0] if pad else 0
    u8 = fn.body.type.dtype == "uint8"
    sh, sw = conv.attr("strides") or (1, 1)
    dh, dw = conv.attr("dilation") or (1, 1)
    pt, pl, pb, pr = conv.attr("padding") or (0, 0, 0, 0)

    # the values a primitive is made from, laid in its key: per channel m, s, corr (OC each,
    # or one), then the scalars of the later steps, in order
    fields, scalars = [], []

    def field(p, kind):
        n = 1 if p.type.ndim == 0 else OC
        fields.append((at[p], kind, n))
        return n

    nm = field(m, "float")
    ns = field(s, "float") if s is not None else 0
    nc = field(corr, "int32_t")
    for post in posts:
        if post[0] != "binary":
            scalars += [v[0] for v in post[1:] if isinstance(v, tuple)]
    for p in dict.fromkeys(scalars):
        field(p, "float" if p.type.dtype == "float32" else "int32_t")
    offsets, off = {}, 0
    for ptr, kind, n in fields:
        offsets[ptr] = off
        off += 4 * n
    keybytes = off
    fill = " ".join(f"memcpy(key + {offsets[ptr]}, {ptr}, {4 * n});" for ptr, kind, n in fields)

    def val(ptr, kind, i="0"):
        return f"((const {kind} *)(q->key + {offsets[ptr]}))[{i}]"

    def kinds(p):
        return "float" if p.type.dtype == "float32" else "int32_t"

    def cval(v):
        if v is None:
            return None
        if isinstance(v, (int, float)):
            return f"{float(v)!r}f"
        p, sign = v
        return f"({'-' if sign < 0 else ''}(float){val(at[p], kinds(p))})"

    mi = "c" if nm > 1 else "0"
    si = "c" if ns > 1 else "0"
    ci = "c" if nc > 1 else "0"
    shift = (f"(float)({val(at[s], 'float', si)} - (float){val(at[corr], 'int32_t', ci)} * {val(at[m], 'float', mi)})"
             if s is not None and not pad else
             f"({val(at[s], 'float', si)})" if s is not None else
             f"(-(float){val(at[corr], 'int32_t', ci)} * {val(at[m], 'float', mi)})" if not pad else "0.0f")
    lines, binaries = [], []
    for k, post in enumerate(posts, start=1):  # (post-op 0: the shift)
        if post[0] == "binary":
            # (a per-channel param as it is, {1, OC, 1, 1}: the shift's descriptor)
            alg = "dnnl_binary_mul" if post[1] == "multiply" else "dnnl_binary_add"
            lines.append(f"ok = ok && dnnl_post_ops_append_binary(po, {alg}, &shift_md) == dnnl_success;")
            binaries.append((k, at[post[2]]))
        elif post[0] == "round":
            lines.append("ok = ok && dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_round, 0.0f, 0.0f) == dnnl_success;")
        elif post[0] == "linear":
            lines.append(f"ok = ok && dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_linear, {cval(post[1])}, "
                         f"{cval(post[2])}) == dnnl_success;")
        elif post[0] == "clip":
            lo, hi = cval(post[1]) or "-FLT_MAX", cval(post[2]) or "FLT_MAX"
            lines.append(f"ok = ok && dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_clip, {lo}, {hi}) == dnnl_success;")
    dst_type = "dnnl_u8" if u8 else "dnnl_f32"
    unpack = (f"for (int64_t f = 0; f < {OC}; f++) for (int64_t c = 0; c < {C}; c++) "
              f"for (int64_t t = 0; t < {KH * KW}; t++) ((int8_t *)u)[(f * {C} + c) * {KH * KW} + t] = "
              f"((const int8_t *)w)[(((f / {FB}) * {C // 4} + c / 4) * {KH * KW} + t) * {4 * FB} + (f % {FB}) * 4 + c % 4];")
    from .onednn import PRELUDE, _weights_c

    args = [f"const float *p{i}" for i in range(len(fn.params))] + ["float *out"] + \
        [f"int64_t sz{i}" for i in range(len(func.scalars))]
    bin_create = "".join(f"\n        && dnnl_memory_create(&bin[{i}], &shift_md, eng, (void *){ptr}) == dnnl_success"
                         for i, (_, ptr) in enumerate(binaries))
    bin_args = "".join(f", {{DNNL_ARG_ATTR_MULTIPLE_POST_OP({k}) | DNNL_ARG_SRC_1, bin[{i}]}}"
                       for i, (k, _) in enumerate(binaries))
    text = f"""{PRELUDE}
static dnnl_memory_desc_t wuser, shift_md;

/* a primitive per batch size and per the values it is made from (key: the scales, shifts and
   scalars of the call's parameters, which differ between the convs sharing this kernel) */
#define PRIMS 256
#define KEYBYTES {keybytes}
typedef struct {{ int64_t n; unsigned char *key; float *shift; dnnl_primitive_t p;
                 dnnl_memory_desc_t src_md, dst_md; const dnnl_memory_desc_t *wmd; }} prim_t;
static prim_t prim[PRIMS];
static int prims;

static void init(void) {{
    dnnl_dims_t wd = {{{OC}, {C}, {KH}, {KW}}}, bd = {{1, {OC}, 1, 1}};
    failed = dnnl_engine_create(&eng, dnnl_cpu, 0) != dnnl_success
        || dnnl_memory_desc_init_by_tag(&wuser, 4, wd, dnnl_s8, dnnl_oihw) != dnnl_success
        || dnnl_memory_desc_init_by_tag(&shift_md, 4, bd, dnnl_f32, dnnl_nchw) != dnnl_success;
}}

/* the primitive for batch n and the values at key into *q (0 on success; the caller holds mu) */
static int make(int64_t n, const unsigned char *key, prim_t *q) {{
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t po = NULL;
    dnnl_primitive_desc_t pd = NULL;
    const_dnnl_primitive_desc_t own;
    q->n = n;
    q->key = malloc(KEYBYTES);
    q->shift = malloc({OC} * sizeof(float));
    float *scale = malloc({OC} * sizeof(float));
    if (!q->key || !q->shift || !scale) {{ free(q->key); free(q->shift); free(scale); return 1; }}
    memcpy(q->key, key, KEYBYTES);
    for (int64_t c = 0; c < {OC}; c++) {{
        scale[c] = {val(at[m], 'float', mi)};
        q->shift[c] = {shift};
    }}
    dnnl_dims_t sd = {{n, {C}, {H}, {W}}}, wd = {{{OC}, {C}, {KH}, {KW}}}, dd = {{n, {OC}, {OH}, {OW}}};
    dnnl_dims_t st = {{{sh}, {sw}}}, dil = {{{dh - 1}, {dw - 1}}}, padl = {{{pt}, {pl}}}, padr = {{{pb}, {pr}}};
    dnnl_memory_desc_t wany;
    dnnl_convolution_desc_t cd;
    int32_t zp = {zp};
    int ok = dnnl_memory_desc_init_by_tag(&q->src_md, 4, sd, dnnl_u8, dnnl_nhwc) == dnnl_success
        && dnnl_memory_desc_init_by_tag(&wany, 4, wd, dnnl_s8, dnnl_format_tag_any) == dnnl_success
        && dnnl_memory_desc_init_by_tag(&q->dst_md, 4, dd, {dst_type}, dnnl_nhwc) == dnnl_success
        && dnnl_dilated_convolution_forward_desc_init(&cd, dnnl_forward_inference, dnnl_convolution_direct,
               &q->src_md, &wany, NULL, &q->dst_md, st, dil, padl, padr) == dnnl_success
        && dnnl_primitive_attr_create(&attr) == dnnl_success
        && dnnl_post_ops_create(&po) == dnnl_success
        && dnnl_primitive_attr_set_output_scales(attr, {OC}, 1 << 1, scale) == dnnl_success
        && (zp == 0 || dnnl_primitive_attr_set_zero_points(attr, DNNL_ARG_SRC, 1, 0, &zp) == dnnl_success)
        && dnnl_post_ops_append_binary(po, dnnl_binary_add, &shift_md) == dnnl_success;
    {" ".join(lines)}
    ok = ok && dnnl_primitive_attr_set_post_ops(attr, po) == dnnl_success
        && dnnl_primitive_desc_create(&pd, &cd, attr, eng, NULL) == dnnl_success
        && dnnl_primitive_create(&q->p, pd) == dnnl_success
        && dnnl_primitive_get_primitive_desc(q->p, &own) == dnnl_success;
    if (ok) {{
        q->wmd = dnnl_primitive_desc_query_md(own, dnnl_query_weights_md, 0);
        if (getenv("EMBER_DNNL_VERBOSE")) {{
            const char *impl = NULL;
            dnnl_primitive_desc_query(own, dnnl_query_impl_info_str, 0, &impl);
            fprintf(stderr, "ember onednn {name} (batch %lld): %s\\n", (long long)n, impl ? impl : "?");
        }}
    }} else {{
        free(q->key); free(q->shift);
    }}
    free(scale);
    if (pd) dnnl_primitive_desc_destroy(pd);
    if (po) dnnl_post_ops_destroy(po);
    if (attr) dnnl_primitive_attr_destroy(attr);
    return ok ? 0 : 1;
}}

{_weights_c(name, unpack)}

int32_t {name}({', '.join(args)}) {{
    int64_t n = {sizes};
    pthread_once(&once, init);
    if (failed || n < 0) return 1;
    if (n == 0) return 0;
    static _Thread_local unsigned char key[KEYBYTES];
    {fill}
    int k = -1;
    pthread_mutex_lock(&mu);
    for (int i = 0; i < prims; i++)
        if (prim[i].n == n && memcmp(prim[i].key, key, KEYBYTES) == 0) {{ k = i; break; }}
    if (k < 0 && prims < PRIMS && make(n, key, &prim[prims]) == 0) k = prims++;
    dnnl_memory_t wei = k < 0 ? NULL : weights({at[conv.args[1]]}, k);
    pthread_mutex_unlock(&mu);
    if (!wei) return 1;  /* (more primitives than PRIMS, or oneDNN failed) */
    static _Thread_local dnnl_stream_t s;
    if (!s && dnnl_stream_create(&s, eng, dnnl_stream_default_flags) != dnnl_success) return 1;
    dnnl_memory_t src = NULL, dst = NULL, sh = NULL, bin[{max(1, len(binaries))}] = {{NULL}};
    int ok = dnnl_memory_create(&src, &prim[k].src_md, eng, (void *){at[conv.args[0]]}) == dnnl_success
        && dnnl_memory_create(&dst, &prim[k].dst_md, eng, out) == dnnl_success
        && dnnl_memory_create(&sh, &shift_md, eng, prim[k].shift) == dnnl_success{bin_create};
    if (ok) {{
        dnnl_exec_arg_t a[{4 + len(binaries)}] = {{{{DNNL_ARG_SRC, src}}, {{DNNL_ARG_WEIGHTS, wei}}, {{DNNL_ARG_DST, dst}},
                                {{DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1, sh}}{bin_args}}};
        ok = dnnl_primitive_execute(prim[k].p, s, {4 + len(binaries)}, a) == dnnl_success && dnnl_stream_wait(s) == dnnl_success;
    }}
    if (src) dnnl_memory_destroy(src);
    if (dst) dnnl_memory_destroy(dst);
    if (sh) dnnl_memory_destroy(sh);
    for (int i = 0; i < {len(binaries)}; i++) if (bin[i]) dnnl_memory_destroy(bin[i]);
    return ok ? 0 : 1;
}}
"""
    return text
