/* ember.h -- run an Ember export (one .so: kernels, program, weights) from C, without Python.
 *
 * An export made by `exe.export("model.so")` or `ember compile model.onnx -o model.so` carries
 * a small native runtime: the functions below. Load the library with dlopen (ember_load does
 * it and finds every function), or link it directly (cc main.c ./model.so).
 *
 *     ember_api api;
 *     char err[512];
 *     if (ember_load("model.so", &api, err, sizeof err)) { puts(err); return 1; }
 *     ember_session *s = api.session_new();
 *     ember_tensor in = {data, 2, {8, 3}, "float32"}, out[1];
 *     if (api.run(s, &in, out)) puts(api.last_error(s));
 *     ... out[0].data, out[0].shape ...;  free(out[0].data);
 *     api.session_free(s);
 *
 * Shapes may be symbolic (a dynamic batch or sequence): the run binds them from the inputs'
 * shapes, checks the relations the model needs (two inputs sharing `seq`), lays the
 * intermediates out for them and keeps that layout while the shapes repeat. A session owns
 * one run's memory: use one session per thread. Outputs are new buffers (64-byte aligned,
 * from aligned_alloc): the caller frees them with free().
 *
 * What the C runtime does not run (control flow, sizes a kernel computes while running):
 * ember_run returns an error that says so; such exports run from Python (ember.load).
 * Unlike ember.load, this loader does not recompute the export's integrity seal.
 */
#ifndef EMBER_H
#define EMBER_H

#include <stdint.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define EMBER_ABI_VERSION 1
#define EMBER_MAX_RANK 16

/* A tensor: C-contiguous data of `dtype` ("float32", "int64", ...; numpy's names). */
typedef struct ember_tensor {
    void *data;
    int32_t rank;
    int64_t shape[EMBER_MAX_RANK];
    const char *dtype;
} ember_tensor;

/* A model input's or output's declaration: dims[k] is -1 where the dimension is symbolic;
 * dim_names[k] then names it ("batch") or gives its expression ("(2 * batch)"). */
typedef struct ember_tensor_info {
    const char *name;
    const char *dtype;
    int32_t rank;
    const int64_t *dims;
    const char *const *dim_names;
} ember_tensor_info;

typedef struct ember_session ember_session;

/* The functions every export defines. Each returns 0 on success; on failure a nonzero code
 * (EMBER_E_*) and a message from ember_last_error. */
int32_t ember_abi_version(void);
int32_t ember_num_inputs(void);
int32_t ember_num_outputs(void);
int32_t ember_input_info(int32_t i, ember_tensor_info *info);
int32_t ember_output_info(int32_t i, ember_tensor_info *info);
ember_session *ember_session_new(void);
void ember_session_free(ember_session *s);
int32_t ember_run(ember_session *s, const ember_tensor *inputs, ember_tensor *outputs);
const char *ember_last_error(const ember_session *s);

enum {
    EMBER_OK = 0,
    EMBER_E_ARGUMENT = 1,    /* a wrong input: count, rank, shape, dtype or a null pointer */
    EMBER_E_SHAPE = 2,       /* the inputs' shapes break a relation the model needs */
    EMBER_E_MEMORY = 3,      /* an allocation failed */
    EMBER_E_KERNEL = 4,      /* a kernel reported a failure */
    EMBER_E_UNSUPPORTED = 5  /* the program needs the Python runtime (control flow, ...) */
};

/* The functions of a library loaded at run time. */
typedef struct ember_api {
    void *handle;
    int32_t (*num_inputs)(void);
    int32_t (*num_outputs)(void);
    int32_t (*input_info)(int32_t, ember_tensor_info *);
    int32_t (*output_info)(int32_t, ember_tensor_info *);
    ember_session *(*session_new)(void);
    void (*session_free)(ember_session *);
    int32_t (*run)(ember_session *, const ember_tensor *, ember_tensor *);
    const char *(*last_error)(const ember_session *);
} ember_api;

#ifdef EMBER_WITH_LOADER
#include <dlfcn.h>
#include <stdio.h>

/* dlopen an export and find its functions; 0, or -1 with a message in err. */
static inline int ember_load(const char *path, ember_api *api, char *err, size_t errlen) {
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(err, errlen, "cannot load %s: %s", path, dlerror());
        return -1;
    }
    int32_t (*version)(void) = (int32_t (*)(void))dlsym(h, "ember_abi_version");
    if (!version) {
        snprintf(err, errlen, "%s is not an Ember export with the C runtime (no ember_abi_version); "
                 "export it again with this Ember", path);
        dlclose(h);
        return -1;
    }
    if (version() != EMBER_ABI_VERSION) {
        snprintf(err, errlen, "%s has C ABI version %d; this header is version %d", path,
                 (int)version(), EMBER_ABI_VERSION);
        dlclose(h);
        return -1;
    }
    api->handle = h;
#define EMBER_SYM(field, name) *(void **)(&api->field) = dlsym(h, name)
    EMBER_SYM(num_inputs, "ember_num_inputs");
    EMBER_SYM(num_outputs, "ember_num_outputs");
    EMBER_SYM(input_info, "ember_input_info");
    EMBER_SYM(output_info, "ember_output_info");
    EMBER_SYM(session_new, "ember_session_new");
    EMBER_SYM(session_free, "ember_session_free");
    EMBER_SYM(run, "ember_run");
    EMBER_SYM(last_error, "ember_last_error");
#undef EMBER_SYM
    return 0;
}
#endif

#ifdef __cplusplus
}
#endif
#endif /* EMBER_H */
