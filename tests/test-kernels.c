/*
 * test-kernels.c - every SIMD kernel against the scalar reference, on this CPU.
 *
 * For each ISA built in and supported here (avx2, avx512, neon), the merged table from
 * lc_kernels_select() is compared entry by entry with lc_kernels_scalar:
 *   - activation quantizers: identical bytes (all ISAs must quantize like ggml's x86 SIMD);
 *   - quantized dots and GEMM micro-kernels: bit-identical to scalar (all ISAs add the terms in
 *     ggml's x86 order, see scalar.c), and GEMM bit-identical to the same ISA's vec_dot;
 *   - float dots: bit-identical to scalar (llama.cpp's x86 order), and close to a double sum;
 *   - element-wise kernels: within a few ulps.
 * The scalar reference itself is checked against known values first.  Exit 77 when there is
 * no SIMD ISA to compare (the scalar checks still run and may fail).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "llm/arch/kernels.h"
#include "llm/quant.h"
#include "llm/repack.h"
#include "testutil.h"

#if defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>
#endif

/* ---------------------------------------------------------------- data */

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static uint32_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 32);
}

/* uniform in [lo, hi) */
static float frand(float lo, float hi)
{
    return lo + (hi - lo) * (float)(rnd() >> 8) * (1.0f / 16777216.0f);
}

enum { EDGE_RANDOM, EDGE_ZERO_NIBBLES, EDGE_FULL_NIBBLES, EDGE_D_ZERO, EDGE_M_ZERO, EDGE_HUGE,
       EDGE_TINY, EDGE_EXACT, EDGE_COUNT };
static const char *const edge_names[] = {"random", "nibbles 0", "nibbles 15", "d=0", "m=0",
                                         "huge scales", "tiny scales", "exact (d=1, m=0)"};

static lc_fp16 scale_for(int edge, int allow_neg)
{
    switch (edge) {
    case EDGE_D_ZERO: return 0;
    case EDGE_HUGE: return lc_fp32_to_fp16(allow_neg && (rnd() & 1) ? -60000.0f : 60000.0f);
    case EDGE_TINY: return (lc_fp16)(1 + (rnd() & 0x3ff)); /* subnormal halves */
    case EDGE_EXACT: return 0x3c00;                       /* 1.0 */
    default: return lc_fp32_to_fp16(frand(allow_neg ? -0.05f : 0.0f, 0.05f));
    }
}

static uint8_t nibbles_for(int edge)
{
    switch (edge) {
    case EDGE_ZERO_NIBBLES: return 0x00;
    case EDGE_FULL_NIBBLES: return 0xFF;
    default: return (uint8_t)rnd();
    }
}

static void make_q4_0(lc_block_q4_0 *b, int nb, int edge)
{
    for (int i = 0; i < nb; i++) {
        b[i].d = scale_for(edge, 1);
        for (int j = 0; j < 16; j++)
            b[i].qs[j] = nibbles_for(edge);
    }
}

static void make_q4_1(lc_block_q4_1 *b, int nb, int edge)
{
    for (int i = 0; i < nb; i++) {
        b[i].d = scale_for(edge, 0);
        b[i].m = edge == EDGE_M_ZERO || edge == EDGE_EXACT ? 0
                 : edge == EDGE_HUGE                      ? lc_fp32_to_fp16(-30000.0f)
                                                          : lc_fp32_to_fp16(frand(-0.5f, 0.1f));
        for (int j = 0; j < 16; j++)
            b[i].qs[j] = nibbles_for(edge);
    }
}

static void make_q8_0w(lc_block_q8_0 *b, int nb, int edge)
{
    for (int i = 0; i < nb; i++) {
        b[i].d = scale_for(edge, 1);
        for (int j = 0; j < 32; j++)
            b[i].qs[j] = (int8_t)(edge == EDGE_ZERO_NIBBLES   ? 0
                                  : edge == EDGE_FULL_NIBBLES ? 127
                                                              : (int)(rnd() % 255) - 127);
    }
}

/* Activations: floats of several shapes, later quantized by the scalar quantizer. */
static void make_acts(float *x, int n, int edge)
{
    for (int i = 0; i < n; i++) {
        switch (edge) {
        case EDGE_ZERO_NIBBLES: x[i] = -frand(0.0f, 3.0f); break;     /* all negative */
        case EDGE_D_ZERO: x[i] = (i / 32) % 2 ? frand(-1, 1) : 0.0f; break; /* zero blocks */
        case EDGE_HUGE: x[i] = frand(-100.0f, 100.0f); break; /* with 6e4 weight scales */
        case EDGE_TINY: x[i] = frand(-1e-30f, 1e-30f); break;
        case EDGE_EXACT: x[i] = (float)((int)(rnd() % 255) - 127); break;
        default: x[i] = frand(-4.0f, 4.0f); break;
        }
    }
    if (edge == EDGE_EXACT) /* make every block's amax 127 so that d = 1 exactly */
        for (int i = 0; i < n; i += 32)
            x[i] = 127.0f;
}

/* ---------------------------------------------------------------- scalar self-checks */

static void check_scalar(const struct lc_kernels *S)
{
    /* Q8_1: ties round half to even (ggml's x86 SIMD), id = 127 / amax. */
    float x[32] = {127.0f, 0.5f, 1.5f, 2.5f, -0.5f, -1.5f, -2.5f, 3.49f, -126.5f};
    lc_block_q8_1 q;
    S->quantize_row[LC_TYPE_Q8_1](x, &q, 32);
    const int8_t want[9] = {127, 0, 2, 2, 0, -2, -2, 3, -126};
    for (int i = 0; i < 9; i++)
        CHECK(q.qs[i] == want[i], "q8_1 tie %d: got %d want %d", i, q.qs[i], want[i]);
    CHECK(q.d == 0x3c00, "q8_1 d = %04x", q.d);
    CHECK(q.s == lc_fp32_to_fp16(127 + 0 + 2 + 2 + 0 - 2 - 2 + 3 - 126), "q8_1 s = %04x", q.s);
    lc_block_q8_0 q0;
    S->quantize_row[LC_TYPE_Q8_0](x, &q0, 32);
    CHECK(memcmp(q0.qs, q.qs, 32) == 0 && q0.d == q.d, "q8_0 like q8_1");
    float z[32] = {0};
    S->quantize_row[LC_TYPE_Q8_1](z, &q, 32);
    CHECK(q.d == 0 && q.s == 0 && q.qs[5] == 0, "zero block");

    /* Q4_1 . Q8_1 against the dequantized product (double). */
    enum { NB = 9, N = NB * 32 };
    lc_block_q4_1 w[NB];
    lc_block_q8_1 a[NB];
    float xf[N], wf[N];
    make_q4_1(w, NB, EDGE_RANDOM);
    make_acts(xf, N, EDGE_RANDOM);
    S->quantize_row[LC_TYPE_Q8_1](xf, a, N);
    lc_dequantize_row_q4_1(w, wf, N);
    double ref = 0, mag = 0;
    for (int b = 0; b < NB; b++) {
        const float dy = lc_fp16_to_fp32(a[b].d);
        for (int j = 0; j < 32; j++) {
            ref += (double)wf[b * 32 + j] * (double)dy * a[b].qs[j];
            mag += fabs((double)wf[b * 32 + j] * (double)dy * a[b].qs[j]);
        }
    }
    float s;
    S->vec_dot[LC_TYPE_Q4_1](N, &s, w, a);
    /* s_y is rounded to fp16, so allow its rounding (2^-11 relative) on the m term */
    CHECK(fabs((double)s - ref) <= 2e-3 * mag, "q4_1 dot %g vs dequantized %g", (double)s, ref);

    /* rms_norm: x = 3,4 -> mean 12.5 */
    const float rx[2] = {3.0f, 4.0f}, rw[2] = {1.0f, 2.0f};
    float ry[2];
    S->rms_norm(ry, rx, rw, 2, 0.0f);
    CHECK(fabsf(ry[0] - 3.0f / sqrtf(12.5f)) < 1e-6f && fabsf(ry[1] - 8.0f / sqrtf(12.5f)) < 1e-6f,
          "rms_norm %g %g", (double)ry[0], (double)ry[1]);
    /* softmax with a masked entry */
    float sm[3] = {1.0f, -INFINITY, 1.0f};
    S->softmax(sm, 3);
    CHECK(sm[0] == 0.5f && sm[1] == 0.0f && sm[2] == 0.5f, "softmax %g %g %g", (double)sm[0],
          (double)sm[1], (double)sm[2]);
    float sw;
    const float g = 1.0f, u = 2.0f;
    S->swiglu(&sw, &g, &u, 1);
    CHECK(fabsf(sw - 2.0f / (1.0f + expf(-1.0f))) < 1e-7f, "swiglu %g", (double)sw);
    /* the fused attention's steps: exp_sum raises the running max and returns the chunk's sum */
    float ex[3] = {2.0f, 4.0f, 1.0f}, em = 1.0f;
    const float es = S->exp_sum(ex, 3, 0.5f, &em);
    CHECK(em == 2.0f && fabsf(ex[0] - expf(-1.0f)) < 2e-7f && fabsf(ex[1] - 1.0f) < 2e-7f &&
          fabsf(ex[2] - expf(-1.5f)) < 2e-7f && fabsf(es - (ex[0] + ex[1] + ex[2])) < 1e-6f,
          "exp_sum %g %g %g sum %g max %g", (double)ex[0], (double)ex[1], (double)ex[2], (double)es,
          (double)em);
    em = 9.0f;   /* a larger running max stays */
    ex[0] = 1.0f;
    S->exp_sum(ex, 1, 1.0f, &em);
    CHECK(em == 9.0f && fabsf(ex[0] - expf(-8.0f)) < 1e-9f, "exp_sum max %g %g", (double)em, (double)ex[0]);
    /* two heads, two value rows of 3: y[j] += p[j][0] x0 + p[j][1] x1 */
    const lc_fp16 vx[6] = {lc_fp32_to_fp16(1.0f), lc_fp32_to_fp16(2.0f), lc_fp32_to_fp16(-1.0f),
                           lc_fp32_to_fp16(0.5f), lc_fp32_to_fp16(0.0f), lc_fp32_to_fp16(4.0f)};
    float y0[3] = {1.0f, 1.0f, 1.0f}, y1[3] = {0.0f, 0.0f, 0.0f};
    const float p0[2] = {2.0f, 4.0f}, p1[2] = {-1.0f, 1.0f};
    float *ys[2] = {y0, y1};
    const float *ps[2] = {p0, p1};
    S->mad_f16_rows(ys, 2, ps, vx, 3, 2, 3);
    CHECK(y0[0] == 5.0f && y0[1] == 5.0f && y0[2] == 15.0f && y1[0] == -0.5f && y1[1] == -2.0f &&
          y1[2] == 5.0f, "mad_f16_rows %g %g %g / %g %g %g", (double)y0[0], (double)y0[1],
          (double)y0[2], (double)y1[0], (double)y1[1], (double)y1[2]);
    /* q.K: the same rows against two queries */
    const float qa[3] = {1.0f, 1.0f, 1.0f}, qb[3] = {2.0f, 0.0f, -1.0f};
    const float *qs[2] = {qa, qb};
    float s0[2], s1[2];
    float *ss[2] = {s0, s1};
    S->qk_f16_rows(ss, 2, qs, vx, 3, 2, 3);
    CHECK(s0[0] == 2.0f && s0[1] == 4.5f && s1[0] == 3.0f && s1[1] == -3.0f,
          "qk_f16_rows %g %g / %g %g", (double)s0[0], (double)s0[1], (double)s1[0], (double)s1[1]);
}


