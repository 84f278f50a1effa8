/* run_model: load an Ember export and run it from C, with no Python.
 *
 *   run_model MODEL.so [INPUT ...] [-o DIR] [-r REPEATS]
 *
 * Each INPUT is FILE:SHAPE (raw little-endian data of the input's dtype, C order, e.g.
 * x.bin:2x3x224x224) or just SHAPE, which fills the input with a fixed pattern (element i is
 * sin(0.01 i) for floats, i mod 7 for integers). With no INPUT at all, every input must have a
 * static shape and gets the pattern. The program prints each output's name, dtype, shape and
 * sum; -o DIR writes output k to DIR/output_k.bin; -r N runs N times and prints the median.
 *
 * Build: cc -O2 -I"$(python -c 'import ember; print(ember.c_include_dir())')" run_model.c \
 *           -o run_model -ldl -lm
 */
#define _POSIX_C_SOURCE 200809L
#define EMBER_WITH_LOADER
#include "ember.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static size_t itemsize(const char *dtype) {
    static const struct { const char *name; size_t size; } sizes[] = {
        {"float32", 4}, {"float64", 8}, {"float16", 2}, {"bfloat16", 2}, {"int64", 8}, {"int32", 4},
        {"int16", 2}, {"int8", 1}, {"uint64", 8}, {"uint32", 4}, {"uint16", 2}, {"uint8", 1}, {"bool", 1}};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        if (!strcmp(dtype, sizes[i].name)) return sizes[i].size;
    return 0;
}

static int64_t numel(const ember_tensor *t) {
    int64_t n = 1;
    for (int32_t a = 0; a < t->rank; a++) n *= t->shape[a];
    return n;
}

static double element(const ember_tensor *t, int64_t i) {
    const char *d = t->dtype;
    if (!strcmp(d, "float32")) return ((const float *)t->data)[i];
    if (!strcmp(d, "float64")) return ((const double *)t->data)[i];
    if (!strcmp(d, "int64")) return (double)((const int64_t *)t->data)[i];
    if (!strcmp(d, "int32")) return ((const int32_t *)t->data)[i];
    if (!strcmp(d, "int8")) return ((const int8_t *)t->data)[i];
    if (!strcmp(d, "uint8") || !strcmp(d, "bool")) return ((const uint8_t *)t->data)[i];
    return NAN;  /* (a dtype this example does not print) */
}

static void fill_pattern(ember_tensor *t) {
    int64_t n = numel(t);
    for (int64_t i = 0; i < n; i++) {
        const char *d = t->dtype;
        if (!strcmp(d, "float32")) ((float *)t->data)[i] = (float)sin(0.01 * (double)i);
        else if (!strcmp(d, "float64")) ((double *)t->data)[i] = sin(0.01 * (double)i);
        else if (!strcmp(d, "int64")) ((int64_t *)t->data)[i] = i % 7;
        else if (!strcmp(d, "int32")) ((int32_t *)t->data)[i] = (int32_t)(i % 7);
        else if (!strcmp(d, "int8") || !strcmp(d, "uint8")) ((uint8_t *)t->data)[i] = (uint8_t)(i % 7);
        else if (!strcmp(d, "bool")) ((uint8_t *)t->data)[i] = (uint8_t)(i % 2);
        else memset((char *)t->data + i * itemsize(d), 0, itemsize(d));
    }
}

