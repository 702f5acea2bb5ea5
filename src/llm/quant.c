/*
 * quant.c - type traits, fp16/bf16 conversion and the reference block quantizers.
 *
 * The quantizers are ggml's reference (`quantize_row_*_ref`, ggml-quants.c) rewritten: the same
 * operations in the same order, so that, compiled without FMA contraction (-ffp-contract=off,
 * as ggml's are), they produce the same bytes as llama.cpp's llama-quantize.
 */
#include "quant.h"

#include <float.h>
#include <math.h>
#include <pthread.h>
#include <string.h>
#include <strings.h>

/* ---------------------------------------------------------------- fp16 / bf16 */

static inline uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static inline float f32_from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* Maratea's branch-free conversions, as ggml_compute_fp16_to_fp32 / fp32_to_fp16 (FP16 lib). */
float lc_fp16_to_fp32(lc_fp16 h)
{
    const uint32_t w = (uint32_t)h << 16;
    const uint32_t sign = w & 0x80000000u;
    const uint32_t two_w = w + w;
    const uint32_t exp_offset = 0xE0u << 23;
    const float exp_scale = 0x1.0p-112f;
    const float normalized = f32_from_bits((two_w >> 4) + exp_offset) * exp_scale;
    const uint32_t magic_mask = 126u << 23;
    const float magic_bias = 0.5f;
    const float denormalized = f32_from_bits((two_w >> 17) | magic_mask) - magic_bias;
    const uint32_t denormalized_cutoff = 1u << 27;
    const uint32_t result = sign | (two_w < denormalized_cutoff ? f32_bits(denormalized)
                                                                : f32_bits(normalized));
    return f32_from_bits(result);
}

lc_fp16 lc_fp32_to_fp16(float f)
{
    const float scale_to_inf = 0x1.0p+112f;
    const float scale_to_zero = 0x1.0p-110f;
    float base = (fabsf(f) * scale_to_inf) * scale_to_zero;
    const uint32_t w = f32_bits(f);
    const uint32_t shl1_w = w + w;
    const uint32_t sign = w & 0x80000000u;
    uint32_t bias = shl1_w & 0xFF000000u;
    if (bias < 0x71000000u)
        bias = 0x71000000u;
    base = f32_from_bits((bias >> 1) + 0x07800000u) + base;
    const uint32_t bits = f32_bits(base);
    const uint32_t exp_bits = (bits >> 13) & 0x00007C00u;
    const uint32_t mantissa_bits = bits & 0x00000FFFu;
    const uint32_t nonsign = exp_bits + mantissa_bits;
    return (lc_fp16)((sign >> 16) | (shl1_w > 0xFF000000u ? 0x7E00u : nonsign));
}

float lc_bf16_to_fp32(lc_bf16 h)
{
    return f32_from_bits((uint32_t)h << 16);
}

lc_bf16 lc_fp32_to_bf16(float f)
{
    uint32_t u = f32_bits(f);
    if ((u & 0x7fffffff) > 0x7f800000) /* NaN: keep it quiet */
        return (lc_bf16)((u >> 16) | 64);
    return (lc_bf16)((u + (0x7fff + ((u >> 16) & 1))) >> 16);
}

float lc_fp16_table[1 << 16];
static pthread_once_t fp16_once = PTHREAD_ONCE_INIT;

static void fp16_table_fill(void)
{
    for (uint32_t i = 0; i < (1u << 16); i++)
        lc_fp16_table[i] = lc_fp16_to_fp32((lc_fp16)i);
}

void lc_quant_init(void)
{
    pthread_once(&fp16_once, fp16_table_fill);
}

/* ---------------------------------------------------------------- reference quantizers */

void lc_quantize_row_q4_0_ref(const float *x, lc_block_q4_0 *y, int64_t n)
{
    const int qk = LC_QK4_0;
    const int64_t nb = n / qk;
    for (int64_t i = 0; i < nb; i++) {
        float amax = 0.0f; /* absolute max */
        float max = 0.0f;
        for (int j = 0; j < qk; j++) {
            const float v = x[i * qk + j];
            if (amax < fabsf(v)) {
                amax = fabsf(v);
                max = v;
            }
        }
        const float d = max / -8;
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = lc_fp32_to_fp16(d);
        for (int j = 0; j < qk / 2; ++j) {
            const float x0 = x[i * qk + 0 + j] * id;
            const float x1 = x[i * qk + qk / 2 + j] * id;
            const uint8_t xi0 = (uint8_t)(fminf(15, (int8_t)(x0 + 8.5f)));
            const uint8_t xi1 = (uint8_t)(fminf(15, (int8_t)(x1 + 8.5f)));
            y[i].qs[j] = xi0;
            y[i].qs[j] |= (uint8_t)(xi1 << 4);
        }
    }
}

