/*
 * quant_search.c - error-minimizing block quantizers for Q4_0, Q4_1, Q5_0, Q5_1, Q8_0.
 *
 * The model.  A block holds 32 weights x[j] stored as integers q[j] and one scale d (Q4_0, Q5_0,
 * Q8_0: x ~ d q, q in [qlo, qhi]) or a scale and an offset (Q4_1, Q5_1: x ~ d q + m, q in
 * [0, nmax]).  For a fixed (d, m) the best q[j] is the nearest level to x[j]; for fixed q the
 * best (d, m) is a weighted least-squares fit.  Neither step alone finds the optimum, and the
 * reference quantizers do neither: they pin the extremes to the end levels, which wastes part of
 * a level at both ends and lets one outlier set the step of the whole block.
 *
 * The search, per block (the idea of ggml's make_qkx2_quants / make_qx_quants, without the
 * K-quants' constraint m <= 0):
 *   1. candidates: step sizes around the reference one -- for the asymmetric types the inverse
 *      step iscale = (nmax + delta) / (max - min), delta in [-1, 1] (NSTEP + 1 values); for the
 *      symmetric ones the largest-magnitude weight mapped to a point near either end level;
 *   2. for each: quantize with that step, re-fit (d, m) by least squares given the levels,
 *      ROUND d and m TO F16 (what is stored is what the kernels multiply with), re-quantize every
 *      weight to the nearest level of the rounded (d, m), and measure the weighted error;
 *   3. the best candidate is polished: alternate fit / round / re-quantize while the error
 *      falls, then try the F16 neighbours (one ulp either way) of d and of m;
 *   4. the reference block is computed too, and kept when the search did not beat it, so the
 *      result is never worse than llama.cpp's quantizer in the weighted error.
 * Q4_1 and Q5_1 run this search in the kernel table (arch/qsearch-lanes.h, several blocks per
 * vector, the same bits on every ISA); Q4_0, Q5_0 and Q8_0 run the code below block by block.
 * The weights w[j] default to 1 (plain squared error); with an importance matrix they are the
 * mean squared activations of the block's input columns, so that E estimates the error of the
 * matrix product rather than of the weights.
 */
#include "quant_search.h"

#include "arch/kernels.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define QB 32     /* weights per block (all five types) */
#define NSTEP 4  /* candidate steps per block and direction */

bool lc_quant_search_supported(enum lc_type t)
{
    return t == LC_TYPE_Q4_0 || t == LC_TYPE_Q4_1 || t == LC_TYPE_Q5_0 || t == LC_TYPE_Q5_1 ||
           t == LC_TYPE_Q8_0;
}

/* Nearest integer of v, |v| < 200 (callers clamp first): floor(v + 0.5) without a libm call. */
static inline int nearest(float v)
{
    return (int)(v + 256.5f) - 256;
}

/* An F16 value that is finite (exponent not all ones). */
static inline bool fp16_finite(lc_fp16 h)
{
    return (h & 0x7c00u) != 0x7c00u;
}

/* ---------------------------------------------------------------- symmetric: x ~ d q */

/* Levels L of x for the stored scale d (nearest in [qlo, qhi]); returns the weighted error. */
static float sym_quant(const float *x, const float *w, float d, int qlo, int qhi, int8_t *L)
{
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    float e = 0.0f;
    for (int j = 0; j < QB; j++) {
        float v = x[j] * id;
        v = v < (float)qlo ? (float)qlo : v > (float)qhi ? (float)qhi : v;
        const int l = nearest(v);
        L[j] = (int8_t)l;
        const float r = d * (float)l - x[j];
        e += w[j] * r * r;
    }
    return e;
}

/* Least-squares scale for the levels L: sum w x L / sum w L^2 (0 when all L are 0). */
static float sym_fit(const float *x, const float *w, const int8_t *L)
{
    float sxl = 0.0f, sll = 0.0f;
    for (int j = 0; j < QB; j++) {
        sxl += w[j] * x[j] * (float)L[j];
        sll += w[j] * (float)L[j] * (float)L[j];
    }
    return sll > 0.0f ? sxl / sll : 0.0f;
}

/* Try the stored scale h: keep it in *best_h / L when its error is smaller. */
static void sym_try(const float *x, const float *w, lc_fp16 h, int qlo, int qhi, lc_fp16 *best_h,
                    float *best_e, int8_t *L)
{
    if (!fp16_finite(h))
        return;
    int8_t Lt[QB];
    const float e = sym_quant(x, w, LC_FP16_TO_FP32(h), qlo, qhi, Lt);
    if (e < *best_e) {
        *best_e = e;
        *best_h = h;
        memcpy(L, Lt, QB);
    }
}

