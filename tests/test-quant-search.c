/*
 * test-quant-search - the error-minimizing quantizers (quant_search.h) and importance-matrix
 * files (imatrix.h).
 *
 *   - on deterministic random rows (Gaussian, uniform, heavy-tailed, one outlier, constant,
 *     zero, tiny and huge scales), for Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, with and without weights:
 *     no block has a larger weighted error than the reference quantizer's, and over Gaussian
 *     rows the searched Q4_1 / Q4_0 lose at least 15 % / 5 % less squared error;
 *   - every searched Q4_1 / Q5_1 block is valid: d >= 0, d and m finite F16;
 *   - an importance matrix written in both formats and read back gives the same means; the
 *     legacy file has llama.cpp's layout (checked byte by byte at the start);
 *   - GPTQ (quant_gptq.h): on inputs with correlated columns its output error |(W - Q) X|^2 is
 *     well below the search's (weighted by the same diag(H)) for every type; with uncorrelated
 *     inputs it is no worse; its blocks are valid; the x x^T sums survive a GGUF imatrix file;
 *   - with an argument FILE.gguf: every Q4_1 / Q5_1 tensor of FILE has valid blocks (used by
 *     test-quantize-search.sh on the quantizer's output).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "arch/kernels.h"
#include "gguf.h"
#include "imatrix.h"
#include "quant.h"
#include "quant_gptq.h"
#include "quant_search.h"
#include "testutil.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static double urand(void) /* [0, 1) */
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (double)(rng >> 11) * (1.0 / 9007199254740992.0);
}

static float grand(void) /* standard normal (Box-Muller) */
{
    double u = urand(), v = urand();
    return (float)(sqrt(-2.0 * log(u + 1e-300)) * cos(6.283185307179586 * v));
}

enum { N = 256, NB = N / 32 };

static void fill(float *x, int kind, float scale)
{
    for (int j = 0; j < N; j++) {
        switch (kind) {
        case 0: x[j] = grand(); break;
        case 1: x[j] = (float)(2 * urand() - 1); break;
        case 2: x[j] = grand() * grand() * grand(); break;          /* heavy tails */
        case 3: x[j] = grand() + (j % 32 == 5 ? 12.0f : 0.0f); break; /* one outlier a block */
        case 4: x[j] = 0.75f; break;
        case 5: x[j] = 0.0f; break;
        default: x[j] = (float)(urand() * 3 + 1); break;            /* all positive */
        }
        x[j] *= scale;
    }
}

static bool fp16_ok(lc_fp16 h)
{
    return (h & 0x7c00u) != 0x7c00u;
}

/* Q4_1 / Q5_1 block validity: d >= 0 (sign bit clear, -0 excluded), d and m finite. */
static int invalid_blocks(enum lc_type t, const void *y, int64_t nb)
{
    int bad = 0;
    for (int64_t i = 0; i < nb; i++) {
        lc_fp16 d, m;
        if (t == LC_TYPE_Q4_1) {
            d = ((const lc_block_q4_1 *)y)[i].d;
            m = ((const lc_block_q4_1 *)y)[i].m;
        } else {
            d = ((const lc_block_q5_1 *)y)[i].d;
            m = ((const lc_block_q5_1 *)y)[i].m;
        }
        bad += !fp16_ok(d) || !fp16_ok(m) || (d & 0x8000u) != 0;
    }
    return bad;
}