/* the smallest and largest of x[0..n-1], starting from FLT_MAX / -FLT_MAX (so a block of +inf
 * has min FLT_MAX; NaNs are skipped) exactly as ggml's quantize_row_q4_1_ref / q5_1_ref scan a
 * block */
static void block_min_max(const float *x, int n, float *min, float *max)
{
    float lo = FLT_MAX, hi = -FLT_MAX;
    for (int j = 0; j < n; j++) {
        if (x[j] < lo)
            lo = x[j];
        if (x[j] > hi)
            hi = x[j];
    }
    *min = lo;
    *max = hi;
}

void lc_quantize_row_q4_1_ref(const float *x, lc_block_q4_1 *y, int64_t n)
{
    const int qk = LC_QK4_1;
    const int64_t nb = n / qk;
    for (int64_t i = 0; i < nb; i++) {
        float min, max;
        block_min_max(x + i * qk, qk, &min, &max);
        const float d = (max - min) / ((1 << 4) - 1);
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = lc_fp32_to_fp16(d);
        y[i].m = lc_fp32_to_fp16(min);
        for (int j = 0; j < qk / 2; ++j) {
            const float x0 = (x[i * qk + 0 + j] - min) * id;
            const float x1 = (x[i * qk + qk / 2 + j] - min) * id;
            const uint8_t xi0 = (uint8_t)fminf(15, (int8_t)(x0 + 0.5f));
            const uint8_t xi1 = (uint8_t)fminf(15, (int8_t)(x1 + 0.5f));
            y[i].qs[j] = xi0;
            y[i].qs[j] |= (uint8_t)(xi1 << 4);
        }
    }
}

void lc_quantize_row_q8_0_ref(const float *x, lc_block_q8_0 *y, int64_t n)
{
    const int qk = LC_QK8_0;
    const int64_t nb = n / qk;
    for (int64_t i = 0; i < nb; i++) {
        float amax = 0.0f;
        for (int j = 0; j < qk; j++)
            amax = fmaxf(amax, fabsf(x[i * qk + j]));
        const float d = amax / ((1 << 7) - 1);
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = lc_fp32_to_fp16(d);
        for (int j = 0; j < qk; ++j)
            y[i].qs[j] = (int8_t)roundf(x[i * qk + j] * id);
    }
}

void lc_quantize_row_q8_1_ref(const float *x, lc_block_q8_1 *y, int64_t n)
{
    const int qk = LC_QK8_1;
    const int64_t nb = n / qk;
    for (int64_t i = 0; i < nb; i++) {
        float amax = 0.0f;
        for (int j = 0; j < qk; j++)
            amax = fmaxf(amax, fabsf(x[i * qk + j]));
        const float d = amax / ((1 << 7) - 1);
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = lc_fp32_to_fp16(d);
        int sum = 0;
        for (int j = 0; j < qk / 2; ++j) {
            const float v0 = x[i * qk + j] * id;
            const float v1 = x[i * qk + qk / 2 + j] * id;
            y[i].qs[j] = (int8_t)roundf(v0);
            y[i].qs[qk / 2 + j] = (int8_t)roundf(v1);
            sum += y[i].qs[j];
            sum += y[i].qs[qk / 2 + j];
        }
        y[i].s = lc_fp32_to_fp16((float)sum * d);
    }
}

