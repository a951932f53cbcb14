/* zflow_trace.h: write a zflow port trace (a .safetensors file) from C, C++, Zig,
 * Rust (FFI) or Swift. Single header, C99, no dependencies beyond the C library.
 *
 * In exactly one C file:
 *     #define ZFLOW_TRACE_IMPLEMENTATION
 *     #include "zflow_trace.h"
 * Everywhere else, include it plainly.
 *
 *     zft_writer *w = zft_create("ours.safetensors");
 *     long long shape[2] = {4, 64};
 *     zft_add(w, "s0/transformer.x_embedder/out", ZFT_BF16, 2, shape, bits);  // uint16 bf16 bits
 *     if (zft_close(w) != 0) { ... }  // 0: the file is in place, whole
 *
 * Name each tensor by the reference's key (docs/trace-format.md, "Keys"), or by your
 * own and rename with `zflow diff --map FILE`. Then:
 *     zflow diff ours.safetensors ref.npz
 *
 * The file appears whole or not at all: tensor data goes to an anonymous temp file
 * (tmpfile), zft_close writes PATH.zft-tmp and renames it onto PATH. Any failed call
 * marks the writer failed: later calls return -1, zft_close writes nothing and
 * returns -1; zft_error (zft_last_error after zft_close) says what went wrong. Data is copied at
 * zft_add, so the caller's buffer may be reused at once. Host byte order must be
 * little-endian (checked). Not thread-safe per writer.
 */
#ifndef ZFLOW_TRACE_H
#define ZFLOW_TRACE_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { ZFT_F32 = 0, ZFT_F16 = 1, ZFT_BF16 = 2 } zft_dtype;

typedef struct zft_writer zft_writer;

/* Starts a trace at path (which should end in .safetensors). NULL when out of memory
 * or when no temp file can be made. */
zft_writer *zft_create(const char *path);

/* Adds one tensor: ndim in 0..32, shape[i] >= 0, data holding the product of the
 * shape elements of dtype (bf16 and f16 as 16-bit patterns). 0 on success, -1 on a bad
 * argument (empty or duplicate key, unknown dtype, ...) or an I/O error. */
int zft_add(zft_writer *w, const char *key, zft_dtype dtype, int ndim, const long long *shape, const void *data);

/* Writes the header and moves the file into place; frees w. 0 on success. */
int zft_close(zft_writer *w);

/* Drops everything written so far; frees w. */
void zft_abort(zft_writer *w);

/* The first error of w, or "" while there is none. */
const char *zft_error(const zft_writer *w);

/* The error of the last zft_close that failed (w is freed by then); not thread-safe. */
const char *zft_last_error(void);

#ifdef __cplusplus
}
#endif
#endif /* ZFLOW_TRACE_H */

#ifdef ZFLOW_TRACE_IMPLEMENTATION
#ifndef ZFLOW_TRACE_IMPLEMENTED
#define ZFLOW_TRACE_IMPLEMENTED

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ZFT_MAX_DIMS 32

typedef struct {
    char *key;
    zft_dtype dtype;
    int ndim;
    long long shape[ZFT_MAX_DIMS];
    long long begin, end;
} zft__tensor;

struct zft_writer {
    char *path;
    FILE *data;
    zft__tensor *t;
    size_t n, cap;
    long long offset;
    int failed;
    char err[256];
};

static int zft__fail(zft_writer *w, const char *fmt, ...) {
    if (!w->failed) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(w->err, sizeof w->err, fmt, ap);
        va_end(ap);
        w->failed = 1;
    }
    return -1;
}

zft_writer *zft_create(const char *path) {
    unsigned one = 1;
    zft_writer *w;
    if (!path || !*path || *(unsigned char *)&one != 1) return NULL; /* big-endian host */
    w = (zft_writer *)calloc(1, sizeof *w);
    if (!w) return NULL;
    w->path = (char *)malloc(strlen(path) + 1);
    w->data = tmpfile();
    if (!w->path || !w->data) {
        if (w->data) fclose(w->data);
        free(w->path);
        free(w);
        return NULL;
    }
    strcpy(w->path, path);
    return w;
}