static void test_blocks(void)
{
    static const enum lc_type types[] = {LC_TYPE_Q4_0, LC_TYPE_Q4_1, LC_TYPE_Q5_0, LC_TYPE_Q5_1,
                                         LC_TYPE_Q8_0};
    static const float scales[] = {1.0f, 0.02f, 1e-6f, 3000.0f};
    float x[N], w[N];
    uint8_t yr[N / 32 * 34], ys[N / 32 * 34];
    for (size_t ti = 0; ti < sizeof(types) / sizeof(types[0]); ti++) {
        const enum lc_type t = types[ti];
        const struct lc_type_traits *tt = lc_type_traits((int)t);
        double sum_ref = 0, sum_search = 0; /* Gaussian rows, unweighted */
        int worse = 0, invalid = 0, rows = 0;
        for (int kind = 0; kind < 7; kind++)
            for (size_t si = 0; si < sizeof(scales) / sizeof(scales[0]); si++)
                for (int rep = 0; rep < 40; rep++) {
                    fill(x, kind, scales[si]);
                    const bool weighted = rep % 2 == 1;
                    for (int j = 0; j < N; j++) /* some zero weights, a wide range */
                        w[j] = j % 7 == 3 ? 0.0f : (float)(urand() * urand() * 10);
                    const float *wp = weighted ? w : NULL;
                    tt->from_float_ref(x, yr, N);
                    CHECK(lc_quantize_row_search(t, x, ys, N, wp) == 0, "search %s", tt->name);
                    for (int b = 0; b < NB; b++) {
                        const double er = lc_quant_row_error(t, x + b * 32,
                                                             yr + b * tt->type_size, 32,
                                                             wp ? wp + b * 32 : NULL);
                        const double es = lc_quant_row_error(t, x + b * 32,
                                                             ys + b * tt->type_size, 32,
                                                             wp ? wp + b * 32 : NULL);
                        /* a tolerance for the float vs double sums of the two error measures */
                        worse += es > er * (1 + 1e-5) + 1e-30;
                    }
                    if (t == LC_TYPE_Q4_1 || t == LC_TYPE_Q5_1)
                        invalid += invalid_blocks(t, ys, NB);
                    if (kind == 0 && si == 0 && !weighted) {
                        sum_ref += lc_quant_row_error(t, x, yr, N, NULL);
                        sum_search += lc_quant_row_error(t, x, ys, N, NULL);
                    }
                    rows++;
                }
        CHECK(worse == 0, "%s: %d blocks with a larger error than the reference", tt->name, worse);
        CHECK(invalid == 0, "%s: %d invalid blocks", tt->name, invalid);
        const double gain = 1 - sum_search / sum_ref;
        fprintf(stderr, "%s: %d rows; Gaussian squared error %.4g (ref) -> %.4g (search), %.1f %% less\n",
                tt->name, rows, sum_ref, sum_search, 100 * gain);
        const double want = t == LC_TYPE_Q4_1 ? 0.15 : t == LC_TYPE_Q4_0 ? 0.05 : 0.0;
        CHECK(gain >= want, "%s: the search removes %.1f %% of the error, want >= %.0f %%",
              tt->name, 100 * gain, 100 * want);
    }
    /* bad arguments */
    CHECK(lc_quantize_row_search(LC_TYPE_Q4_K, x, ys, N, NULL) == -1, "Q4_K is not searched");
    CHECK(lc_quantize_row_search(LC_TYPE_Q4_1, x, ys, 48, NULL) == -1, "48 is not a row of blocks");
}

/*
 * The Q4_1 / Q5_1 search kernel of every ISA this CPU has gives the scalar table's bits (blocks
 * in vector lanes, qsearch-lanes.h): 37 blocks (a partial last vector) of each kind of data,
 * weights given (some zero, some all-zero blocks), sqrt(sigma2 + x^2), and 1; so does
 * lc_quantize_row_search's whole row.
 */
