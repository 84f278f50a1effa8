"""The ``onednn`` backend's quantized kernels: Ember's integer conv and product groups on
oneDNN's int8 primitives (uint8 data, int8 weights, int32 sums).

A QDQ conv or Linear layer reaches the fused groups as ``integer_products``, ``requantize``
and ``block_layout`` leave it: ``nn.conv2d_nchwc`` or ``nn.matmul_packed`` with
``dot="dot_u8i8x4"`` over uint8 data read as int32 words and Ember's packed weights (four
int8 along the contraction in a word), then an epilogue of per-channel, full-shape and scalar
arithmetic::

    cast(sums [- corr], float32) * m [+ s]  round  [* c]  [max/min c]  [+ residual]  round
    cast(int32)  + zp  max/min c  cast(uint8)  [cast(float32) - zp' * s']

where ``corr``, a conv's, is its data's zero point times the weights' column sums. oneDNN
computes the same: the sums into its output scales ``m``, ``s`` a per-channel binary add
(post-op 0), every later step with a param a binary post-op reading the param itself at each
run (integer steps on whole numbers in float: exact), ``round`` an eltwise one, and the last
cast the destination's type. The data's zero point is oneDNN's source zero point (where the
conv pads, its pad value; elsewhere found from ``corr`` and the weights' column sums when the
primitive is made), so its sums less the zero point's work are Ember's, exactly; where it
cannot be found, ``-corr * m`` joins the shift. The float steps are the same operations, not
always in the same roundings (LLVM may fuse Ember's ``* m + s`` into one; oneDNN scales, then
adds): a value within a last bit of a half can go to the other code, and a code off grows
through the next layers. QDQ ResNet-50: a fifth of its outputs one code (0.91) off Ember's
alone, as a quarter of ONNX Runtime's optimized session's are off its plain one's.

oneDNN 2.6's int8 JIT convolutions read ``nhwc`` only (blocked int8 data ran its reference
code), so with this backend the quantized regions take one block of all the channels
(``Backend.int8_channels_last``); a product's rows are plain. Its brgemm convolutions computed
an eltwise ``linear`` followed by a binary or ``sum`` post-op wrongly (up to 25 codes off its
own reference code on the same inputs): scalars are binary post-ops for that reason too.

The scales, shift and zero-point correction are the group's parameters, which differ between
the groups sharing a kernel: a primitive is made per batch size and per those values, kept,
and found again by comparing them (a few kilobytes, each run).
"""
from __future__ import annotations

import struct

from ..graph.ir import Call, Var
from .onednn_c import PRELUDE, made_c, weights_c

__all__ = ["DOTS", "int8_plan", "int8_source"]

ANCHORS = ("nn.conv2d_nchwc", "nn.matmul_packed")
# The packed dots of the groups oneDNN takes: uint8 by int8 in words of four channels, exact
# with VNNI; ``dot_u8i7x4``, an AVX2 host's ``pmaddubsw``, the same words: exact for 7-bit
# weights, and with ``saturating_int8`` both saturate pair sums, not always at the same sums
# (MobileNetV2 QDQ on a Zen 3: 6.5% of outputs up to 5.8e-4 apart, inside ORT's own spread).
# (``dot_i16x2``'s int16 pairs it has no kernel for.)
DOTS = ("dot_u8i8x4", "dot_u8i7x4")


def _param(e) -> bool:
    return isinstance(e, Var)