void lc_quantize_row_q5_0_ref(const float *x, lc_block_q5_0 *y, int64_t n)
{
    const int qk = LC_QK5_0;
    const int64_t nb = n / qk;
    for (int64_t i = 0; i < nb; i++) {
        float amax = 0.0f;
        float max = 0.0f;
        for (int j = 0; j < qk; j++) {
            const float v = x[i * qk + j];
            if (amax < fabsf(v)) {
                amax = fabsf(v);
                max = v;
            }
        }
        const float d = max / -16;
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = lc_fp32_to_fp16(d);
        uint32_t qh = 0;
        for (int j = 0; j < qk / 2; ++j) {
            const float x0 = x[i * qk + 0 + j] * id;
            const float x1 = x[i * qk + qk / 2 + j] * id;
            const int8_t t0 = (int8_t)(x0 + 16.5f), t1 = (int8_t)(x1 + 16.5f);
            const uint8_t xi0 = (uint8_t)(t0 < 31 ? t0 : 31);
            const uint8_t xi1 = (uint8_t)(t1 < 31 ? t1 : 31);
            y[i].qs[j] = (uint8_t)((xi0 & 0x0F) | ((xi1 & 0x0F) << 4));
            qh |= ((xi0 & 0x10u) >> 4) << (j + 0);
            qh |= ((xi1 & 0x10u) >> 4) << (j + qk / 2);
        }
        memcpy(y[i].qh, &qh, sizeof(qh));
    }
}

void lc_quantize_row_q5_1_ref(const float *x, lc_block_q5_1 *y, int64_t n)
{
    const int qk = LC_QK5_1;
    const int64_t nb = n / qk;
    for (int64_t i = 0; i < nb; i++) {
        float min, max;
        block_min_max(x + i * qk, qk, &min, &max);
        const float d = (max - min) / ((1 << 5) - 1);
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = lc_fp32_to_fp16(d);
        y[i].m = lc_fp32_to_fp16(min);
        uint32_t qh = 0;
        for (int j = 0; j < qk / 2; ++j) {
            const float x0 = (x[i * qk + 0 + j] - min) * id;
            const float x1 = (x[i * qk + qk / 2 + j] - min) * id;
            const uint8_t xi0 = (uint8_t)(x0 + 0.5f);
            const uint8_t xi1 = (uint8_t)(x1 + 0.5f);
            y[i].qs[j] = (uint8_t)((xi0 & 0x0F) | ((xi1 & 0x0F) << 4));
            qh |= ((xi0 & 0x10u) >> 4) << (j + 0);
            qh |= ((xi1 & 0x10u) >> 4) << (j + qk / 2);
        }
        memcpy(y[i].qh, &qh, sizeof(qh));
    }
}

/* ---------------------------------------------------------------- dequantizers */

const int8_t lc_kvalues_iq4nl[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                     1,    13,   25,  38,  53,  69,  89,  113};

void lc_dequantize_row_q5_0(const lc_block_q5_0 *x, float *y, int64_t n)
{
    const int qk = LC_QK5_0;
    const int64_t nb = n / qk;
    for (int64_t i = 0; i < nb; i++) {
        const float d = lc_fp16_to_fp32(x[i].d);
        uint32_t qh;
        memcpy(&qh, x[i].qh, sizeof(qh));
        for (int j = 0; j < qk / 2; ++j) {
            const uint8_t xh_0 = (uint8_t)(((qh >> (j + 0)) << 4) & 0x10);
            const uint8_t xh_1 = (uint8_t)((qh >> (j + 12)) & 0x10);
            const int x0 = ((x[i].qs[j] & 0x0F) | xh_0) - 16;
            const int x1 = ((x[i].qs[j] >> 4) | xh_1) - 16;
            y[i * qk + j + 0] = (float)x0 * d;
            y[i * qk + j + qk / 2] = (float)x1 * d;
        }
    }
}

void lc_dequantize_row_q5_1(const lc_block_q5_1 *x, float *y, int64_t n)
{
    const int qk = LC_QK5_1;
    const int64_t nb = n / qk;
    for (int64_t i = 0; i < nb; i++) {
        const float d = lc_fp16_to_fp32(x[i].d);
        const float m = lc_fp16_to_fp32(x[i].m);
        uint32_t qh;
        memcpy(&qh, x[i].qh, sizeof(qh));
        for (int j = 0; j < qk / 2; ++j) {
            const uint8_t xh_0 = (uint8_t)(((qh >> (j + 0)) << 4) & 0x10);
            const uint8_t xh_1 = (uint8_t)((qh >> (j + 12)) & 0x10);
            const int x0 = (x[i].qs[j] & 0x0F) | xh_0;
            const int x1 = (x[i].qs[j] >> 4) | xh_1;
            y[i * qk + j + 0] = (float)x0 * d + m;
            y[i * qk + j + qk / 2] = (float)x1 * d + m;
        }
    }
}