static void test_isas(void)
{
    enum { NBK = 37, NX = NBK * 32 };
    static float x[NX], w[NX];
    static lc_fp16 d0[NBK], m0[NBK], d1[NBK], m1[NBK];
    static uint8_t L0[NX], L1[NX], y0[NX], y1[NX];
    static const char *const isas[] = {"avx2", "avx512", "neon"};
    int compared = 0;
    for (int kind = 0; kind < 7; kind++)
        for (int si = 0; si < 3; si++) {
            const float scale = si == 0 ? 1.0f : si == 1 ? 0.02f : 3e-6f;
            for (int j = 0; j < NX; j++) {
                const float v = kind == 0 ? grand() : kind == 1 ? (float)(2 * urand() - 1) :
                                kind == 2 ? grand() * grand() * grand() :
                                kind == 3 ? grand() + (j % 32 == 5 ? 12.0f : 0.0f) :
                                kind == 4 ? 0.75f : kind == 5 ? (j < 64 ? 0.0f : grand()) :
                                (float)(urand() * 3 + 1);
                x[j] = v * scale;
                w[j] = j % 7 == 3 || (j >= 96 && j < 128) ? 0.0f : (float)(urand() * urand() * 10);
            }
            for (int mode = 0; mode < 3; mode++)
                for (int nmax = 15; nmax <= 31; nmax += 16) {
                    const float *wp = mode == 0 ? w : NULL;
                    const float s2 = mode == 1 ? 1e-4f * scale * scale : -1.0f;
                    char *err = NULL;
                    CHECK(lc_kernels_select("scalar", &err) == 0, "select scalar");
                    lc_kernels()->qsearch_asym(x, wp, s2, NBK, nmax, d0, m0, L0);
                    const enum lc_type t = nmax == 15 ? LC_TYPE_Q4_1 : LC_TYPE_Q5_1;
                    CHECK(lc_quantize_row_search(t, x, y0, NX, wp) == 0, "row");
                    int bad_levels = 0;
                    for (int j = 0; j < NX; j++)
                        bad_levels += L0[j] > nmax;
                    CHECK(bad_levels == 0, "%d levels above %d", bad_levels, nmax);
                    for (size_t i = 0; i < sizeof(isas) / sizeof(isas[0]); i++) {
                        if (!lc_kernels_isa_available(isas[i]))
                            continue;
                        CHECK(lc_kernels_select(isas[i], &err) == 0, "select %s", isas[i]);
                        memset(L1, 0xee, sizeof(L1));
                        lc_kernels()->qsearch_asym(x, wp, s2, NBK, nmax, d1, m1, L1);
                        CHECK(memcmp(d0, d1, sizeof(d0)) == 0 && memcmp(m0, m1, sizeof(m0)) == 0 &&
                                  memcmp(L0, L1, sizeof(L0)) == 0,
                              "%s: kind %d scale %g mode %d nmax %d: not the scalar bits", isas[i],
                              kind, (double)scale, mode, nmax);
                        CHECK(lc_quantize_row_search(t, x, y1, NX, wp) == 0, "row");
                        CHECK(memcmp(y0, y1, lc_row_size(t, NX)) == 0,
                              "%s: kind %d mode %d: another row", isas[i], kind, mode);
                        compared++;
                    }
                }
        }
    char *err = NULL;
    CHECK(lc_kernels_select("auto", &err) == 0, "select auto");
    fprintf(stderr, "search kernels: %d comparisons with the scalar bits\n", compared);
}