/* ---------------------------------------------------------------- comparisons */

static int close_to(double a, double b, double mag, double rel)
{
    return fabs(a - b) <= rel * mag + 1e-35;
}

static const int block_counts[] = {1, 2, 3, 4, 5, 7, 8, 15, 16, 17, 33, 64, 129};
#define N_COUNTS ((int)(sizeof block_counts / sizeof block_counts[0]))
#define MAX_NB 129
#define MAX_ROWS 13
#define MAX_COLS 130 /* > 2 column chunks of the AVX-512 GEMM */

static void make_weights(int type, void *w, int nb, int edge)
{
    if (type == LC_TYPE_Q4_1)
        make_q4_1(w, nb, edge);
    else if (type == LC_TYPE_Q4_0)
        make_q4_0(w, nb, edge);
    else
        make_q8_0w(w, nb, edge);
}

/* bit-for-bit equality (NaN payloads included: huge edge scales can overflow) */
static int same_bits(float a, float b)
{
    return memcmp(&a, &b, sizeof a) == 0;
}

static void check_quantized(const struct lc_kernels *S, const struct lc_kernels *K, int type)
{
    const struct lc_type_traits *tt = lc_type_traits(type);
    const int at = tt->vec_dot_type;
    const size_t wsz = tt->type_size, asz = lc_type_traits(at)->type_size;
    uint8_t *w = malloc(MAX_ROWS * MAX_NB * wsz);
    uint8_t *a = malloc(MAX_COLS * MAX_NB * asz);
    uint8_t *a2 = malloc(MAX_NB * asz);
    float *xf = malloc(1025 * 32 * sizeof(float)); /* MAX_NB blocks, and the GEMM's 1025 */
    float *out = malloc(MAX_ROWS * MAX_COLS * 2 * sizeof(float));
    const int do_dot = K->vec_dot[type] != S->vec_dot[type];
    const int do_q = K->quantize_row[at] != S->quantize_row[at];
    const int do_gemm = K->gemm[type] != NULL;
    int n_dots = 0;

    for (int ci = 0; ci < N_COUNTS; ci++) {
        const int nb = block_counts[ci], n = nb * 32;
        for (int edge = 0; edge < EDGE_COUNT; edge++) {
            make_weights(type, w, nb, edge);
            make_acts(xf, n, edge);
            S->quantize_row[at](xf, a, n);
            if (do_q) {
                memset(a2, 0x5A, (size_t)nb * asz);
                K->quantize_row[at](xf, a2, n);
                CHECK(memcmp(a, a2, (size_t)nb * asz) == 0, "%s quantize_row %s: %d blocks, %s",
                      K->isa, lc_type_name(at), nb, edge_names[edge]);
            }
            if (!do_dot)
                continue;
            float ss = NAN, sk = NAN;
            S->vec_dot[type](n, &ss, w, a);
            K->vec_dot[type](n, &sk, w, a);
            n_dots++;
            CHECK(memcmp(&ss, &sk, sizeof ss) == 0,
                  "%s vec_dot %s: %d blocks, %s: %.9g vs scalar %.9g", K->isa, tt->name, nb,
                  edge_names[edge], (double)sk, (double)ss);
        }
    }

    /* GEMM: several rows and columns; rows and columns strided with padding */
    if (do_gemm) {
        static const int cols[] = {1, 2, 3, 4, 5, 6, 9, 67, 130};
        /* 1024 blocks: the AVX-512 GEMM's full row buffer; 1025: longer (its fallback path) */
        static const int nbs[] = {1, 3, 8, 17, 1024, 1025};
        for (int bi = 0; bi < 6; bi++) {
            const int nb = nbs[bi], n = nb * 32;
            const size_t w_stride = (size_t)nb * wsz + 8, a_stride = (size_t)nb * asz + 4;
            uint8_t *W = calloc(MAX_ROWS, w_stride);
            uint8_t *A = calloc(MAX_COLS, a_stride);
            /* every kind of edge data, in rows and columns (random data in most of them) */
            for (int r = 0; r < MAX_ROWS; r++)
                make_weights(type, W + r * w_stride, nb, r < EDGE_COUNT ? r : EDGE_RANDOM);
            for (int c = 0; c < MAX_COLS; c++) {
                make_acts(xf, n, c < EDGE_COUNT ? (c + 3) % EDGE_COUNT : EDGE_RANDOM);
                S->quantize_row[at](xf, A + c * a_stride, n);
            }
            for (int nr = 1; nr <= MAX_ROWS; nr++)
                for (int cj = 0; cj < 9; cj++) {
                    const int nc = cols[cj];
                    if (nb > 17 && (nc > 9 || nr > 5))
                        continue; /* keep the long rows cheap */
                    const size_t ld = (size_t)nr + 3;
                    /* one column more than written: a tile must not write past the last one */
                    for (size_t i = 0; i < ld * (size_t)(nc + 1); i++)
                        out[i] = -12345.0f;
                    K->gemm[type](n, out, ld, W, w_stride, nr, A, a_stride, nc);
                    for (int c = 0; c < nc; c++) {
                        for (int r = 0; r < nr; r++) {
                            float sk, ss;
                            K->vec_dot[type](n, &sk, W + r * w_stride, A + c * a_stride);
                            S->vec_dot[type](n, &ss, W + r * w_stride, A + c * a_stride);
                            const float g = out[c * ld + r];
                            CHECK(same_bits(g, sk),
                                  "%s gemm %s n=%d %dx%d (r%d,c%d): %.9g vs vec_dot %.9g", K->isa,
                                  tt->name, n, nr, nc, r, c, (double)g, (double)sk);
                            CHECK(same_bits(g, ss), "%s gemm %s vs scalar: %.9g vs %.9g", K->isa,
                                  tt->name, (double)g, (double)ss);
                        }
                        for (size_t r = (size_t)nr; r < ld; r++)
                            CHECK(out[c * ld + r] == -12345.0f, "%s gemm %s wrote padding", K->isa,
                                  tt->name);
                    }
                    for (size_t i = ld * (size_t)nc; i < ld * (size_t)(nc + 1); i++)
                        CHECK(out[i] == -12345.0f, "%s gemm %s %dx%d wrote past the last column",
                              K->isa, tt->name, nr, nc);
                    if (!K->gemv[type] || cj > 0)
                        continue;
                    /* GEMV (decode): every column as its own product, the same bits */
                    for (int c = 0; c < 5; c++) {
                        for (int r = 0; r <= nr; r++)
                            out[r] = -12345.0f;
                        K->gemv[type](n, out, W, w_stride, nr, A + c * a_stride);
                        for (int r = 0; r < nr; r++) {
                            float ss;
                            S->vec_dot[type](n, &ss, W + r * w_stride, A + c * a_stride);
                            CHECK(same_bits(out[r], ss),
                                  "%s gemv %s n=%d nr=%d (r%d,c%d): %.9g vs %.9g", K->isa,
                                  tt->name, n, nr, r, c, (double)out[r], (double)ss);
                        }
                        CHECK(out[nr] == -12345.0f, "%s gemv %s wrote past the rows", K->isa,
                              tt->name);
                    }
                }
            free(W);
            free(A);
        }
    }
    fprintf(stderr, "  %s %s: dot %s (%d cases), quantize %s %s, gemm %s\n", K->isa, tt->name,
            do_dot ? "compared" : "scalar", n_dots, lc_type_name(at), do_q ? "compared" : "scalar",
            do_gemm ? "compared" : "none");
    free(w);
    free(a);
    free(a2);
    free(xf);
    free(out);
}

/*
 * The types of issue 13 (Q5_0, Q5_1, IQ4_NL, Q2_K, Q3_K, Q4_K, Q5_K, IQ4_XS).  Random bytes are
 * valid blocks of every one of them, so a block is random bits with its fp16 scales set per edge
 * case: 0 random in [-1, 1], 1 zero, 2 fp16 max (65504), 3 the smallest subnormal, 4 all quant
 * bits set, 5 all quant bits clear.  Checks:
 *  - scalar vec_dot against the plain definition, sum(to_float(w) * dequantized activations) in
 *    double (so the bit layouts are the dequantizers', which follow ggml's reference), over odd
 *    lengths;
 *  - an ISA's vec_dot / gemm, when it has its own, bit for bit against scalar.c's;
 *  - the IQ4_NL gemm (tinyBLAS's order) against the same definition.
 */
struct newtype {
    int type;
    int d_off[2]; /* byte offsets of the fp16 scales in a block (-1: none) */
};
static const struct newtype new_types[] = {
    {LC_TYPE_Q5_0, {0, -1}},   {LC_TYPE_Q5_1, {0, 2}},  {LC_TYPE_IQ4_NL, {0, -1}},
    {LC_TYPE_Q2_K, {80, 82}},  {LC_TYPE_Q3_K, {108, -1}}, {LC_TYPE_Q4_K, {0, 2}},
    {LC_TYPE_Q5_K, {0, 2}},    {LC_TYPE_IQ4_XS, {0, -1}}, {LC_TYPE_Q6_K, {208, -1}},
};
#define NEW_EDGES 6

static void make_new_block(const struct newtype *nt, uint8_t *b, size_t sz, int edge)
{
    for (size_t i = 0; i < sz; i++)
        b[i] = edge == 4 ? 0xFF : edge == 5 ? 0x00 : (uint8_t)rnd();
    for (int k = 0; k < 2; k++) {
        if (nt->d_off[k] < 0)
            continue;
        lc_fp16 h = edge == 1 ? 0 : edge == 2 ? 0x7BFF : edge == 3 ? 0x0001
                  : lc_fp32_to_fp16(frand(-1.0f, 1.0f));
        memcpy(b + nt->d_off[k], &h, sizeof h);
    }
    if (nt->type == LC_TYPE_IQ4_XS && edge == 4) { /* scales_h all ones is ls = 63: keep it */
    }
}

/* dequantized activations of an activation row (Q8_0, Q8_1, Q8_K) */
static void deq_act(int at, const void *a, double *y, int n)
{
    if (at == LC_TYPE_Q8_K) {
        const lc_block_q8_K *b = a;
        for (int i = 0; i < n; i++)
            y[i] = (double)b[i / 256].d * b[i / 256].qs[i % 256];
    } else if (at == LC_TYPE_Q8_1) {
        const lc_block_q8_1 *b = a;
        for (int i = 0; i < n; i++)
            y[i] = (double)lc_fp16_to_fp32(b[i / 32].d) * b[i / 32].qs[i % 32];
    } else {
        const lc_block_q8_0 *b = a;
        for (int i = 0; i < n; i++)
            y[i] = (double)lc_fp16_to_fp32(b[i / 32].d) * b[i / 32].qs[i % 32];
    }
}

/*
 * The operands of check_new_gemm / check_new_gemv: mr weight rows of nb blocks of nt's type
 * (every edge kind of make_new_block among them) and mc activation rows (the edge kinds of
 * make_acts, quantized by S), each row padded (8 and 4 bytes) so that strides are not sizes.
 * *W and *A are calloc'd (the caller frees them; mr_alloc >= mr rows for W).
 */
