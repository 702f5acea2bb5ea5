/*
 * quant_k.c - the K-quant block formats llamachat needs: Q6_K (weights: what llama.cpp stores
 * output.weight in) and Q8_K (its activations).
 *
 * These are ggml's reference versions (ggml/src/ggml-quants.c as of llama.cpp build 4748,
 * February 2025: quantize_row_q6_K_ref with make_qx_quants, dequantize_row_q6_K,
 * quantize_row_q8_K_ref, and the generic ggml_vec_dot_q6_K_q8_K), rewritten with the same
 * float operations in the same order.  libllm is compiled with -ffp-contract=off, as ggml's
 * quantizers are, so that no multiply-add is fused and the bytes match llama-quantize's.
 *
 * Q6_K layout (256 weights = 16 sub-blocks of 16): each weight is a 6-bit unsigned q in 0..63,
 * x = d * scales[sub] * (q - 32).  The low 4 bits live in ql, the high 2 bits in qh.  Within
 * each half of 128 weights (ql advancing by 64 bytes, qh by 32), for l in 0..31:
 *   weight l      : low nibble of ql[l],      bits 0-1 of qh[l]
 *   weight l + 32 : low nibble of ql[l + 32], bits 2-3 of qh[l]
 *   weight l + 64 : high nibble of ql[l],     bits 4-5 of qh[l]
 *   weight l + 96 : high nibble of ql[l + 32], bits 6-7 of qh[l]
 */
#include "quant.h"

#include <assert.h>
#include <math.h>
#include <string.h>

/* ggml's GROUP_MAX_EPS: a group whose largest magnitude is below this is quantized to zero. */
#define GROUP_MAX_EPS 1e-15f

static inline int imin(int a, int b)
{
    return a < b ? a : b;
}

static inline int imax(int a, int b)
{
    return a > b ? a : b;
}

/*
 * Round to nearest, ties to even, for |fval| <= 2^22: adding 1.5 * 2^23 leaves the rounded
 * integer in the low mantissa bits (ggml's nearest_int; independent of the FPU rounding
 * functions, which is what makes the files reproducible).
 */
static inline int nearest_int(float fval)
{
    assert(fval <= 4194303.f);
    const float val = fval + 12582912.f;
    int i;
    memcpy(&i, &val, sizeof(int));
    return (i & 0x007fffff) - 0x00400000;
}

/*
 * Symmetric quantization of n values to integers in [-nmax, nmax - 1], stored in L as l + nmax.
 * Returns the scale such that x ~ scale * (L - nmax).  With rmse_type 1 and no quant weights,
 * the fit is weighted by x^2: start from iscale = -nmax / max (max = the value of largest
 * magnitude), compute the least-squares scale sum(w x l) / sum(w l^2), then try 18 nearby
 * iscales -(nmax + 0.1 is) / max and keep the one that maximises sum(w x l)^2 / sum(w l^2)
 * (equivalently minimises the weighted squared error).  Only the branches Q6_K uses are here.
 */