static void test_imatrix_files(void)
{
    char dir[] = "/tmp/test-imatrix-XXXXXX";
    if (!mkdtemp(dir)) {
        CHECK(0, "mkdtemp");
        return;
    }
    char dat[64], gg[64];
    snprintf(dat, sizeof(dat), "%s/im.dat", dir);
    snprintf(gg, sizeof(gg), "%s/im.gguf", dir);
    struct lc_imatrix *im = lc_imatrix_new();
    float x[3 * 40];
    for (int i = 0; i < 3 * 40; i++)
        x[i] = grand();
    /* two chunks: "b" 2 rows + 1 row of 40 (stride 40); "a" 3 rows of 8 (stride 40) */
    CHECK(lc_imatrix_add(im, "blk.0.b.weight", x, 2, 40, 40) == 0, "add");
    CHECK(lc_imatrix_add(im, "blk.0.a.weight", x, 3, 8, 40) == 0, "add");
    lc_imatrix_end_chunk(im);
    CHECK(lc_imatrix_add(im, "blk.0.b.weight", x + 80, 1, 40, 40) == 0, "add");
    CHECK(lc_imatrix_add(im, "blk.0.b.weight", x, 1, 39, 40) == -1, "another row length");
    lc_imatrix_end_chunk(im);
    int64_t n = 0;
    const float *mb = lc_imatrix_get(im, "blk.0.b.weight", &n);
    CHECK(mb && n == 40, "get b");
    if (mb) {
        const double want = ((double)x[7] * (double)x[7] + (double)x[47] * (double)x[47] + (double)x[87] * (double)x[87]) / 3;
        CHECK(fabs((double)mb[7] - want) < 1e-6 * want, "mean of column 7: %g, want %g", (double)mb[7], want);
    }
    char *err = NULL;
    CHECK(lc_imatrix_save(im, dat, false, "text.txt", 128, &err) == 0, "save dat: %s", err);
    CHECK(lc_imatrix_save(im, gg, true, "text.txt", 128, &err) == 0, "save gguf: %s", err);

    /* the legacy layout: n_entries, then the first entry (sorted: "a") len, name, ncall, nval */
    FILE *f = fopen(dat, "rb");
    int32_t hdr[2];
    char name[15];
    int32_t cn[2];
    float v0;
    bool rd = f && fread(hdr, 4, 2, f) == 2 && fread(name, 1, 14, f) == 14 &&
              fread(cn, 4, 2, f) == 2 && fread(&v0, 4, 1, f) == 1;
    CHECK(rd, "read the legacy file");
    if (rd) {
        name[14] = '\0';
        CHECK(hdr[0] == 2 && hdr[1] == 14 && strcmp(name, "blk.0.a.weight") == 0,
              "legacy header %d %d %s", hdr[0], hdr[1], name);
        /* "a" was used in 1 chunk: ncall 1, value = mean * ncall */
        CHECK(cn[0] == 1 && cn[1] == 8, "ncall %d nval %d", cn[0], cn[1]);
        const double want = ((double)x[0] * (double)x[0] + (double)x[40] * (double)x[40] + (double)x[80] * (double)x[80]) / 3;
        CHECK(fabs((double)v0 - want) < 1e-6 * want, "value %g, want %g", (double)v0, want);
    }
    if (f)
        fclose(f);

    for (int k = 0; k < 2; k++) {
        struct lc_imatrix *back = lc_imatrix_load(k ? gg : dat, &err);
        CHECK(back != NULL, "load %s: %s", k ? gg : dat, err ? err : "");
        if (!back)
            continue;
        CHECK(lc_imatrix_count(back) == 2, "entries %d", lc_imatrix_count(back));
        static const char *const names[] = {"blk.0.a.weight", "blk.0.b.weight"};
        for (int e = 0; e < 2; e++) {
            int64_t n1 = 0, n2 = 0;
            const float *m1 = lc_imatrix_get(im, names[e], &n1);
            const float *m2 = lc_imatrix_get(back, names[e], &n2);
            CHECK(m1 && m2 && n1 == n2, "%s: %s back", k ? "gguf" : "dat", names[e]);
            int diff = 0;
            for (int64_t j = 0; m1 && m2 && j < n1; j++)
                diff += fabsf(m1[j] - m2[j]) > 1e-6f * m1[j];
            CHECK(diff == 0, "%s: %s: %d means differ", k ? "gguf" : "dat", names[e], diff);
        }
        lc_imatrix_free(back);
    }
    /* a truncated legacy file is refused with a message */
    FILE *g = fopen(dat, "r+b");
    if (g) {
        CHECK(ftruncate(fileno(g), 30) == 0, "truncate");
        fclose(g);
    }
    free(err);
    err = NULL;
    struct lc_imatrix *bad = lc_imatrix_load(dat, &err);
    CHECK(bad == NULL && err && strstr(err, "truncated"), "truncated file: %s", err ? err : "accepted");
    lc_imatrix_free(bad);
    free(err);
    lc_imatrix_free(im);
    unlink(dat);
    unlink(gg);
    rmdir(dir);
}

/* Every Q4_1 / Q5_1 tensor of a file has valid blocks. */
static void check_file(const char *path)
{
    char *err = NULL;
    struct lc_gguf *g = lc_gguf_open(path, &err);
    CHECK(g != NULL, "%s: %s", path, err ? err : "");
    free(err);
    if (!g)
        return;
    int n_q = 0;
    for (int64_t i = 0; i < lc_gguf_n_tensors(g); i++) {
        const struct lc_gguf_tensor *t = lc_gguf_tensor(g, i);
        if (t->type != LC_TYPE_Q4_1 && t->type != LC_TYPE_Q5_1)
            continue;
        const int64_t nb = (int64_t)(t->nbytes / lc_type_traits((int)t->type)->type_size);
        const int bad = invalid_blocks(t->type, t->data, nb);
        CHECK(bad == 0, "%s: %s: %d invalid blocks of %lld", path, t->name, bad, (long long)nb);
        n_q++;
    }
    CHECK(n_q > 0, "%s: no Q4_1 / Q5_1 tensors", path);
    fprintf(stderr, "%s: %d Q4_1/Q5_1 tensors checked\n", path, n_q);
    lc_gguf_free(g);
}