def _chain(fn):
    """``(anchor, [(step, param or None)])``: ``fn``'s body as a conv or a product by weights
    then one op at a time on the previous value (the other operand a param), else None."""
    steps = []
    e = fn.body
    while isinstance(e, Call) and e.op not in ANCHORS:
        if e.op in ("round", "cast") and len(e.args) == 1:
            steps.append((e.op if e.op == "round" else f"cast:{e.attr('dtype')}", None))
            e = e.args[0]
            continue
        if e.op not in ("subtract", "multiply", "add", "maximum", "minimum") or len(e.args) != 2:
            return None
        a, b = e.args
        if e.op != "subtract" and _param(a) and isinstance(b, Call):
            a, b = b, a  # (the chain's value first)
        if not (isinstance(a, Call) and _param(b)):
            return None
        steps.append((e.op, b))
        e = a
    if not (isinstance(e, Call) and len(e.args) == 2 and all(_param(a) for a in e.args)):
        return None
    return e, steps[::-1]


def _conv_ok(conv) -> bool:
    x, w, out = conv.args[0].type, conv.args[1].type, conv.type
    a = conv.attrs
    pad = a.get("pad_value", 0)
    return (a.get("dot") in DOTS and not a.get("pairs") and a.get("groups", 1) == 1
            and x.dtype == w.dtype == out.dtype == "int32" and x.ndim == 5 and w.ndim == 5 and w.is_static
            and all(isinstance(d, int) for d in (*x.shape[1:], *out.shape[1:])) and x.shape[0] == out.shape[0]
            # (channels last, nhwc, only: oneDNN 2 runs int8 data in blocks on its reference code)
            and x.shape[1] == 1 and out.shape[1] == 1 and w.shape[1] == x.shape[4]
            # (a pad value of one zero point's four bytes)
            and (not pad or len(set(struct.pack("<I", pad & 0xFFFFFFFF))) == 1))


def _product_ok(mm) -> bool:
    a, bp, out = mm.args[0].type, mm.args[1].type, mm.type
    first = a.shape[0]
    return (mm.attrs.get("dot") in DOTS and not mm.attrs.get("runtime")
            and a.dtype == bp.dtype == out.dtype == "int32" and bp.ndim == 3 and bp.is_static
            and a.ndim == out.ndim and all(isinstance(d, int) for d in a.shape[1:])
            and tuple(a.shape[:-1]) == tuple(out.shape[:-1]) and out.shape[-1] == mm.attr("units")
            and bp.shape[1] == a.shape[-1]
            and (isinstance(first, int) or len(first.symbols) == 1))


def int8_plan(fn):
    """``(anchor, head, posts)`` for a quantized conv or product group oneDNN runs, else None.
    ``head`` is ``(corr or None, m, s or None)``: the sums less ``corr`` (a conv's zero-point
    correction, per channel), times ``m`` (per channel or one), plus ``s``; ``posts`` the
    later steps as ``("round",)`` and ``("binary", op, param, "channel" | "full" | "scalar")``
    (a param of one value per channel, of the output's shape, or one; read at each run)."""
    found = _chain(fn)
    if found is None:
        return None
    anchor, steps = found
    out = anchor.type
    if anchor.op == "nn.conv2d_nchwc":
        if not _conv_ok(anchor):
            return None
        channel = {(1, 1, 1, 1, out.shape[4])}
        if not (steps and steps[0][0] == "subtract" and steps[0][1].type.dtype == "int32"
                and (tuple(steps[0][1].type.shape) in channel or steps[0][1].type.ndim == 0)):
            return None
        corr, steps = steps[0][1], steps[1:]
    else:
        if not _product_ok(anchor):
            return None
        units = out.shape[-1]
        channel = {(units,), (1,) * (out.ndim - 1) + (units,)}
        corr = None

    def kind(p):
        shape = tuple(p.type.shape)
        return "scalar" if not shape else "channel" if shape in channel else \
            "full" if shape == tuple(out.shape) and p.type.dtype == "float32" else None

    # the head: cast(float32) multiply(m) [add(s)]
    if len(steps) < 2 or steps[0][0] != "cast:float32" or steps[1][0] != "multiply" \
            or steps[1][1].type.dtype != "float32" or kind(steps[1][1]) not in ("scalar", "channel"):
        return None
    m, rest, s = steps[1][1], steps[2:], None
    if rest and rest[0][0] == "add" and rest[0][1].type.dtype == "float32" and kind(rest[0][1]) in ("scalar", "channel"):
        s, rest = rest[0][1], rest[1:]
    posts = _posts(rest, kind)
    if posts is None:
        return None
    return anchor, (corr, m, s), posts