void lc_dequantize_row_iq4_nl(const lc_block_iq4_nl *x, float *y, int64_t n)
{
    const int qk = LC_QK4_NL;
    const int64_t nb = n / qk;
    for (int64_t i = 0; i < nb; i++) {
        const float d = lc_fp16_to_fp32(x[i].d);
        for (int j = 0; j < qk / 2; ++j) {
            y[i * qk + j] = d * (float)lc_kvalues_iq4nl[x[i].qs[j] & 0xf];
            y[i * qk + j + qk / 2] = d * (float)lc_kvalues_iq4nl[x[i].qs[j] >> 4];
        }
    }
}

void lc_dequantize_row_q4_0(const lc_block_q4_0 *x, float *y, int64_t n)
{
    const int qk = LC_QK4_0;
    const int64_t nb = n / qk;
    for (int64_t i = 0; i < nb; i++) {
        const float d = lc_fp16_to_fp32(x[i].d);
        for (int j = 0; j < qk / 2; ++j) {
            const int x0 = (x[i].qs[j] & 0x0F) - 8;
            const int x1 = (x[i].qs[j] >> 4) - 8;
            y[i * qk + j + 0] = (float)x0 * d;
            y[i * qk + j + qk / 2] = (float)x1 * d;
        }
    }
}

void lc_dequantize_row_q4_1(const lc_block_q4_1 *x, float *y, int64_t n)
{
    const int qk = LC_QK4_1;
    const int64_t nb = n / qk;
    for (int64_t i = 0; i < nb; i++) {
        const float d = lc_fp16_to_fp32(x[i].d);
        const float m = lc_fp16_to_fp32(x[i].m);
        for (int j = 0; j < qk / 2; ++j) {
            const int x0 = (x[i].qs[j] & 0x0F);
            const int x1 = (x[i].qs[j] >> 4);
            y[i * qk + j + 0] = (float)x0 * d + m;
            y[i * qk + j + qk / 2] = (float)x1 * d + m;
        }
    }
}

void lc_dequantize_row_q8_0(const lc_block_q8_0 *x, float *y, int64_t n)
{
    const int qk = LC_QK8_0;
    const int64_t nb = n / qk;
    for (int64_t i = 0; i < nb; i++) {
        const float d = lc_fp16_to_fp32(x[i].d);
        for (int j = 0; j < qk; ++j)
            y[i * qk + j] = (float)x[i].qs[j] * d;
    }
}

/* ---------------------------------------------------------------- simple rows */

static void f32_to_float(const void *x, float *y, int64_t n)
{
    memcpy(y, x, (size_t)n * sizeof(float));
}

static void f32_from_float(const float *x, void *y, int64_t n)
{
    memcpy(y, x, (size_t)n * sizeof(float));
}

static void f16_to_float(const void *x, float *y, int64_t n)
{
    const lc_fp16 *h = x;
    for (int64_t i = 0; i < n; i++)
        y[i] = lc_fp16_to_fp32(h[i]);
}

static void f16_from_float(const float *x, void *y, int64_t n)
{
    lc_fp16 *h = y;
    for (int64_t i = 0; i < n; i++)
        h[i] = lc_fp32_to_fp16(x[i]);
}

static void bf16_to_float(const void *x, float *y, int64_t n)
{
    const lc_bf16 *h = x;
    for (int64_t i = 0; i < n; i++)
        y[i] = lc_bf16_to_fp32(h[i]);
}

static void bf16_from_float(const float *x, void *y, int64_t n)
{
    lc_bf16 *h = y;
    for (int64_t i = 0; i < n; i++)
        h[i] = lc_fp32_to_bf16(x[i]);
}

#define TO(fn) ((lc_to_float_fn)(void (*)(void))(fn))
#define FROM(fn) ((lc_from_float_fn)(void (*)(void))(fn))

/* The K-quants live in quant_k.c.  Block sizes and bytes of every id are ggml's
 * (ggml.c type_traits); the ones without to_float are named for errors only. */