static const char *zft__st_name(zft_dtype d) {
    switch (d) {
    case ZFT_F32: return "F32";
    case ZFT_F16: return "F16";
    case ZFT_BF16: return "BF16";
    }
    return NULL;
}

int zft_add(zft_writer *w, const char *key, zft_dtype dtype, int ndim, const long long *shape, const void *data) {
    zft__tensor *t;
    long long elems = 1, bytes;
    size_t i;
    int d;
    if (!w) return -1;
    if (w->failed) return -1;
    if (!key || !*key) return zft__fail(w, "%s: a tensor key must be a non-empty string", w->path);
    if (strncmp(key, "__", 2) == 0) return zft__fail(w, "%s: key \"%s\": keys starting with __ are reserved", w->path, key);
    for (i = 0; key[i]; i++)
        if ((unsigned char)key[i] < 0x20) return zft__fail(w, "%s: key \"%s\": control character in key", w->path, key);
    for (i = 0; i < w->n; i++)
        if (strcmp(w->t[i].key, key) == 0) return zft__fail(w, "%s: key \"%s\": added twice", w->path, key);
    if (!zft__st_name(dtype)) return zft__fail(w, "%s: key \"%s\": unknown dtype %d (want ZFT_F32, ZFT_F16 or ZFT_BF16)", w->path, key, (int)dtype);
    if (ndim < 0 || ndim > ZFT_MAX_DIMS) return zft__fail(w, "%s: key \"%s\": ndim %d outside 0..%d", w->path, key, ndim, ZFT_MAX_DIMS);
    if (ndim > 0 && !shape) return zft__fail(w, "%s: key \"%s\": shape is NULL", w->path, key);
    for (d = 0; d < ndim; d++) {
        if (shape[d] < 0) return zft__fail(w, "%s: key \"%s\": negative dimension %lld", w->path, key, shape[d]);
        if (shape[d] != 0 && elems > (1LL << 60) / shape[d]) return zft__fail(w, "%s: key \"%s\": shape too large", w->path, key);
        elems *= shape[d];
    }
    bytes = elems * (dtype == ZFT_F32 ? 4 : 2);
    if (bytes > 0 && !data) return zft__fail(w, "%s: key \"%s\": data is NULL", w->path, key);
    if (w->n == w->cap) {
        size_t cap = w->cap ? 2 * w->cap : 16;
        zft__tensor *nt = (zft__tensor *)realloc(w->t, cap * sizeof *nt);
        if (!nt) return zft__fail(w, "%s: out of memory", w->path);
        w->t = nt;
        w->cap = cap;
    }
    t = &w->t[w->n];
    memset(t, 0, sizeof *t);
    t->key = (char *)malloc(strlen(key) + 1);
    if (!t->key) return zft__fail(w, "%s: out of memory", w->path);
    strcpy(t->key, key);
    t->dtype = dtype;
    t->ndim = ndim;
    for (d = 0; d < ndim; d++) t->shape[d] = shape[d];
    if (bytes > 0 && fwrite(data, 1, (size_t)bytes, w->data) != (size_t)bytes) {
        free(t->key);
        return zft__fail(w, "%s: key \"%s\": cannot write the data to the temp file", w->path, key);
    }
    t->begin = w->offset;
    t->end = w->offset + bytes;
    w->offset = t->end;
    w->n++;
    return 0;
}

/* A growing string for the JSON header. */
typedef struct { char *s; size_t n, cap; int oom; } zft__buf;

static void zft__put(zft__buf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        char *ns;
        while (b->n + n + 1 > cap) cap *= 2;
        ns = (char *)realloc(b->s, cap);
        if (!ns) { b->oom = 1; return; }
        b->s = ns;
        b->cap = cap;
    }
    memcpy(b->s + b->n, s, n);
    b->n += n;
    b->s[b->n] = 0;
}

static void zft__puts(zft__buf *b, const char *s) { zft__put(b, s, strlen(s)); }

static void zft__putf(zft__buf *b, const char *fmt, long long v) {
    char tmp[32];
    int n = snprintf(tmp, sizeof tmp, fmt, v);
    zft__put(b, tmp, (size_t)n);
}