static float make_qx_quants(int n, int nmax, const float *x, int8_t *L)
{
    float max = 0;
    float amax = 0;
    for (int i = 0; i < n; ++i) {
        const float ax = fabsf(x[i]);
        if (ax > amax) {
            amax = ax;
            max = x[i];
        }
    }
    if (amax < GROUP_MAX_EPS) { /* all zero */
        for (int i = 0; i < n; ++i)
            L[i] = 0;
        return 0.f;
    }
    float iscale = (float)-nmax / max;
    float sumlx = 0;
    float suml2 = 0;
    for (int i = 0; i < n; ++i) {
        int l = nearest_int(iscale * x[i]);
        l = imax(-nmax, imin(nmax - 1, l));
        L[i] = (int8_t)(l + nmax);
        const float w = x[i] * x[i];
        sumlx += w * x[i] * (float)l;
        suml2 += w * (float)l * (float)l;
    }
    float scale = suml2 != 0.0f ? sumlx / suml2 : 0.0f;
    float best = scale * sumlx;
    for (int is = -9; is <= 9; ++is) {
        if (is == 0)
            continue;
        iscale = -((float)nmax + 0.1f * (float)is) / max;
        sumlx = suml2 = 0;
        for (int i = 0; i < n; ++i) {
            int l = nearest_int(iscale * x[i]);
            l = imax(-nmax, imin(nmax - 1, l));
            const float w = x[i] * x[i];
            sumlx += w * x[i] * (float)l;
            suml2 += w * (float)l * (float)l;
        }
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < n; ++i) {
                const int l = nearest_int(iscale * x[i]);
                L[i] = (int8_t)(nmax + imax(-nmax, imin(nmax - 1, l)));
            }
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

void lc_quantize_row_q6_K_ref(const float *x, lc_block_q6_K *y, int64_t n)
{
    assert(n % LC_QK_K == 0);
    const int64_t nb = n / LC_QK_K;
    int8_t L[LC_QK_K];
    float scales[LC_QK_K / 16];

    for (int64_t i = 0; i < nb; i++) {
        /* 1. a scale per sub-block of 16 (6-bit levels -32..31) */
        float max_scale = 0;
        float max_abs_scale = 0;
        for (int ib = 0; ib < LC_QK_K / 16; ++ib) {
            const float scale = make_qx_quants(16, 32, x + 16 * ib, L + 16 * ib);
            scales[ib] = scale;
            const float abs_scale = fabsf(scale);
            if (abs_scale > max_abs_scale) {
                max_abs_scale = abs_scale;
                max_scale = scale;
            }
        }
        if (max_abs_scale < GROUP_MAX_EPS) {
            memset(&y[i], 0, sizeof(lc_block_q6_K));
            y[i].d = lc_fp32_to_fp16(0.f);
            x += LC_QK_K;
            continue;
        }
        /* 2. the sub-block scales as int8 against one fp16 super-block scale d */
        const float iscale = -128.f / max_scale;
        y[i].d = lc_fp32_to_fp16(1 / iscale);
        for (int ib = 0; ib < LC_QK_K / 16; ++ib)
            y[i].scales[ib] = (int8_t)imin(127, nearest_int(iscale * scales[ib]));

        /* 3. requantize every weight with the scale actually stored: d * scales[j] */
        for (int j = 0; j < LC_QK_K / 16; ++j) {
            const float d = lc_fp16_to_fp32(y[i].d) * (float)y[i].scales[j];
            if (d == 0.0f)
                continue;
            for (int ii = 0; ii < 16; ++ii) {
                int l = nearest_int(x[16 * j + ii] / d);
                l = imax(-32, imin(31, l));
                L[16 * j + ii] = (int8_t)(l + 32);
            }
        }

        /* 4. pack (layout in the header comment) */
        uint8_t *ql = y[i].ql;
        uint8_t *qh = y[i].qh;
        for (int j = 0; j < LC_QK_K; j += 128) {
            for (int l = 0; l < 32; ++l) {
                const uint8_t q1 = (uint8_t)(L[j + l + 0] & 0xF);
                const uint8_t q2 = (uint8_t)(L[j + l + 32] & 0xF);
                const uint8_t q3 = (uint8_t)(L[j + l + 64] & 0xF);
                const uint8_t q4 = (uint8_t)(L[j + l + 96] & 0xF);
                ql[l + 0] = (uint8_t)(q1 | (q3 << 4));
                ql[l + 32] = (uint8_t)(q2 | (q4 << 4));
                qh[l] = (uint8_t)((L[j + l] >> 4) | ((L[j + l + 32] >> 4) << 2) |
                                  ((L[j + l + 64] >> 4) << 4) | ((L[j + l + 96] >> 4) << 6));
            }
            ql += 64;
            qh += 32;
        }
        x += LC_QK_K;
    }
}

void lc_dequantize_row_q6_K(const lc_block_q6_K *x, float *y, int64_t n)
{
    assert(n % LC_QK_K == 0);
    const int64_t nb = n / LC_QK_K;
    for (int64_t i = 0; i < nb; i++) {
        const float d = lc_fp16_to_fp32(x[i].d);
        const uint8_t *ql = x[i].ql;
        const uint8_t *qh = x[i].qh;
        const int8_t *sc = x[i].scales;
        for (int half = 0; half < LC_QK_K; half += 128) {
            for (int l = 0; l < 32; ++l) {
                const int is = l / 16;
                const int q1 = ((ql[l + 0] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
                const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
                const int q3 = ((ql[l + 0] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
                y[l + 0] = d * (float)sc[is + 0] * (float)q1;
                y[l + 32] = d * (float)sc[is + 2] * (float)q2;
                y[l + 64] = d * (float)sc[is + 4] * (float)q3;
                y[l + 96] = d * (float)sc[is + 6] * (float)q4;
            }
            y += 128;
            ql += 64;
            qh += 32;
            sc += 8;
        }
    }
}

void lc_quantize_row_q8_K_ref(const float *x, lc_block_q8_K *y, int64_t n)
{
    assert(n % LC_QK_K == 0);
    const int64_t nb = n / LC_QK_K;
    for (int64_t i = 0; i < nb; i++) {
        float max = 0;
        float amax = 0;
        for (int j = 0; j < LC_QK_K; ++j) {
            const float ax = fabsf(x[j]);
            if (ax > amax) {
                amax = ax;
                max = x[j];
            }
        }
        if (amax == 0.0f) {
            /* ggml leaves bsums unset here; zero them so the block is deterministic */
            memset(&y[i], 0, sizeof(y[i]));
            x += LC_QK_K;
            continue;
        }
        /* -127 (not -128) so that q = 127 * x / |max| never needs clamping below */
        const float iscale = -127.f / max;
        for (int j = 0; j < LC_QK_K; ++j) {
            const int v = nearest_int(iscale * x[j]);
            y[i].qs[j] = (int8_t)imin(127, v);
        }
        for (int j = 0; j < LC_QK_K / 16; ++j) {
            int sum = 0;
            for (int ii = 0; ii < 16; ++ii)
                sum += y[i].qs[j * 16 + ii];
            y[i].bsums[j] = (int16_t)sum;
        }
        y[i].d = 1 / iscale;
        x += LC_QK_K;
    }
}

/*
 * dot(Q6_K row, Q8_K row) as ggml's generic ggml_vec_dot_q6_K_q8_K: per super-block, unpack the
 * 6-bit weights to int8 (q - 32), accumulate scale * w * a in 8 int32 lanes, then add
 * d_w * d_a * lane into 8 float sums; the 8 sums are added at the end.
 */
void lc_vec_dot_q6_K_q8_K_ref(int n, float *s, const void *vx, const void *vy)
{
    assert(n % LC_QK_K == 0);
    const lc_block_q6_K *x = vx;
    const lc_block_q8_K *y = vy;
    const int nb = n / LC_QK_K;

    int8_t aux8[LC_QK_K];
    int16_t aux16[8];
    float sums[8];
    int32_t aux32[8];
    memset(sums, 0, sizeof(sums));

    float sumf = 0;
    for (int i = 0; i < nb; ++i) {
        const uint8_t *q4 = x[i].ql;
        const uint8_t *qh = x[i].qh;
        const int8_t *q8 = y[i].qs;
        memset(aux32, 0, sizeof(aux32));
        int8_t *a = aux8;
        for (int j = 0; j < LC_QK_K; j += 128) {
            for (int l = 0; l < 32; ++l) {
                a[l + 0] = (int8_t)(((q4[l + 0] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32);
                a[l + 32] = (int8_t)(((q4[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32);
                a[l + 64] = (int8_t)(((q4[l + 0] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
                a[l + 96] = (int8_t)(((q4[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
            }
            a += 128;
            q4 += 64;
            qh += 32;
        }
        a = aux8;
        for (int j = 0; j < LC_QK_K / 16; ++j) {
            const int scale = x[i].scales[j];
            for (int l = 0; l < 8; ++l)
                aux16[l] = (int16_t)(q8[l] * a[l]);
            for (int l = 0; l < 8; ++l)
                aux32[l] += scale * aux16[l];
            q8 += 8;
            a += 8;
            for (int l = 0; l < 8; ++l)
                aux16[l] = (int16_t)(q8[l] * a[l]);
            for (int l = 0; l < 8; ++l)
                aux32[l] += scale * aux16[l];
            q8 += 8;
            a += 8;
        }
        const float d = lc_fp16_to_fp32(x[i].d) * y[i].d;
        for (int l = 0; l < 8; ++l)
            sums[l] += d * (float)aux32[l];
    }
    for (int l = 0; l < 8; ++l)
        sumf += sums[l];
    *s = sumf;
}

/* ---------------------------------------------------------------- Q2_K Q3_K Q4_K Q5_K IQ4_XS */

/*
 * Q4_K / Q5_K scales: 8 sub-blocks of 32 weights, each with a 6-bit scale and a 6-bit min,
 * packed into 12 bytes: for j < 4, scale j is the low 6 bits of q[j] and min j those of
 * q[j + 4]; for j >= 4 the low 4 bits are the nibbles of q[j + 4] (scale low, min high) and the
 * top 2 bits are the top 2 bits of q[j - 4] (scale) and q[j] (min).
 */
void lc_get_scale_min_k4(int j, const uint8_t *q, uint8_t *d, uint8_t *m)
{
    if (j < 4) {
        *d = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *d = (uint8_t)((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
        *m = (uint8_t)((q[j + 4] >> 4) | ((q[j - 0] >> 6) << 4));
    }
}

/* Q3_K scales: 16 6-bit values, low 4 bits in the nibbles of bytes 0-7 (scales 0-7 low
 * nibbles, 8-15 high nibbles), top 2 bits in bytes 8-11; stored with an offset of 32. */
void lc_q3_K_scales(const uint8_t *packed, int8_t out[16])
{
    const uint32_t kmask1 = 0x03030303, kmask2 = 0x0f0f0f0f;
    uint32_t aux[4];
    memcpy(aux, packed, 12);
    const uint32_t tmp = aux[2];
    aux[2] = ((aux[0] >> 4) & kmask2) | (((tmp >> 4) & kmask1) << 4);
    aux[3] = ((aux[1] >> 4) & kmask2) | (((tmp >> 6) & kmask1) << 4);
    aux[0] = (aux[0] & kmask2) | (((tmp >> 0) & kmask1) << 4);
    aux[1] = (aux[1] & kmask2) | (((tmp >> 2) & kmask1) << 4);
    uint8_t b[16];
    memcpy(b, aux, 16);
    for (int i = 0; i < 16; i++)
        out[i] = (int8_t)(b[i] - 32);
}

/*
 * Q2_K: 16 sub-blocks of 16 weights; x = d * (scales[s] & 15) * q - dmin * (scales[s] >> 4),
 * q in 0..3.  In each half of 128 weights (qs advancing by 32 bytes), weights 32v + l
 * (v = 0..3, l = 0..31) are bits 2v, 2v+1 of qs[l]; sub-block 8 * half + 2v + l / 16.
 */
void lc_dequantize_row_q2_K(const lc_block_q2_K *x, float *y, int64_t n)
{
    assert(n % LC_QK_K == 0);
    const int64_t nb = n / LC_QK_K;
    for (int64_t i = 0; i < nb; i++) {
        const float d = lc_fp16_to_fp32(x[i].d);
        const float min = lc_fp16_to_fp32(x[i].dmin);
        const uint8_t *q = x[i].qs;
        int is = 0;
        for (int n0 = 0; n0 < LC_QK_K; n0 += 128) {
            int shift = 0;
            for (int j = 0; j < 4; ++j) {
                uint8_t sc = x[i].scales[is++];
                float dl = d * (float)(sc & 0xF), ml = min * (float)(sc >> 4);
                for (int l = 0; l < 16; ++l)
                    *y++ = dl * (float)((int8_t)((q[l] >> shift) & 3)) - ml;
                sc = x[i].scales[is++];
                dl = d * (float)(sc & 0xF);
                ml = min * (float)(sc >> 4);
                for (int l = 0; l < 16; ++l)
                    *y++ = dl * (float)((int8_t)((q[l + 16] >> shift) & 3)) - ml;
                shift += 2;
            }
            q += 32;
        }
    }
}

/*
 * Q3_K: 16 sub-blocks of 16; x = d * (scale - 32) * (q - 4 * !hbit), q the low 2 bits laid out
 * as in Q2_K, hbit bit (4 * half + v) of hmask[l].
 */
void lc_dequantize_row_q3_K(const lc_block_q3_K *x, float *y, int64_t n)
{
    assert(n % LC_QK_K == 0);
    const int64_t nb = n / LC_QK_K;
    for (int64_t i = 0; i < nb; i++) {
        const float d_all = lc_fp16_to_fp32(x[i].d);
        int8_t scales[16];
        lc_q3_K_scales(x[i].scales, scales);
        const uint8_t *q = x[i].qs;
        const uint8_t *hm = x[i].hmask;
        uint8_t m = 1;
        int is = 0;
        for (int n0 = 0; n0 < LC_QK_K; n0 += 128) {
            int shift = 0;
            for (int j = 0; j < 4; ++j) {
                float dl = d_all * (float)scales[is++];
                for (int l = 0; l < 16; ++l)
                    *y++ = dl * (float)((int8_t)((q[l + 0] >> shift) & 3) - ((hm[l + 0] & m) ? 0 : 4));
                dl = d_all * (float)scales[is++];
                for (int l = 0; l < 16; ++l)
                    *y++ = dl * (float)((int8_t)((q[l + 16] >> shift) & 3) - ((hm[l + 16] & m) ? 0 : 4));
                shift += 2;
                m = (uint8_t)(m << 1);
            }
            q += 32;
        }
    }
}

/*
 * Q4_K: 8 sub-blocks of 32; x = d * sc * q - dmin * m.  Each 64 weights take 32 bytes of qs:
 * the low nibbles are the first 32 (sub-block 2j), the high nibbles the next 32 (2j + 1).
 */
void lc_dequantize_row_q4_K(const lc_block_q4_K *x, float *y, int64_t n)
{
    assert(n % LC_QK_K == 0);
    const int64_t nb = n / LC_QK_K;
    for (int64_t i = 0; i < nb; i++) {
        const uint8_t *q = x[i].qs;
        const float d = lc_fp16_to_fp32(x[i].d);
        const float min = lc_fp16_to_fp32(x[i].dmin);
        int is = 0;
        uint8_t sc, m;
        for (int j = 0; j < LC_QK_K; j += 64) {
            lc_get_scale_min_k4(is + 0, x[i].scales, &sc, &m);
            const float d1 = d * sc, m1 = min * m;
            lc_get_scale_min_k4(is + 1, x[i].scales, &sc, &m);
            const float d2 = d * sc, m2 = min * m;
            for (int l = 0; l < 32; ++l)
                *y++ = d1 * (float)(q[l] & 0xF) - m1;
            for (int l = 0; l < 32; ++l)
                *y++ = d2 * (float)(q[l] >> 4) - m2;
            q += 32;
            is += 2;
        }
    }
}

/* Q5_K: Q4_K plus a fifth bit: weight 64j + l has bit 2j of qh[l], weight 64j + 32 + l bit 2j+1. */
void lc_dequantize_row_q5_K(const lc_block_q5_K *x, float *y, int64_t n)
{
    assert(n % LC_QK_K == 0);
    const int64_t nb = n / LC_QK_K;
    for (int64_t i = 0; i < nb; i++) {
        const uint8_t *ql = x[i].qs;
        const uint8_t *qh = x[i].qh;
        const float d = lc_fp16_to_fp32(x[i].d);
        const float min = lc_fp16_to_fp32(x[i].dmin);
        int is = 0;
        uint8_t sc, m;
        unsigned u1 = 1, u2 = 2;
        for (int j = 0; j < LC_QK_K; j += 64) {
            lc_get_scale_min_k4(is + 0, x[i].scales, &sc, &m);
            const float d1 = d * sc, m1 = min * m;
            lc_get_scale_min_k4(is + 1, x[i].scales, &sc, &m);
            const float d2 = d * sc, m2 = min * m;
            for (int l = 0; l < 32; ++l)
                *y++ = d1 * (float)((ql[l] & 0xF) + (qh[l] & u1 ? 16 : 0)) - m1;
            for (int l = 0; l < 32; ++l)
                *y++ = d2 * (float)((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - m2;
            ql += 32;
            is += 2;
            u1 <<= 2;
            u2 <<= 2;
        }
    }
}

/* IQ4_XS: 8 sub-blocks of 32 as IQ4_NL blocks, each with a 6-bit scale (low 4 bits in the
 * nibbles of scales_l, high 2 bits in scales_h), x = d * (ls - 32) * kvalues_iq4nl[q]. */
void lc_dequantize_row_iq4_xs(const lc_block_iq4_xs *x, float *y, int64_t n)
{
    assert(n % LC_QK_K == 0);
    const int64_t nb = n / LC_QK_K;
    for (int64_t i = 0; i < nb; i++) {
        const uint8_t *qs = x[i].qs;
        const float d = lc_fp16_to_fp32(x[i].d);
        for (int ib = 0; ib < LC_QK_K / 32; ++ib) {
            const int ls = ((x[i].scales_l[ib / 2] >> 4 * (ib % 2)) & 0xf) |
                           (((x[i].scales_h >> 2 * ib) & 3) << 4);
            const float dl = d * (float)(ls - 32);
            for (int j = 0; j < 16; ++j) {
                y[j + 0] = dl * (float)lc_kvalues_iq4nl[qs[j] & 0xf];
                y[j + 16] = dl * (float)lc_kvalues_iq4nl[qs[j] >> 4];
            }
            y += 32;
            qs += 16;
        }
    }
}

/* ---------------------------------------------------------------- K-quant quantizers */

/*
 * ggml's reference quantizers of Q2_K, Q3_K, Q4_K, Q5_K (quantize_row_*_K_ref, what
 * llama-quantize runs without an importance matrix) and IQ4_NL / IQ4_XS (quantize_iq4_nl /
 * quantize_iq4_xs without one), with the same float operations in the same order, so that the
 * bytes are llama-quantize's (see the top of this file for -ffp-contract=off).
 */

/*
 * Asymmetric fit of n values to integers 0..nmax: x ~ scale * L - the_min (the_min >= 0).
 * Start from the range [min(x, 0), max(x)], then try nstep + 1 inverse scales
 * (rmin + rdelta * is + nmax) / (max - min); for each, the weighted least-squares scale and
 * offset of the rounded L (offset clamped to <= 0), kept when its weighted error (absolute
 * with use_mad, else squared) is lower.  ggml's make_qkx2_quants.
 */
static float make_qkx2_quants(int n, int nmax, const float *x, const float *weights, uint8_t *L,
                              float *the_min, uint8_t *Laux, float rmin, float rdelta, int nstep,
                              bool use_mad)
{
    float min = x[0];
    float max = x[0];
    float sum_w = weights[0];
    float sum_x = sum_w * x[0];
    for (int i = 1; i < n; ++i) {
        if (x[i] < min)
            min = x[i];
        if (x[i] > max)
            max = x[i];
        const float w = weights[i];
        sum_w += w;
        sum_x += w * x[i];
    }
    if (min > 0)
        min = 0;
    if (max == min) {
        for (int i = 0; i < n; ++i)
            L[i] = 0;
        *the_min = -min;
        return 0.f;
    }
    float iscale = (float)nmax / (max - min);
    float scale = 1 / iscale;
    float best_error = 0;
    for (int i = 0; i < n; ++i) {
        const int l = nearest_int(iscale * (x[i] - min));
        L[i] = (uint8_t)imax(0, imin(nmax, l));
        float diff = scale * (float)L[i] + min - x[i];
        diff = use_mad ? fabsf(diff) : diff * diff;
        best_error += weights[i] * diff;
    }
    if (nstep < 1) {
        *the_min = -min;
        return scale;
    }
    for (int is = 0; is <= nstep; ++is) {
        iscale = (rmin + rdelta * (float)is + (float)nmax) / (max - min);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; ++i) {
            int l = nearest_int(iscale * (x[i] - min));
            l = imax(0, imin(nmax, l));
            Laux[i] = (uint8_t)l;
            const float w = weights[i];
            sum_l += w * (float)l;
            sum_l2 += w * (float)l * (float)l;
            sum_xl += w * (float)l * x[i];
        }
        const float D = sum_w * sum_l2 - sum_l * sum_l;
        if (D > 0) {
            float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
            float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
            if (this_min > 0) {
                this_min = 0;
                this_scale = sum_xl / sum_l2;
            }
            float cur_error = 0;
            for (int i = 0; i < n; ++i) {
                float diff = this_scale * (float)Laux[i] + this_min - x[i];
                diff = use_mad ? fabsf(diff) : diff * diff;
                cur_error += weights[i] * diff;
            }
            if (cur_error < best_error) {
                for (int i = 0; i < n; ++i)
                    L[i] = Laux[i];
                best_error = cur_error;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    *the_min = -min;
    return scale;
}

/*
 * Symmetric fit of n values to -nmax..nmax-1 (stored + nmax in L) for Q3_K: iscale -nmax / max,
 * then (do_rmse) up to 5 passes of coordinate descent that change one L at a time when that
 * raises sum(w x l)^2 / sum(w l^2), w = x^2.  ggml's make_q3_quants.
 */
static float make_q3_quants(int n, int nmax, const float *x, int8_t *L, bool do_rmse)
{
    float max = 0;
    float amax = 0;
    for (int i = 0; i < n; ++i) {
        const float ax = fabsf(x[i]);
        if (ax > amax) {
            amax = ax;
            max = x[i];
        }
    }
    if (amax < GROUP_MAX_EPS) {
        for (int i = 0; i < n; ++i)
            L[i] = 0;
        return 0.f;
    }
    const float iscale = (float)-nmax / max;
    if (do_rmse) {
        float sumlx = 0;
        float suml2 = 0;
        for (int i = 0; i < n; ++i) {
            int l = nearest_int(iscale * x[i]);
            l = imax(-nmax, imin(nmax - 1, l));
            L[i] = (int8_t)l;
            const float w = x[i] * x[i];
            sumlx += w * x[i] * (float)l;
            suml2 += w * (float)l * (float)l;
        }
        for (int itry = 0; itry < 5; ++itry) {
            int n_changed = 0;
            for (int i = 0; i < n; ++i) {
                const float w = x[i] * x[i];
                float slx = sumlx - w * x[i] * (float)L[i];
                if (slx > 0) {
                    float sl2 = suml2 - w * (float)L[i] * (float)L[i];
                    int new_l = nearest_int(x[i] * sl2 / slx);
                    new_l = imax(-nmax, imin(nmax - 1, new_l));
                    if (new_l != L[i]) {
                        slx += w * x[i] * (float)new_l;
                        sl2 += w * (float)new_l * (float)new_l;
                        if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
                            L[i] = (int8_t)new_l;
                            sumlx = slx;
                            suml2 = sl2;
                            ++n_changed;
                        }
                    }
                }
            }
            if (!n_changed)
                break;
        }
        for (int i = 0; i < n; ++i)
            L[i] = (int8_t)(L[i] + nmax);
        return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
    }
    for (int i = 0; i < n; ++i) {
        int l = nearest_int(iscale * x[i]);
        l = imax(-nmax, imin(nmax - 1, l));
        L[i] = (int8_t)(l + nmax);
    }
    return 1 / iscale;
}

/* pack 256 2-bit values: in each half of 128, qs[l] holds weights l, l+32, l+64, l+96 */
static void pack_2bit(const uint8_t *L, uint8_t *qs)
{
    for (int j = 0; j < LC_QK_K; j += 128)
        for (int l = 0; l < 32; ++l)
            qs[j / 4 + l] = (uint8_t)(L[j + l] | (L[j + l + 32] << 2) | (L[j + l + 64] << 4) |
                                      (L[j + l + 96] << 6));
}

void lc_quantize_row_q2_K_ref(const float *x, lc_block_q2_K *y, int64_t n)
{
    assert(n % LC_QK_K == 0);
    const int64_t nb = n / LC_QK_K;
    uint8_t L[LC_QK_K], Laux[16];
    float weights[16], mins[LC_QK_K / 16], scales[LC_QK_K / 16];
    const float q4scale = 15.f;
    for (int64_t i = 0; i < nb; i++) {
        float max_scale = 0; /* the mins are subtracted, so scales are >= 0 */
        float max_min = 0;
        for (int j = 0; j < LC_QK_K / 16; ++j) {
            for (int l = 0; l < 16; ++l)
                weights[l] = fabsf(x[16 * j + l]);
            scales[j] = make_qkx2_quants(16, 3, x + 16 * j, weights, L + 16 * j, &mins[j], Laux,
                                         -0.5f, 0.1f, 15, true);
            if (scales[j] > max_scale)
                max_scale = scales[j];
            if (mins[j] > max_min)
                max_min = mins[j];
        }
        if (max_scale > 0) {
            const float iscale = q4scale / max_scale;
            for (int j = 0; j < LC_QK_K / 16; ++j)
                y[i].scales[j] = (uint8_t)nearest_int(iscale * scales[j]);
            y[i].d = lc_fp32_to_fp16(max_scale / q4scale);
        } else {
            for (int j = 0; j < LC_QK_K / 16; ++j)
                y[i].scales[j] = 0;
            y[i].d = lc_fp32_to_fp16(0.f);
        }
        if (max_min > 0) {
            const float iscale = q4scale / max_min;
            for (int j = 0; j < LC_QK_K / 16; ++j)
                y[i].scales[j] |= (uint8_t)(nearest_int(iscale * mins[j]) << 4);
            y[i].dmin = lc_fp32_to_fp16(max_min / q4scale);
        } else {
            y[i].dmin = lc_fp32_to_fp16(0.f);
        }
        for (int j = 0; j < LC_QK_K / 16; ++j) {
            const float d = lc_fp16_to_fp32(y[i].d) * (float)(y[i].scales[j] & 0xF);
            if (d == 0.0f)
                continue;
            const float dm = lc_fp16_to_fp32(y[i].dmin) * (float)(y[i].scales[j] >> 4);
            for (int ii = 0; ii < 16; ++ii) {
                const int l = nearest_int((x[16 * j + ii] + dm) / d);
                L[16 * j + ii] = (uint8_t)imax(0, imin(3, l));
            }
        }
        pack_2bit(L, y[i].qs);
        x += LC_QK_K;
    }
}

void lc_quantize_row_q3_K_ref(const float *x, lc_block_q3_K *y, int64_t n)
{
    assert(n % LC_QK_K == 0);
    const int64_t nb = n / LC_QK_K;
    int8_t L[LC_QK_K];
    float scales[LC_QK_K / 16];
    for (int64_t i = 0; i < nb; i++) {
        float max_scale = 0;
        float amax = 0;
        for (int j = 0; j < LC_QK_K / 16; ++j) {
            scales[j] = make_q3_quants(16, 4, x + 16 * j, L + 16 * j, true);
            const float scale = fabsf(scales[j]);
            if (scale > amax) {
                amax = scale;
                max_scale = scales[j];
            }
        }
        memset(y[i].scales, 0, 12);
        if (max_scale != 0.0f) {
            const float iscale = -32.f / max_scale;
            for (int j = 0; j < LC_QK_K / 16; ++j) {
                int8_t l = (int8_t)nearest_int(iscale * scales[j]);
                l = (int8_t)(imax(-32, imin(31, l)) + 32);
                if (j < 8)
                    y[i].scales[j] = (uint8_t)(l & 0xF);
                else
                    y[i].scales[j - 8] |= (uint8_t)((l & 0xF) << 4);
                l >>= 4;
                y[i].scales[j % 4 + 8] |= (uint8_t)(l << (2 * (j / 4)));
            }
            y[i].d = lc_fp32_to_fp16(1 / iscale);
        } else {
            y[i].d = lc_fp32_to_fp16(0.f);
        }
        for (int j = 0; j < LC_QK_K / 16; ++j) {
            int sc = j < 8 ? y[i].scales[j] & 0xF : y[i].scales[j - 8] >> 4;
            sc = (sc | (((y[i].scales[8 + j % 4] >> (2 * (j / 4))) & 3) << 4)) - 32;
            const float d = lc_fp16_to_fp32(y[i].d) * (float)sc;
            if (d == 0.0f)
                continue;
            for (int ii = 0; ii < 16; ++ii) {
                const int l = nearest_int(x[16 * j + ii] / d);
                L[16 * j + ii] = (int8_t)(imax(-4, imin(3, l)) + 4);
            }
        }
        /* the high bit of weight j goes to bit j / 32 of hmask[j % 32] */
        memset(y[i].hmask, 0, LC_QK_K / 8);
        int m = 0;
        uint8_t hm = 1;
        for (int j = 0; j < LC_QK_K; ++j) {
            if (L[j] > 3) {
                y[i].hmask[m] |= hm;
                L[j] = (int8_t)(L[j] - 4);
            }
            if (++m == LC_QK_K / 8) {
                m = 0;
                hm = (uint8_t)(hm << 1);
            }
        }
        uint8_t Lu[LC_QK_K];
        for (int j = 0; j < LC_QK_K; ++j)
            Lu[j] = (uint8_t)L[j];
        pack_2bit(Lu, y[i].qs);
        x += LC_QK_K;
    }
}

/*
 * The scales and mins of Q4_K / Q5_K: 8 sub-blocks of 32 fitted by make_qkx2_quants (weights
 * av_x + |x|, av_x the sub-block's RMS), then both quantized to 6 bits against their largest,
 * and the quants recomputed from the rounded scales (0..nmax into L).
 */
static void k45_quantize(const float *x, uint8_t *packed, lc_fp16 *dd, lc_fp16 *dmin, uint8_t *L,
                         int nmax, float rmin, float rdelta, int nstep)
{
    uint8_t Laux[32];
    float weights[32], mins[LC_QK_K / 32], scales[LC_QK_K / 32];
    float max_scale = 0;
    float max_min = 0;
    for (int j = 0; j < LC_QK_K / 32; ++j) {
        float sum_x2 = 0;
        for (int l = 0; l < 32; ++l)
            sum_x2 += x[32 * j + l] * x[32 * j + l];
        const float av_x = sqrtf(sum_x2 / 32);
        for (int l = 0; l < 32; ++l)
            weights[l] = av_x + fabsf(x[32 * j + l]);
        scales[j] = make_qkx2_quants(32, nmax, x + 32 * j, weights, L + 32 * j, &mins[j], Laux, rmin,
                                     rdelta, nstep, false);
        if (scales[j] > max_scale)
            max_scale = scales[j];
        if (mins[j] > max_min)
            max_min = mins[j];
    }
    const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
    const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
    for (int j = 0; j < LC_QK_K / 32; ++j) {
        uint8_t ls = (uint8_t)nearest_int(inv_scale * scales[j]);
        uint8_t lm = (uint8_t)nearest_int(inv_min * mins[j]);
        ls = (uint8_t)imin(63, ls);
        lm = (uint8_t)imin(63, lm);
        if (j < 4) {
            packed[j] = ls;
            packed[j + 4] = lm;
        } else {
            packed[j + 4] = (uint8_t)((ls & 0xF) | ((lm & 0xF) << 4));
            packed[j - 4] |= (uint8_t)((ls >> 4) << 6);
            packed[j - 0] |= (uint8_t)((lm >> 4) << 6);
        }
    }
    *dd = lc_fp32_to_fp16(max_scale / 63.f);
    *dmin = lc_fp32_to_fp16(max_min / 63.f);
    for (int j = 0; j < LC_QK_K / 32; ++j) {
        uint8_t sc, m;
        lc_get_scale_min_k4(j, packed, &sc, &m);
        const float d = lc_fp16_to_fp32(*dd) * (float)sc;
        if (d == 0.0f)
            continue;
        const float dm = lc_fp16_to_fp32(*dmin) * (float)m;
        for (int ii = 0; ii < 32; ++ii) {
            const int l = nearest_int((x[32 * j + ii] + dm) / d);
            L[32 * j + ii] = (uint8_t)imax(0, imin(nmax, l));
        }
    }
}

void lc_quantize_row_q4_K_ref(const float *x, lc_block_q4_K *y, int64_t n)
{
    assert(n % LC_QK_K == 0);
    const int64_t nb = n / LC_QK_K;
    uint8_t L[LC_QK_K];
    for (int64_t i = 0; i < nb; i++) {
        k45_quantize(x, y[i].scales, &y[i].d, &y[i].dmin, L, 15, -1.f, 0.1f, 20);
        uint8_t *q = y[i].qs;
        for (int j = 0; j < LC_QK_K; j += 64, q += 32)
            for (int l = 0; l < 32; ++l)
                q[l] = (uint8_t)(L[j + l] | (L[j + l + 32] << 4));
        x += LC_QK_K;
    }
}

void lc_quantize_row_q5_K_ref(const float *x, lc_block_q5_K *y, int64_t n)
{
    assert(n % LC_QK_K == 0);
    const int64_t nb = n / LC_QK_K;
    uint8_t L[LC_QK_K];
    for (int64_t i = 0; i < nb; i++) {
        k45_quantize(x, y[i].scales, &y[i].d, &y[i].dmin, L, 31, -0.5f, 0.1f, 15);
        uint8_t *qh = y[i].qh, *ql = y[i].qs;
        memset(qh, 0, LC_QK_K / 8);
        uint8_t m1 = 1, m2 = 2;
        for (int k = 0; k < LC_QK_K; k += 64) {
            for (int j = 0; j < 32; ++j) {
                int l1 = L[k + j];
                if (l1 > 15) {
                    l1 -= 16;
                    qh[j] |= m1;
                }
                int l2 = L[k + j + 32];
                if (l2 > 15) {
                    l2 -= 16;
                    qh[j] |= m2;
                }
                ql[j] = (uint8_t)(l1 | (l2 << 4));
            }
            m1 = (uint8_t)(m1 << 2);
            m2 = (uint8_t)(m2 << 2);
            ql += 32;
        }
        x += LC_QK_K;
    }
}

/* the index of the level of values (16, ascending) nearest to x; ties go up (ggml) */
static int best_index_int8(int n, const int8_t *val, float x)
{
    if (x <= val[0])
        return 0;
    if (x >= val[n - 1])
        return n - 1;
    int ml = 0, mu = n - 1;
    while (mu - ml > 1) {
        const int mav = (ml + mu) / 2;
        if (x < val[mav])
            mu = mav;
        else
            ml = mav;
    }
    return x - val[mu - 1] < val[mu] - x ? mu - 1 : mu;
}

/*
 * IQ4_NL / IQ4_XS without quant weights (ggml's quantize_row_iq4_nl_impl, ntry = 7): per block
 * of 32, weights x^2, the scale from the largest magnitude, refined over 15 inverse scales by
 * weighted least squares; with several blocks per super-block (IQ4_XS) the block scales are
 * quantized to 6 bits (ls - 32) against d = -max_scale / 32 and the quants recomputed.
 * sb: super-block size (32 or 256); dh, q4, scales_h, scales_l: the block's fields.
 */
static void iq4_quantize(int sb, const float *x, lc_fp16 *dh, uint8_t *q4, uint16_t *scales_h,
                         uint8_t *scales_l)
{
    const int bs = 32, ntry = 7;
    const int8_t *values = lc_kvalues_iq4nl;
    float weight[32], scales[LC_QK_K / 32];
    uint8_t L[LC_QK_K];
    memset(L, 0, sizeof L);
    memset(q4, 0, (size_t)sb / 2);
    *dh = lc_fp32_to_fp16(0.f);
    float max_scale = 0, amax_scale = 0;
    for (int ib = 0; ib < sb / bs; ++ib) {
        const float *xb = x + ib * bs;
        uint8_t *Lb = L + ib * bs;
        for (int j = 0; j < bs; ++j)
            weight[j] = xb[j] * xb[j];
        float amax = 0, max = 0;
        for (int j = 0; j < bs; ++j) {
            const float ax = fabsf(xb[j]);
            if (ax > amax) {
                amax = ax;
                max = xb[j];
            }
        }
        if (amax < GROUP_MAX_EPS) {
            scales[ib] = 0;
            continue;
        }
        float d = ntry > 0 ? -max / values[0] : max / values[0];
        float id = 1 / d;
        float sumqx = 0, sumq2 = 0;
        for (int j = 0; j < bs; ++j) {
            const float al = id * xb[j];
            const int l = best_index_int8(16, values, al);
            Lb[j] = (uint8_t)l;
            const float q = values[l];
            const float w = weight[j];
            sumqx += w * q * xb[j];
            sumq2 += w * q * q;
        }
        d = sumqx / sumq2;
        float best = d * sumqx;
        for (int itry = -ntry; itry <= ntry; ++itry) {
            id = (float)(itry + values[0]) / max;
            sumqx = sumq2 = 0;
            for (int j = 0; j < bs; ++j) {
                const float al = id * xb[j];
                const int l = best_index_int8(16, values, al);
                const float q = values[l];
                const float w = weight[j];
                sumqx += w * q * xb[j];
                sumq2 += w * q * q;
            }
            if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
                d = sumqx / sumq2;
                best = d * sumqx;
            }
        }
        scales[ib] = d;
        const float abs_d = fabsf(d);
        if (abs_d > amax_scale) {
            amax_scale = abs_d;
            max_scale = d;
        }
    }
    if (sb / bs > 1) {
        const int nb = sb / bs;
        memset(scales_h, 0, (size_t)((nb + 7) / 8) * sizeof(uint16_t));
        const float d = -max_scale / 32;
        *dh = lc_fp32_to_fp16(d);
        const float id = d != 0.0f ? 1 / d : 0.f;
        for (int ib = 0; ib < nb; ++ib) {
            int l = nearest_int(id * scales[ib]);
            l = imax(-32, imin(31, l));
            const float dl = d * (float)l;
            const float idl = dl != 0.0f ? 1 / dl : 0.f;
            uint8_t *Lb = L + ib * bs;
            const float *xb = x + ib * bs;
            for (int j = 0; j < bs; ++j)
                Lb[j] = (uint8_t)best_index_int8(16, values, idl * xb[j]);
            l += 32;
            const uint8_t l_l = (uint8_t)(l & 0xf), l_h = (uint8_t)(l >> 4);
            if (ib % 2 == 0)
                scales_l[ib / 2] = l_l;
            else
                scales_l[ib / 2] |= (uint8_t)(l_l << 4);
            scales_h[ib / 8] |= (uint16_t)(l_h << 2 * (ib % 8));
        }
    } else {
        *dh = lc_fp32_to_fp16(scales[0]);
        const float id = scales[0] != 0.0f ? 1 / scales[0] : 0;
        for (int j = 0; j < sb; ++j)
            L[j] = (uint8_t)best_index_int8(16, values, id * x[j]);
    }
    for (int i = 0; i < sb / 32; ++i)
        for (int j = 0; j < 16; ++j)
            q4[16 * i + j] = (uint8_t)(L[32 * i + j] | (L[32 * i + 16 + j] << 4));
}

void lc_quantize_row_iq4_nl_ref(const float *x, lc_block_iq4_nl *y, int64_t n)
{
    assert(n % LC_QK4_NL == 0);
    for (int64_t i = 0; i < n / LC_QK4_NL; i++) {
        uint16_t unused_h;
        uint8_t unused_l;
        iq4_quantize(LC_QK4_NL, x + LC_QK4_NL * i, &y[i].d, y[i].qs, &unused_h, &unused_l);
    }
}

void lc_quantize_row_iq4_xs_ref(const float *x, lc_block_iq4_xs *y, int64_t n)
{
    assert(n % LC_QK_K == 0);
    for (int64_t i = 0; i < n / LC_QK_K; i++) {
        uint16_t sh;
        iq4_quantize(LC_QK_K, x + LC_QK_K * i, &y[i].d, y[i].qs, &sh, y[i].scales_l);
        memcpy(&y[i].scales_h, &sh, sizeof sh);
    }
}