static int parse_shape(const char *s, ember_tensor *t) {
    t->rank = 0;
    if (!strcmp(s, "scalar")) return 0;
    while (*s) {
        char *end;
        long long v = strtoll(s, &end, 10);
        if (end == s || v < 0 || t->rank >= EMBER_MAX_RANK) return -1;
        t->shape[t->rank++] = v;
        s = end;
        if (*s == 'x' || *s == ',') s++;
        else if (*s) return -1;
    }
    return 0;
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        fprintf(stderr, "usage: %s MODEL.so [FILE:SHAPE | SHAPE ...] [-o DIR] [-r REPEATS]\n", argv[0]);
        return 2;
    }
    ember_api api;
    char err[1024];
    if (ember_load(argv[1], &api, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    int32_t nin = api.num_inputs(), nout = api.num_outputs();
    ember_tensor *in = calloc((size_t)nin + 1, sizeof *in), *out = calloc((size_t)nout + 1, sizeof *out);
    const char *outdir = NULL;
    int repeats = 1, given = 0;
    for (int a = 2; a < argc; a++) {
        if (!strcmp(argv[a], "-o") && a + 1 < argc) { outdir = argv[++a]; continue; }
        if (!strcmp(argv[a], "-r") && a + 1 < argc) { repeats = atoi(argv[++a]); continue; }
        if (given >= nin) { fprintf(stderr, "the model has %d input(s); got more\n", nin); return 2; }
        ember_tensor_info info;
        api.input_info(given, &info);
        ember_tensor *t = &in[given++];
        t->dtype = info.dtype;
        const char *colon = strrchr(argv[a], ':');
        const char *shape = colon ? colon + 1 : argv[a];
        if (parse_shape(shape, t)) { fprintf(stderr, "bad shape '%s' (write it as 2x3x224x224)\n", shape); return 2; }
        size_t bytes = (size_t)numel(t) * itemsize(t->dtype);
        t->data = malloc(bytes ? bytes : 1);
        if (colon) {
            char *path = strndup(argv[a], (size_t)(colon - argv[a]));
            FILE *f = fopen(path, "rb");
            if (!f || fread(t->data, 1, bytes, f) != bytes) {
                fprintf(stderr, "cannot read %zu bytes of input '%s' from %s\n", bytes, info.name, path);
                return 1;
            }
            fclose(f);
            free(path);
        } else {
            fill_pattern(t);
        }
    }
    for (; given < nin; given++) {  /* the rest: static shapes, the pattern */
        ember_tensor_info info;
        api.input_info(given, &info);
        ember_tensor *t = &in[given];
        t->dtype = info.dtype;
        t->rank = info.rank;
        for (int32_t k = 0; k < info.rank; k++) {
            if (info.dims[k] < 0) {
                fprintf(stderr, "input '%s' has the symbolic dimension %s: give its shape\n", info.name,
                        info.dim_names[k]);
                return 2;
            }
            t->shape[k] = info.dims[k];
        }
        t->data = malloc((size_t)numel(t) * itemsize(t->dtype) + 1);
        fill_pattern(t);
    }

    ember_session *s = api.session_new();
    if (!s) { fprintf(stderr, "out of memory\n"); return 1; }
    double *times = calloc((size_t)(repeats > 0 ? repeats : 1), sizeof(double));
    for (int r = 0; r < (repeats > 0 ? repeats : 1); r++) {
        if (r) for (int32_t o = 0; o < nout; o++) free(out[o].data);
        double t0 = now();
        int32_t rc = api.run(s, in, out);
        times[r] = now() - t0;
        if (rc) {
            fprintf(stderr, "error %d: %s\n", rc, api.last_error(s));
            return 1;
        }
    }
    for (int32_t o = 0; o < nout; o++) {
        ember_tensor_info info;
        api.output_info(o, &info);
        double sum = 0;
        for (int64_t i = 0; i < numel(&out[o]); i++) sum += element(&out[o], i);
        printf("%s %s (", info.name, out[o].dtype);
        for (int32_t a = 0; a < out[o].rank; a++) printf(a ? ", %lld" : "%lld", (long long)out[o].shape[a]);
        printf(out[o].rank == 1 ? ",) sum %.6g\n" : ") sum %.6g\n", sum);
        if (outdir) {
            char path[4096];
            snprintf(path, sizeof path, "%s/output_%d.bin", outdir, o);
            FILE *f = fopen(path, "wb");
            size_t bytes = (size_t)numel(&out[o]) * itemsize(out[o].dtype);
            if (!f || fwrite(out[o].data, 1, bytes, f) != bytes) { fprintf(stderr, "cannot write %s\n", path); return 1; }
            fclose(f);
        }
        free(out[o].data);
    }
    if (repeats > 1) {
        qsort(times, (size_t)repeats, sizeof(double), cmp_double);
        printf("median of %d runs: %.3f ms\n", repeats, 1e3 * times[repeats / 2]);
    }
    api.session_free(s);
    for (int32_t i = 0; i < nin; i++) free(in[i].data);
    free(in); free(out); free(times);
    return 0;
}