static void new_operands(const struct lc_kernels *S, const struct newtype *nt, int nb, int mr,
                         int mr_alloc, int mc, uint8_t **W, size_t *w_stride, uint8_t **A,
                         size_t *a_stride)
{
    const struct lc_type_traits *tt = lc_type_traits(nt->type);
    const int at = tt->vec_dot_type, qk = tt->blck_size, n = nb * qk;
    const size_t wsz = tt->type_size, asz = lc_type_traits(at)->type_size;
    *w_stride = (size_t)nb * wsz + 8;
    *a_stride = (size_t)nb * (size_t)(qk / lc_type_traits(at)->blck_size) * asz + 4; /* tight_copy: - 4 */
    *W = calloc((size_t)mr_alloc, *w_stride);
    *A = calloc((size_t)mc, *a_stride);
    float *xf = malloc((size_t)n * sizeof(float));
    for (int r = 0; r < mr; r++)
        for (int b = 0; b < nb; b++)
            make_new_block(nt, *W + r * *w_stride + (size_t)b * wsz, wsz, r < NEW_EDGES ? r : 0);
    for (int c = 0; c < mc; c++) {
        make_acts(xf, n, c < EDGE_COUNT ? (c + 3) % EDGE_COUNT : EDGE_RANDOM);
        S->quantize_row[at](xf, *A + c * *a_stride, n);
    }
    free(xf);
}

/*
 * rows rows of row_bytes each, stride bytes apart at src, copied into a malloc'd buffer that
 * ends with the last row's last byte (the caller frees it): a kernel reading past the last
 * block of the last row is then an ASan error, which new_operands' padding and spare rows hide.
 */
static uint8_t *tight_copy(const uint8_t *src, size_t stride, int rows, size_t row_bytes)
{
    const size_t bytes = (size_t)(rows - 1) * stride + row_bytes;
    uint8_t *t = malloc(bytes);
    if (t)
        memcpy(t, src, bytes);
    return t;
}

/*
 * An ISA's own GEMM of a new type over several rows and columns (tiles and their tails, rows
 * and columns strided with padding, every edge kind among them): each output bit for bit
 * scalar.c's batch order (its gemm for IQ4_NL, vec_dot for the others), nothing written
 * outside.  Returns the number of outputs compared.
 */
static long check_new_gemm(const struct lc_kernels *S, const struct lc_kernels *K,
                           const struct newtype *nt)
{
    const struct lc_type_traits *tt = lc_type_traits(nt->type);
    const int qk = tt->blck_size;
    static const int nbs[] = {1, 3, 8};
    /* 16 and more rows: AVX-512's IQ4_XS and Q2_K GEMMs take whole groups of 16 (the rest by
     * tiles); 8 and 13 columns: their 8-column tiles and the 4, 2, 1 tails */
    static const int rows[] = {1, 2, 3, 4, 5, 7, 16, 17, 35};
    static const int cols[] = {1, 2, 3, 4, 5, 6, 9, 8, 13};
    enum { MR = 35, MC = 13 };
    long compared = 0;
    for (int bi = 0; bi < 3; bi++) {
        const int nb = nbs[bi], n = nb * qk;
        uint8_t *W, *A;
        size_t w_stride, a_stride;
        new_operands(S, nt, nb, MR, MR, MC, &W, &w_stride, &A, &a_stride);
        float out[(MR + 3) * (MC + 1)];
        for (int ri = 0; ri < (int)(sizeof rows / sizeof *rows); ri++)
            for (int cj = 0; cj < (int)(sizeof cols / sizeof *cols); cj++) {
                const int nr = rows[ri], nc = cols[cj];
                const size_t ld = (size_t)nr + 3;
                for (size_t i = 0; i < ld * (size_t)(nc + 1); i++)
                    out[i] = -12345.0f;
                uint8_t *Wt = tight_copy(W, w_stride, nr, (size_t)nb * tt->type_size);
                uint8_t *At = tight_copy(A, a_stride, nc, a_stride - 4);
                K->gemm[nt->type](n, out, ld, Wt, w_stride, nr, At, a_stride, nc);
                free(Wt);
                free(At);
                for (int c = 0; c < nc; c++) {
                    for (int r = 0; r < nr; r++) {
                        float ss = NAN;
                        if (S->gemm[nt->type])
                            S->gemm[nt->type](n, &ss, 1, W + r * w_stride, w_stride, 1,
                                              A + c * a_stride, a_stride, 1);
                        else
                            S->vec_dot[nt->type](n, &ss, W + r * w_stride, A + c * a_stride);
                        CHECK(same_bits(out[c * ld + r], ss),
                              "%s gemm %s n=%d %dx%d (r%d,c%d): %.9g vs scalar %.9g", K->isa,
                              tt->name, n, nr, nc, r, c, (double)out[c * ld + r], (double)ss);
                        compared++;
                    }
                    for (size_t r = (size_t)nr; r < ld; r++)
                        CHECK(out[c * ld + r] == -12345.0f, "%s gemm %s wrote padding", K->isa,
                              tt->name);
                }
                for (size_t i = ld * (size_t)nc; i < ld * (size_t)(nc + 1); i++)
                    CHECK(out[i] == -12345.0f, "%s gemm %s %dx%d wrote past the last column",
                          K->isa, tt->name, nr, nc);
            }
        free(W);
        free(A);
    }
    return compared;
}

/*
 * recode (kernels.h): the Q8_0 / Q6_K blocks written for Q5_0, IQ4_NL and Q3_K blocks (every
 * edge kind of make_new_block, 0xFF and 0x00 bytes among them) hold the same weights, float
 * for float, as the type's dequantizer gives; K's bytes equal the scalar reference's.
 */
static void check_recode(const struct lc_kernels *S, const struct lc_kernels *K)
{
    static const int types[] = {LC_TYPE_Q5_0, LC_TYPE_IQ4_NL, LC_TYPE_Q3_K};
    enum { NB = 3, QMAX = 256 };
    for (int ti = 0; ti < 3; ti++) {
        const int type = types[ti], to = lc_recoded_type(type);
        const struct newtype *nt = NULL;
        for (size_t j = 0; j < sizeof new_types / sizeof new_types[0]; j++)
            if (new_types[j].type == type)
                nt = &new_types[j];
        const struct lc_type_traits *tt = lc_type_traits(type), *tto = lc_type_traits(to);
        CHECK(S->recode[type] && K->recode[type] && nt, "%s: no recode", tt->name);
        if (!S->recode[type] || !K->recode[type] || !nt)
            continue;
        const int qk = tt->blck_size, nbo = NB * qk / tto->blck_size;
        uint8_t x[NB * 112], ys[NB * 272 + 64], yk[sizeof ys];
        float a[NB * QMAX], b[NB * QMAX];
        int compared = 0;
        for (int rep = 0; rep < 50; rep++) {
            for (int i = 0; i < NB; i++)
                make_new_block(nt, x + (size_t)i * tt->type_size, tt->type_size,
                               rep < NEW_EDGES ? rep : 0);
            memset(ys, 0x5A, sizeof ys);
            memset(yk, 0x5A, sizeof yk);
            S->recode[type](x, ys, NB);
            K->recode[type](x, yk, NB);
            CHECK(memcmp(ys, yk, sizeof ys) == 0, "%s recode %s: bytes differ from scalar's",
                  K->isa, tt->name);
            CHECK(ys[(size_t)nbo * tto->type_size] == 0x5A, "recode %s wrote past its blocks",
                  tt->name);
            tt->to_float(x, a, NB * qk);
            tto->to_float(ys, b, NB * qk);
            for (int j = 0; j < NB * qk; j++, compared++)
                CHECK(same_bits(a[j], b[j]) || (isnan(a[j]) && isnan(b[j])),
                      "recode %s -> %s weight %d: %.9g, dequantized %.9g", tt->name, tto->name, j,
                      (double)b[j], (double)a[j]);
        }
        fprintf(stderr, "  %s recode %s -> %s: %d weights compared\n", K->isa, tt->name,
                tto->name, compared);
    }
}

/*
 * An ISA's own decode GEMV of a new type (Q5_0, IQ4_NL): rows 1..9 (4-row groups and their
 * tails, strided with padding, every edge kind among them) against one activation row, each
 * output bit for bit scalar.c's vec_dot, nothing written past the rows.  Block counts 1 and 2
 * (IQ4_NL's odd tail and pair), 3, 7, 33 and 64, 8 activation rows: an odd tail added with the
 * wrong rounding (fmaf against a multiply and an add) shows in a few outputs only.  Returns the
 * number of outputs compared.
 */
static long check_new_gemv(const struct lc_kernels *S, const struct lc_kernels *K,
                           const struct newtype *nt)
{
    const struct lc_type_traits *tt = lc_type_traits(nt->type);
    const int qk = tt->blck_size;
    static const int nbs[] = {1, 2, 3, 7, 33, 64};
    enum { MR = 9, MC = 8 };
    long compared = 0;
    for (int bi = 0; bi < (int)(sizeof nbs / sizeof *nbs); bi++) {
        const int nb = nbs[bi], n = nb * qk;
        uint8_t *W, *A;
        size_t w_stride, a_stride;
        /* rows allocated past MR: the prefetch may look past the rows (it is given tight
         * copies, where only prefetches, which ASan does not check, may go past the end) */
        new_operands(S, nt, nb, MR, MR + 12, MC, &W, &w_stride, &A, &a_stride);
        for (int nr = 1; nr <= MR; nr++)
            for (int c = 0; c < MC; c++) {
                float out[MR + 1];
                for (int r = 0; r <= MR; r++)
                    out[r] = -12345.0f;
                uint8_t *Wt = tight_copy(W, w_stride, nr, (size_t)nb * tt->type_size);
                uint8_t *At = tight_copy(A + c * a_stride, a_stride, 1, a_stride - 4);
                K->gemv[nt->type](n, out, Wt, w_stride, nr, At);
                free(Wt);
                free(At);
                for (int r = 0; r < nr; r++, compared++) {
                    float ss = NAN;
                    S->vec_dot[nt->type](n, &ss, W + r * w_stride, A + c * a_stride);
                    CHECK(same_bits(out[r], ss), "%s gemv %s n=%d nr=%d (r%d,c%d): %.9g vs %.9g",
                          K->isa, tt->name, n, nr, r, c, (double)out[r], (double)ss);
                }
                CHECK(out[nr] == -12345.0f, "%s gemv %s wrote past the rows", K->isa, tt->name);
            }
        free(W);
        free(A);
    }
    return compared;
}