def _posts(rest, kind):
    """The post-ops of the steps after the head (:func:`int8_plan`), or None where one has no
    post-op or the result is not what the last step makes. Every step with a param is a
    binary post-op reading it at each run, the integer ones on whole numbers in float (exact):
    oneDNN 2.6's brgemm convolutions computed an eltwise ``linear`` followed by a binary or
    ``sum`` post-op wrongly (up to 25 codes off its reference code on the same inputs; a
    binary post-op in its place, exactly)."""
    posts, integral, dtype = [], False, "float32"
    for k, (op, p) in enumerate(rest):
        last = k == len(rest) - 1
        where = kind(p) if p is not None else None
        if p is not None and (p.type.dtype != dtype or (dtype == "int32" and where != "scalar")):
            return None
        if op == "round":
            posts.append(("round",))
            integral = True
        elif op in ("multiply", "add", "subtract", "maximum", "minimum") and where and dtype in ("float32", "int32"):
            posts.append(("binary", op, p, where))
            integral = (integral and op in ("maximum", "minimum")) or dtype == "int32"
        elif op == "cast:int32" and integral and dtype == "float32":
            dtype = "int32"  # (exact: the value is a whole number already)
        elif op == "cast:uint8" and integral and dtype == "int32" and (
                last or [r[0] for r in rest[k - 2:k]] == ["maximum", "minimum"]):
            # (the last step: oneDNN saturates to the destination's uint8; inside the chain, a
            # quantizer's saturation then its cast, dequantized after: its bounds, a uint8's by
            # construction, make the cast exact, the value going on as a whole float)
            dtype = "uint8"
        elif op == "cast:float32" and dtype in ("int32", "uint8"):
            dtype = "float32"  # (whole numbers in float, as they were)
        else:
            return None
    return posts if dtype in ("uint8", "float32") else None