static void zft__put_json_string(zft__buf *b, const char *s) {
    zft__put(b, "\"", 1);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') {
            char e[2] = {'\\', *s};
            zft__put(b, e, 2);
        } else {
            zft__put(b, s, 1);
        }
    }
    zft__put(b, "\"", 1);
}

static char zft__last[256];

const char *zft_last_error(void) { return zft__last; }

static void zft__free(zft_writer *w) {
    size_t i;
    if (w->failed) memcpy(zft__last, w->err, sizeof zft__last);
    for (i = 0; i < w->n; i++) free(w->t[i].key);
    free(w->t);
    if (w->data) fclose(w->data);
    free(w->path);
    free(w);
}

void zft_abort(zft_writer *w) {
    if (w) zft__free(w);
}

const char *zft_error(const zft_writer *w) { return w ? w->err : "no writer"; }

int zft_close(zft_writer *w) {
    zft__buf b = {0, 0, 0, 0};
    char *tmp = NULL;
    FILE *out = NULL;
    unsigned char len[8];
    char chunk[1 << 16];
    size_t i, r;
    int d, ok = 0;
    long long hl;
    if (!w) return -1;
    if (w->failed) goto done;
    zft__puts(&b, "{");
    for (i = 0; i < w->n; i++) {
        zft__tensor *t = &w->t[i];
        if (i) zft__puts(&b, ",");
        zft__put_json_string(&b, t->key);
        zft__puts(&b, ":{\"dtype\":\"");
        zft__puts(&b, zft__st_name(t->dtype));
        zft__puts(&b, "\",\"shape\":[");
        for (d = 0; d < t->ndim; d++) zft__putf(&b, d ? ",%lld" : "%lld", t->shape[d]);
        zft__putf(&b, "],\"data_offsets\":[%lld", t->begin);
        zft__putf(&b, ",%lld]}", t->end);
    }
    zft__puts(&b, "}");
    while ((8 + b.n) % 8) zft__puts(&b, " "); /* data starts 8-byte aligned */
    if (b.oom) { zft__fail(w, "%s: out of memory", w->path); goto done; }
    tmp = (char *)malloc(strlen(w->path) + 9);
    if (!tmp) { zft__fail(w, "%s: out of memory", w->path); goto done; }
    sprintf(tmp, "%s.zft-tmp", w->path);
    out = fopen(tmp, "wb");
    if (!out) { zft__fail(w, "%s: cannot create %s", w->path, tmp); goto done; }
    hl = (long long)b.n;
    for (d = 0; d < 8; d++) len[d] = (unsigned char)((unsigned long long)hl >> (8 * d));
    if (fwrite(len, 1, 8, out) != 8 || fwrite(b.s, 1, b.n, out) != b.n) { zft__fail(w, "%s: cannot write %s", w->path, tmp); goto done; }
    if (fflush(w->data) != 0 || fseek(w->data, 0, SEEK_SET) != 0) { zft__fail(w, "%s: cannot read back the temp data", w->path); goto done; }
    while ((r = fread(chunk, 1, sizeof chunk, w->data)) > 0)
        if (fwrite(chunk, 1, r, out) != r) { zft__fail(w, "%s: cannot write %s", w->path, tmp); goto done; }
    if (ferror(w->data)) { zft__fail(w, "%s: cannot read back the temp data", w->path); goto done; }
    if (fclose(out) != 0) { out = NULL; zft__fail(w, "%s: cannot write %s", w->path, tmp); goto done; }
    out = NULL;
    if (rename(tmp, w->path) != 0) { zft__fail(w, "%s: cannot rename %s onto it", w->path, tmp); goto done; }
    ok = 1;
done:
    if (out) fclose(out);
    if (!ok && tmp) remove(tmp);
    free(tmp);
    free(b.s);
    zft__free(w);
    return ok ? 0 : -1;
}

#endif /* ZFLOW_TRACE_IMPLEMENTED */
#endif /* ZFLOW_TRACE_IMPLEMENTATION */
