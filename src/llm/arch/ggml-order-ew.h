/*
 * ggml-order-ew.h - element-wise kernels in the exact arithmetic of llama.cpp's x86 CPU backend
 * (ggml_v_expf, ggml_vec_soft_max_f32, ggml_vec_silu_f32 on AVX-512), shared by scalar.c and the
 * x86 files.  Every fused step is written as fmaf(): scalar.c (no -mfma) gets libm's exact fmaf,
 * the x86 files get the FMA instruction, and both produce the same bits.
 */
#ifndef LC_GGML_ORDER_EW_H
#define LC_GGML_ORDER_EW_H

#include <math.h>
#include <stdint.h>
#include <string.h>

/* _mm512_reduce_add_ps as GCC expands it: halves 256-bit, then 128-bit, then (0+2, 1+3). */
static inline float ew_reduce16(const float v[16])
{
    float t8[8], t4[4];
    for (int i = 0; i < 8; i++)
        t8[i] = v[i + 8] + v[i];
    for (int i = 0; i < 4; i++)
        t4[i] = t8[i + 4] + t8[i];
    const float a = t4[0] + t4[2], b = t4[1] + t4[3];
    return a + b;
}

/* 2^i for |i| <= 126, built from its bits */
static inline float pow2i(int i)
{
    const uint32_t bits = (uint32_t)(i + 127) << 23;
    float f;
    memcpy(&f, &bits, sizeof(f));
    return f;
}

/*
 * expf as ggml_v_expf (AVX-512), lane by lane: n = round(x / ln 2) by the 1.5 * 2^23 trick,
 * b = x - n ln 2 in two fused steps, a degree-5 polynomial in b, scaled by 2^n; |n| > 192
 * saturates to +inf or 0.  Within 1.5 ulp of expf, but not equal to it, hence the copy.
 */
static inline float v_expf(float x)
{
    const float r = 0x1.8p23f;
    const float z = fmaf(x, 0x1.715476p+0f, r);
    const float n = z - r;
    if (fabsf(n) > 192.0f || isnan(n))
        return n > 0.0f ? INFINITY : 0.0f;
    float b = fmaf(-n, 0x1.62e4p-1f, x);
    b = fmaf(-n, 0x1.7f7d1cp-20f, b);
    const float u = b * b;
    const float p1 = fmaf(0x1.0e4020p-7f, b, 0x1.573e2ep-5f);
    const float p2 = fmaf(0x1.555e66p-3f, b, 0x1.fffdb6p-2f);
    const float p4 = fmaf(0x1.ffffecp-1f, b, 1.0f);
    const float j = fmaf(fmaf(p1, u, p2), u, p4);
    /* j * 2^n as _mm512_scalef_ps: two exact power-of-two steps, one rounding at the end */
    const int ni = (int)n, h = ni / 2;
    return (j * pow2i(h)) * pow2i(ni - h);
}

/*
 * Softmax as ggml's soft_max on AVX-512: max in float; exp(x - max) by v_expf in blocks of 16,
 * each block's 16 values summed by ew_reduce16 and added in double (the tail, n % 16, by expf one
 * at a time); every value then multiplied by the float reciprocal of the sum.  The caller pads
 * n to llama.cpp's KV length (a multiple of 32) with -INFINITY, which become exactly 0.
 */
static void ew_softmax(float *x, int n)
{
    float max = -INFINITY;
    for (int i = 0; i < n; i++) /* ggml_vec_max_f32: MAX(a, b) = a > b ? a : b */
        max = max > x[i] ? max : x[i];
    if (max == -INFINITY) { /* everything masked: define the result as all zeros */
        for (int i = 0; i < n; i++)
            x[i] = 0.0f;
        return;
    }
    double sum = 0.0;
    int i = 0;
    for (; i + 15 < n; i += 16) {
        for (int m = 0; m < 16; m++)
            x[i + m] = v_expf(x[i + m] - max);
        sum += (double)ew_reduce16(x + i);
    }
    for (; i < n; i++) {
        const float v = expf(x[i] - max);
        sum += (double)v;
        x[i] = v;
    }
    const float scale = (float)(1.0 / sum);
    for (i = 0; i < n; i++)
        x[i] *= scale;
}

/*
 * One chunk of the fused attention's online softmax (kernels.h exp_sum): t = x * scale (one
 * rounding), *m raised to the largest t, x = v_expf(t - *m); returns the sum of the new x in
 * blocks of 16 (the last padded with zeros), each block's sum by ew_reduce16, added in order to
 * a float from 0.  Not a ggml order (ours; ggml's flash_attn_ext takes one key at a time): the
 * AVX-512 version gives these bits with 16 lanes.
 */
static float ew_exp_sum(float *x, int n, float scale, float *m)
{
    float max = *m;
    for (int i = 0; i < n; i++) {
        const float t = x[i] * scale;
        max = max > t ? max : t;
    }
    *m = max;
    float sum = 0.0f;
    for (int i = 0; i < n; i += 16) {
        float b[16] = {0};
        for (int k = 0; k < 16 && i + k < n; k++)
            b[k] = x[i + k] = v_expf(x[i + k] * scale - max);
        sum += ew_reduce16(b);
    }
    return sum;
}

/*
 * SwiGLU as llama.cpp's graph computes it (ggml_silu, then ggml_mul): silu(v) = v / (1 + e^-v)
 * with v_expf in blocks of 16 (ggml_v_silu), libm expf for the tail; then times u.
 */
static void ew_swiglu(float *y, const float *g, const float *u, int n)
{
    int i = 0;
    for (; i + 15 < n; i += 16)
        for (int m = 0; m < 16; m++)
            y[i + m] = (g[i + m] / (1.0f + v_expf(0.0f - g[i + m]))) * u[i + m];
    for (; i < n; i++)
        y[i] = (g[i] / (1.0f + expf(-g[i]))) * u[i];
}

#endif