def _anchor_c(anchor, dst_type: str) -> dict:
    """The C particular to the anchor op: the descriptors of its data, weights and result for
    batch ``n`` (``desc``), the weights' plain format (``init``), Ember's packed weights
    unpacked into it (``unpack``), the per-channel and full-shape descriptors of binary
    post-ops, and the channel count ``OC``."""
    out = anchor.type.shape
    if anchor.op == "nn.conv2d_nchwc":
        x, w = anchor.args[0].type.shape, anchor.args[1].type.shape
        OC, OH, OW = out[4], out[2], out[3]
        C, KH, KW, H, W = 4 * x[4], w[2], w[3], x[2], x[3]
        sh, sw = anchor.attr("strides") or (1, 1)
        dh, dw = anchor.attr("dilation") or (1, 1)
        pt, pl, pb, pr = anchor.attr("padding") or (0, 0, 0, 0)
        pad = anchor.attrs.get("pad_value", 0)
        return dict(OC=OC, init=f"dnnl_dims_t wd = {{{OC}, {C}, {KH}, {KW}}}, bd = {{1, {OC}, 1, 1}};"
                                f" dnnl_dims_t od1 = {{1, 1, 1, 1}}; int wn = 4, bn = 4, wtag = dnnl_oihw, btag = dnnl_nchw;",
                    zp=struct.pack("<I", pad & 0xFFFFFFFF)[0] if pad else 0,
                    desc=f"""dnnl_dims_t sd = {{n, {C}, {H}, {W}}}, wd = {{{OC}, {C}, {KH}, {KW}}}, dd = {{n, {OC}, {OH}, {OW}}};
    dnnl_dims_t st = {{{sh}, {sw}}}, dil = {{{dh - 1}, {dw - 1}}}, padl = {{{pt}, {pl}}}, padr = {{{pb}, {pr}}};
    dnnl_memory_desc_t wany;
    dnnl_convolution_desc_t od;
    int ok = dnnl_memory_desc_init_by_tag(&q->src_md, 4, sd, dnnl_u8, dnnl_nhwc) == dnnl_success
        && dnnl_memory_desc_init_by_tag(&wany, 4, wd, dnnl_s8, dnnl_format_tag_any) == dnnl_success
        && dnnl_memory_desc_init_by_tag(&q->dst_md, 4, dd, {dst_type}, dnnl_nhwc) == dnnl_success
        && dnnl_memory_desc_init_by_tag(&q->full_md, 4, dd, dnnl_f32, dnnl_nhwc) == dnnl_success
        && dnnl_dilated_convolution_forward_desc_init(&od, dnnl_forward_inference, dnnl_convolution_direct,
               &q->src_md, &wany, NULL, &q->dst_md, st, dil, padl, padr) == dnnl_success;""",
                    colsum=(f"for (int64_t cc = 0; cc < {C}; cc++) for (int64_t t = 0; t < {KH * KW}; t++) "
                            f"cs += w8[((cc / 4) * {KH * KW} + t) * {4 * OC} + c * 4 + cc % 4];"),
                    unpack=(f"for (int64_t f = 0; f < {OC}; f++) for (int64_t c = 0; c < {C}; c++) "
                            f"for (int64_t t = 0; t < {KH * KW}; t++) ((int8_t *)u)[(f * {C} + c) * {KH * KW} + t] = "
                            f"((const int8_t *)w)[((c / 4) * {KH * KW} + t) * {4 * OC} + f * 4 + c % 4];"))
    a = anchor.args[0].type.shape
    panels, K4, NR = anchor.args[1].type.shape
    N, K = out[-1], 4 * K4
    R = 1
    for d in a[1:-1]:
        R *= d
    return dict(OC=N, zp=0, colsum="", init=f"dnnl_dims_t wd = {{{K}, {N}}}, bd = {{1, {N}}}, od1 = {{1, 1}}; int wn = 2, "
                                 f"bn = 2, wtag = dnnl_ab, btag = dnnl_ab;",
                desc=f"""dnnl_dims_t sd = {{n * {R}, {K}}}, wd = {{{K}, {N}}}, dd = {{n * {R}, {N}}};
    dnnl_memory_desc_t wany;
    dnnl_matmul_desc_t od;
    int ok = dnnl_memory_desc_init_by_tag(&q->src_md, 2, sd, dnnl_u8, dnnl_ab) == dnnl_success
        && dnnl_memory_desc_init_by_tag(&wany, 2, wd, dnnl_s8, dnnl_format_tag_any) == dnnl_success
        && dnnl_memory_desc_init_by_tag(&q->dst_md, 2, dd, {dst_type}, dnnl_ab) == dnnl_success
        && dnnl_memory_desc_init_by_tag(&q->full_md, 2, dd, dnnl_f32, dnnl_ab) == dnnl_success
        && dnnl_matmul_desc_init(&od, &q->src_md, &wany, NULL, &q->dst_md) == dnnl_success;""",
                # (Ember's panels: (N/NR, K/4, NR) words of four int8 along K)
                unpack=(f"for (int64_t kk = 0; kk < {K}; kk++) for (int64_t j = 0; j < {N}; j++) "
                        f"((int8_t *)u)[kk * {N} + j] = ((const int8_t *)w)[((j / {NR}) * {K4} + kk / 4) * {4 * NR} "
                        f"+ (j % {NR}) * 4 + kk % 4];"))