/* |(w - deq(q)) X|^2 over the N rows of X (n columns), for one quantized row. */
static double product_error(enum lc_type t, const float *w, const void *q, const float *X,
                            int nrows, int n)
{
    float deq[256];
    lc_type_traits((int)t)->to_float(q, deq, n);
    double s = 0.0;
    for (int r = 0; r < nrows; r++) {
        double acc = 0.0;
        for (int j = 0; j < n; j++)
            acc += ((double)w[j] - (double)deq[j]) * (double)X[r * n + j];
        s += acc * acc;
    }
    return s;
}

static void test_gptq(void)
{
    enum { n = 128, NX = 1024, ROWS = 16 };
    static float X[NX * n], A[n * n], z[n], W[ROWS * n];
    static double cov[n * n];
    static const enum lc_type types[] = {LC_TYPE_Q4_0, LC_TYPE_Q4_1, LC_TYPE_Q5_0, LC_TYPE_Q5_1,
                                         LC_TYPE_Q8_0};
    for (int corr = 0; corr < 2; corr++) {
        /* inputs x = A z: A = I (uncorrelated) or I + a dense random part (correlated) with a
         * non-zero mean, as the activations in a transformer */
        for (int i = 0; i < n * n; i++)
            A[i] = (i % (n + 1) == 0 ? 1.0f : 0.0f) + (corr ? 0.35f * grand() : 0.0f);
        for (int r = 0; r < NX; r++) {
            for (int j = 0; j < n; j++)
                z[j] = grand() + (corr ? 0.5f : 0.0f);
            for (int i = 0; i < n; i++) {
                float acc = 0.0f;
                for (int j = 0; j < n; j++)
                    acc += A[i * n + j] * z[j];
                X[r * n + i] = acc;
            }
        }
        memset(cov, 0, sizeof(cov));
        for (int r = 0; r < NX; r++)
            for (int a = 0; a < n; a++)
                for (int b = 0; b < n; b++)
                    cov[a * n + b] += (double)X[r * n + a] * (double)X[r * n + b];
        struct lc_gptq *g = lc_gptq_prepare(cov, NX, n, 0.01f);
        CHECK(g != NULL, "prepare");
        if (!g)
            return;
        for (int i = 0; i < ROWS * n; i++)
            W[i] = 0.02f * grand();
        for (size_t k = 0; k < sizeof(types) / sizeof(types[0]); k++) {
            const enum lc_type t = types[k];
            uint8_t qs[256], qg[256];
            double es = 0.0, eg = 0.0;
            int invalid = 0;
            for (int r = 0; r < ROWS; r++) {
                const float *w = W + r * n;
                CHECK(lc_quantize_row_search(t, w, qs, n, g->diag) == 0, "search");
                CHECK(lc_quantize_row_gptq(t, w, qg, g) == 0, "gptq");
                es += product_error(t, w, qs, X, NX, n);
                eg += product_error(t, w, qg, X, NX, n);
                if (t == LC_TYPE_Q4_1 || t == LC_TYPE_Q5_1)
                    invalid += invalid_blocks(t, qg, n / 32);
            }
            const char *tn = lc_type_traits((int)t)->name;
            fprintf(stderr, "gptq %s %s inputs: |(W-Q)X|^2 %.4g, search %.4g (%.0f %%)\n", tn,
                    corr ? "correlated" : "uncorrelated", eg, es, 100.0 * eg / es);
            if (corr)
                CHECK(eg < 0.6 * es, "%s: GPTQ's error %.4g is not 40 %% below the search's %.4g",
                      tn, eg, es);
            else
                CHECK(eg <= 1.02 * es, "%s: GPTQ's error %.4g above the search's %.4g", tn, eg, es);
            CHECK(invalid == 0, "%s: %d invalid GPTQ blocks", tn, invalid);
        }
        CHECK(lc_quantize_row_gptq(LC_TYPE_Q4_K, W, z, g) == -1, "Q4_K is not GPTQ'd");
        lc_gptq_free(g);
    }
    /* a singular H (all inputs 0) still factors: dead columns get H_jj = 1 */
    memset(cov, 0, sizeof(cov));
    struct lc_gptq *g = lc_gptq_prepare(cov, 10, n, 0.01f);
    CHECK(g != NULL, "all-zero x x^T");
    lc_gptq_free(g);
    CHECK(lc_gptq_prepare(cov, 0, n, 0.01f) == NULL, "no rows");
}