static const struct lc_type_traits traits[LC_TYPE_COUNT] = {
    [LC_TYPE_F32] = {"f32", 1, 4, false, f32_to_float, f32_from_float, LC_TYPE_F32},
    [LC_TYPE_F16] = {"f16", 1, 2, false, f16_to_float, f16_from_float, LC_TYPE_F16},
    [LC_TYPE_BF16] = {"bf16", 1, 2, false, bf16_to_float, bf16_from_float, LC_TYPE_BF16},
    [LC_TYPE_Q4_0] = {"q4_0", LC_QK4_0, sizeof(lc_block_q4_0), true, TO(lc_dequantize_row_q4_0),
                      FROM(lc_quantize_row_q4_0_ref), LC_TYPE_Q8_0},
    [LC_TYPE_Q4_1] = {"q4_1", LC_QK4_1, sizeof(lc_block_q4_1), true, TO(lc_dequantize_row_q4_1),
                      FROM(lc_quantize_row_q4_1_ref), LC_TYPE_Q8_1},
    [LC_TYPE_Q5_0] = {"q5_0", LC_QK5_0, sizeof(lc_block_q5_0), true, TO(lc_dequantize_row_q5_0),
                      FROM(lc_quantize_row_q5_0_ref), LC_TYPE_Q8_0},
    [LC_TYPE_Q5_1] = {"q5_1", LC_QK5_1, sizeof(lc_block_q5_1), true, TO(lc_dequantize_row_q5_1),
                      FROM(lc_quantize_row_q5_1_ref), LC_TYPE_Q8_1},
    [LC_TYPE_Q8_0] = {"q8_0", LC_QK8_0, sizeof(lc_block_q8_0), true, TO(lc_dequantize_row_q8_0),
                      FROM(lc_quantize_row_q8_0_ref), LC_TYPE_Q8_0},
    [LC_TYPE_Q8_1] = {"q8_1", LC_QK8_1, sizeof(lc_block_q8_1), true, NULL,
                      FROM(lc_quantize_row_q8_1_ref), LC_TYPE_Q8_1},
    [LC_TYPE_Q2_K] = {"q2_K", LC_QK_K, sizeof(lc_block_q2_K), true, TO(lc_dequantize_row_q2_K),
                      FROM(lc_quantize_row_q2_K_ref), LC_TYPE_Q8_K},
    [LC_TYPE_Q3_K] = {"q3_K", LC_QK_K, sizeof(lc_block_q3_K), true, TO(lc_dequantize_row_q3_K),
                      FROM(lc_quantize_row_q3_K_ref), LC_TYPE_Q8_K},
    [LC_TYPE_Q4_K] = {"q4_K", LC_QK_K, sizeof(lc_block_q4_K), true, TO(lc_dequantize_row_q4_K),
                      FROM(lc_quantize_row_q4_K_ref), LC_TYPE_Q8_K},
    [LC_TYPE_Q5_K] = {"q5_K", LC_QK_K, sizeof(lc_block_q5_K), true, TO(lc_dequantize_row_q5_K),
                      FROM(lc_quantize_row_q5_K_ref), LC_TYPE_Q8_K},
    [LC_TYPE_Q6_K] = {"q6_K", LC_QK_K, sizeof(lc_block_q6_K), true, TO(lc_dequantize_row_q6_K),
                      FROM(lc_quantize_row_q6_K_ref), LC_TYPE_Q8_K},
    [LC_TYPE_Q8_K] = {"q8_K", LC_QK_K, sizeof(lc_block_q8_K), true, NULL,
                      FROM(lc_quantize_row_q8_K_ref), LC_TYPE_Q8_K},
    [LC_TYPE_IQ4_NL] = {"iq4_nl", LC_QK4_NL, sizeof(lc_block_iq4_nl), true,
                        TO(lc_dequantize_row_iq4_nl),
                        FROM(lc_quantize_row_iq4_nl_ref), LC_TYPE_Q8_0},
    [LC_TYPE_IQ4_XS] = {"iq4_xs", LC_QK_K, sizeof(lc_block_iq4_xs), true,
                        TO(lc_dequantize_row_iq4_xs),
                        FROM(lc_quantize_row_iq4_xs_ref), LC_TYPE_Q8_K},
    /* Known so that files open and errors name them; no kernels. */
    [LC_TYPE_IQ2_XXS] = {"iq2_xxs", LC_QK_K, 66, true, NULL, NULL, LC_TYPE_Q8_K},
    [LC_TYPE_IQ2_XS] = {"iq2_xs", LC_QK_K, 74, true, NULL, NULL, LC_TYPE_Q8_K},
    [LC_TYPE_IQ3_XXS] = {"iq3_xxs", LC_QK_K, 98, true, NULL, NULL, LC_TYPE_Q8_K},
    [LC_TYPE_IQ1_S] = {"iq1_s", LC_QK_K, 50, true, NULL, NULL, LC_TYPE_Q8_K},
    [LC_TYPE_IQ3_S] = {"iq3_s", LC_QK_K, 110, true, NULL, NULL, LC_TYPE_Q8_K},
    [LC_TYPE_IQ2_S] = {"iq2_s", LC_QK_K, 82, true, NULL, NULL, LC_TYPE_Q8_K},
    [LC_TYPE_IQ1_M] = {"iq1_m", LC_QK_K, 56, true, NULL, NULL, LC_TYPE_Q8_K},
    [LC_TYPE_TQ1_0] = {"tq1_0", LC_QK_K, 54, true, NULL, NULL, LC_TYPE_Q8_K},
    [LC_TYPE_TQ2_0] = {"tq2_0", LC_QK_K, 66, true, NULL, NULL, LC_TYPE_Q8_K},
    [LC_TYPE_MXFP4] = {"mxfp4", 32, 17, true, NULL, NULL, LC_TYPE_Q8_0},
    /* ggml 0.27.0 (llama.cpp 0.7.0): names, blocks and bytes from its ggml_type_name,
     * ggml_blck_size and ggml_type_size */
    [LC_TYPE_NVFP4] = {"nvfp4", 64, 36, true, NULL, NULL, LC_TYPE_Q8_0},
    [LC_TYPE_Q1_0] = {"q1_0", 128, 18, true, NULL, NULL, LC_TYPE_Q8_0},
    [LC_TYPE_Q2_0] = {"q2_0", 64, 18, true, NULL, NULL, LC_TYPE_Q8_0},
    [LC_TYPE_I8] = {"i8", 1, 1, false, NULL, NULL, LC_TYPE_I8},
    [LC_TYPE_I16] = {"i16", 1, 2, false, NULL, NULL, LC_TYPE_I16},
    [LC_TYPE_I32] = {"i32", 1, 4, false, NULL, NULL, LC_TYPE_I32},
    [LC_TYPE_I64] = {"i64", 1, 8, false, NULL, NULL, LC_TYPE_I64},
    [LC_TYPE_F64] = {"f64", 1, 8, false, NULL, NULL, LC_TYPE_F64},
};

