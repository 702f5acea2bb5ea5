/*
 * gguf-compare - compare two GGUF files structurally: version, alignment, every key (order,
 * type, value; arrays element by element), every tensor (order, name, type, shape, data bytes).
 * Prints each difference; exit 0 when identical, 1 when different, 2 on error.  A split model
 * (given by its first part) is compared as the union of its parts, split.* keys aside.
 *
 *   gguf-compare [--ignore-order] A.gguf B.gguf
 *   gguf-compare --list MODEL.gguf
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llm/gguf.h"

static int n_diff;

static void diff(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void diff(const char *fmt, ...)
{
    n_diff++;
    if (n_diff > 50)
        return;
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
}

static size_t scalar_size(enum lc_gguf_type t)
{
    switch (t) {
    case LC_GGUF_UINT8: case LC_GGUF_INT8: case LC_GGUF_BOOL: return 1;
    case LC_GGUF_UINT16: case LC_GGUF_INT16: return 2;
    case LC_GGUF_UINT32: case LC_GGUF_INT32: case LC_GGUF_FLOAT32: return 4;
    case LC_GGUF_UINT64: case LC_GGUF_INT64: case LC_GGUF_FLOAT64: return 8;
    default: return 0;
    }
}

/* true when key i of a equals key j of b (type and value) */
static bool same_value(const struct lc_gguf *a, int64_t i, const struct lc_gguf *b, int64_t j)
{
    enum lc_gguf_type t = lc_gguf_kv_type(a, i);
    if (t != lc_gguf_kv_type(b, j))
        return false;
    if (t == LC_GGUF_STRING) {
        const char *k = lc_gguf_key(a, i);
        return strcmp(lc_gguf_get_str(a, k), lc_gguf_get_str(b, lc_gguf_key(b, j))) == 0;
    }
    if (t == LC_GGUF_ARRAY) {
        enum lc_gguf_type at = lc_gguf_arr_type(a, i);
        uint64_t n = lc_gguf_arr_n(a, i);
        if (at != lc_gguf_arr_type(b, j) || n != lc_gguf_arr_n(b, j))
            return false;
        if (at == LC_GGUF_STRING) {
            for (uint64_t k = 0; k < n; k++)
                if (strcmp(lc_gguf_arr_str(a, i, k), lc_gguf_arr_str(b, j, k)) != 0)
                    return false;
            return true;
        }
        const size_t sz = scalar_size(at);
        const void *da = lc_gguf_arr_data(a, i), *db = lc_gguf_arr_data(b, j);
        if (!sz || !da || !db)
            return n == 0;
        return memcmp(da, db, sz * n) == 0;
    }
    const size_t sz = scalar_size(t);
    return sz && memcmp(lc_gguf_val_data(a, i), lc_gguf_val_data(b, j), sz) == 0;
}

/* All tensors of a (possibly split) model, in file order. */
struct model {
    struct lc_gguf **parts;
    int n_parts;
    int64_t n;
    const struct lc_gguf_tensor **t;
};

static bool open_model(const char *path, struct model *m)
{
    char *err = NULL;
    m->parts = lc_gguf_open_split(path, &m->n_parts, &err);
    if (!m->parts) {
        fprintf(stderr, "gguf-compare: %s\n", err ? err : path);
        free(err);
        return false;
    }
    m->n = 0;
    for (int p = 0; p < m->n_parts; p++)
        m->n += lc_gguf_n_tensors(m->parts[p]);
    m->t = malloc((size_t)(m->n ? m->n : 1) * sizeof(*m->t));
    int64_t k = 0;
    for (int p = 0; p < m->n_parts; p++)
        for (int64_t i = 0; i < lc_gguf_n_tensors(m->parts[p]); i++)
            m->t[k++] = lc_gguf_tensor(m->parts[p], i);
    return m->t != NULL;
}

static const struct lc_gguf_tensor *model_find(const struct model *m, const char *name)
{
    for (int64_t i = 0; i < m->n; i++)
        if (strcmp(m->t[i]->name, name) == 0)
            return m->t[i];
    return NULL;
}

static void close_model(struct model *m)
{
    lc_gguf_free_split(m->parts, m->n_parts);
    free(m->t);
}

/* Keys compared: all, except split.* when one side is a split model. */
static int64_t next_key(const struct lc_gguf *g, int64_t i, bool skip_split)
{
    while (i < lc_gguf_n_kv(g) && skip_split && strncmp(lc_gguf_key(g, i), "split.", 6) == 0)
        i++;
    return i;
}

