/*
 * imatrix.c - importance matrices: accumulation, llama.cpp's legacy and GGUF files.
 *
 * Each matrix keeps double sums of x_j^2 and the number of rows summed; the mean is sum / rows.
 * A legacy file stores only mean * ncall and ncall, so one read back has rows = ncall and
 * sum = mean * ncall: the mean (all that quantizing uses) is exact, and saving it again in
 * either format gives the same means.
 */
#include "imatrix.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gguf.h"

struct entry {
    char *name;
    int64_t n;      /* values */
    int nmat;       /* matrices stacked (experts), n % nmat == 0 */
    double *sum2;   /* (n) sums of x^2 */
    double *rows;   /* (nmat) rows summed per matrix */
    int32_t ncall;  /* chunks in which the matrix was used */
    float *mean;    /* (n) cache for lc_imatrix_get */
    double *cov;    /* (n, n) sums of x_a x_b (a <= b kept; mirrored on read), or NULL */
    bool touched;   /* used in the current chunk */
};

struct lc_imatrix {
    struct entry *e;
    int n, cap;
    int32_t n_chunks;
    int64_t cov_max; /* collect x x^T for matrices of at most this many columns (0: none) */
};

static void set_err(char **err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void set_err(char **err, const char *fmt, ...)
{
    if (!err)
        return;
    va_list ap;
    va_start(ap, fmt);
    char buf[512];
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    *err = strdup(buf);
}

struct lc_imatrix *lc_imatrix_new(void)
{
    return calloc(1, sizeof(struct lc_imatrix));
}

void lc_imatrix_free(struct lc_imatrix *im)
{
    if (!im)
        return;
    for (int i = 0; i < im->n; i++) {
        free(im->e[i].name);
        free(im->e[i].sum2);
        free(im->e[i].rows);
        free(im->e[i].mean);
        free(im->e[i].cov);
    }
    free(im->e);
    free(im);
}

static struct entry *find(const struct lc_imatrix *im, const char *name)
{
    for (int i = 0; i < im->n; i++)
        if (strcmp(im->e[i].name, name) == 0)
            return &im->e[i];
    return NULL;
}

/* The entry for name with n values in nmat matrices, created zeroed; NULL on a size mismatch
 * or out of memory. */
static struct entry *get_entry(struct lc_imatrix *im, const char *name, int64_t n, int nmat)
{
    struct entry *e = find(im, name);
    if (e)
        return e->n == n && e->nmat == nmat ? e : NULL;
    if (im->n == im->cap) {
        int cap = im->cap ? 2 * im->cap : 64;
        struct entry *ne = realloc(im->e, (size_t)cap * sizeof(*ne));
        if (!ne)
            return NULL;
        im->e = ne;
        im->cap = cap;
    }
    e = &im->e[im->n];
    memset(e, 0, sizeof(*e));
    e->name = strdup(name);
    e->n = n;
    e->nmat = nmat;
    e->sum2 = calloc((size_t)n, sizeof(double));
    e->rows = calloc((size_t)nmat, sizeof(double));
    if (!e->name || !e->sum2 || !e->rows) {
        free(e->name);
        free(e->sum2);
        free(e->rows);
        return NULL;
    }
    if (im->cov_max >= n && nmat == 1) {
        e->cov = calloc((size_t)(n * n), sizeof(double));
        if (!e->cov) {
            free(e->name);
            free(e->sum2);
            free(e->rows);
            return NULL;
        }
    }
    im->n++;
    return e;
}

void lc_imatrix_collect_cov(struct lc_imatrix *im, int64_t max_n)
{
    im->cov_max = max_n > 0 ? max_n : 0;
}

int lc_imatrix_add(struct lc_imatrix *im, const char *name, const float *x, int rows, int n,
                   size_t stride)
{
    struct entry *e = get_entry(im, name, n, 1);
    if (!e)
        return -1;
    for (int r = 0; r < rows; r++) {
        const float *xr = x + (size_t)r * stride;
        for (int j = 0; j < n; j++)
            e->sum2[j] += (double)xr[j] * (double)xr[j];
        if (e->cov)
            for (int a = 0; a < n; a++) {
                const double xa = (double)xr[a];
                if (xa == 0.0)
                    continue;
                double *ca = e->cov + (size_t)a * (size_t)n;
                for (int b = a; b < n; b++)
                    ca[b] += xa * (double)xr[b];
            }
    }
    e->rows[0] += rows;
    if (!e->touched) {
        e->touched = true;
        e->ncall++;
    }
    free(e->mean);
    e->mean = NULL;
    return 0;
}

void lc_imatrix_end_chunk(struct lc_imatrix *im)
{
    im->n_chunks++;
    for (int i = 0; i < im->n; i++)
        im->e[i].touched = false;
}

int lc_imatrix_count(const struct lc_imatrix *im)
{
    return im->n;
}

const char *lc_imatrix_name(const struct lc_imatrix *im, int i)
{
    return i >= 0 && i < im->n ? im->e[i].name : NULL;
}

const float *lc_imatrix_get(const struct lc_imatrix *im, const char *name, int64_t *n)
{
    struct entry *e = find(im, name);
    if (!e)
        return NULL;
    if (!e->mean) {
        e->mean = malloc((size_t)e->n * sizeof(float));
        if (!e->mean)
            return NULL;
        const int64_t per = e->n / e->nmat;
        for (int64_t j = 0; j < e->n; j++) {
            const double r = e->rows[j / per];
            e->mean[j] = r > 0 ? (float)(e->sum2[j] / r) : 0.0f;
        }
    }
    *n = e->n;
    return e->mean;
}

/* Mirror the upper triangle of e->cov into the lower one (adds only touch a <= b). */
static void mirror_cov(const struct entry *e)
{
    const int64_t n = e->n;
    for (int64_t a = 0; a < n; a++)
        for (int64_t b = a + 1; b < n; b++)
            e->cov[b * n + a] = e->cov[a * n + b];
}

void lc_imatrix_round_f32(struct lc_imatrix *im)
{
    for (int i = 0; i < im->n; i++) {
        struct entry *e = &im->e[i];
        for (int64_t j = 0; j < e->n; j++)
            e->sum2[j] = (double)(float)e->sum2[j];
        for (int k = 0; k < e->nmat; k++)
            e->rows[k] = (double)(float)e->rows[k];
        if (e->cov) {
            mirror_cov(e);
            for (int64_t j = 0; j < e->n * e->n; j++)
                e->cov[j] = (double)(float)e->cov[j];
        }
        free(e->mean); /* the cached means were of the unrounded sums */
        e->mean = NULL;
    }
}

const double *lc_imatrix_get_cov(const struct lc_imatrix *im, const char *name, int64_t *n,
                                 double *rows)
{
    struct entry *e = find(im, name);
    if (!e || !e->cov || !(e->rows[0] > 0))
        return NULL;
    mirror_cov(e);
    *n = e->n;
    *rows = e->rows[0];
    return e->cov;
}

/* ---------------------------------------------------------------- files */

static int cmp_name(const void *a, const void *b)
{
    return strcmp((*(const struct entry *const *)a)->name, (*(const struct entry *const *)b)->name);
}

/* The entries sorted by name (llama.cpp writes them so); NULL when out of memory. */
static const struct entry **sorted(const struct lc_imatrix *im)
{
    const struct entry **s = malloc((size_t)(im->n ? im->n : 1) * sizeof(*s));
    if (!s)
        return NULL;
    for (int i = 0; i < im->n; i++)
        s[i] = &im->e[i];
    qsort(s, (size_t)im->n, sizeof(*s), cmp_name);
    return s;
}

static int save_legacy(const struct lc_imatrix *im, const struct entry **s, const char *path,
                       const char *dataset, char **err)
{
    size_t tl = strlen(path) + sizeof(".tmp.XXXXXX");
    char *tmp = malloc(tl);
    if (!tmp) {
        set_err(err, "%s: out of memory", path);
        return -1;
    }
    snprintf(tmp, tl, "%s.tmp.XXXXXX", path);
    int fd = mkstemp(tmp);
    if (fd >= 0)
        (void)fchmod(fd, 0644); /* mkstemp creates 0600; an imatrix is not secret */
    FILE *f = fd >= 0 ? fdopen(fd, "wb") : NULL;
    if (!f) {
        set_err(err, "%s: %s", path, strerror(errno));
        if (fd >= 0) {
            close(fd);
            unlink(tmp);
        }
        free(tmp);
        return -1;
    }
    bool ok = true;
    int32_t n_entries = 0;
    for (int i = 0; i < im->n; i++)
        n_entries += s[i]->rows[0] > 0;
    ok = ok && fwrite(&n_entries, 4, 1, f) == 1;
    float *tmpv = NULL;
    for (int i = 0; i < im->n && ok; i++) {
        const struct entry *e = s[i];
        if (!(e->rows[0] > 0)) /* no data: llama.cpp skips it too */
            continue;
        const int32_t len = (int32_t)strlen(e->name);
        const int32_t ncall = e->ncall > 0 ? e->ncall : 1;
        const int32_t nval = (int32_t)e->n;
        float *t = realloc(tmpv, (size_t)nval * sizeof(float));
        if (!t) {
            ok = false;
            break;
        }
        tmpv = t;
        const int64_t per = e->n / e->nmat;
        for (int64_t j = 0; j < e->n; j++) {
            const double r = e->rows[j / per];
            tmpv[j] = r > 0 ? (float)(e->sum2[j] / r * ncall) : 1.0f;
        }
        ok = ok && fwrite(&len, 4, 1, f) == 1 && fwrite(e->name, 1, (size_t)len, f) == (size_t)len;
        ok = ok && fwrite(&ncall, 4, 1, f) == 1 && fwrite(&nval, 4, 1, f) == 1;
        ok = ok && fwrite(tmpv, sizeof(float), (size_t)nval, f) == (size_t)nval;
    }
    free(tmpv);
    const int32_t chunks = im->n_chunks;
    const int32_t dlen = dataset ? (int32_t)strlen(dataset) : 0;
    ok = ok && fwrite(&chunks, 4, 1, f) == 1 && fwrite(&dlen, 4, 1, f) == 1;
    ok = ok && (dlen == 0 || fwrite(dataset, 1, (size_t)dlen, f) == (size_t)dlen);
    ok = ok && fflush(f) == 0 && fsync(fileno(f)) == 0;
    ok = fclose(f) == 0 && ok;
    if (!ok || rename(tmp, path) != 0) {
        set_err(err, "%s: write failed: %s", path, strerror(errno));
        unlink(tmp);
        free(tmp);
        return -1;
    }
    free(tmp);
    return 0;
}

static int save_gguf(const struct lc_imatrix *im, const struct entry **s, const char *path,
                     const char *dataset, uint32_t chunk_size, char **err)
{
    struct lc_gguf_writer *w = lc_gguf_writer_new();
    if (!w) {
        set_err(err, "%s: out of memory", path);
        return -1;
    }
    const char *ds[1] = {dataset ? dataset : ""};
    int rc = lc_gguf_writer_set_str(w, "general.type", "imatrix");
    rc |= lc_gguf_writer_set_arr_str(w, "imatrix.datasets", ds, dataset ? 1 : 0);
    rc |= lc_gguf_writer_set_u32(w, "imatrix.chunk_count", (uint32_t)im->n_chunks);
    rc |= lc_gguf_writer_set_u32(w, "imatrix.chunk_size", chunk_size);
    char name[128];
    for (int i = 0; i < im->n && rc == 0; i++) {
        const struct entry *e = s[i];
        const int64_t ne_s[2] = {e->n / e->nmat, e->nmat};
        const int64_t ne_c[2] = {1, e->nmat};
        snprintf(name, sizeof(name), "%s.in_sum2", e->name);
        rc |= lc_gguf_writer_add_tensor(w, name, LC_TYPE_F32, 2, ne_s);
        snprintf(name, sizeof(name), "%s.counts", e->name);
        rc |= lc_gguf_writer_add_tensor(w, name, LC_TYPE_F32, 2, ne_c);
        if (e->cov) {
            const int64_t ne_v[2] = {e->n, e->n};
            snprintf(name, sizeof(name), "%s.in_cov", e->name);
            rc |= lc_gguf_writer_add_tensor(w, name, LC_TYPE_F32, 2, ne_v);
        }
    }
    if (rc != 0) {
        set_err(err, "%s: cannot describe the tensors (a name of 56 bytes or more?)", path);
        lc_gguf_writer_free(w);
        return -1;
    }
    if (lc_gguf_writer_begin(w, path, err) != 0) {
        lc_gguf_writer_free(w);
        return -1;
    }
    for (int i = 0; i < im->n; i++) {
        const struct entry *e = s[i];
        float *v = malloc((size_t)e->n * sizeof(float));
        float c[64];
        if (!v || e->nmat > 64) {
            free(v);
            set_err(err, "%s: out of memory", path);
            lc_gguf_writer_free(w);
            return -1;
        }
        for (int64_t j = 0; j < e->n; j++)
            v[j] = (float)e->sum2[j];
        for (int k = 0; k < e->nmat; k++)
            c[k] = (float)e->rows[k];
        rc = lc_gguf_writer_write_data(w, v, (size_t)e->n * sizeof(float), err);
        free(v);
        if (rc == 0)
            rc = lc_gguf_writer_write_data(w, c, (size_t)e->nmat * sizeof(float), err);
        if (rc == 0 && e->cov) {
            mirror_cov(e);
            float *cv = malloc((size_t)(e->n * e->n) * sizeof(float));
            for (int64_t j = 0; cv && j < e->n * e->n; j++)
                cv[j] = (float)e->cov[j];
            if (cv)
                rc = lc_gguf_writer_write_data(w, cv, (size_t)(e->n * e->n) * sizeof(float), err);
            if (!cv) {
                set_err(err, "%s: out of memory", path);
                rc = -1;
            }
            free(cv);
        }
        if (rc != 0) {
            lc_gguf_writer_free(w);
            return -1;
        }
    }
    rc = lc_gguf_writer_end(w, err);
    lc_gguf_writer_free(w);
    return rc;
}

int lc_imatrix_save(const struct lc_imatrix *im, const char *path, bool gguf, const char *dataset,
                    uint32_t chunk_size, char **err)
{
    const struct entry **s = sorted(im);
    if (!s) {
        set_err(err, "%s: out of memory", path);
        return -1;
    }
    int rc = gguf ? save_gguf(im, s, path, dataset, chunk_size, err)
                  : save_legacy(im, s, path, dataset, err);
    free(s);
    return rc;
}

static struct lc_imatrix *load_gguf(const char *path, char **err)
{
    struct lc_gguf *g = lc_gguf_open(path, err);
    if (!g)
        return NULL;
    struct lc_imatrix *im = lc_imatrix_new();
    if (!im) {
        lc_gguf_free(g);
        set_err(err, "%s: out of memory", path);
        return NULL;
    }
    uint32_t chunks = 0;
    if (lc_gguf_get_u32(g, "imatrix.chunk_count", &chunks))
        im->n_chunks = (int32_t)chunks;
    static const char sfx[] = ".in_sum2";
    const size_t ls = sizeof(sfx) - 1;
    for (int64_t i = 0; i < lc_gguf_n_tensors(g); i++) {
        const struct lc_gguf_tensor *t = lc_gguf_tensor(g, i);
        const size_t ln = strlen(t->name);
        if (ln <= ls || strcmp(t->name + ln - ls, sfx) != 0)
            continue;
        char base[128], cname[160];
        snprintf(base, sizeof(base), "%.*s", (int)(ln - ls), t->name);
        snprintf(cname, sizeof(cname), "%s.counts", base);
        const struct lc_gguf_tensor *c = lc_gguf_find_tensor(g, cname);
        const int64_t nmat = t->ne[1];
        if (!c || t->type != LC_TYPE_F32 || c->type != LC_TYPE_F32 || t->ne[2] != 1 ||
            t->ne[3] != 1 || c->ne[0] * c->ne[1] * c->ne[2] * c->ne[3] != nmat || nmat > 4096) {
            set_err(err, "%s: '%s' without a matching F32 '%s'", path, t->name, cname);
            goto fail;
        }
        struct entry *e = get_entry(im, base, t->ne[0] * nmat, (int)nmat);
        if (!e) {
            set_err(err, "%s: '%s' twice, or out of memory", path, base);
            goto fail;
        }
        const float *v = t->data, *cv = c->data;
        for (int64_t j = 0; j < e->n; j++) {
            if (!isfinite(v[j]) || v[j] < 0) {
                set_err(err, "%s: '%s' holds a negative or non-finite sum", path, t->name);
                goto fail;
            }
            e->sum2[j] = (double)v[j];
        }
        for (int64_t k = 0; k < nmat; k++) {
            if (!isfinite(cv[k]) || cv[k] < 0) {
                set_err(err, "%s: '%s' holds a bad count", path, cname);
                goto fail;
            }
            e->rows[k] = (double)cv[k];
        }
        e->ncall = (int32_t)chunks;
        /* llamachat's extension: the sums of x x^T (llamachat-imatrix --cov) */
        snprintf(cname, sizeof(cname), "%s.in_cov", base);
        const struct lc_gguf_tensor *covt = lc_gguf_find_tensor(g, cname);
        if (covt) {
            if (covt->type != LC_TYPE_F32 || nmat != 1 || covt->ne[0] != e->n ||
                covt->ne[1] != e->n ||
                covt->ne[2] != 1 || covt->ne[3] != 1) {
                set_err(err, "%s: '%s' is not an F32 [%" PRId64 ", %" PRId64 "] matrix", path,
                        cname, e->n, e->n);
                goto fail;
            }
            e->cov = malloc((size_t)(e->n * e->n) * sizeof(double));
            if (!e->cov) {
                set_err(err, "%s: out of memory", path);
                goto fail;
            }
            const float *m = covt->data;
            for (int64_t j = 0; j < e->n * e->n; j++) {
                if (!isfinite(m[j])) {
                    set_err(err, "%s: '%s' holds a non-finite value", path, cname);
                    goto fail;
                }
                e->cov[j] = (double)m[j];
            }
        }
    }
    if (im->n == 0) {
        set_err(err, "%s: no '*.in_sum2' tensors: not an imatrix file", path);
        goto fail;
    }
    lc_gguf_free(g);
    return im;
fail:
    lc_gguf_free(g);
    lc_imatrix_free(im);
    return NULL;
}

static bool rd(FILE *f, void *p, size_t n)
{
    return fread(p, 1, n, f) == n;
}

static struct lc_imatrix *load_legacy(FILE *f, const char *path, char **err)
{
    struct lc_imatrix *im = lc_imatrix_new();
    float *tmp = NULL;
    char *name = NULL;
    if (!im)
        goto oom;
    int32_t n_entries;
    if (!rd(f, &n_entries, 4) || n_entries < 1 || n_entries > (1 << 20)) {
        set_err(err, "%s: not an imatrix file (no entries)", path);
        goto fail;
    }
    for (int32_t i = 0; i < n_entries; i++) {
        int32_t len, ncall, nval;
        if (!rd(f, &len, 4) || len < 1 || len > 4096) {
            set_err(err, "%s: entry %d: bad name length", path, i + 1);
            goto fail;
        }
        name = malloc((size_t)len + 1);
        if (!name)
            goto oom;
        if (!rd(f, name, (size_t)len) || !rd(f, &ncall, 4) || !rd(f, &nval, 4) || nval < 1 ||
            nval > (1 << 28)) {
            set_err(err, "%s: entry %d: truncated or bad value count", path, i + 1);
            goto fail;
        }
        name[len] = '\0';
        float *t = realloc(tmp, (size_t)nval * sizeof(float));
        if (!t)
            goto oom;
        tmp = t;
        if (!rd(f, tmp, (size_t)nval * sizeof(float))) {
            set_err(err, "%s: entry '%s': truncated", path, name);
            goto fail;
        }
        struct entry *e = get_entry(im, name, nval, 1);
        if (!e) {
            set_err(err, "%s: entry '%s' twice, or out of memory", path, name);
            goto fail;
        }
        /* llama-quantize: mean = value / ncall when ncall > 0 */
        const double div = ncall > 0 ? ncall : 1;
        for (int32_t j = 0; j < nval; j++) {
            if (!isfinite(tmp[j]) || tmp[j] < 0) {
                set_err(err, "%s: entry '%s' holds a negative or non-finite value", path, name);
                goto fail;
            }
            e->sum2[j] = (double)tmp[j];
        }
        e->rows[0] = div;
        e->ncall = ncall;
        free(name);
        name = NULL;
    }
    int32_t chunks;
    if (rd(f, &chunks, 4)) /* optional trailer: chunk count, dataset name */
        im->n_chunks = chunks;
    free(tmp);
    return im;
oom:
    set_err(err, "%s: out of memory", path);
fail:
    free(name);
    free(tmp);
    lc_imatrix_free(im);
    return NULL;
}

struct lc_imatrix *lc_imatrix_load(const char *path, char **err)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        set_err(err, "%s: %s", path, strerror(errno));
        return NULL;
    }
    char magic[4];
    if (!rd(f, magic, 4)) {
        fclose(f);
        set_err(err, "%s: empty or unreadable", path);
        return NULL;
    }
    if (memcmp(magic, "GGUF", 4) == 0) {
        fclose(f);
        return load_gguf(path, err);
    }
    rewind(f);
    struct lc_imatrix *im = load_legacy(f, path, err);
    fclose(f);
    return im;
}
