/* The tables an export's generated C file gives the C runtime (runtime.c): internal to Ember,
 * not part of the public header. See ember/compiler/deploy.py for how they are made. */
#ifndef EMBER_PROGRAM_H
#define EMBER_PROGRAM_H

#include "ember.h"

enum { SLOT_INPUT, SLOT_CONST, SLOT_ARENA, SLOT_OUTPUT, SLOT_VIEW, SLOT_VALUE };

typedef struct ember_slot_desc {
    int32_t kind;
    int32_t itemsize;
    int32_t rank;
    int32_t dim0;      /* its dims are D[dim0 .. dim0 + rank) */
    int64_t offset;    /* const: byte offset in the weights; arena of a static program: in the arena;
                          view: in its base */
    int32_t base;      /* view: the slot it reshapes */
    int32_t live0, live1;  /* arena: first and last call that uses it */
} ember_slot_desc;

typedef struct ember_io_desc {
    const char *name;
    const char *dtype;
    int32_t rank;
    int32_t slot;
    int32_t copy;      /* output: copied out of its slot (an input, a constant, the arena) */
    const int64_t *dims;
    const char *const *dim_names;
} ember_io_desc;

/* Bind the symbols from the inputs' shapes (S), check the declared dims and the model's
 * relations, and compute every dimension the run needs (D); 0, or an EMBER_E_* code with
 * a message in msg. */
typedef int32_t (*ember_shapes_fn)(const ember_tensor *in, int64_t *S, int64_t *D, char *msg, size_t n);

typedef struct ember_program_desc {
    const char *unsupported;  /* why the C runtime cannot run this program, or NULL */
    int32_t nslots;
    const ember_slot_desc *slots;
    int32_t ninputs, noutputs;
    const ember_io_desc *inputs, *outputs;
    int32_t nsyms, ndims;
    ember_shapes_fn shapes;
    int64_t nwords;
    const int64_t *words;     /* the native runner's program; sizes filled per layout */
    int32_t nscalars;
    const int64_t *scalar_at; /* (word position, D index) pairs */
    void *const *fns;
    int64_t arena_bytes;      /* a static program's arena; -1: planned per layout */
    int32_t ncalls;
} ember_program_desc;

#endif