int main(int argc, char **argv)
{
    bool ignore_order = false, list = false, rmse = false;
    int ai = 1;
    for (; ai < argc && argv[ai][0] == '-'; ai++) {
        if (strcmp(argv[ai], "--ignore-order") == 0)
            ignore_order = true;
        else if (strcmp(argv[ai], "--list") == 0)
            list = true;
        else if (strcmp(argv[ai], "--rmse") == 0)
            rmse = true;
        else
            break;
    }
    if (argc - ai != (list ? 1 : 2)) {
        fprintf(stderr, "usage: gguf-compare [--ignore-order] A.gguf B.gguf\n"
                        "       gguf-compare --list MODEL.gguf   (name type shape, one a line)\n"
                        "       gguf-compare --rmse A.gguf B.gguf  (per tensor: rmse, max |a-b|)\n"
                        "A split model is given by its first part.\n");
        return 2;
    }
    struct model ma, mb;
    if (!open_model(argv[ai], &ma))
        return 2;
    if (list) {
        for (int64_t i = 0; i < ma.n; i++) {
            const struct lc_gguf_tensor *t = ma.t[i];
            printf("%s %s", t->name, lc_type_name((int)t->type));
            for (uint32_t d = 0; d < t->n_dims; d++)
                printf("%s%lld", d ? "x" : " ", (long long)t->ne[d]);
            printf("\n");
        }
        close_model(&ma);
        return 0;
    }
    if (!open_model(argv[ai + 1], &mb))
        return 2;
    if (rmse) {
        lc_quant_init();
        for (int64_t k = 0; k < ma.n; k++) {
            const struct lc_gguf_tensor *x = ma.t[k], *y = model_find(&mb, x->name);
            const struct lc_type_traits *tx = lc_type_traits((int)x->type);
            const struct lc_type_traits *ty = y ? lc_type_traits((int)y->type) : NULL;
            if (!y || !tx || !ty || !tx->to_float || !ty->to_float ||
                memcmp(x->ne, y->ne, sizeof(x->ne)) != 0)
                continue;
            const int64_t n = x->ne[0] * x->ne[1] * x->ne[2] * x->ne[3];
            float *fa = malloc((size_t)n * sizeof(float)), *fb = malloc((size_t)n * sizeof(float));
            tx->to_float(x->data, fa, n);
            ty->to_float(y->data, fb, n);
            double s2 = 0, mx = 0;
            for (int64_t e = 0; e < n; e++) {
                const double d = fabs((double)fa[e] - (double)fb[e]);
                s2 += d * d;
                mx = d > mx ? d : mx;
            }
            printf("%s %.3e %.3e\n", x->name, sqrt(s2 / (double)n), mx);
            free(fa);
            free(fb);
        }
        close_model(&ma);
        close_model(&mb);
        return 0;
    }
    const struct lc_gguf *a = ma.parts[0], *b = mb.parts[0];
    const bool skip_split = ma.n_parts > 1 || mb.n_parts > 1;
    if (lc_gguf_version(a) != lc_gguf_version(b) || lc_gguf_alignment(a) != lc_gguf_alignment(b))
        diff("header: v%u align %zu vs v%u align %zu\n", lc_gguf_version(a),
             lc_gguf_alignment(a), lc_gguf_version(b), lc_gguf_alignment(b));
    /* keys: by position (or by name with --ignore-order) */
    int64_t i = next_key(a, 0, skip_split), j = next_key(b, 0, skip_split);
    for (; i < lc_gguf_n_kv(a); i = next_key(a, i + 1, skip_split)) {
        const char *k = lc_gguf_key(a, i);
        int64_t jj = ignore_order ? lc_gguf_find_key(b, k) : j;
        if (!ignore_order)
            j = next_key(b, j + 1, skip_split);
        if (jj < 0 || jj >= lc_gguf_n_kv(b)) {
            diff("key %s: only in %s\n", k, argv[ai]);
            continue;
        }
        if (strcmp(k, lc_gguf_key(b, jj)) != 0) {
            diff("key order: %s vs %s\n", k, lc_gguf_key(b, jj));
            continue;
        }
        if (!same_value(a, i, b, jj))
            diff("key %s: values differ\n", k);
    }
    if (!ignore_order && j < lc_gguf_n_kv(b))
        diff("key %s: only in %s\n", lc_gguf_key(b, j), argv[ai + 1]);
    if (ignore_order)
        for (j = next_key(b, 0, skip_split); j < lc_gguf_n_kv(b);
             j = next_key(b, j + 1, skip_split))
            if (lc_gguf_find_key(a, lc_gguf_key(b, j)) < 0)
                diff("key %s: only in %s\n", lc_gguf_key(b, j), argv[ai + 1]);
    /* tensors */
    if (ma.n != mb.n)
        diff("number of tensors: %lld vs %lld\n", (long long)ma.n, (long long)mb.n);
    for (int64_t k = 0; k < ma.n; k++) {
        const struct lc_gguf_tensor *x = ma.t[k];
        const struct lc_gguf_tensor *y =
            ignore_order ? model_find(&mb, x->name) : (k < mb.n ? mb.t[k] : NULL);
        if (!y) {
            diff("tensor %s: only in %s\n", x->name, argv[ai]);
            continue;
        }
        if (strcmp(x->name, y->name) != 0) {
            diff("tensor order: %s vs %s\n", x->name, y->name);
            continue;
        }
        if (x->type != y->type) {
            diff("tensor %s: type %s vs %s\n", x->name, lc_type_name((int)x->type),
                 lc_type_name((int)y->type));
            continue;
        }
        if (memcmp(x->ne, y->ne, sizeof(x->ne)) != 0 || x->n_dims != y->n_dims) {
            diff("tensor %s: shape differs\n", x->name);
            continue;
        }
        if (x->nbytes != y->nbytes || memcmp(x->data, y->data, x->nbytes) != 0)
            diff("tensor %s: data differs\n", x->name);
    }
    if (n_diff > 50)
        printf("... %d differences in all\n", n_diff);
    close_model(&ma);
    close_model(&mb);
    return n_diff ? 1 : 0;
}
