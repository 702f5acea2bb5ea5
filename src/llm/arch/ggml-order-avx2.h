/*
 * ggml-order-avx2.h - float dots, softmax and SwiGLU in the exact arithmetic of llama.cpp's x86
 * AVX2 CPU backend (ggml-cpu "haswell": 8 float lanes, F16C conversions, FMA), written in
 * portable C for every ISA (lc_context_params.order = LC_ORDER_GGML_AVX2).  Exact, not fast:
 * each SIMD lane is a scalar fmaf() (libm's exact one, or the FMA instruction), and the
 * horizontal sums add in the order the intrinsics do.
 *
 *  - ggml_vec_dot_f16 / ggml_vec_dot_f32: four accumulators of 8 lanes over blocks of 32
 *    elements (GGML_F16_STEP / GGML_F32_STEP 32, EPR 8), fused multiply-add; reduced as
 *    GGML_F32x8_REDUCE: accumulators 0+2, 1+3, then 0+1, then the two 128-bit halves added
 *    lane-wise and two _mm_hadd_ps: (t0 + t1) + (t2 + t3).  The tail (n % 32) is added one
 *    product at a time, in double for f16 (ggml_float), in float for f32.
 *  - ggml_vec_soft_max_f32: exp by ggml_v_expf's AVX2 form in blocks of 8, each block summed
 *    as (v[i] + v[i+4]) then (t0 + t2) + (t1 + t3) and added in double; the tail by expf.
 *  - ggml_vec_swiglu_f32: silu by the same exp in blocks of 8 (x / (1 + e^-x)), times u.
 */
#ifndef LC_GGML_ORDER_AVX2_H
#define LC_GGML_ORDER_AVX2_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "quant.h"

static inline float o8_bits_f(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline uint32_t o8_f_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* GGML_F32x8_REDUCE of four 8-lane accumulators */
static inline float o8_reduce4(float acc[4][8])
{
    float x0[8], t0[4];
    for (int m = 0; m < 8; m++) {
        const float a02 = acc[0][m] + acc[2][m], a13 = acc[1][m] + acc[3][m];
        x0[m] = a02 + a13;
    }
    for (int m = 0; m < 4; m++)
        t0[m] = x0[m] + x0[m + 4];
    const float h0 = t0[0] + t0[1], h1 = t0[2] + t0[3];
    return h0 + h1;
}

static inline float o8_dot_f16(const lc_fp16 *x, const lc_fp16 *y, int n)
{
    const int np = n & ~31;
    float acc[4][8] = {{0}};
    for (int i = 0; i < np; i += 32)
        for (int j = 0; j < 4; j++)
            for (int m = 0; m < 8; m++) {
                const int e = i + 8 * j + m;
                acc[j][m] = fmaf(LC_FP16_TO_FP32(x[e]), LC_FP16_TO_FP32(y[e]), acc[j][m]);
            }
    double sum = (double)o8_reduce4(acc);
    for (int i = np; i < n; i++)
        sum += (double)(LC_FP16_TO_FP32(x[i]) * LC_FP16_TO_FP32(y[i]));
    return (float)sum;
}

static inline float o8_dot_f32(const float *x, const float *y, int n)
{
    const int np = n & ~31;
    float acc[4][8] = {{0}};
    for (int i = 0; i < np; i += 32)
        for (int j = 0; j < 4; j++)
            for (int m = 0; m < 8; m++) {
                const int e = i + 8 * j + m;
                acc[j][m] = fmaf(x[e], y[e], acc[j][m]);
            }
    float sum = o8_reduce4(acc);
    for (int i = np; i < n; i++)
        sum = fmaf(x[i], y[i], sum); /* `sumf += x[i]*y[i]` contracted by GCC with -mfma */
    return sum;
}

/*
 * ggml_v_expf, AVX2 form, one lane: n = round(x / ln 2), b = x - n ln 2 in two fused steps,
 * j = p(b) - 1 (the last term a product, not a fused add of 1), then 2^n + 2^n j; where
 * |n| > 126 the scale is split in two factors, and |n| > 192 saturates.
 */
static inline float o8_expf(float x)
{
    const float r = 0x1.8p23f;
    const float z = fmaf(x, 0x1.715476p+0f, r);
    const float n = z - r;
    const float b = fmaf(-n, 0x1.7f7d1cp-20f, fmaf(-n, 0x1.62e4p-1f, x));
    const uint32_t e = o8_f_bits(z) << 23;
    const float k = o8_bits_f(e + o8_f_bits(1.0f));
    const float u = b * b;
    const float j = fmaf(fmaf(fmaf(0x1.0e4020p-7f, b, 0x1.573e2ep-5f), u,
                              fmaf(0x1.555e66p-3f, b, 0x1.fffdb6p-2f)),
                         u, 0x1.ffffecp-1f * b);
    const float an = fabsf(n);
    if (!(an > 126.0f))
        return fmaf(j, k, k);
    const uint32_t g = n <= 0.0f ? 0x82000000u : 0u;
    const float s1 = o8_bits_f(g + 0x7f000000u);
    const float s2 = o8_bits_f(e - g);
    if (an > 192.0f)
        return s1 * s1;
    return fmaf(s2, j, s2) * s1;
}

static void o8_softmax(float *x, int n)
{
    float max = -INFINITY;
    for (int i = 0; i < n; i++)
        max = max > x[i] ? max : x[i];
    if (max == -INFINITY) {
        for (int i = 0; i < n; i++)
            x[i] = 0.0f;
        return;
    }
    double sum = 0.0;
    int i = 0;
    for (; i + 7 < n; i += 8) {
        float t[4];
        for (int m = 0; m < 8; m++)
            x[i + m] = o8_expf(x[i + m] - max);
        for (int m = 0; m < 4; m++)
            t[m] = x[i + m + 4] + x[i + m];
        const float a = t[0] + t[2], b = t[1] + t[3];
        sum += (double)(a + b);
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

static void o8_swiglu(float *y, const float *g, const float *u, int n)
{
    int i = 0;
    for (; i + 7 < n; i += 8)
        for (int m = 0; m < 8; m++)
            y[i + m] = (g[i + m] / (1.0f + o8_expf(0.0f - g[i + m]))) * u[i + m];
    for (; i < n; i++)
        y[i] = (g[i] / (1.0f + expf(-g[i]))) * u[i];
}

static void o8_vec_dot_f16(int n, float *s, const void *x, const void *y)
{
    *s = o8_dot_f16(x, y, n);
}

static void o8_vec_dot_f32(int n, float *s, const void *x, const void *y)
{
    *s = o8_dot_f32(x, y, n);
}

#endif
