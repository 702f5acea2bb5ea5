/*
 * test-quant-files.c - our reference quantizers against llama.cpp's files, byte for byte.
 *
 * For each pair (unquantized model, the same model quantized by llama-quantize) in
 * ../shared/models, every tensor of the quantized file is recomputed from the unquantized one
 * with the reference quantizer of its type (or copied when the type is unchanged) and compared
 * with the stored bytes.  This covers Q4_0, Q4_1, Q8_0, F16 and Q6_K (output.weight of the
 * synth-small q4_0/q4_1 files, every 2-D tensor of synth-small-q6_k).  Then every Q6_K tensor
 * is dequantized and compared with its source (relative RMSE of a 6-bit format).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "llm/gguf.h"
#include "llm/quant.h"
#include "testutil.h"

static int64_t nelem(const struct lc_gguf_tensor *t)
{
    return t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
}

/* Returns the number of tensors compared; counts failures through CHECK. */
static int compare_pair(const char *src_name, const char *dst_name, int *n_q6k)
{
    char p1[512], p2[512];
    char *err = NULL;
    struct lc_gguf *src = lc_gguf_open(tu_shared(src_name, p1, sizeof(p1)), &err);
    CHECK(src != NULL, "open %s: %s", src_name, err ? err : "?");
    free(err);
    err = NULL;
    struct lc_gguf *dst = lc_gguf_open(tu_shared(dst_name, p2, sizeof(p2)), &err);
    CHECK(dst != NULL, "open %s: %s", dst_name, err ? err : "?");
    free(err);
    if (!src || !dst) {
        lc_gguf_free(src);
        lc_gguf_free(dst);
        return 0;
    }
    int compared = 0;
    for (int64_t i = 0; i < lc_gguf_n_tensors(dst); i++) {
        const struct lc_gguf_tensor *d = lc_gguf_tensor(dst, i);
        const struct lc_gguf_tensor *s = lc_gguf_find_tensor(src, d->name);
        CHECK(s != NULL, "%s: tensor %s missing in %s", dst_name, d->name, src_name);
        if (!s)
            continue;
        CHECK(memcmp(s->ne, d->ne, sizeof(s->ne)) == 0, "%s: %s shape", dst_name, d->name);
        const int64_t ncols = d->ne[0], nrows = nelem(d) / ncols;
        const struct lc_type_traits *ts = lc_type_traits((int)s->type);
        const struct lc_type_traits *td = lc_type_traits((int)d->type);
        CHECK(ts && td && ts->to_float && td->from_float_ref, "%s: %s: types %d -> %d",
              dst_name, d->name, (int)s->type, (int)d->type);
        if (!(ts && td && ts->to_float && td->from_float_ref))
            continue;
        const size_t drow = lc_row_size(d->type, ncols), srow = lc_row_size(s->type, ncols);
        float *x = malloc((size_t)ncols * sizeof(float));
        float *y = malloc((size_t)ncols * sizeof(float));
        uint8_t *q = malloc(drow);
        int64_t bad_rows = 0, first_bad = -1;
        double e2 = 0, x2 = 0;
        for (int64_t r = 0; r < nrows; r++) {
            const uint8_t *sp = (const uint8_t *)s->data + (size_t)r * srow;
            const uint8_t *dp = (const uint8_t *)d->data + (size_t)r * drow;
            if (s->type == d->type) {
                memcpy(q, sp, drow);
            } else {
                ts->to_float(sp, x, ncols);
                td->from_float_ref(x, q, ncols);
            }
            if (memcmp(q, dp, drow) != 0) {
                bad_rows++;
                if (first_bad < 0)
                    first_bad = r;
            }
            if (d->type == LC_TYPE_Q6_K) {
                lc_dequantize_row_q6_K((const lc_block_q6_K *)dp, y, ncols);
                for (int64_t c = 0; c < ncols; c++) {
                    e2 += ((double)x[c] - (double)y[c]) * ((double)x[c] - (double)y[c]);
                    x2 += (double)x[c] * (double)x[c];
                }
            }
        }
        CHECK(bad_rows == 0, "%s: %s (%s -> %s): %lld of %lld rows differ, first row %lld",
              dst_name, d->name, ts->name, td->name, (long long)bad_rows, (long long)nrows,
              (long long)first_bad);
        if (d->type == LC_TYPE_Q6_K) {
            /* 6-bit: about 1/(32 sqrt 12) = 0.9 % relative RMSE on Gaussian-like weights */
            CHECK(x2 > 0 && sqrt(e2 / x2) < 0.02, "%s: %s: Q6_K dequantized rel. rmse %g",
                  dst_name, d->name, x2 > 0 ? sqrt(e2 / x2) : -1.0);
            (*n_q6k)++;
        }
        free(x);
        free(y);
        free(q);
        compared++;
    }
    lc_gguf_free(src);
    lc_gguf_free(dst);
    return compared;
}

int main(void)
{
    lc_quant_init();
    static const struct {
        const char *src, *dst;
        int n_tensors; /* all of them must be compared */
        int n_q6k;     /* how many are Q6_K */
    } pairs[] = {
        {"models/stories260K-ff192-f32.gguf", "models/stories260K-ff192-q4_1.gguf", 48, 0},
        {"models/stories260K-ff192-f32.gguf", "models/stories260K-ff192-q4_0.gguf", 48, 0},
        {"models/stories260K-ff192-f32.gguf", "models/stories260K-ff192-q8_0.gguf", 48, 0},
        {"models/stories260K-ff192-f32.gguf", "models/stories260K-ff192-f16.gguf", 48, 0},
        {"models/synth-small-f16.gguf", "models/synth-small-q4_1.gguf", 21, 1},
        {"models/synth-small-f16.gguf", "models/synth-small-q4_0.gguf", 21, 1},
        {"models/synth-small-f16.gguf", "models/synth-small-q8_0.gguf", 21, 0},
        {"models/synth-small-f16.gguf", "models/synth-small-q6_k.gguf", 21, 16},
    };
    for (size_t i = 0; i < sizeof(pairs) / sizeof(pairs[0]); i++) {
        int n_q6k = 0;
        const int n = compare_pair(pairs[i].src, pairs[i].dst, &n_q6k);
        CHECK(n == pairs[i].n_tensors, "%s: %d tensors compared, expected %d", pairs[i].dst, n,
              pairs[i].n_tensors);
        CHECK(n_q6k == pairs[i].n_q6k, "%s: %d Q6_K tensors, expected %d", pairs[i].dst, n_q6k,
              pairs[i].n_q6k);
        fprintf(stderr, "%s: %d tensors byte-identical (%d Q6_K)\n", pairs[i].dst, n, n_q6k);
    }
    return tu_finish("test-quant-files");
}
