/* The C runtime every export carries (ember.h): runs the program that the export's generated
 * tables (program.h) describe through the kernels' native program runner.
 *
 * Per run: check the inputs, bind the symbols from their shapes and compute every dimension
 * (the generated shapes function), lay the intermediates out once per new set of symbol
 * values (the compiler's plan for a static program; a first-fit plan over the calls'
 * lifetimes otherwise), then one call into the native runner. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "program.h"

extern const ember_program_desc ember__program;
extern const unsigned char __ember_weights[];
extern int32_t __ember_run_program(const int64_t *prog, void *const *slots, void *const *fns);

#define ALIGN 64

struct ember_session {
    int64_t *S, *D, *last_S;
    int laid_out;
    void **ptrs;
    int64_t *words;
    int64_t *nbytes;
    int64_t *offsets;
    unsigned char *arena;
    int64_t arena_cap;
    char error[1024];
};

static const ember_program_desc *P = &ember__program;

static int64_t round_up(int64_t n) { return n <= 0 ? ALIGN : (n + ALIGN - 1) / ALIGN * ALIGN; }

static void *alloc_aligned(int64_t n) { return aligned_alloc(ALIGN, (size_t)round_up(n)); }

static int32_t fail(ember_session *s, int32_t code, const char *fmt, const char *a, long long b, long long c) {
    snprintf(s->error, sizeof s->error, fmt, a, b, c);
    return code;
}

int32_t ember_abi_version(void) { return EMBER_ABI_VERSION; }
int32_t ember_num_inputs(void) { return P->ninputs; }
int32_t ember_num_outputs(void) { return P->noutputs; }

static int32_t info_of(const ember_io_desc *d, int32_t n, int32_t i, ember_tensor_info *info) {
    if (i < 0 || i >= n || !info) return EMBER_E_ARGUMENT;
    info->name = d[i].name;
    info->dtype = d[i].dtype;
    info->rank = d[i].rank;
    info->dims = d[i].dims;
    info->dim_names = d[i].dim_names;
    return EMBER_OK;
}

int32_t ember_input_info(int32_t i, ember_tensor_info *info) { return info_of(P->inputs, P->ninputs, i, info); }
int32_t ember_output_info(int32_t i, ember_tensor_info *info) { return info_of(P->outputs, P->noutputs, i, info); }

ember_session *ember_session_new(void) {
    ember_session *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    int32_t n = P->nslots > 0 ? P->nslots : 1;
    s->S = calloc((size_t)P->nsyms + 1, sizeof(int64_t));
    s->last_S = calloc((size_t)P->nsyms + 1, sizeof(int64_t));
    s->D = calloc((size_t)P->ndims + 1, sizeof(int64_t));
    s->ptrs = calloc((size_t)n, sizeof(void *));
    s->nbytes = calloc((size_t)n, sizeof(int64_t));
    s->offsets = calloc((size_t)n, sizeof(int64_t));
    s->words = malloc(((size_t)P->nwords + 1) * sizeof(int64_t));
    if (!s->S || !s->last_S || !s->D || !s->ptrs || !s->nbytes || !s->offsets || !s->words) {
        ember_session_free(s);
        return NULL;
    }
    if (P->nwords) memcpy(s->words, P->words, (size_t)P->nwords * sizeof(int64_t));
    return s;
}

void ember_session_free(ember_session *s) {
    if (!s) return;
    free(s->S); free(s->last_S); free(s->D); free(s->ptrs); free(s->words);
    free(s->nbytes); free(s->offsets); free(s->arena);
    free(s);
}

const char *ember_last_error(const ember_session *s) { return s ? s->error : "no session"; }

static const void *base_of(const ember_session *s, int32_t k) {
    int64_t offset = 0;  /* a view's bytes start at its offset in its base */
    for (int depth = 0; P->slots[k].kind == SLOT_VIEW && depth < P->nslots; depth++) {
        offset += P->slots[k].offset;
        k = P->slots[k].base;
    }
    return s->ptrs[k] ? (const char *)s->ptrs[k] + offset : NULL;
}

