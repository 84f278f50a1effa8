"""The C every ``onednn`` kernel shares, float (:mod:`.onednn`) or quantized
(:mod:`.onednn_int8`): its prelude, the end of making a primitive, and its weights reordered
into each primitive's format."""
from __future__ import annotations

__all__ = ["PRELUDE", "made_c", "weights_c"]

# what every kernel's C starts with: oneDNN, its engine, and the once/lock a kernel makes its
# primitives under
PRELUDE = """#include <float.h>
#include <oneapi/dnnl/dnnl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static dnnl_engine_t eng;
static int failed;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
"""


def made_c(name: str, failed: str = "") -> str:
    """C ending ``make()``: on success the primitive's weights format kept (``q->wmd``, the
    primitive's own copy) and, with ``EMBER_DNNL_VERBOSE``, its implementation printed; on
    failure ``failed``; then the descriptors ``pd``, ``po``, ``attr`` destroyed. Leaves ``ok``."""
    return f"""if (ok) {{
        q->wmd = dnnl_primitive_desc_query_md(own, dnnl_query_weights_md, 0);
        if (getenv("EMBER_DNNL_VERBOSE")) {{
            const char *impl = NULL;
            dnnl_primitive_desc_query(own, dnnl_query_impl_info_str, 0, &impl);
            fprintf(stderr, "ember onednn {name} (batch %lld): %s\\n", (long long)n, impl ? impl : "?");
        }}
    }}{f" else {{ {failed} }}" if failed else ""}
    if (pd) dnnl_primitive_desc_destroy(pd);
    if (po) dnnl_post_ops_destroy(po);
    if (attr) dnnl_primitive_attr_destroy(attr);"""


def weights_c(name: str, unpack) -> str:
    """C of a kernel's weights in its primitives' formats: ``weights(w, k)``, the weights at
    ``w`` reordered from the user format ``wuser`` (or from Ember's packing through ``unpack``:
    C filling ``void *u`` from ``w``) into primitive ``k``'s, once per (weights buffer,
    primitive), and ``<name>__forget(w)``. Needs ``eng``, ``wuser``, ``mu`` and ``prim[k].wmd``."""
    user = ("(void *)w" if unpack is None else "u")
    return f"""/* the weights reordered into a primitive's format, per (weights buffer, primitive): two
   executables of one library (the same architecture, other weights) each get theirs, and an
   executable's finalizer forgets its buffers ({name}__forget) before their memory is reused */
#define SLOTS 64
static struct {{ const void *w; int k; dnnl_memory_t m; }} slot[SLOTS];
static int slots;

/* the weights at w in the format of primitive k: reordered on first sight (NULL on failure;
   the caller holds mu) */
static dnnl_memory_t weights(const float *w, int k) {{
    for (int i = 0; i < slots; i++)
        if (slot[i].w == w && slot[i].k == k) return slot[i].m;
    dnnl_memory_t wu = NULL, wp = NULL, m = NULL;
    dnnl_primitive_desc_t rpd = NULL;
    dnnl_primitive_t r = NULL;
    dnnl_stream_t s = NULL;
    dnnl_exec_arg_t ra[2];
    {'' if unpack is None else 'void *u = malloc(dnnl_memory_desc_get_size(&wuser));' + chr(10) + '    if (!u) return NULL;' + chr(10) + '    ' + unpack}
    if (dnnl_memory_create(&wu, &wuser, eng, {user}) == dnnl_success
            && dnnl_memory_create(&wp, prim[k].wmd, eng, DNNL_MEMORY_ALLOCATE) == dnnl_success
            && dnnl_reorder_primitive_desc_create(&rpd, &wuser, eng, prim[k].wmd, eng, NULL) == dnnl_success
            && dnnl_primitive_create(&r, rpd) == dnnl_success
            && dnnl_stream_create(&s, eng, dnnl_stream_default_flags) == dnnl_success) {{
        ra[0].arg = DNNL_ARG_FROM; ra[0].memory = wu; ra[1].arg = DNNL_ARG_TO; ra[1].memory = wp;
        if (dnnl_primitive_execute(r, s, 2, ra) == dnnl_success && dnnl_stream_wait(s) == dnnl_success) {{
            m = wp;
            wp = NULL;
            if (slots == SLOTS) {{ dnnl_memory_destroy(slot[0].m); slot[0] = slot[--slots]; }}
            slot[slots].w = w; slot[slots].k = k; slot[slots].m = m; slots++;
        }}
    }}
    if (s) dnnl_stream_destroy(s);
    if (r) dnnl_primitive_destroy(r);
    if (rpd) dnnl_primitive_desc_destroy(rpd);
    if (wu) dnnl_memory_destroy(wu);
    if (wp) dnnl_memory_destroy(wp);
    {'' if unpack is None else 'free(u);'}
    return m;
}}

void {name}__forget(const void *w) {{
    pthread_mutex_lock(&mu);
    for (int i = 0; i < slots; i++)
        if (slot[i].w == w) {{ dnnl_memory_destroy(slot[i].m); slot[i--] = slot[--slots]; }}
    pthread_mutex_unlock(&mu);
}}"""