/* The search for one block of a symmetric type; returns the stored scale, L the levels. */
static lc_fp16 sym_search(const float *x, const float *w, int qlo, int qhi, int8_t *L)
{
    float amax = 0.0f, vmax = 0.0f;
    for (int j = 0; j < QB; j++)
        if (fabsf(x[j]) > amax) {
            amax = fabsf(x[j]);
            vmax = x[j];
        }
    lc_fp16 best_h = 0;
    float best_e = sym_quant(x, w, 0.0f, qlo, qhi, L); /* d = 0 */
    if (amax == 0.0f)
        return best_h;
    /* vmax on level t, |t| from |end| - 1.5 to |end| + 0.5, at either end */
    const int ends[2] = {qlo, qhi};
    const int n_ends = -qlo == qhi ? 1 : 2;
    for (int s = 0; s < n_ends; s++) {
        const float a = (float)abs(ends[s]);
        for (int k = 0; k <= NSTEP; k++) {
            const float t = a - 1.5f + 2.0f * (float)k / NSTEP;
            if (t < 0.5f)
                continue;
            const float d = vmax / (ends[s] < 0 ? -t : t);
            sym_try(x, w, lc_fp32_to_fp16(d), qlo, qhi, &best_h, &best_e, L);
        }
    }
    /* polish: least-squares fit of the best levels, rounded, re-quantized */
    for (int it = 0; it < 4; it++) {
        const lc_fp16 h0 = best_h;
        sym_try(x, w, lc_fp32_to_fp16(sym_fit(x, w, L)), qlo, qhi, &best_h, &best_e, L);
        if (best_h == h0)
            break;
    }
    /* the F16 neighbours of the stored scale */
    const lc_fp16 h0 = best_h;
    sym_try(x, w, (lc_fp16)(h0 + 1), qlo, qhi, &best_h, &best_e, L);
    if ((h0 & 0x7fffu) != 0)
        sym_try(x, w, (lc_fp16)(h0 - 1), qlo, qhi, &best_h, &best_e, L);
    return best_h;
}

/* ---------------------------------------------------------------- packing, rows */

static void pack_block(enum lc_type t, const float *x, const float *w, void *out)
{
    switch (t) {
    case LC_TYPE_Q4_0: {
        lc_block_q4_0 *y = out;
        int8_t L[QB];
        y->d = sym_search(x, w, -8, 7, L);
        for (int j = 0; j < QB / 2; j++)
            y->qs[j] = (uint8_t)((L[j] + 8) | ((L[j + QB / 2] + 8) << 4));
        break;
    }
    case LC_TYPE_Q5_0: {
        lc_block_q5_0 *y = out;
        int8_t L[QB];
        y->d = sym_search(x, w, -16, 15, L);
        uint32_t qh = 0;
        for (int j = 0; j < QB / 2; j++) {
            const unsigned u0 = (unsigned)(L[j] + 16), u1 = (unsigned)(L[j + QB / 2] + 16);
            y->qs[j] = (uint8_t)((u0 & 0x0f) | ((u1 & 0x0f) << 4));
            qh |= ((u0 >> 4) & 1u) << j;
            qh |= ((u1 >> 4) & 1u) << (j + QB / 2);
        }
        memcpy(y->qh, &qh, sizeof(qh));
        break;
    }
    case LC_TYPE_Q8_0: {
        lc_block_q8_0 *y = out;
        int8_t L[QB];
        /* -127..127 as the reference: some kernels take |q| of an int8 */
        y->d = sym_search(x, w, -127, 127, L);
        memcpy(y->qs, L, QB);
        break;
    }
    default: break;
    }
}

/* Weighted squared error of one block (dequantized with the type's to_float). */
static float block_error(const struct lc_type_traits *tt, const float *x, const void *blk,
                         const float *w)
{
    float y[QB];
    tt->to_float(blk, y, QB);
    float e = 0.0f;
    for (int j = 0; j < QB; j++) {
        const float r = y[j] - x[j];
        e += w[j] * r * r;
    }
    return e;
}

