/*
 * gguf_split.c - open a model stored as several GGUF files (llama.cpp's gguf-split layout).
 *
 * Convention (llama.cpp examples/gguf-split, llama_split_path / llama_split_prefix): the parts
 * are named PREFIX-00001-of-0000N.gguf ... PREFIX-0000N-of-0000N.gguf; every part holds the keys
 * split.no (u16, 0-based), split.count (u16, N) and split.tensors.count (i32, the tensors of all
 * parts together); the first part holds all the other metadata; each part's tensor data is
 * self-contained (offsets relative to that part's data section).
 */
#include "gguf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void split_err(char **err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void split_err(char **err, const char *fmt, ...)
{
    if (!err)
        return;
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    if (vasprintf(&s, fmt, ap) < 0)
        s = NULL;
    va_end(ap);
    *err = s;
}

/* Integer value of key as int64, or `dflt` when the key is absent; false if not an integer. */
static bool get_int(const struct lc_gguf *g, const char *key, int64_t dflt, int64_t *out)
{
    if (lc_gguf_find_key(g, key) < 0) {
        *out = dflt;
        return true;
    }
    return lc_gguf_get_i64(g, key, out);
}

void lc_gguf_free_split(struct lc_gguf **parts, int n_parts)
{
    if (!parts)
        return;
    for (int i = 0; i < n_parts; i++)
        lc_gguf_free(parts[i]);
    free(parts);
}

struct lc_gguf **lc_gguf_open_split(const char *first, int *n_parts, char **err)
{
    if (err)
        *err = NULL;
    *n_parts = 0;
    struct lc_gguf *g0 = lc_gguf_open(first, err);
    if (!g0)
        return NULL;
    int64_t no, count, n_tensors_all;
    if (!get_int(g0, LC_GGUF_KEY_SPLIT_NO, 0, &no) ||
        !get_int(g0, LC_GGUF_KEY_SPLIT_COUNT, 1, &count) ||
        !get_int(g0, LC_GGUF_KEY_SPLIT_TENSORS_COUNT, lc_gguf_n_tensors(g0), &n_tensors_all)) {
        split_err(err, "%s: split.no / split.count / split.tensors.count is not an integer",
                  first);
        lc_gguf_free(g0);
        return NULL;
    }
    if (count < 1 || count > 99999 || no < 0 || no >= count) {
        split_err(err, "%s: invalid split keys (split.no %lld, split.count %lld)", first,
                  (long long)no, (long long)count);
        lc_gguf_free(g0);
        return NULL;
    }
    if (no != 0) {
        split_err(err, "%s is part %lld of %lld of a split model: give the first part (-00001-of-"
                       "%05lld.gguf)",
                  first, (long long)no + 1, (long long)count, (long long)count);
        lc_gguf_free(g0);
        return NULL;
    }
    struct lc_gguf **parts = calloc((size_t)count, sizeof(*parts));
    if (!parts) {
        split_err(err, "%s: out of memory", first);
        lc_gguf_free(g0);
        return NULL;
    }
    parts[0] = g0;
    if (count == 1) {
        *n_parts = 1;
        return parts;
    }

    /* The prefix: the path without its "-00001-of-0000N.gguf" (llama_split_prefix). */
    const size_t plen = strlen(first) + 1;
    char *prefix = malloc(plen);
    char *path = malloc(plen + 32);
    if (!prefix || !path) {
        split_err(err, "%s: out of memory", first);
        goto fail;
    }
    if (lc_gguf_split_prefix(prefix, plen, first, 1, (int)count) != 0) {
        split_err(err, "%s: first part of a %lld-part model, but its name does not end in "
                       "'-00001-of-%05lld.gguf'",
                  first, (long long)count, (long long)count);
        goto fail;
    }
    int64_t n_tensors = lc_gguf_n_tensors(g0);
    for (int i = 1; i < count; i++) {
        if (lc_gguf_split_path(path, plen + 32, prefix, i + 1, (int)count) != 0) {
            split_err(err, "%s: cannot make the name of part %d", first, i + 1);
            goto fail;
        }
        char *e = NULL;
        parts[i] = lc_gguf_open(path, &e);
        if (!parts[i]) {
            split_err(err, "split model %s: part %d of %lld: %s", first, i + 1, (long long)count,
                      e ? e : path);
            free(e);
            goto fail;
        }
        int64_t pno, pcount, ptc;
        if (!get_int(parts[i], LC_GGUF_KEY_SPLIT_NO, -1, &pno) ||
            !get_int(parts[i], LC_GGUF_KEY_SPLIT_COUNT, -1, &pcount) ||
            !get_int(parts[i], LC_GGUF_KEY_SPLIT_TENSORS_COUNT, -1, &ptc) || pno != i ||
            pcount != count || ptc != n_tensors_all) {
            split_err(err,
                      "split model %s: part %s does not match: split.no %lld (expected %d), "
                      "split.count %lld (expected %lld), split.tensors.count %lld (expected %lld)",
                      first, path, (long long)pno, i, (long long)pcount, (long long)count,
                      (long long)ptc, (long long)n_tensors_all);
            goto fail;
        }
        n_tensors += lc_gguf_n_tensors(parts[i]);
    }
    if (n_tensors != n_tensors_all) {
        split_err(err, "split model %s: the %lld parts hold %lld tensors, split.tensors.count "
                       "says %lld",
                  first, (long long)count, (long long)n_tensors, (long long)n_tensors_all);
        goto fail;
    }
    free(prefix);
    free(path);
    *n_parts = (int)count;
    return parts;
fail:
    free(prefix);
    free(path);
    lc_gguf_free_split(parts, (int)count);
    return NULL;
}