/* x x^T sums: collected, written to a GGUF imatrix as NAME.in_cov, read back */
static void test_imatrix_cov(void)
{
    char dir[] = "/tmp/lc-imcov-XXXXXX";
    if (!mkdtemp(dir)) {
        CHECK(0, "mkdtemp");
        return;
    }
    char gg[64], dat[64];
    snprintf(gg, sizeof(gg), "%s/c.gguf", dir);
    snprintf(dat, sizeof(dat), "%s/c.dat", dir);
    struct lc_imatrix *im = lc_imatrix_new();
    lc_imatrix_collect_cov(im, 16);
    float x[3 * 8];
    for (int i = 0; i < 24; i++)
        x[i] = (float)(i % 7) - 2.5f;
    CHECK(lc_imatrix_add(im, "blk.0.c.weight", x, 3, 8, 8) == 0, "add");
    CHECK(lc_imatrix_add(im, "blk.0.big.weight", x, 1, 24, 24) == 0, "add");
    int64_t n = 0;
    double rows = 0;
    const double *c = lc_imatrix_get_cov(im, "blk.0.c.weight", &n, &rows);
    CHECK(c && n == 8 && rows == 3.0, "cov collected");
    if (c) {
        const double want = (double)x[1] * (double)x[6] + (double)x[9] * (double)x[14] +
                            (double)x[17] * (double)x[22];
        CHECK(c[1 * 8 + 6] == want && c[6 * 8 + 1] == want, "cov[1][6] %g, want %g", c[1 * 8 + 6], want);
    }
    CHECK(lc_imatrix_get_cov(im, "blk.0.big.weight", &n, &rows) == NULL, "24 > max_n: no cov");
    char *err = NULL;
    CHECK(lc_imatrix_save(im, gg, true, "t.txt", 8, &err) == 0, "save: %s", err ? err : "");
    CHECK(lc_imatrix_save(im, dat, false, "t.txt", 8, &err) == 0, "save dat: %s", err ? err : "");
    struct lc_imatrix *back = lc_imatrix_load(gg, &err);
    CHECK(back != NULL, "load: %s", err ? err : "");
    if (back) {
        const double *cb = lc_imatrix_get_cov(back, "blk.0.c.weight", &n, &rows);
        CHECK(cb && n == 8 && rows == 3.0, "cov back");
        int diff = 0;
        for (int i = 0; cb && c && i < 64; i++)
            diff += cb[i] != (double)(float)c[i];
        CHECK(cb && diff == 0, "%d sums differ after the round trip", diff);
        lc_imatrix_free(back);
    }
    struct lc_imatrix *leg = lc_imatrix_load(dat, &err);
    CHECK(leg && lc_imatrix_get_cov(leg, "blk.0.c.weight", &n, &rows) == NULL,
          "a legacy file has no x x^T sums");
    lc_imatrix_free(leg);
    lc_imatrix_free(im);
    unlink(gg);
    unlink(dat);
    rmdir(dir);
}

int main(int argc, char **argv)
{
    lc_quant_init();
    if (argc > 1) {
        for (int i = 1; i < argc; i++)
            check_file(argv[i]);
        return tu_finish("test-quant-search (files)");
    }
    test_blocks();
    test_isas();
    test_imatrix_files();
    test_gptq();
    test_imatrix_cov();
    return tu_finish("test-quant-search");
}