/* Q4_1 / Q5_1: the lanes kernel (qsearch-lanes.h) on chunks of the row, then packed. */
static void search_asym(enum lc_type t, const float *x, void *y, int64_t n, const float *w,
                        float sigma2)
{
    enum { CH = 64 };
    const int nmax = t == LC_TYPE_Q4_1 ? 15 : 31;
    const struct lc_kernels *k = lc_kernels();
    lc_fp16 d[CH], m[CH];
    uint8_t L[CH * QB];
    for (int64_t b0 = 0; b0 < n / QB; b0 += CH) {
        const int64_t nb = n / QB - b0 < CH ? n / QB - b0 : CH;
        k->qsearch_asym(x + b0 * QB, w ? w + b0 * QB : NULL, sigma2, nb, nmax, d, m, L);
        for (int64_t i = 0; i < nb; i++) {
            const uint8_t *l = L + i * QB;
            if (t == LC_TYPE_Q4_1) {
                lc_block_q4_1 *yb = (lc_block_q4_1 *)y + b0 + i;
                yb->d = d[i];
                yb->m = m[i];
                for (int j = 0; j < QB / 2; j++)
                    yb->qs[j] = (uint8_t)(l[j] | (l[j + QB / 2] << 4));
            } else {
                lc_block_q5_1 *yb = (lc_block_q5_1 *)y + b0 + i;
                yb->d = d[i];
                yb->m = m[i];
                uint32_t qh = 0;
                for (int j = 0; j < QB / 2; j++) {
                    const unsigned u0 = l[j], u1 = l[j + QB / 2];
                    yb->qs[j] = (uint8_t)((u0 & 0x0f) | ((u1 & 0x0f) << 4));
                    qh |= ((u0 >> 4) & 1u) << j;
                    qh |= ((u1 >> 4) & 1u) << (j + QB / 2);
                }
                memcpy(yb->qh, &qh, sizeof(qh));
            }
        }
    }
}

/* The symmetric types, block by block: the search, then the reference block when the search
 * did not beat it.  w NULL: sqrt(sigma2 + x^2) when sigma2 >= 0, else 1. */
static void search_sym(enum lc_type t, const float *x, void *y, int64_t n, const float *w,
                       float sigma2)
{
    const struct lc_type_traits *tt = lc_type_traits((int)t);
    const size_t bs = tt->type_size;
    uint8_t ref[sizeof(lc_block_q8_0)]; /* the largest of the three */
    uint8_t *out = y;
    static const float ones[QB] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
                                   1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
    float wr[QB];
    for (int64_t i = 0; i < n / QB; i++) {
        const float *xb = x + i * QB;
        const float *wb = ones;
        if (w) {
            wb = w + i * QB;
        } else if (sigma2 >= 0.0f) {
            for (int j = 0; j < QB; j++)
                wr[j] = sqrtf(sigma2 + xb[j] * xb[j]);
            wb = wr;
        }
        float sw = 0.0f;
        for (int j = 0; j < QB; j++)
            sw += wb[j];
        if (!(sw > 0.0f && isfinite(sw)))
            wb = ones;
        uint8_t *blk = out + (size_t)i * bs;
        pack_block(t, xb, wb, blk);
        tt->from_float_ref(xb, ref, QB);
        if (block_error(tt, xb, ref, wb) <= block_error(tt, xb, blk, wb))
            memcpy(blk, ref, bs);
    }
}

static int search_row(enum lc_type t, const float *x, void *y, int64_t n, const float *w,
                      float sigma2)
{
    if (!lc_quant_search_supported(t) || n % QB != 0)
        return -1;
    lc_quant_init();
    if (t == LC_TYPE_Q4_1 || t == LC_TYPE_Q5_1)
        search_asym(t, x, y, n, w, sigma2);
    else
        search_sym(t, x, y, n, w, sigma2);
    return 0;
}

int lc_quantize_row_search(enum lc_type t, const float *x, void *y, int64_t n, const float *w)
{
    return search_row(t, x, y, n, w, -1.0f);
}

float lc_quant_search_sigma2(const float *x, int64_t n)
{
    /* four partial sums (a fixed order: the same on every machine), added at the end */
    double s[4] = {0.0, 0.0, 0.0, 0.0};
    int64_t j = 0;
    for (; j + 4 <= n; j += 4)
        for (int k = 0; k < 4; k++)
            s[k] += (double)x[j + k] * (double)x[j + k];
    for (; j < n; j++)
        s[0] += (double)x[j] * (double)x[j];
    return n > 0 ? (float)(((s[0] + s[1]) + (s[2] + s[3])) / (double)n) : 0.0f;
}

int lc_quantize_row_search_rms(enum lc_type t, const float *x, void *y, int64_t n)
{
    return search_row(t, x, y, n, NULL, lc_quant_search_sigma2(x, n));
}

double lc_quant_row_error(enum lc_type t, const float *x, const void *y, int64_t n,
                          const float *w)
{
    const struct lc_type_traits *tt = lc_type_traits((int)t);
    if (!tt || !tt->to_float || n % tt->blck_size != 0)
        return -1.0;
    const int bk = tt->blck_size;
    float buf[LC_QK_K];
    double e = 0.0;
    for (int64_t i = 0; i < n; i += bk) {
        tt->to_float((const uint8_t *)y + (size_t)(i / bk) * tt->type_size, buf, bk);
        for (int j = 0; j < bk; j++) {
            const double r = (double)buf[j] - (double)x[i + j];
            e += (w ? (double)w[i + j] : 1.0) * r * r;
        }
    }
    return e;
}