static void check_new_types(const struct lc_kernels *S, const struct lc_kernels *K)
{
    static const int nbs[] = {1, 2, 3, 5, 7, 16, 17, 33};
    for (size_t ti = 0; ti < sizeof new_types / sizeof new_types[0]; ti++) {
        const struct newtype *nt = &new_types[ti];
        const struct lc_type_traits *tt = lc_type_traits(nt->type);
        const int at = tt->vec_dot_type, qk = tt->blck_size;
        const size_t wsz = tt->type_size, asz = lc_type_traits(at)->type_size;
        const int apb = qk / lc_type_traits(at)->blck_size; /* activation blocks per weight block */
        const int own_dot = K->vec_dot[nt->type] != S->vec_dot[nt->type];
        const int own_gemm = K->gemm[nt->type] && K->gemm[nt->type] != S->gemm[nt->type];
        int cases = 0;
        for (int ci = 0; ci < 8; ci++) {
            const int nb = nbs[ci], n = nb * qk;
            uint8_t *w = malloc((size_t)nb * wsz);
            uint8_t *a = malloc((size_t)nb * apb * asz);
            float *xf = malloc((size_t)n * sizeof(float));
            float *wf = malloc((size_t)n * sizeof(float));
            double *yd = malloc((size_t)n * sizeof(double));
            for (int edge = 0; edge < NEW_EDGES; edge++) {
                for (int b = 0; b < nb; b++)
                    make_new_block(nt, w + (size_t)b * wsz, wsz, edge);
                make_acts(xf, n, edge % EDGE_COUNT);
                S->quantize_row[at](xf, a, n);
                tt->to_float(w, wf, n);
                deq_act(at, a, yd, n);
                double want = 0.0, mag = 0.0;
                for (int i = 0; i < n; i++) {
                    want += (double)wf[i] * yd[i];
                    mag += fabs((double)wf[i] * yd[i]);
                }
                float ss = NAN;
                S->vec_dot[nt->type](n, &ss, w, a);
                cases++;
                /* Q5_1: s = dy * sum(q) is stored as fp16, so m * s is 2^-11 off at most */
                const double rel = nt->type == LC_TYPE_Q5_1 ? 2e-3 : 2e-5;
                if (isfinite(want) && isfinite(mag) && mag < 1e30)
                    CHECK(close_to(ss, want, mag, rel),
                          "scalar vec_dot %s: %d blocks, edge %d: %.9g, definition %.9g",
                          tt->name, nb, edge, (double)ss, want);
                if (own_dot) {
                    float sk = NAN;
                    K->vec_dot[nt->type](n, &sk, w, a);
                    CHECK(same_bits(ss, sk), "%s vec_dot %s: %d blocks, edge %d: %.9g vs scalar %.9g",
                          K->isa, tt->name, nb, edge, (double)sk, (double)ss);
                }
                if (S->gemm[nt->type]) { /* the batch order (IQ4_NL): one row, one column */
                    float g = NAN;
                    S->gemm[nt->type](n, &g, 1, w, wsz * (size_t)nb, 1, a, asz * (size_t)nb, 1);
                    if (isfinite(want) && isfinite(mag) && mag < 1e30)
                        CHECK(close_to(g, want, mag, rel), "scalar gemm %s: %d blocks: %.9g vs %.9g",
                              tt->name, nb, (double)g, want);
                    /* one block: vec_dot's odd tail is one rounding of d * (integer sum) */
                    if (nb == 1 && isfinite(ss)) {
                        int isum = 0;
                        const lc_block_iq4_nl *x1 = (const void *)w;
                        const lc_block_q8_0 *y1 = (const void *)a;
                        for (int j = 0; j < 16; j++)
                            isum += lc_kvalues_iq4nl[x1->qs[j] & 15] * y1->qs[j] +
                                    lc_kvalues_iq4nl[x1->qs[j] >> 4] * y1->qs[j + 16];
                        const float dd = lc_fp16_to_fp32(y1->d) * lc_fp16_to_fp32(x1->d);
                        CHECK(same_bits(ss, 0.0f + dd * (float)isum), "vec_dot %s 1 block: %.9g vs %.9g",
                              tt->name, (double)ss, (double)(dd * (float)isum));
                    }
                    if (own_gemm) {
                        float gk = NAN;
                        K->gemm[nt->type](n, &gk, 1, w, wsz * (size_t)nb, 1, a, asz * (size_t)nb, 1);
                        CHECK(same_bits(g, gk), "%s gemm %s: %.9g vs scalar %.9g", K->isa,
                              tt->name, (double)gk, (double)g);
                    }
                }
            }
            free(w);
            free(a);
            free(xf);
            free(wf);
            free(yd);
        }
        long tiles = 0;
        if (own_gemm)
            tiles = check_new_gemm(S, K, nt);
        if (K->gemv[nt->type] && K->gemv[nt->type] != S->gemv[nt->type])
            fprintf(stderr, "  %s %s: gemv, %ld outputs compared\n", K->isa, tt->name,
                    check_new_gemv(S, K, nt));
        fprintf(stderr, "  %s %s: %d cases, dot %s, gemm %s (%ld tile outputs)\n", K->isa,
                tt->name, cases, own_dot ? "compared" : "scalar", own_gemm ? "compared" : "scalar",
                tiles);
    }
}

/* Q6_K super-blocks: edge 1 all zero quants, 2 all ones and scale -128, 3 scale 127 */
static void make_q6_K(lc_block_q6_K *w, int nb, int edge)
{
    for (int b = 0; b < nb; b++) {
        for (int j = 0; j < LC_QK_K / 2; j++)
            w[b].ql[j] = edge == 1 ? 0 : edge == 2 ? 0xFF : (uint8_t)rnd();
        for (int j = 0; j < LC_QK_K / 4; j++)
            w[b].qh[j] = edge == 1 ? 0 : edge == 2 ? 0xFF : (uint8_t)rnd();
        for (int j = 0; j < LC_QK_K / 16; j++)
            w[b].scales[j] = (int8_t)(edge == 2 ? -128 : edge == 3 ? 127 : (int)(rnd() % 256) - 128);
        w[b].d = lc_fp32_to_fp16(frand(-0.01f, 0.01f));
    }
}

/*
 * Q6_K . Q8_K: the ISA's kernel equals scalar.c's bit for bit; scalar.c's (ggml's x86 order)
 * agrees with the generic reference lc_vec_dot_q6_K_q8_K_ref up to float summation order.
 */
static void check_q6_K(const struct lc_kernels *S, const struct lc_kernels *K)
{
    enum { MAXB = 9 };
    lc_block_q6_K *w = malloc(MAXB * sizeof(*w));
    lc_block_q8_K *a = malloc(MAXB * sizeof(*a));
    float *xf = malloc(MAXB * LC_QK_K * sizeof(float));
    int n_cases = 0;
    for (int nb = 1; nb <= MAXB; nb += 2)
        for (int edge = 0; edge < 4; edge++) {
            const int n = nb * LC_QK_K;
            make_q6_K(w, nb, edge);
            for (int i = 0; i < n; i++)
                xf[i] = edge == 1 ? -frand(0, 2) : frand(-2, 2);
            S->quantize_row[LC_TYPE_Q8_K](xf, a, n);
            float ss = NAN, sk = NAN, sr = NAN;
            S->vec_dot[LC_TYPE_Q6_K](n, &ss, w, a);
            lc_vec_dot_q6_K_q8_K_ref(n, &sr, w, a);
            double mag = 0;
            for (int b = 0; b < nb; b++)
                for (int j = 0; j < LC_QK_K; j++) {
                    const int h = j / 128, l = j % 128, v = l / 32, e = l % 32;
                    const int byte = w[b].ql[64 * h + 32 * (v & 1) + e];
                    const int q = ((v < 2 ? byte & 15 : byte >> 4) |
                                   (((w[b].qh[32 * h + e] >> (2 * v)) & 3) << 4)) - 32;
                    mag += fabs((double)lc_fp16_to_fp32(w[b].d) * (double)a[b].d *
                                w[b].scales[j / 16] * q * a[b].qs[j]);
                }
            CHECK(close_to(ss, sr, mag, 1e-5), "q6_K scalar vs generic ref: %d blocks: %.9g vs %.9g",
                  nb, (double)ss, (double)sr);
            if (K->vec_dot[LC_TYPE_Q6_K] != S->vec_dot[LC_TYPE_Q6_K]) {
                K->vec_dot[LC_TYPE_Q6_K](n, &sk, w, a);
                CHECK(memcmp(&ss, &sk, sizeof ss) == 0, "%s vec_dot q6_K: %d blocks, edge %d: %.9g vs scalar %.9g",
                      K->isa, nb, edge, (double)sk, (double)ss);
                n_cases++;
            }
        }
    fprintf(stderr, "  %s q6_K: %d cases compared\n", K->isa, n_cases);
    free(w);
    free(a);
    free(xf);
}

/*
 * Activation quantizers on many blocks: a 1/d instead of 127/amax scale, or another rounding of
 * ties, changes about one quant in a few thousand, so thousands of blocks are needed to see it.
 */
static void check_quantize_stress(const struct lc_kernels *S, const struct lc_kernels *K)
{
    enum { NB = 4096, N = NB * 32 };
    static const int types[] = {LC_TYPE_Q8_0, LC_TYPE_Q8_1, LC_TYPE_Q8_K};
    float *x = malloc(N * sizeof(float));
    const size_t max_sz = lc_row_size(LC_TYPE_Q8_K, N) > NB * sizeof(lc_block_q8_1)
                              ? lc_row_size(LC_TYPE_Q8_K, N)
                              : NB * sizeof(lc_block_q8_1);
    uint8_t *a = malloc(max_sz), *b = malloc(max_sz);
    for (int i = 0; i < N; i++) {
        const float range = (float)(1 + (i / 32) % 13) * 0.37f;
        x[i] = frand(-range, range);
    }
    for (int blk = 0; blk < NB; blk += 3) {
        /* near-ties: x = (k + 1/2) * amax / 127 lands within an ulp of a half-integer after
         * scaling, where 127/amax and 1/(amax/127) round differently */
        float *xb = x + blk * 32;
        const float amax = (blk % 2) ? 127.0f : frand(0.01f, 50.0f);
        xb[0] = amax;
        for (int j = 1; j < 32; j++)
            xb[j] = ((float)((int)(rnd() % 254) - 127) + 0.5f) * amax / 127.0f;
    }
    /* Q8_K's super-blocks of 256: all zero but for one -0.0; |max| tied between a negative and
     * a positive value (the first one sets the sign of the scale), both orders, in two vectors
     * of 16 and in one; and one zero block */
    for (int j = 0; j < 256; j++) {
        x[5 * 256 + j] = 0.0f;
        x[11 * 256 + j] = 0.0f;
    }
    x[5 * 256 + 77] = -0.0f;
    x[7 * 256 + 10] = -300.0f;
    x[7 * 256 + 200] = 300.0f;
    x[9 * 256 + 3] = 250.0f;
    x[9 * 256 + 100] = -250.0f;
    x[15 * 256 + 33] = -1000.0f; /* the same 16 floats */
    x[15 * 256 + 40] = 1000.0f;
    /* near-ties at Q8_K's scale: the whole super-block of 256 takes its max from x[0], so the
     * 32-float near-ties above are no longer ties there (an FMA for iscale * x + magic changed
     * 691 of 4096 such blocks, and passed unseen before these) */
    for (int sb = 40; sb < 72; sb++) {
        float *xb = x + sb * 256;
        const float amax = (sb % 2) ? 127.0f : frand(0.01f, 50.0f);
        xb[0] = (sb % 4 < 2) ? amax : -amax;
        for (int j = 1; j < 256; j++)
            xb[j] = ((float)((int)(rnd() % 254) - 127) + 0.5f) * amax / 127.0f;
    }
    /* Q8_K only: |max| so small that -127 / max overflows to -inf (+inf): the reference's
     * int8 cast wraps nearest_int's -4194304 to 0 (AVX2's saturating pack gave -128); one sign
     * per block, no zeros, as the reference asserts on +inf and NaN products.  (Not for Q8_0 /
     * Q8_1: there 1 / d overflows too, and ggml's scalar reference converts inf to int8, which
     * C leaves undefined, while its SIMD quantizers -- llama.cpp's actual path -- give -128.) */
    float *xk = malloc(N * sizeof(float));
    memcpy(xk, x, N * sizeof(float));
    for (int j = 0; j < 256; j++) {
        xk[13 * 256 + j] = 2e-37f * (float)(j % 7 + 1) / 7.0f;
        xk[14 * 256 + j] = -1e-39f * (float)(j % 5 + 1); /* subnormal */
    }
    for (int t = 0; t < 3; t++) {
        const int at = types[t];
        if (K->quantize_row[at] == S->quantize_row[at])
            continue;
        const size_t sz = lc_row_size(at, N);
        memset(b, 0x5A, sz);
        const float *xt = at == LC_TYPE_Q8_K ? xk : x;
        S->quantize_row[at](xt, a, N);
        K->quantize_row[at](xt, b, N);
        int bad = 0;
        for (size_t i = 0; i < sz; i++)
            bad += a[i] != b[i];
        CHECK(bad == 0, "%s quantize_row %s, %d blocks: %d bytes differ", K->isa,
              lc_type_name(at), NB, bad);
    }
    free(xk);
    free(x);
    free(a);
    free(b);
}