/* First fit over the arena slots, largest first: two slots may share bytes when no call uses
 * both (the same rule as the Python runtime's plan, with these sizes). */
static int64_t plan_arena(ember_session *s) {
    int32_t n = 0;
    int32_t *order = malloc(sizeof(int32_t) * (size_t)(P->nslots + 1));
    if (!order) return -1;
    for (int32_t k = 0; k < P->nslots; k++)
        if (P->slots[k].kind == SLOT_ARENA) order[n++] = k;
    for (int32_t i = 1; i < n; i++) {  /* insertion sort: by size, descending, then by first use */
        int32_t k = order[i], j = i - 1;
        while (j >= 0 && (s->nbytes[order[j]] < s->nbytes[k] ||
                          (s->nbytes[order[j]] == s->nbytes[k] && P->slots[order[j]].live0 > P->slots[k].live0))) {
            order[j + 1] = order[j];
            j--;
        }
        order[j + 1] = k;
    }
    int64_t top = 0;
    for (int32_t i = 0; i < n; i++) {
        const ember_slot_desc *v = &P->slots[order[i]];
        int64_t size = round_up(s->nbytes[order[i]]), at = 0;
        for (int moved = 1; moved;) {  /* the lowest offset no overlapping placed slot covers */
            moved = 0;
            for (int32_t j = 0; j < i; j++) {
                const ember_slot_desc *w = &P->slots[order[j]];
                if (w->live1 < v->live0 || v->live1 < w->live0) continue;
                int64_t lo = s->offsets[order[j]], hi = lo + round_up(s->nbytes[order[j]]);
                if (at < hi && lo < at + size) { at = hi; moved = 1; }
            }
        }
        s->offsets[order[i]] = at;
        if (at + size > top) top = at + size;
    }
    free(order);
    return top;
}

/* Sizes, arena and pointers for the symbol values in s->S (kept while they repeat). */
static int32_t lay_out(ember_session *s) {
    if (s->laid_out && (P->nsyms == 0 || !memcmp(s->S, s->last_S, sizeof(int64_t) * (size_t)P->nsyms)))
        return EMBER_OK;
    for (int32_t k = 0; k < P->nslots; k++) {
        const ember_slot_desc *d = &P->slots[k];
        int64_t n = d->itemsize;
        for (int32_t a = 0; a < d->rank; a++) {
            int64_t v = s->D[d->dim0 + a];
            if (v < 0) return fail(s, EMBER_E_SHAPE, "slot %s%lld has a negative dimension (%lld) at these shapes", "", k, v);
            n *= v;
        }
        s->nbytes[k] = n;
    }
    int64_t need = P->arena_bytes;
    if (need < 0) {
        need = plan_arena(s);
        if (need < 0) return fail(s, EMBER_E_MEMORY, "out of memory%s (%lld, %lld)", "", 0, 0);
    } else {
        for (int32_t k = 0; k < P->nslots; k++) s->offsets[k] = P->slots[k].offset;
    }
    if (!s->arena || s->arena_cap < need) {
        free(s->arena);
        s->arena = alloc_aligned(need);
        s->arena_cap = s->arena ? need : 0;
        if (!s->arena) return fail(s, EMBER_E_MEMORY, "the intermediates need %s%lld bytes (%lld): out of memory", "", need, 0);
    }
    for (int32_t k = 0; k < P->nslots; k++) {
        const ember_slot_desc *d = &P->slots[k];
        if (d->kind == SLOT_CONST) s->ptrs[k] = (void *)(__ember_weights + d->offset);
        else if (d->kind == SLOT_ARENA) s->ptrs[k] = s->arena + s->offsets[k];
    }
    for (int32_t i = 0; i < P->nscalars; i++) s->words[P->scalar_at[2 * i]] = s->D[P->scalar_at[2 * i + 1]];
    memcpy(s->last_S, s->S, sizeof(int64_t) * (size_t)P->nsyms);
    s->laid_out = 1;
    return EMBER_OK;
}