def int8_source(fn, func, name: str, plan, sizes: str) -> str:
    """The C of the kernel running ``plan`` (:func:`int8_plan`) on oneDNN for the batch
    ``sizes`` (a C expression: ``onednn._sizes``)."""
    anchor, (corr, m, s), posts = plan
    at = {p: f"p{i}" for i, p in enumerate(fn.params)}
    u8 = fn.body.type.dtype == "uint8"
    dst_type = "dnnl_u8" if u8 else "dnnl_f32"
    A = _anchor_c(anchor, dst_type)
    OC, zp, unpack = A["OC"], A["zp"], A["unpack"]

    # the values a primitive is made from, laid in its key: per channel m, s, corr (OC each,
    # or one); the later steps' params are read at each run
    fields = []

    def field(p, kind):
        n = 1 if p.type.ndim == 0 else OC
        fields.append((at[p], kind, n))
        return n

    nm = field(m, "float")
    ns = field(s, "float") if s is not None else 0
    nc = field(corr, "int32_t") if corr is not None else 0
    offsets, off = {}, 0
    for ptr, kind, n in fields:
        offsets[ptr] = off
        off += 4 * n
    keybytes = off
    fill = " ".join(f"memcpy(key + {offsets[ptr]}, {ptr}, {4 * n});" for ptr, kind, n in fields)

    def val(ptr, kind, i="0"):
        return f"((const {kind} *)(q->key + {offsets[ptr]}))[{i}]"

    mi, si, ci = ("c" if k > 1 else "0" for k in (nm, ns, nc))
    # the shift, post-op 0: s, less corr * m where oneDNN cannot take the data's zero point
    shift = " + ".join(([f"{val(at[s], 'float', si)}"] if s is not None else []) + (
        [f"(zp ? 0.0f : -(float){val(at[corr], 'int32_t', ci)} * {val(at[m], 'float', mi)})"] if corr is not None else []))
    # the data's zero point, where the conv does not pad at it: from corr = zero * colsum(w),
    # so that oneDNN's sums less its work are Ember's, exactly (a shift by -corr * m after the
    # scaling rounds otherwise, and a code off there grows through the next layers)
    derive = "" if corr is None else f"""if (zp == 0) {{
        int found = 0, same = 1;
        int64_t z = 0;
        for (int64_t c = 0; c < {OC} && same; c++) {{
            int64_t cs = 0, cr = {val(at[corr], 'int32_t', ci)};
            {A["colsum"]}
            if (cs == 0) {{ same = cr == 0; continue; }}
            if (cr % cs) {{ same = 0; break; }}
            if (!found) {{ z = cr / cs; found = 1; }} else if (cr / cs != z) same = 0;
        }}
        if (same && found && z > 0 && z < 256) zp = (int32_t)z;
    }}"""
    lines, binaries = [], []
    for k, post in enumerate(posts, start=1):
        if post[0] == "binary":
            alg = {"multiply": "dnnl_binary_mul", "add": "dnnl_binary_add", "subtract": "dnnl_binary_sub",
                   "maximum": "dnnl_binary_max", "minimum": "dnnl_binary_min"}[post[1]]
            md = {"channel": "&shift_md", "full": "&q->full_md",
                  "scalar": "&one_md" if post[2].type.dtype == "float32" else "&one_s32_md"}[post[3]]
            lines.append(f"ok = ok && dnnl_post_ops_append_binary(po, {alg}, {md}) == dnnl_success;")
            binaries.append((k, at[post[2]], md.replace("q->", "prim[k].")))
        elif post[0] == "round":
            lines.append("ok = ok && dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_round, 0.0f, 0.0f) == dnnl_success;")
    args = [f"const float *p{i}" for i in range(len(fn.params))] + ["float *out"] + \
        [f"int64_t sz{i}" for i in range(len(func.scalars))]
    bin_create = "".join(f"\n        && dnnl_memory_create(&bin[{i}], {md}, eng, (void *){ptr}) == dnnl_success"
                         for i, (_, ptr, md) in enumerate(binaries))
    bin_args = "".join(f", {{DNNL_ARG_ATTR_MULTIPLE_POST_OP({k}) | DNNL_ARG_SRC_1, bin[{i}]}}"
                       for i, (k, _, _) in enumerate(binaries))
    text = f"""{PRELUDE}
static dnnl_memory_desc_t wuser, shift_md, one_md, one_s32_md;

/* a primitive per batch size and per the values it is made from (key: the scales, shifts and
   scalars of the call's parameters, which differ between the groups sharing this kernel) */
#define PRIMS 256
#define KEYBYTES {keybytes}
typedef struct {{ int64_t n; unsigned char *key; float *shift; dnnl_primitive_t p;
                 dnnl_memory_desc_t src_md, dst_md, full_md; const dnnl_memory_desc_t *wmd; }} prim_t;
static prim_t prim[PRIMS];
static int prims;

static void init(void) {{
    {A["init"]}
    failed = dnnl_engine_create(&eng, dnnl_cpu, 0) != dnnl_success
        || dnnl_memory_desc_init_by_tag(&wuser, wn, wd, dnnl_s8, wtag) != dnnl_success
        || dnnl_memory_desc_init_by_tag(&shift_md, bn, bd, dnnl_f32, btag) != dnnl_success
        || dnnl_memory_desc_init_by_tag(&one_md, bn, od1, dnnl_f32, btag) != dnnl_success
        || dnnl_memory_desc_init_by_tag(&one_s32_md, bn, od1, dnnl_s32, btag) != dnnl_success;
}}

/* the primitive for batch n and the values at key into *q (0 on success; the caller holds mu) */
static int make(int64_t n, const unsigned char *key, const int8_t *w8, prim_t *q) {{
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
    int32_t zp = {zp};
    {derive}
    for (int64_t c = 0; c < {OC}; c++) {{
        scale[c] = {val(at[m], 'float', mi)};
        q->shift[c] = {shift or "0.0f"};
    }}
    {A["desc"]}
    ok = ok
        && dnnl_primitive_attr_create(&attr) == dnnl_success
        && dnnl_post_ops_create(&po) == dnnl_success
        && dnnl_primitive_attr_set_output_scales(attr, {OC}, 1 << 1, scale) == dnnl_success
        && (zp == 0 || dnnl_primitive_attr_set_zero_points(attr, DNNL_ARG_SRC, 1, 0, &zp) == dnnl_success)
        && dnnl_post_ops_append_binary(po, dnnl_binary_add, &shift_md) == dnnl_success;
    {" ".join(lines)}
    ok = ok && dnnl_primitive_attr_set_post_ops(attr, po) == dnnl_success
        && dnnl_primitive_desc_create(&pd, &od, attr, eng, NULL) == dnnl_success
        && dnnl_primitive_create(&q->p, pd) == dnnl_success
        && dnnl_primitive_get_primitive_desc(q->p, &own) == dnnl_success;
    {made_c(name, failed="free(q->key); free(q->shift);")}
    free(scale);
    return ok ? 0 : 1;
}}

{weights_c(name, unpack)}

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
    if (k < 0 && prims < PRIMS && make(n, key, (const int8_t *){at[anchor.args[1]]}, &prim[prims]) == 0) k = prims++;
    dnnl_memory_t wei = k < 0 ? NULL : weights({at[anchor.args[1]]}, k);
    pthread_mutex_unlock(&mu);
    if (!wei) return 1;  /* (more primitives than PRIMS, or oneDNN failed) */
    static _Thread_local dnnl_stream_t s;
    if (!s && dnnl_stream_create(&s, eng, dnnl_stream_default_flags) != dnnl_success) return 1;
    dnnl_memory_t src = NULL, dst = NULL, sh = NULL, bin[{max(1, len(binaries))}] = {{NULL}};
    int ok = dnnl_memory_create(&src, &prim[k].src_md, eng, (void *){at[anchor.args[0]]}) == dnnl_success
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