/*
 * The fused attention's kernels (kernels.h): exp_sum and mad_f16_rows / mad_f32_rows have the
 * scalar reference's bits on every ISA; qk_f16_rows sums in its own order, within float rounding
 * of a double sum.  Head sizes with and without tails, 1 to 9 heads, odd row counts.
 */
static void check_attn(const struct lc_kernels *S, const struct lc_kernels *K)
{
    static const int hds[] = {64, 128, 80, 40, 8};
    static const int nrs[] = {1, 7, 16, 37, 128};
    enum { NY = 9, NR = 128, HD = 128, STRIDE = 4 * HD + 8 };
    lc_fp16 *x16 = malloc((size_t)NR * STRIDE * sizeof(lc_fp16));
    float *x32 = malloc((size_t)NR * STRIDE * sizeof(float));
    static float q[NY][HD], p[NY][NR], y1[NY][HD], y2[NY][HD], s1[NY][NR], s2[NY][NR];
    for (size_t i = 0; i < (size_t)NR * STRIDE; i++) {
        x32[i] = frand(-2.0f, 2.0f);
        x16[i] = lc_fp32_to_fp16(x32[i]);
    }
    for (int j = 0; j < NY; j++) {
        for (int i = 0; i < HD; i++)
            q[j][i] = lc_fp16_to_fp32(lc_fp32_to_fp16(frand(-3.0f, 3.0f)));
        for (int r = 0; r < NR; r++)
            p[j][r] = frand(0.0f, 1.0f);
    }
    float *Y1[NY], *Y2[NY], *S1[NY], *S2[NY];
    const float *P[NY], *Q[NY];
    for (int j = 0; j < NY; j++) {
        Y1[j] = y1[j], Y2[j] = y2[j], S1[j] = s1[j], S2[j] = s2[j], P[j] = p[j], Q[j] = q[j];
    }
    for (size_t ih = 0; ih < sizeof(hds) / sizeof(hds[0]); ih++)
        for (size_t ir = 0; ir < sizeof(nrs) / sizeof(nrs[0]); ir++)
            for (int ny = 1; ny <= NY; ny += 2) {
                const int n = hds[ih], nr = nrs[ir];
                const size_t stride = ir % 2 ? (size_t)n : (size_t)STRIDE; /* packed or strided */
                for (int j = 0; j < ny; j++)
                    for (int i = 0; i < n; i++)
                        y1[j][i] = y2[j][i] = q[j][i] * 0.25f;
                S->mad_f16_rows(Y1, ny, P, x16, stride, nr, n);
                K->mad_f16_rows(Y2, ny, P, x16, stride, nr, n);
                CHECK(!memcmp(y1, y2, sizeof(y1)), "%s mad_f16_rows n=%d nr=%d ny=%d: not the same bits",
                      K->isa, n, nr, ny);
                S->mad_f32_rows(Y1, ny, P, x32, stride, nr, n);
                K->mad_f32_rows(Y2, ny, P, x32, stride, nr, n);
                CHECK(!memcmp(y1, y2, sizeof(y1)), "%s mad_f32_rows n=%d nr=%d ny=%d: not the same bits",
                      K->isa, n, nr, ny);
                S->qk_f16_rows(S1, ny, Q, x16, stride, nr, n);
                K->qk_f16_rows(S2, ny, Q, x16, stride, nr, n);
                int bad = 0;
                for (int j = 0; j < ny; j++)
                    for (int r = 0; r < nr; r++) {
                        double want = 0.0, mag = 0.0;
                        for (int i = 0; i < n; i++) {
                            const double t = (double)lc_fp16_to_fp32(x16[(size_t)r * stride + (size_t)i]) *
                                             (double)q[j][i];
                            want += t;
                            mag += fabs(t);
                        }
                        bad += !close_to(s1[j][r], want, mag, 1e-6) + !close_to(s2[j][r], want, mag, 1e-6);
                    }
                CHECK(!bad, "%s qk_f16_rows n=%d nr=%d ny=%d: %d sums off", K->isa, n, nr, ny, bad);
            }
    /* exp_sum: scores that saturate, underflow, tails of every length, a running max above */
    for (int n = 1; n <= NR; n += n < 40 ? 1 : 29) {
        for (int i = 0; i < n; i++)
            s1[0][i] = s2[0][i] = frand(-1.0f, 1.0f) * (i % 3 ? 300.0f : 20.0f);
        float m1 = n % 2 ? -INFINITY : 50.0f, m2 = m1;
        const float e1 = S->exp_sum(s1[0], n, 0.7f, &m1), e2 = K->exp_sum(s2[0], n, 0.7f, &m2);
        CHECK(m1 == m2 && !memcmp(&e1, &e2, sizeof(e1)) &&
              !memcmp(s1[0], s2[0], (size_t)n * sizeof(float)),
              "%s exp_sum n=%d: not the same bits (max %g %g, sum %.9g %.9g)", K->isa, n,
              (double)m1, (double)m2, (double)e1, (double)e2);
    }
    free(x16);
    free(x32);
}

static void check_float(const struct lc_kernels *S, const struct lc_kernels *K)
{
    static const int lens[] = {1, 3, 7, 8, 15, 16, 17, 31, 32, 33, 48, 63, 64, 65, 100, 128, 172,
                               192, 257, 1000};
    enum { MAXN = 1000 };
    float *x = malloc(MAXN * sizeof(float)), *y = malloc(MAXN * sizeof(float));
    float *w = malloc(MAXN * sizeof(float));
    float *o1 = malloc(MAXN * sizeof(float)), *o2 = malloc(MAXN * sizeof(float));
    float *o3 = malloc(MAXN * sizeof(float));
    lc_fp16 *hx = malloc(MAXN * sizeof(lc_fp16)), *hy = malloc(MAXN * sizeof(lc_fp16));
    lc_fp16 *h1 = malloc(MAXN * sizeof(lc_fp16)), *h2 = malloc(MAXN * sizeof(lc_fp16));
    for (int li = 0; li < (int)(sizeof lens / sizeof lens[0]); li++) {
        const int n = lens[li];
        for (int i = 0; i < n; i++) {
            x[i] = frand(-3, 3);
            y[i] = frand(-3, 3);
            w[i] = frand(0.5f, 1.5f);
            hx[i] = lc_fp32_to_fp16(x[i]);
            hy[i] = lc_fp32_to_fp16(y[i]);
        }
        double mag = 0, magh = 0, ref_f32 = 0, ref_f16 = 0;
        for (int i = 0; i < n; i++) {
            mag += fabs((double)x[i] * (double)y[i]);
            magh += fabs((double)lc_fp16_to_fp32(hx[i]) * (double)lc_fp16_to_fp32(hy[i]));
            ref_f32 += (double)x[i] * (double)y[i];
            ref_f16 += (double)lc_fp16_to_fp32(hx[i]) * (double)lc_fp16_to_fp32(hy[i]);
        }
        /* float dots: llama.cpp's x86 order on every ISA, so equal bit for bit */
        float a, b;
        a = S->dot_f32(x, y, n);
        b = K->dot_f32(x, y, n);
        CHECK(a == b, "%s dot_f32 n=%d: %.9g vs %.9g", K->isa, n, (double)b, (double)a);
        CHECK(close_to(a, ref_f32, mag, 1e-5), "dot_f32 n=%d: %.9g vs double %.9g", n, (double)a,
              ref_f32);
        S->vec_dot[LC_TYPE_F32](n, &a, x, y);
        K->vec_dot[LC_TYPE_F32](n, &b, x, y);
        CHECK(a == b, "%s vec_dot f32 n=%d", K->isa, n);
        a = S->dot_f16(hx, hy, n);
        b = K->dot_f16(hx, hy, n);
        CHECK(a == b, "%s dot_f16 n=%d: %.9g vs %.9g", K->isa, n, (double)b, (double)a);
        CHECK(close_to(a, ref_f16, magh, 1e-5), "dot_f16 n=%d: %.9g vs double %.9g", n, (double)a,
              ref_f16);
        S->vec_dot[LC_TYPE_F16](n, &a, hx, hy);
        K->vec_dot[LC_TYPE_F16](n, &b, hx, hy);
        CHECK(a == b, "%s vec_dot f16 n=%d", K->isa, n);

        /* conversions: bytes */
        S->quantize_row[LC_TYPE_F16](x, h1, n);
        K->quantize_row[LC_TYPE_F16](x, h2, n);
        CHECK(memcmp(h1, h2, (size_t)n * 2) == 0, "%s quantize_row f16 n=%d", K->isa, n);
        S->quantize_row[LC_TYPE_BF16](x, h1, n);
        K->quantize_row[LC_TYPE_BF16](x, h2, n);
        CHECK(memcmp(h1, h2, (size_t)n * 2) == 0, "%s quantize_row bf16 n=%d", K->isa, n);

        S->rms_norm(o1, x, w, n, 1e-5f);
        K->rms_norm(o2, x, w, n, 1e-5f);
        int bad = 0;
        for (int i = 0; i < n; i++)
            bad += !(fabsf(o1[i] - o2[i]) <= 2e-6f * fabsf(o1[i]));
        CHECK(!bad, "%s rms_norm n=%d: %d elements differ", K->isa, n, bad);

        for (int i = 0; i < n; i++) {
            o1[i] = o2[i] = x[i] * 10.0f;
            if (i % 5 == 4)
                o1[i] = o2[i] = -INFINITY; /* a causal/padding mask */
        }
        /* softmax and SwiGLU keep ggml's AVX-512 arithmetic on every ISA: the same bits;
         * scores up to +-1000 so that some exps saturate (|n| > 192) and some underflow */
        S->softmax(o1, n);
        K->softmax(o2, n);
        CHECK(!memcmp(o1, o2, (size_t)n * sizeof(float)), "%s softmax n=%d: not the same bits", K->isa, n);
        for (int i = 0; i < n; i++)
            o1[i] = o2[i] = x[i] * (i % 3 ? 1000.0f : 40.0f);
        S->softmax(o1, n);
        K->softmax(o2, n);
        CHECK(!memcmp(o1, o2, (size_t)n * sizeof(float)), "%s softmax (wide) n=%d: not the same bits", K->isa, n);

        S->swiglu(o1, x, y, n);
        K->swiglu(o2, x, y, n);
        CHECK(!memcmp(o1, o2, (size_t)n * sizeof(float)), "%s swiglu n=%d: not the same bits", K->isa, n);
        for (int i = 0; i < n; i++)
            o3[i] = x[i] * (i % 2 ? 300.0f : 90.0f); /* e^-g saturates: silu(g) = 0 or g */
        S->swiglu(o1, o3, y, n);
        K->swiglu(o2, o3, y, n);
        CHECK(!memcmp(o1, o2, (size_t)n * sizeof(float)), "%s swiglu (wide) n=%d: not the same bits", K->isa, n);

        for (int i = 0; i < n; i++)
            o1[i] = o2[i] = y[i];
        S->axpy_f32(o1, 0.37f, x, n);
        K->axpy_f32(o2, 0.37f, x, n);
        bad = 0;
        for (int i = 0; i < n; i++)
            bad += !(fabsf(o1[i] - o2[i]) <= 1e-6f * (fabsf(y[i]) + fabsf(0.37f * x[i])));
        CHECK(!bad, "%s axpy_f32 n=%d: %d elements differ", K->isa, n, bad);
        for (int i = 0; i < n; i++)
            o1[i] = o2[i] = y[i];
        S->axpy_f16(o1, -1.7f, hx, n);
        K->axpy_f16(o2, -1.7f, hx, n);
        bad = 0;
        for (int i = 0; i < n; i++)
            bad += !(fabsf(o1[i] - o2[i]) <= 1e-6f * (fabsf(y[i]) + fabsf(1.7f * x[i])));
        CHECK(!bad, "%s axpy_f16 n=%d: %d elements differ", K->isa, n, bad);
    }
    free(x);
    free(y);
    free(w);
    free(o1);
    free(o2);
    free(o3);
    free(hx);
    free(hy);
    free(h1);
    free(h2);
}