/* ids ggml once had and removed (no layout any more): named in errors all the same */
static const char *const removed_names[LC_TYPE_COUNT] = {
    [4] = "q4_2",         [5] = "q4_3",         [31] = "q4_0_4_4",   [32] = "q4_0_4_8",
    [33] = "q4_0_8_8",    [36] = "iq4_nl_4_4", [37] = "iq4_nl_4_8", [38] = "iq4_nl_8_8",
};

const struct lc_type_traits *lc_type_traits(int t)
{
    if (t < 0 || t >= LC_TYPE_COUNT || traits[t].name == NULL)
        return NULL;
    return &traits[t];
}

bool lc_type_computable(int t)
{
    const struct lc_type_traits *tt = lc_type_traits(t);
    return tt && tt->to_float && lc_type_traits((int)tt->vec_dot_type) &&
           (tt->vec_dot_type == (enum lc_type)t || tt->is_quantized);
}

const char *lc_type_name(int t)
{
    const struct lc_type_traits *tt = lc_type_traits(t);
    if (tt)
        return tt->name;
    if (t >= 0 && t < LC_TYPE_COUNT && removed_names[t])
        return removed_names[t];
    return "unknown";
}

int lc_type_from_name(const char *name)
{
    for (int t = 0; t < LC_TYPE_COUNT; t++)
        if (traits[t].name && strcasecmp(traits[t].name, name) == 0)
            return t;
    return -1;
}

size_t lc_row_size(enum lc_type t, int64_t n)
{
    const struct lc_type_traits *tt = lc_type_traits((int)t);
    if (!tt || n < 0 || n % tt->blck_size != 0)
        return 0;
    return (size_t)(n / tt->blck_size) * tt->type_size;
}
