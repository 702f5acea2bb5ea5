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