/* ---------------------------------------------------------------- dispatch */

static void check_dispatch(void)
{
    char *err = NULL;
    CHECK(lc_kernels_select("sse9", &err) == -1 && err && strstr(err, "unknown kernel ISA 'sse9'"),
          "unknown ISA error: %s", err ? err : "(none)");
    free(err);
    err = NULL;
    CHECK(lc_kernels_select("scalar", &err) == 0 && !err, "select scalar");
    CHECK(strcmp(lc_kernels()->isa, "scalar") == 0, "scalar active");
    CHECK(strncmp(lc_kernels_built(), "scalar", 6) == 0, "built: %s", lc_kernels_built());
    static const char *const isas[] = {"avx2", "avx512", "neon"};
    for (int i = 0; i < 3; i++) {
        const int built = strstr(lc_kernels_built(), isas[i]) != NULL;
        const int avail = lc_kernels_isa_available(isas[i]);
        err = NULL;
        const int rc = lc_kernels_select(isas[i], &err);
        CHECK(rc == (avail ? 0 : -1), "select %s: %d (available %d)", isas[i], rc, avail);
        /* kernels.h: the x16 entries are never NULL after dispatch (matmul calls them) */
        if (rc == 0)
            for (int t = 0; t < 7; t++) {
                static const int x16_types[] = {LC_TYPE_Q4_0, LC_TYPE_Q4_1, LC_TYPE_Q6_K,
                                                LC_TYPE_Q4_K, LC_TYPE_Q5_K, LC_TYPE_Q5_1,
                                                LC_TYPE_Q8_0};
                CHECK(lc_kernels()->gemv_x16[x16_types[t]] && lc_kernels()->gemm_x16[x16_types[t]],
                      "%s: x16 entries of %s missing", isas[i], lc_type_name(x16_types[t]));
            }
        if (!built)
            CHECK(err && strstr(err, "not built"), "%s not built: %s", isas[i], err ? err : "-");
        else if (!avail)
            CHECK(err && strstr(err, "not supported"), "%s unsupported: %s", isas[i],
                  err ? err : "-");
        free(err);
    }
    CHECK(lc_kernels_select("auto", NULL) == 0, "auto");
    const struct lc_kernels *k = lc_kernels();
    CHECK(k->vec_dot[LC_TYPE_Q4_1] && k->quantize_row[LC_TYPE_Q8_1] && k->rms_norm && k->softmax &&
              k->swiglu && k->dot_f32 && k->dot_f16 && k->axpy_f16 && k->axpy_f32,
          "merged table complete");
    fprintf(stderr, "built: %s; auto picks %s\n", lc_kernels_built(), k->isa);
}

/*
 * The Q4_0 entries in the order of llama.cpp's repacked Q4_0x8 kernels: vec_dot_q4_0x8 of K
 * against the scalar one, and K's gemv/gemm (when present) against the scalar vec_dot_q4_0x8,
 * bit for bit, over every kind of edge data; the scalar reference itself against a direct
 * formula.
 */
static void check_q4_0x8(const struct lc_kernels *S, const struct lc_kernels *K)
{
    static const int nbs[] = {1, 2, 3, 8, 17, 64, 1025};
    static const int cols[] = {1, 3, 4, 5, 67};
    const size_t wsz = sizeof(lc_block_q4_0), asz = sizeof(lc_block_q8_0);
    float *xf = malloc(1025 * 32 * sizeof(float));
    float *out = malloc(16 * 68 * sizeof(float));
    for (int bi = 0; bi < 7; bi++) {
        const int nb = nbs[bi], n = nb * 32;
        const size_t w_stride = (size_t)nb * wsz + 6, a_stride = (size_t)nb * asz + 2;
        uint8_t *W = calloc(MAX_ROWS, w_stride), *A = calloc(67, a_stride);
        for (int r = 0; r < MAX_ROWS; r++)
            make_weights(LC_TYPE_Q4_0, W + r * w_stride, nb, r < EDGE_COUNT ? r : EDGE_RANDOM);
        for (int c = 0; c < 67; c++) {
            make_acts(xf, n, c < EDGE_COUNT ? (c + 5) % EDGE_COUNT : EDGE_RANDOM);
            S->quantize_row[LC_TYPE_Q8_0](xf, A + c * a_stride, n);
        }
        /* the scalar reference: fma(float(isum), dx * dy, acc) from 0, block by block */
        if (K == S || bi < 3) {
            const lc_block_q4_0 *x = (const lc_block_q4_0 *)(const void *)W;
            const lc_block_q8_0 *y = (const lc_block_q8_0 *)(const void *)A;
            float acc = 0.0f, got;
            for (int i = 0; i < nb; i++) {
                int isum = 0;
                for (int j = 0; j < 32; j++) {
                    const int q = j < 16 ? (x[i].qs[j] & 15) : (x[i].qs[j - 16] >> 4);
                    isum += (q - 8) * y[i].qs[j];
                }
                acc = fmaf((float)isum, lc_fp16_to_fp32(x[i].d) * lc_fp16_to_fp32(y[i].d), acc);
            }
            S->vec_dot_q4_0x8(n, &got, W, A);
            CHECK(same_bits(got, acc), "scalar q4_0x8 n=%d: %.9g, formula %.9g", n, (double)got,
                  (double)acc);
        }
        for (int r = 0; r < MAX_ROWS; r++)
            for (int c = 0; c < 5; c++) {
                float sk, ss;
                K->vec_dot_q4_0x8(n, &sk, W + r * w_stride, A + c * a_stride);
                S->vec_dot_q4_0x8(n, &ss, W + r * w_stride, A + c * a_stride);
                CHECK(same_bits(sk, ss), "%s vec_dot_q4_0x8 n=%d (r%d,c%d): %.9g vs %.9g", K->isa,
                      n, r, c, (double)sk, (double)ss);
            }
        for (int nr = 1; nr <= MAX_ROWS; nr++) {
            if (K->gemv_q4_0x8)
                for (int c = 0; c < 3; c++) {
                    for (int r = 0; r <= nr; r++)
                        out[r] = -12345.0f;
                    K->gemv_q4_0x8(n, out, W, w_stride, nr, A + c * a_stride);
                    for (int r = 0; r < nr; r++) {
                        float ss;
                        S->vec_dot_q4_0x8(n, &ss, W + r * w_stride, A + c * a_stride);
                        CHECK(same_bits(out[r], ss), "%s gemv_q4_0x8 n=%d nr=%d r%d: %.9g vs %.9g",
                              K->isa, n, nr, r, (double)out[r], (double)ss);
                    }
                    CHECK(out[nr] == -12345.0f, "%s gemv_q4_0x8 wrote past the rows", K->isa);
                }
            if (K->gemm_q4_0x8)
                for (int cj = 0; cj < 5; cj++) {
                    const int nc = cols[cj];
                    if (nb > 64 && (nc > 4 || nr > 5))
                        continue;
                    const size_t ld = (size_t)nr + 2;
                    for (size_t i = 0; i < ld * (size_t)(nc + 1); i++)
                        out[i] = -12345.0f;
                    K->gemm_q4_0x8(n, out, ld, W, w_stride, nr, A, a_stride, nc);
                    for (int c = 0; c < nc; c++)
                        for (int r = 0; r < nr; r++) {
                            float ss;
                            S->vec_dot_q4_0x8(n, &ss, W + r * w_stride, A + c * a_stride);
                            CHECK(same_bits(out[c * ld + r], ss),
                                  "%s gemm_q4_0x8 n=%d %dx%d (r%d,c%d): %.9g vs %.9g", K->isa, n,
                                  nr, nc, r, c, (double)out[c * ld + r], (double)ss);
                        }
                    for (size_t i = 0; i < ld * (size_t)(nc + 1); i++)
                        if (i % ld >= (size_t)nr || i >= ld * (size_t)nc)
                            CHECK(out[i] == -12345.0f, "%s gemm_q4_0x8 %dx%d wrote outside",
                                  K->isa, nr, nc);
                }
        }
        free(W);
        free(A);
    }
    free(xf);
    free(out);
}

/*
 * The x16 layout (repack.h): repacking loses nothing (lc_x16_get_block gives back every block
 * byte for byte), and K's gemv_x16 / gemm_x16 on the repacked matrix give, bit for bit, the
 * scalar vec_dot of each original row (Q4_1, Q6_K) or the scalar vec_dot_q4_0x8 (Q4_0), for groups
 * of every kind of edge data, odd and even block counts (Q4_0's unpaired last block), several
 * groups, and thread-like slices starting at a later group; nothing written past the rows or
 * the columns.
 */