int32_t ember_run(ember_session *s, const ember_tensor *inputs, ember_tensor *outputs) {
    if (!s) return EMBER_E_ARGUMENT;
    s->error[0] = 0;
    if (P->unsupported) {
        snprintf(s->error, sizeof s->error, "this export needs the Python runtime (ember.load): %s", P->unsupported);
        return EMBER_E_UNSUPPORTED;
    }
    if ((P->ninputs && !inputs) || (P->noutputs && !outputs))
        return fail(s, EMBER_E_ARGUMENT, "inputs and outputs must not be NULL%s%lld%lld", "", 0, 0);
    for (int32_t i = 0; i < P->ninputs; i++) {
        const ember_io_desc *d = &P->inputs[i];
        if (inputs[i].rank != d->rank)
            return fail(s, EMBER_E_ARGUMENT, "input '%s' must have rank %lld, got %lld", d->name, d->rank, inputs[i].rank);
        if (!inputs[i].dtype || strcmp(inputs[i].dtype, d->dtype)) {
            snprintf(s->error, sizeof s->error, "input '%s' must have dtype %s, got %s", d->name, d->dtype,
                     inputs[i].dtype ? inputs[i].dtype : "(null)");
            return EMBER_E_ARGUMENT;
        }
        if (!inputs[i].data)
            return fail(s, EMBER_E_ARGUMENT, "input '%s' has no data (NULL)%lld%lld", d->name, 0, 0);
    }
    int32_t rc = P->shapes(inputs, s->S, s->D, s->error, sizeof s->error);
    if (rc) return rc;
    rc = lay_out(s);
    if (rc) return rc;
    for (int32_t i = 0; i < P->ninputs; i++) s->ptrs[P->inputs[i].slot] = inputs[i].data;
    for (int32_t o = 0; o < P->noutputs; o++) {
        outputs[o].data = NULL;
        int32_t k = P->outputs[o].slot;
        if (!P->outputs[o].copy) {
            s->ptrs[k] = alloc_aligned(s->nbytes[k]);
            if (!s->ptrs[k]) {
                for (int32_t j = 0; j < o; j++) if (!P->outputs[j].copy) free(s->ptrs[P->outputs[j].slot]);
                return fail(s, EMBER_E_MEMORY, "output '%s' needs %lld bytes: out of memory%lld", P->outputs[o].name,
                            s->nbytes[k], 0);
            }
        }
    }
    for (int32_t k = 0; k < P->nslots; k++)
        if (P->slots[k].kind == SLOT_VIEW) s->ptrs[k] = (void *)base_of(s, k);
    int32_t r = P->ncalls ? __ember_run_program(s->words, s->ptrs, P->fns) : 0;
    for (int32_t o = 0; o < P->noutputs; o++) {
        const ember_io_desc *d = &P->outputs[o];
        const ember_slot_desc *sl = &P->slots[d->slot];
        ember_tensor *t = &outputs[o];
        t->rank = d->rank;
        t->dtype = d->dtype;
        for (int32_t a = 0; a < d->rank && a < EMBER_MAX_RANK; a++) t->shape[a] = s->D[sl->dim0 + a];
        if (d->copy) {
            t->data = r ? NULL : alloc_aligned(s->nbytes[d->slot]);
            if (t->data) memcpy(t->data, s->ptrs[d->slot], (size_t)s->nbytes[d->slot]);
            else if (!r) r = -2;
        } else {
            t->data = s->ptrs[d->slot];
            if (r) { free(t->data); t->data = NULL; }
        }
    }
    if (r > 0) return fail(s, EMBER_E_KERNEL, "kernel call %s%lld of %lld failed (a scratch allocation ran out "
                           "of memory, or an offloaded kernel's library failed)", "", r, P->ncalls);
    if (r == -2) return fail(s, EMBER_E_MEMORY, "copying an output: out of memory%s%lld%lld", "", 0, 0);
    if (r) return fail(s, EMBER_E_UNSUPPORTED, "the native program runner met a call it was not built for%s%lld%lld",
                       "", 0, 0);
    return EMBER_OK;
}