static void check_x16(const struct lc_kernels *S, const struct lc_kernels *K, int type)
{
    const int q6 = type == LC_TYPE_Q6_K, qk = lc_type_traits(type)->blck_size;
    const int kq = qk == LC_QK_K; /* Q8_K activations */
    const struct newtype *nt = NULL; /* Q4_K, Q5_K, Q5_1: random blocks as check_new_types' */
    for (size_t t = 0; t < sizeof new_types / sizeof new_types[0]; t++)
        if (new_types[t].type == type)
            nt = &new_types[t];
    /* blocks per row (K-quants: super-blocks, up to 1025 * 32 weights as the others) */
    /* K-quants: 24 and 25 (the AVX-512 GEMMs' scratch once changed from stack to heap there),
     * 129 (a long row) */
    static const int nbs_q4[] = {1, 2, 3, 7, 64, 176, 1025}, nbs_q6[] = {1, 2, 3, 5, 8, 22, 24, 25, 129};
    const int *nbs = kq ? nbs_q6 : nbs_q4;
    const int n_nbs = kq ? (int)(sizeof nbs_q6 / sizeof nbs_q6[0]) : (int)(sizeof nbs_q4 / sizeof nbs_q4[0]);
    /* every column count of the AVX-512 GEMMs' tiles: K-quants 8, then 4, 2, 1; Q4_0 4-column
     * tiles' remainders, up to two tiles (gemm_x16_q4_0 expands groups from 4 columns on, and
     * goes column by column below); the AVX2 expanded GEMMs (Q4_0, Q8_0, Q5_1, K-quants): 4-column
     * tiles, then one column at a time, from 4 columns on */
    static const int cols_any[] = {1, 2, 5, 67}, cols_q4_0[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 67},
                     cols_kq[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 15, 17, 67};
    const int tiled = type == LC_TYPE_Q4_0 || type == LC_TYPE_Q8_0 || type == LC_TYPE_Q5_1;
    const int *cols = kq ? cols_kq : tiled ? cols_q4_0 : cols_any;
    const int n_cols = kq ? (int)(sizeof cols_kq / sizeof cols_kq[0])
                       : tiled ? (int)(sizeof cols_q4_0 / sizeof cols_q4_0[0])
                               : (int)(sizeof cols_any / sizeof cols_any[0]);
    const int at = lc_type_traits(type)->vec_dot_type;
    const size_t wsz = lc_type_traits(type)->type_size, asz = lc_type_traits(at)->type_size;
    const lc_vec_dot_fn ref = type == LC_TYPE_Q4_0 ? S->vec_dot_q4_0x8 : S->vec_dot[type];
    enum { NR = 48 };
    float *xf = malloc(129 * 256 * sizeof(float)); /* the longest rows: 129 Q6_K super-blocks */
    float *out = malloc((NR + 2) * 68 * sizeof(float));
    long n_checked = 0;
    for (int bi = 0; bi < n_nbs; bi++) {
        const int nb = nbs[bi], n = nb * qk;
        /* padded columns (Q8_K, with a float, stays 4-byte aligned) */
        const size_t row = (size_t)nb * wsz, a_stride = (size_t)nb * asz + (kq ? 4 : 2);
        uint8_t *W = malloc(NR * row), *X = malloc(NR * row), *A = calloc(67, a_stride);
        for (int r = 0; r < NR; r++) {
            const int edge = r % 16 < EDGE_COUNT ? (r + r / 16) % EDGE_COUNT : EDGE_RANDOM;
            if (q6)
                make_q6_K((lc_block_q6_K *)(void *)(W + r * row), nb, edge % 4);
            else if (nt)
                for (int i = 0; i < nb; i++)
                    make_new_block(nt, W + r * row + (size_t)i * wsz, wsz, edge % NEW_EDGES);
            else
                make_weights(type, W + r * row, nb, edge);
            /* Q8_0: some weights -128 (a file may hold them; the quantizer does not make them),
             * the x + 128 of the AVX-512 kernels at its edge */
            if (type == LC_TYPE_Q8_0 && r % 4 == 1)
                for (int i = 0; i < nb; i++)
                    for (int j = r % 3; j < 32; j += 5)
                        ((lc_block_q8_0 *)(void *)(W + r * row))[i].qs[j] = -128;
        }
        for (int c = 0; c < 67; c++) {
            make_acts(xf, n, c < EDGE_COUNT ? (c + 1) % EDGE_COUNT : EDGE_RANDOM);
            S->quantize_row[at](xf, A + c * a_stride, n);
        }
        if (kq) /* column 1: every activation -128, the largest |sum((q - 32) * y)| (16384, with
                 * the all-zero quants of edge 1) that the kernels keep in 16 bits (Q4_K, Q5_K:
                 * 4 * 31 * 128 with all quant bits set) */
            for (int i = 0; i < nb; i++) {
                lc_block_q8_K *y = (lc_block_q8_K *)(void *)(A + a_stride) + i;
                memset(y->qs, 0x80, sizeof y->qs);
                for (int j = 0; j < LC_QK_K / 16; j++)
                    y->bsums[j] = -128 * 16;
            }
        memset(X, 0xA5, NR * row);
        lc_x16_repack(type, X, W, n, NR);
        int same = 1;
        for (int r = 0; r < NR; r++)
            for (int i = 0; i < nb; i++) {
                uint8_t blk[sizeof(lc_block_q6_K)];
                lc_x16_get_block(type, X + (size_t)(r / 16) * 16 * row, nb, r % 16, i, blk);
                same &= memcmp(blk, W + r * row + (size_t)i * wsz, wsz) == 0;
            }
        CHECK(same, "x16 %s nb=%d: repacked blocks do not read back", lc_type_name(type), nb);
        /* slices [g0 * 16, NR) as a thread gets them */
        for (int g0 = 0; g0 < NR / 16; g0++) {
            const int nr = NR - 16 * g0;
            const uint8_t *Xg = X + (size_t)g0 * 16 * row;
            for (int c = 0; c < 3; c++) {
                for (int r = 0; r <= nr; r++)
                    out[r] = -12345.0f;
                K->gemv_x16[type](n, out, Xg, row, nr, A + c * a_stride);
                for (int r = 0; r < nr; r++) {
                    float ss;
                    ref(n, &ss, W + (size_t)(16 * g0 + r) * row, A + c * a_stride);
                    n_checked++;
                    CHECK(same_bits(out[r], ss), "%s gemv_x16 %s n=%d nr=%d r%d c%d: %.9g vs %.9g",
                          K->isa, lc_type_name(type), n, nr, r, c, (double)out[r], (double)ss);
                }
                CHECK(out[nr] == -12345.0f, "%s gemv_x16 %s wrote past the rows", K->isa,
                      lc_type_name(type));
            }
            for (int cj = 0; cj < n_cols; cj++) {
                const int nc = cols[cj];
                if (nb * qk > 64 * 32 && nc > (kq && nb <= 25 ? 67 : kq ? 17 : 9))
                    continue;
                const size_t ld = (size_t)nr + 2;
                for (size_t i = 0; i < ld * (size_t)(nc + 1); i++)
                    out[i] = -12345.0f;
                K->gemm_x16[type](n, out, ld, Xg, row, nr, A, a_stride, nc);
                for (int c = 0; c < nc; c++)
                    for (int r = 0; r < nr; r++) {
                        float ss;
                        ref(n, &ss, W + (size_t)(16 * g0 + r) * row, A + c * a_stride);
                        n_checked++;
                        CHECK(same_bits(out[c * ld + r], ss),
                              "%s gemm_x16 %s n=%d %dx%d (r%d,c%d): %.9g vs %.9g", K->isa,
                              lc_type_name(type), n, nr, nc, r, c, (double)out[c * ld + r],
                              (double)ss);
                    }
                for (size_t i = 0; i < ld * (size_t)(nc + 1); i++)
                    if (i % ld >= (size_t)nr || i >= ld * (size_t)nc)
                        CHECK(out[i] == -12345.0f, "%s gemm_x16 %s %dx%d wrote outside", K->isa,
                              lc_type_name(type), nr, nc);
            }
        }
        free(W);
        free(X);
        free(A);
    }
    fprintf(stderr, "  %s x16 %s: %ld products compared (%s kernels)\n", K->isa,
            lc_type_name(type), n_checked, K->x16_native >> type & 1 ? "own" : "scalar");
    free(xf);
    free(out);
}

/*
 * The exact value of one product of check_x16_fast, in double: the sum over blocks of
 * fl(dx dy) isum (+ fl(m s_y) for Q4_1), and for Q4_K / Q5_K over super-blocks of
 * fl(dx dy) sum_j sc_j D_j - fl(dmin dy) sum_j m_j S_j (ggml's 6-bit scales and mins, D_j the
 * sub-block's integer product, S_j its activations' sum).  *mag: the sum of the magnitudes of
 * those terms (what the fast order rounds); *mag8: the same over vec_dot's 8 float lanes of 4
 * products each, which may cancel (Q4_1, Q8_0; -1 for the K-quants, not checked).
 */
static double fast_exact(int type, const uint8_t *xr, const uint8_t *yr, int nb, double *mag,
                         double *mag8)
{
    const size_t wsz = lc_type_traits(type)->type_size;
    double exact = 0.0;
    *mag = 0.0;
    *mag8 = 0.0;
    if (type == LC_TYPE_Q4_K || type == LC_TYPE_Q5_K) {
        const int q5 = type == LC_TYPE_Q5_K;
        const lc_block_q8_K *y = (const lc_block_q8_K *)(const void *)yr;
        for (int i = 0; i < nb; i++) {
            /* Q4_K and Q5_K share d, dmin, scales[12], then Q5_K's qh[32], qs[128] */
            const lc_block_q5_K *b5 = (const lc_block_q5_K *)(const void *)(xr + (size_t)i * wsz);
            const lc_block_q4_K *b4 = (const lc_block_q4_K *)(const void *)(xr + (size_t)i * wsz);
            const uint8_t *qs = q5 ? b5->qs : b4->qs;
            long isum = 0, msum = 0;
            for (int j = 0; j < 8; j++) {
                uint8_t sc, m;
                lc_get_scale_min_k4(j, b4->scales, &sc, &m);
                long dj = 0, sj = 0;
                for (int l = 0; l < 32; l++) {
                    int q = j % 2 ? qs[32 * (j / 2) + l] >> 4 : qs[32 * (j / 2) + l] & 0xF;
                    if (q5 && (b5->qh[l] >> j & 1))
                        q += 16;
                    dj += (long)q * y[i].qs[32 * j + l];
                    sj += y[i].qs[32 * j + l];
                }
                isum += sc * dj;
                msum += m * sj;
            }
            const double t1 = (double)(lc_fp16_to_fp32(b4->d) * y[i].d) * (double)isum;
            const double t2 = (double)(lc_fp16_to_fp32(b4->dmin) * y[i].d) * (double)msum;
            exact += t1 - t2;
            *mag += fabs(t1) + fabs(t2);
        }
        *mag8 = -1.0;
        return exact;
    }
    const int q8 = type == LC_TYPE_Q8_0; /* else Q4_1 */
    const lc_block_q4_1 *x = (const lc_block_q4_1 *)(const void *)xr;
    const lc_block_q8_1 *y = (const lc_block_q8_1 *)(const void *)yr;
    const lc_block_q8_0 *x8 = (const lc_block_q8_0 *)(const void *)xr;
    const lc_block_q8_0 *y8 = (const lc_block_q8_0 *)(const void *)yr;
    for (int i = 0; i < nb; i++) {
        long isum = 0, lanes = 0;
        for (int k = 0; k < 8; k++) {
            long lane = 0;
            for (int t = 0; t < 4; t++) { /* Q4_1: j, j + 16 share a byte */
                const int j = 4 * (k % 4) + t;
                lane += q8      ? (long)x8[i].qs[4 * k + t] * y8[i].qs[4 * k + t]
                        : k < 4 ? (long)(x[i].qs[j] & 0x0F) * y[i].qs[j]
                                : (long)(x[i].qs[j] >> 4) * y[i].qs[j + 16];
            }
            isum += lane;
            lanes += labs(lane);
        }
        const double dd = q8 ? (double)(lc_fp16_to_fp32(x8[i].d) * lc_fp16_to_fp32(y8[i].d))
                             : (double)(lc_fp16_to_fp32(x[i].d) * lc_fp16_to_fp32(y[i].d));
        const double t1 = dd * (double)isum;
        const double t2 =
            q8 ? 0.0 : (double)lc_fp16_to_fp32(x[i].m) * (double)lc_fp16_to_fp32(y[i].s);
        exact += t1 + t2;
        *mag += fabs(t1) + fabs(t2);
        *mag8 += fabs(dd) * (double)lanes + fabs(t2);
    }
    return exact;
}

/*
 * The opt-in gemm_x16_fast entries (kernels.h; AVX-512 Q4_1, Q8_0, Q4_K, Q5_K): not vec_dot's
 * bits, so each product is compared with the exact value (fast_exact) within the bound of float
 * summation over the blocks, (nb + 8) * 2^-23 times the sum of the magnitudes of the terms the
 * order rounds (Q4_1 / Q8_0: scalar vec_dot is checked against its own bound over its 8 float
 * lanes, to show the bound's scale).  Shapes as check_x16: odd and even block counts up to 1025
 * (K-quants: 129 super-blocks), slices starting at later groups (whose rows then come from other
 * tiles, with the same bits), 1 to 67 columns (every remainder of the 4-column and the K-quants'
 * 8-column tiles), nothing written outside.  Weights: make_weights' edge blocks (K-quants:
 * check_new_types' random and edge blocks: scales 0, 65504, subnormal; all quant bits set or
 * clear); activations: make_acts' shapes through the scalar quantizer, for the K-quants column 1
 * all -128 (the largest chains the kernels keep in 16 bits).  Products whose magnitudes reach
 * the float range (the huge-scale edge blocks) are skipped: no order is meaningful there.
 */
static void check_x16_fast(const struct lc_kernels *S, const struct lc_kernels *K, int type)
{
    /* AVX-512 has these four: a table without one must not pass unseen */
    CHECK(K->gemm_x16_fast[type] || strcmp(K->isa, "avx512") != 0,
          "avx512: no --fast-math %s kernel in the table", lc_type_name(type));
    if (!K->gemm_x16_fast[type])
        return;
    const int kq = type == LC_TYPE_Q4_K || type == LC_TYPE_Q5_K;
    static const int nbs_b[] = {1, 2, 3, 7, 64, 176, 1025}, nbs_k[] = {1, 2, 3, 8, 25, 129};
    static const int cols_b[] = {1, 2, 3, 4, 5, 6, 7, 67}, cols_k[] = {1, 2, 3, 4, 5, 7, 8, 9, 15, 17, 67};
    const int *nbs = kq ? nbs_k : nbs_b, *cols = kq ? cols_k : cols_b;
    const int n_nbs = kq ? 6 : 7, n_cols = kq ? 11 : 8;
    const int qk = lc_type_traits(type)->blck_size;
    const int atype = kq ? LC_TYPE_Q8_K : type == LC_TYPE_Q8_0 ? LC_TYPE_Q8_0 : LC_TYPE_Q8_1;
    const size_t wsz = lc_type_traits(type)->type_size, asz = lc_type_traits(atype)->type_size;
    const struct newtype *nt = NULL;
    for (size_t t = 0; t < sizeof new_types / sizeof new_types[0]; t++)
        if (new_types[t].type == type)
            nt = &new_types[t];
    enum { NR = 48 };
    float *xf = malloc(129 * 256 * sizeof(float)); /* the longest rows (> 1025 * 32) */
    float *out = malloc((NR + 2) * 68 * sizeof(float));
    float *first = malloc((size_t)n_cols * NR * 67 * sizeof(float));
    long n_checked = 0, n_skipped = 0;
    double worst = 0.0; /* largest |fast - exact| / bound */
    for (int bi = 0; bi < n_nbs; bi++) {
        const int nb = nbs[bi], n = nb * qk;
        const size_t row = (size_t)nb * wsz, a_stride = (size_t)nb * asz + (kq ? 4 : 2);
        uint8_t *W = malloc(NR * row), *X = malloc(NR * row), *A = calloc(67, a_stride);
        for (int r = 0; r < NR; r++) {
            if (kq)
                for (int i = 0; i < nb; i++)
                    make_new_block(nt, W + r * row + (size_t)i * wsz, wsz,
                                   r % 16 < NEW_EDGES ? (r + r / 16) % NEW_EDGES : 0);
            else
                make_weights(type, W + r * row, nb,
                             r % 16 < EDGE_COUNT ? (r + r / 16) % EDGE_COUNT : EDGE_RANDOM);
        }
        for (int c = 0; c < 67; c++) {
            make_acts(xf, n, c < EDGE_COUNT ? (c + 1) % EDGE_COUNT : EDGE_RANDOM);
            S->quantize_row[atype](xf, A + c * a_stride, n);
        }
        for (int i = 0; kq && i < nb; i++) { /* column 1: every activation -128 */
            lc_block_q8_K *y = (lc_block_q8_K *)(void *)(A + a_stride) + i;
            memset(y->qs, 0x80, sizeof y->qs);
            for (int j = 0; j < LC_QK_K / 16; j++)
                y->bsums[j] = -128 * 16;
        }
        lc_x16_repack(type, X, W, n, NR);
        for (int g0 = 0; g0 < NR / 16; g0++) {
            const int nr = NR - 16 * g0;
            const uint8_t *Xg = X + (size_t)g0 * 16 * row;
            for (int cj = 0; cj < n_cols; cj++) {
                const int nc = cols[cj];
                if (nb > (kq ? 8 : 64) && nc > 9) /* long rows: the narrow tiles only */
                    continue;
                const size_t ld = (size_t)nr + 2;
                for (size_t i = 0; i < ld * (size_t)(nc + 1); i++)
                    out[i] = -12345.0f;
                K->gemm_x16_fast[type](n, out, ld, Xg, row, nr, A, a_stride, nc);
                for (int c = 0; c < nc; c++)
                    for (int r = 0; r < nr; r++) {
                        const uint8_t *xr = W + (size_t)(16 * g0 + r) * row;
                        double mag, mag8;
                        const double exact = fast_exact(type, xr, A + c * a_stride, nb, &mag, &mag8);
                        if (!(mag < 1e37) || !(mag8 < 1e37)) {
                            n_skipped++;
                            continue;
                        }
                        const double bound = (nb + 8) * 0x1p-23 * mag + 1e-30;
                        const float f = out[c * ld + r];
                        n_checked++;
                        /* a row's result does not depend on the tile that computed it (a 32-row
                         * pair of groups or a group alone: slices at later groups pair them
                         * differently, as threads' chunks do) */
                        float *f0 = &first[((size_t)cj * NR + (size_t)(16 * g0 + r)) * 67 + (size_t)c];
                        if (g0 == 0)
                            *f0 = f;
                        else
                            CHECK(same_bits(f, *f0), "%s gemm_x16_fast %s n=%d row %d col %d: "
                                  "%.9g from the slice at group %d, %.9g from group 0", K->isa,
                                  lc_type_name(type), n, 16 * g0 + r, c, (double)f, g0, (double)*f0);
                        const double e = fabs((double)f - exact) / bound;
                        if (e > worst)
                            worst = e;
                        CHECK(e <= 1.0, "%s gemm_x16_fast %s n=%d %dx%d (r%d,c%d): %.9g, exact %.9g, bound %.3g",
                              K->isa, lc_type_name(type), n, nr, nc, r, c, (double)f, exact, bound);
                        if (mag8 >= 0.0) {
                            float ss;
                            S->vec_dot[type](n, &ss, xr, A + c * a_stride);
                            CHECK(fabs((double)ss - exact) <= (nb + 8) * 0x1p-23 * mag8 + 1e-30,
                                  "scalar vec_dot %s n=%d: %.9g, exact %.9g, bound %.3g",
                                  lc_type_name(type), n, (double)ss, exact, (nb + 8) * 0x1p-23 * mag8);
                        }
                    }
                for (size_t i = 0; i < ld * (size_t)(nc + 1); i++)
                    if (i % ld >= (size_t)nr || i >= ld * (size_t)nc)
                        CHECK(out[i] == -12345.0f, "%s gemm_x16_fast %s %dx%d wrote outside",
                              K->isa, lc_type_name(type), nr, nc);
            }
        }
        free(W);
        free(X);
        free(A);
    }
    fprintf(stderr, "  %s x16 %s fast: %ld products within bound (worst %.3f of it), %ld huge skipped\n",
            K->isa, lc_type_name(type), n_checked, worst, n_skipped);
    free(first);
    free(xf);
    free(out);
}

int main(void)
{
    lc_quant_init();
    const struct lc_kernels *S = &lc_kernels_scalar;
#if defined(__aarch64__) && defined(__linux__)
    /* which integer path arm-neon.c takes (test-kernels-neon.sh checks it ran both) */
    fprintf(stderr, "neon dotprod: %s\n", (getauxval(AT_HWCAP) & (1 << 20)) ? "yes" : "no");
#endif
    check_scalar(S);
    check_attn(S, S);
    check_q4_0x8(S, S);
    check_x16(S, S, LC_TYPE_Q4_1);
    check_x16(S, S, LC_TYPE_Q4_0);
    check_x16(S, S, LC_TYPE_Q6_K);
    check_x16(S, S, LC_TYPE_Q4_K);
    check_x16(S, S, LC_TYPE_Q5_K);
    check_x16(S, S, LC_TYPE_Q5_1);
    check_x16(S, S, LC_TYPE_Q8_0);
    check_dispatch();
    check_new_types(S, S);

    static const char *const isas[] = {"avx512", "avx2", "neon"};
    int compared = 0;
    for (int i = 0; i < 3; i++) {
        if (!lc_kernels_isa_available(isas[i])) {
            fprintf(stderr, "%s: not available here, skipped\n", isas[i]);
            continue;
        }
        char *err = NULL;
        CHECK(lc_kernels_select(isas[i], &err) == 0, "select %s: %s", isas[i], err ? err : "");
        free(err);
        const struct lc_kernels *K = lc_kernels();
        fprintf(stderr, "comparing %s with scalar\n", K->isa);
        check_recode(S, K);
        check_quantized(S, K, LC_TYPE_Q4_1);
        check_quantized(S, K, LC_TYPE_Q4_0);
        check_quantized(S, K, LC_TYPE_Q8_0);
        check_q4_0x8(S, K);
        if (K->x16_native) {
            check_x16(S, K, LC_TYPE_Q4_1);
            check_x16(S, K, LC_TYPE_Q4_0);
            check_x16(S, K, LC_TYPE_Q6_K);
            check_x16(S, K, LC_TYPE_Q4_K);
            check_x16(S, K, LC_TYPE_Q5_K);
            check_x16(S, K, LC_TYPE_Q5_1);
            check_x16(S, K, LC_TYPE_Q8_0);
            check_x16_fast(S, K, LC_TYPE_Q4_1);
            check_x16_fast(S, K, LC_TYPE_Q8_0);
            check_x16_fast(S, K, LC_TYPE_Q4_K);
            check_x16_fast(S, K, LC_TYPE_Q5_K);
        }
        check_q6_K(S, K);
        check_new_types(S, K);
        check_quantize_stress(S, K);
        check_float(S, K);
        check_attn(S, K);
        compared++;
    }
    const int rc = tu_finish("test-kernels");
    if (rc == 0 && compared == 0) {
        fprintf(stderr, "test-kernels: no SIMD ISA to compare on this machine\n");
        return 77;
    }
    return rc;
}
