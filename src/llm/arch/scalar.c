/*
 * scalar.c - the reference kernels: plain C, one readable loop per kernel, always built.
 *
 * These define what every ISA file must compute.  The integer parts of the quantized dot
 * products are exact, so SIMD versions agree with them up to the order of float summation;
 * the activation quantizers are byte-exact across all ISAs (see quantize_row_q8_1 below).
 *
 * Sources: ggml-cpu (ggml_vec_dot_*_q8_*, quantize_row_q8_*, ggml_compute_forward_rms_norm_f32,
 * ggml_compute_forward_soft_max_f32, ggml_vec_silu_f32), build 4748, rewritten.
 */
#include <math.h>
#include <string.h>

#include "kernels.h"
#include "repack.h"
#include "ggml-order-ew.h"

/* ---------------------------------------------------------------- activation quantizers */

/*
 * Q8_0 / Q8_1 activation rows, as llama.cpp quantizes activations on x86 (the machine the golden
 * data came from): ggml's AVX/AVX2 quantize_row_q8_{0,1} compute d = amax/127 but scale by
 * id = 127/amax (not 1/d as the `_ref` versions do) and round with _mm256_round_ps
 * (_MM_ROUND_NEAREST, i.e. half to even, not roundf's half away from zero).  Both differences
 * change a quant now and then (ties, and products one ulp apart), so every llamachat ISA, scalar
 * included, uses ggml's SIMD rounding: nearbyintf() in the default rounding mode is half-even.
 * The `_ref` quantizers in quant.c stay as they are: they quantize weights, like llama-quantize.
 * s = d * sum(q) is computed in float and rounded to fp16, as ggml does.
 */
static void quantize_row_q8_0(const float *x, void *vy, int64_t n)
{
    lc_block_q8_0 *y = vy;
    const int64_t nb = n / LC_QK8_0;
    for (int64_t i = 0; i < nb; i++) {
        const float *xb = x + i * LC_QK8_0;
        float amax = 0.0f;
        for (int j = 0; j < LC_QK8_0; j++)
            amax = fmaxf(amax, fabsf(xb[j]));
        const float d = amax / 127.f;
        const float id = amax != 0.0f ? 127.f / amax : 0.0f;
        y[i].d = lc_fp32_to_fp16(d);
        for (int j = 0; j < LC_QK8_0; j++)
            y[i].qs[j] = (int8_t)nearbyintf(xb[j] * id);
    }
}

static void quantize_row_q8_1(const float *x, void *vy, int64_t n)
{
    lc_block_q8_1 *y = vy;
    const int64_t nb = n / LC_QK8_1;
    for (int64_t i = 0; i < nb; i++) {
        const float *xb = x + i * LC_QK8_1;
        float amax = 0.0f;
        for (int j = 0; j < LC_QK8_1; j++)
            amax = fmaxf(amax, fabsf(xb[j]));
        const float d = amax / 127.f;
        const float id = amax != 0.0f ? 127.f / amax : 0.0f;
        y[i].d = lc_fp32_to_fp16(d);
        int sum = 0;
        for (int j = 0; j < LC_QK8_1; j++) {
            y[i].qs[j] = (int8_t)nearbyintf(xb[j] * id);
            sum += y[i].qs[j];
        }
        y[i].s = lc_fp32_to_fp16(d * (float)sum);
    }
}

/* Q8_K: ggml-cpu's quantize_row_q8_K is the reference one on every ISA llamachat targets. */
static void quantize_row_q8_K(const float *x, void *y, int64_t n)
{
    lc_quantize_row_q8_K_ref(x, y, n);
}

static void quantize_row_f32(const float *x, void *y, int64_t n)
{
    memcpy(y, x, (size_t)n * sizeof(float));
}

static void quantize_row_f16(const float *x, void *vy, int64_t n)
{
    lc_fp16 *y = vy;
    for (int64_t i = 0; i < n; i++)
        y[i] = lc_fp32_to_fp16(x[i]);
}

static void quantize_row_bf16(const float *x, void *vy, int64_t n)
{
    lc_bf16 *y = vy;
    for (int64_t i = 0; i < n; i++)
        y[i] = lc_fp32_to_bf16(x[i]);
}

/* ---------------------------------------------------------------- float dots */

/*
 * Float dots in the order llama.cpp's x86 AVX-512 build sums them, so that logits agree to the
 * last bits where they can (an F16 KV cache and Q8 activations turn one-ulp differences into
 * different roundings, and those into different tokens a few dozen tokens later):
 *
 *  - ggml_vec_dot_f32 / ggml_vec_dot_f16 (one token: decode, and q.k): four accumulators of
 *    16 float lanes over blocks of 64 elements, fused multiply-add, reduced 0+2, 1+3, 0+1 and
 *    then across lanes (reduce16); the tail (n % 64) is added one product at a time, in float
 *    for f32 and in double for f16 (whose whole sum is a double, ggml_float).
 *  - tinyBLAS (llamafile sgemm, prompt batches of 2 or more tokens, k a multiple of 16):
 *    one accumulator of 16 lanes per output over the whole row, then reduce16.
 *
 * reduce16 is _mm512_reduce_add_ps as GCC expands it: halves 256-bit, then 128-bit, then
 * (0+2, 1+3), then the last two.
 */

/* Four 16-lane accumulators over the first n & ~63 elements, reduced to one float. */
#define SIMD64_SUM(LOADX, LOADY, np, out)                                                        \
    do {                                                                                         \
        float acc_[4][16] = {{0}};                                                               \
        for (int i_ = 0; i_ < (np); i_ += 64)                                                    \
            for (int j_ = 0; j_ < 4; j_++)                                                       \
                for (int m_ = 0; m_ < 16; m_++) {                                                \
                    const int e_ = i_ + 16 * j_ + m_;                                            \
                    acc_[j_][m_] = fmaf(LOADX(e_), LOADY(e_), acc_[j_][m_]);                     \
                }                                                                                \
        for (int m_ = 0; m_ < 16; m_++) {                                                        \
            acc_[0][m_] += acc_[2][m_];                                                          \
            acc_[1][m_] += acc_[3][m_];                                                          \
        }                                                                                        \
        for (int m_ = 0; m_ < 16; m_++)                                                          \
            acc_[0][m_] += acc_[1][m_];                                                          \
        (out) = ew_reduce16(acc_[0]);                                                               \
    } while (0)

static float dot_f32(const float *x, const float *y, int n)
{
    const int np = n & ~63;
    float sum;
#define LX(e) x[e]
#define LY(e) y[e]
    SIMD64_SUM(LX, LY, np, sum);
#undef LX
#undef LY
    for (int i = np; i < n; i++)
        sum = fmaf(x[i], y[i], sum); /* GCC contracts ggml's `sumf += x[i]*y[i]` with -mfma */
    return sum;
}

static float dot_f16(const lc_fp16 *x, const lc_fp16 *y, int n)
{
    const int np = n & ~63;
    float simd;
#define LX(e) LC_FP16_TO_FP32(x[e])
#define LY(e) LC_FP16_TO_FP32(y[e])
    SIMD64_SUM(LX, LY, np, simd);
#undef LX
#undef LY
    double sum = (double)simd;
    for (int i = np; i < n; i++)
        sum += (double)(LC_FP16_TO_FP32(x[i]) * LC_FP16_TO_FP32(y[i]));
    return (float)sum;
}

/* tinyBLAS order: one 16-lane fused accumulator per output over the row, then reduce16.
 * Rows whose length is not a multiple of 16 are not tinyBLAS's: use the vec_dot order. */
static float tiny_dot_f32(const float *x, const float *y, int n)
{
    if (n % 16)
        return dot_f32(x, y, n);
    float acc[16] = {0};
    for (int l = 0; l < n; l += 16)
        for (int m = 0; m < 16; m++)
            acc[m] = fmaf(x[l + m], y[l + m], acc[m]);
    return ew_reduce16(acc);
}

static float tiny_dot_f16(const lc_fp16 *x, const lc_fp16 *y, int n)
{
    if (n % 16)
        return dot_f16(x, y, n);
    float acc[16] = {0};
    for (int l = 0; l < n; l += 16)
        for (int m = 0; m < 16; m++)
            acc[m] = fmaf(LC_FP16_TO_FP32(x[l + m]), LC_FP16_TO_FP32(y[l + m]), acc[m]);
    return ew_reduce16(acc);
}

#include "float-rows.h"

static void vec_dot_bf16(int n, float *s, const void *vx, const void *vy)
{
    const lc_bf16 *x = vx, *y = vy;
    double sum = 0.0;
    for (int i = 0; i < n; i++)
        sum += (double)(lc_bf16_to_fp32(x[i]) * lc_bf16_to_fp32(y[i]));
    *s = (float)sum;
}

/* ---------------------------------------------------------------- quantized dots */

/*
 * The quantized dots add their terms in the order of ggml's x86 kernels (ggml-cpu-quants.c,
 * the __AVX2__ paths of ggml_vec_dot_{q4_0_q8_0,q4_1_q8_1,q8_0_q8_0}, which llama.cpp also runs
 * on AVX-512 machines, with vpdpbusd for the integer part): the golden data came from there, and
 * with quantized activations a one-ulp difference in a layer's output can flip an activation
 * quant in the next layer and move the logits by 0.1.  So every llamachat ISA computes exactly
 * this, and all of them agree with llama.cpp on x86 bit for bit:
 *
 *   - a block's 32 weights are taken in the unpacked order (for Q4: the low nibbles of qs[0..15],
 *     then the high nibbles) with the activations qs[0..31], and the integer products are summed
 *     in 8 lanes of 4 consecutive elements (lane j = elements 4j .. 4j+3);
 *   - per block, each lane is converted to float and accumulated with a fused multiply-add by
 *     d = dx * dy:  acc[j] = fma(d, lane[j], acc[j]);
 *   - at the end the lanes are added as ggml's hsum_float_8 does (below), and for Q4_1 the sum
 *     of mx * sy over the blocks (a plain float sum in block order) is added last.
 */
static float hsum8(const float l[8])
{
    return ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7]));
}

/* acc[j] = fma(d, sum of p[4j .. 4j+3], acc[j]) for the 32 integer products p of one block */
static void block_lanes(float acc[8], float d, const int p[32])
{
    for (int j = 0; j < 8; j++)
        acc[j] = fmaf(d, (float)(p[4 * j] + p[4 * j + 1] + p[4 * j + 2] + p[4 * j + 3]), acc[j]);
}

/* Q4_0 . Q8_0: x = dx * (q - 8), y = dy * p  ->  sum over blocks of dx * dy * sum((q - 8) * p). */
static void vec_dot_q4_0_q8_0(int n, float *s, const void *vx, const void *vy)
{
    const lc_block_q4_0 *x = vx;
    const lc_block_q8_0 *y = vy;
    const int nb = n / LC_QK4_0;
    float acc[8] = {0};
    for (int i = 0; i < nb; i++) {
        int p[32];
        for (int j = 0; j < 16; j++) {
            p[j] = ((x[i].qs[j] & 0x0F) - 8) * y[i].qs[j];
            p[j + 16] = ((x[i].qs[j] >> 4) - 8) * y[i].qs[j + 16];
        }
        block_lanes(acc, LC_FP16_TO_FP32(x[i].d) * LC_FP16_TO_FP32(y[i].d), p);
    }
    *s = hsum8(acc);
}

/* acc = fma(float(isum), dx * dy, acc) for one Q4_0 block (the Q4_0x8 order) */
static float q4_0x8_block(float acc, const lc_block_q4_0 *x, const lc_block_q8_0 *y)
{
    int isum = 0;
    for (int j = 0; j < 16; j++)
        isum += ((x->qs[j] & 0x0F) - 8) * y->qs[j] + ((x->qs[j] >> 4) - 8) * y->qs[j + 16];
    return fmaf((float)isum, LC_FP16_TO_FP32(x->d) * LC_FP16_TO_FP32(y->d), acc);
}

/*
 * Q4_0 . Q8_0 in the order of llama.cpp's repacked kernels (ggml_gemv_q4_0_8x8_q8_0 and
 * ggml_gemm_q4_0_8x8_q8_0, the x86 AVX2/AVX-512 paths of ggml-cpu-aarch64.cpp, which llama.cpp
 * uses for Q4_0 matrices with a multiple of 8 rows): the block's 32 products summed as one
 * integer, acc = fma(float(isum), dx * dy, acc) block by block from acc = 0, and acc is the
 * result (no lanes, no horizontal sum).
 */
static void vec_dot_q4_0x8_q8_0(int n, float *s, const void *vx, const void *vy)
{
    const lc_block_q4_0 *x = vx;
    const lc_block_q8_0 *y = vy;
    const int nb = n / LC_QK4_0;
    float acc = 0.0f;
    for (int i = 0; i < nb; i++)
        acc = q4_0x8_block(acc, x + i, y + i);
    *s = acc;
}

/* one block of vec_dot_q4_1_q8_1: acc's lanes and the m * s sum */
static void q4_1_block(float acc[8], float *summs, const lc_block_q4_1 *x, const lc_block_q8_1 *y)
{
    int p[32];
    for (int j = 0; j < 16; j++) {
        p[j] = (x->qs[j] & 0x0F) * y->qs[j];
        p[j + 16] = (x->qs[j] >> 4) * y->qs[j + 16];
    }
    *summs += LC_FP16_TO_FP32(x->m) * LC_FP16_TO_FP32(y->s);
    block_lanes(acc, LC_FP16_TO_FP32(x->d) * LC_FP16_TO_FP32(y->d), p);
}

/*
 * Q4_1 . Q8_1: x = dx * q + mx, y = dy * p, sy = dy * sum(p) (stored in the Q8_1 block):
 *   sum_j x_j y_j = dx * dy * sum(q * p) + mx * sy
 * ggml_vec_dot_q4_1_q8_1's formula, per block; the mx * sy terms are summed apart.
 */
static void vec_dot_q4_1_q8_1(int n, float *s, const void *vx, const void *vy)
{
    const lc_block_q4_1 *x = vx;
    const lc_block_q8_1 *y = vy;
    const int nb = n / LC_QK4_1;
    float acc[8] = {0};
    float summs = 0.0f;
    for (int i = 0; i < nb; i++)
        q4_1_block(acc, &summs, x + i, y + i);
    *s = hsum8(acc) + summs;
}

/*
 * The x16 layout (repack.h): the same dots, row by row, each block rebuilt in ggml's layout by
 * lc_x16_get_block.  Q4_1, Q6_K, Q4_K, Q5_K, Q5_1, Q8_0 in vec_dot's order, Q4_0 in the Q4_0x8 order.
 */
static void q6_K_block(float acc[8], const lc_block_q6_K *x, const lc_block_q8_K *y);
static void q4_K_block(float acc[8], float acc_m[4], const lc_block_q4_K *x, const lc_block_q8_K *y);
static void q5_K_block(float acc[8], float *summs, const lc_block_q5_K *x, const lc_block_q8_K *y);
static void q5_1_block(float acc[8], float *summs, const lc_block_q5_1 *x, const lc_block_q8_1 *y);
static void q8_0_block(float acc[8], const lc_block_q8_0 *x, const lc_block_q8_0 *y);

static void gemv_x16(enum lc_type type, int n, float *s, const void *vw, size_t w_stride, int nr,
                     const void *va)
{
    const int nb = n / lc_type_traits(type)->blck_size;
    for (int r = 0; r < nr; r++) {
        const uint8_t *group = (const uint8_t *)vw + (size_t)(r / LC_X16_ROWS) * LC_X16_ROWS * w_stride;
        if (type == LC_TYPE_Q4_K) {
            const lc_block_q8_K *y = va;
            float acc[8] = {0}, acc_m[4] = {0};
            for (int i = 0; i < nb; i++) {
                lc_block_q4_K x;
                lc_x16_get_block(type, group, nb, r % LC_X16_ROWS, i, &x);
                q4_K_block(acc, acc_m, &x, y + i);
            }
            s[r] = hsum8(acc) + ((acc_m[0] + acc_m[2]) + (acc_m[1] + acc_m[3]));
        } else if (type == LC_TYPE_Q5_K) {
            const lc_block_q8_K *y = va;
            float acc[8] = {0}, summs = 0.0f;
            for (int i = 0; i < nb; i++) {
                lc_block_q5_K x;
                lc_x16_get_block(type, group, nb, r % LC_X16_ROWS, i, &x);
                q5_K_block(acc, &summs, &x, y + i);
            }
            s[r] = hsum8(acc) + summs;
        } else if (type == LC_TYPE_Q5_1) {
            const lc_block_q8_1 *y = va;
            float acc[8] = {0}, summs = 0.0f;
            for (int i = 0; i < nb; i++) {
                lc_block_q5_1 x;
                lc_x16_get_block(type, group, nb, r % LC_X16_ROWS, i, &x);
                q5_1_block(acc, &summs, &x, y + i);
            }
            s[r] = hsum8(acc) + summs;
        } else if (type == LC_TYPE_Q8_0) {
            lc_block_q8_0 x[1];
            float acc[8] = {0};
            for (int i = 0; i < nb; i++) {
                lc_x16_get_block(type, group, nb, r % LC_X16_ROWS, i, x);
                q8_0_block(acc, x, (const lc_block_q8_0 *)va + i);
            }
            s[r] = hsum8(acc);
        } else if (type == LC_TYPE_Q4_1) {
            const lc_block_q8_1 *y = va;
            float acc[8] = {0};
            float summs = 0.0f;
            for (int i = 0; i < nb; i++) {
                lc_block_q4_1 x;
                lc_x16_get_block(type, group, nb, r % LC_X16_ROWS, i, &x);
                q4_1_block(acc, &summs, &x, y + i);
            }
            s[r] = hsum8(acc) + summs;
        } else if (type == LC_TYPE_Q6_K) {
            const lc_block_q8_K *y = va;
            float acc[8] = {0};
            for (int i = 0; i < nb; i++) {
                lc_block_q6_K x;
                lc_x16_get_block(type, group, nb, r % LC_X16_ROWS, i, &x);
                q6_K_block(acc, &x, y + i);
            }
            s[r] = hsum8(acc);
        } else {
            const lc_block_q8_0 *y = va;
            float acc = 0.0f;
            for (int i = 0; i < nb; i++) {
                lc_block_q4_0 x;
                lc_x16_get_block(type, group, nb, r % LC_X16_ROWS, i, &x);
                acc = q4_0x8_block(acc, &x, y + i);
            }
            s[r] = acc;
        }
    }
}

static void gemv_x16_q4_1(int n, float *s, const void *w, size_t w_stride, int nr, const void *a)
{
    gemv_x16(LC_TYPE_Q4_1, n, s, w, w_stride, nr, a);
}

static void gemv_x16_q4_0(int n, float *s, const void *w, size_t w_stride, int nr, const void *a)
{
    gemv_x16(LC_TYPE_Q4_0, n, s, w, w_stride, nr, a);
}

static void gemv_x16_q6_K(int n, float *s, const void *w, size_t w_stride, int nr, const void *a)
{
    gemv_x16(LC_TYPE_Q6_K, n, s, w, w_stride, nr, a);
}

#define DEFINE_X16_SCALAR(NAME, TYPE)                                                             \
    static void gemv_x16_##NAME(int n, float *s, const void *w, size_t w_stride, int nr,          \
                                const void *a)                                                    \
    {                                                                                             \
        gemv_x16(TYPE, n, s, w, w_stride, nr, a);                                                 \
    }                                                                                             \
    static void gemm_x16_##NAME(int n, float *s, size_t ld_s, const void *w, size_t w_stride,     \
                                int nr, const void *a, size_t a_stride, int nc)                   \
    {                                                                                             \
        for (int c = 0; c < nc; c++)                                                              \
            gemv_x16(TYPE, n, s + (size_t)c * ld_s, w, w_stride, nr,                              \
                     (const uint8_t *)a + (size_t)c * a_stride);                                  \
    }
DEFINE_X16_SCALAR(q4_K, LC_TYPE_Q4_K)
DEFINE_X16_SCALAR(q5_K, LC_TYPE_Q5_K)
DEFINE_X16_SCALAR(q5_1, LC_TYPE_Q5_1)
DEFINE_X16_SCALAR(q8_0, LC_TYPE_Q8_0)

static void gemm_x16_q6_K(int n, float *s, size_t ld_s, const void *w, size_t w_stride, int nr,
                          const void *a, size_t a_stride, int nc)
{
    for (int c = 0; c < nc; c++)
        gemv_x16(LC_TYPE_Q6_K, n, s + (size_t)c * ld_s, w, w_stride, nr,
                 (const uint8_t *)a + (size_t)c * a_stride);
}

static void gemm_x16_q4_1(int n, float *s, size_t ld_s, const void *w, size_t w_stride, int nr,
                          const void *a, size_t a_stride, int nc)
{
    for (int c = 0; c < nc; c++)
        gemv_x16(LC_TYPE_Q4_1, n, s + (size_t)c * ld_s, w, w_stride, nr,
                 (const uint8_t *)a + (size_t)c * a_stride);
}

static void gemm_x16_q4_0(int n, float *s, size_t ld_s, const void *w, size_t w_stride, int nr,
                          const void *a, size_t a_stride, int nc)
{
    for (int c = 0; c < nc; c++)
        gemv_x16(LC_TYPE_Q4_0, n, s + (size_t)c * ld_s, w, w_stride, nr,
                 (const uint8_t *)a + (size_t)c * a_stride);
}

/* Q8_0 . Q8_0: sum over blocks of dx * dy * sum(q * p), in ggml's AVX2 lane order. */
static void vec_dot_q8_0_q8_0(int n, float *s, const void *vx, const void *vy)
{
    const lc_block_q8_0 *x = vx;
    const lc_block_q8_0 *y = vy;
    const int nb = n / LC_QK8_0;
    float acc[8] = {0};
    for (int i = 0; i < nb; i++)
        q8_0_block(acc, x + i, y + i);
    *s = hsum8(acc);
}

static void q8_0_block(float acc[8], const lc_block_q8_0 *x, const lc_block_q8_0 *y)
{
    int p[32];
    for (int j = 0; j < 32; j++)
        p[j] = x->qs[j] * y->qs[j];
    block_lanes(acc, LC_FP16_TO_FP32(x->d) * LC_FP16_TO_FP32(y->d), p);
}

/* one super-block of vec_dot_q6_K_q8_K: acc's 8 lanes */
static void q6_K_block(float acc[8], const lc_block_q6_K *x, const lc_block_q8_K *y)
{
    int lanes[8] = {0};
    for (int h = 0; h < 2; h++) {
        const uint8_t *ql = x->ql + 64 * h, *qh = x->qh + 32 * h;
        const int8_t *q8 = y->qs + 128 * h;
        const int8_t *sc = x->scales + 8 * h;
        for (int v = 0; v < 4; v++)
            for (int l = 0; l < 32; l++) {
                const int b = ql[32 * (v & 1) + l];
                const int q = ((v < 2 ? b & 0x0F : b >> 4) | (((qh[l] >> (2 * v)) & 3) << 4)) - 32;
                lanes[l / 4] += sc[2 * v + l / 16] * q * q8[32 * v + l];
            }
    }
    const float d = y->d * LC_FP16_TO_FP32(x->d);
    for (int k = 0; k < 8; k++)
        acc[k] = fmaf(d, (float)lanes[k], acc[k]);
}

/*
 * Q6_K . Q8_K in the order of ggml's x86 kernel (the __AVX2__ ggml_vec_dot_q6_K_q8_K, which
 * llama.cpp runs on AVX-512 machines too), not the generic one (lc_vec_dot_q6_K_q8_K_ref): per
 * super-block, exact integer sums in 8 lanes, then acc[lane] = fma(d, lane, acc[lane]) with
 * d = dy * dx, and hsum_float_8 at the end.
 * A super-block is two halves of 128 weights; a half is four quarters v = 0..3 of 32 weights:
 * quarter v takes the low (v < 2) or high nibbles of ql[32 * (v & 1) + l] and bits 2v, 2v+1 of
 * qh[l] as its upper two bits, minus 32; weights l = 0..15 of a quarter use scale 2v, 16..31
 * scale 2v + 1 (of the half's 8).  Lane k collects, in every quarter, the weights 4k .. 4k+3.
 */
static void vec_dot_q6_K_q8_K(int n, float *s, const void *vx, const void *vy)
{
    const lc_block_q6_K *x = vx;
    const lc_block_q8_K *y = vy;
    const int nb = n / LC_QK_K;
    float acc[8] = {0};
    for (int i = 0; i < nb; i++)
        q6_K_block(acc, x + i, y + i);
    *s = hsum8(acc);
}

/* ---------------------------------------------------------------- Q5_0 Q5_1 IQ4_NL */

/* the 32 quants of a Q5 block in unpacked order: nibbles of qs plus bit j of qh as bit 4 */
static void q5_unpack(const uint8_t qs[16], const uint8_t qh4[4], int q[32])
{
    uint32_t qh;
    memcpy(&qh, qh4, sizeof(qh));
    for (int j = 0; j < 16; j++) {
        q[j] = (qs[j] & 0x0F) | (int)(((qh >> j) & 1u) << 4);
        q[j + 16] = (qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1u) << 4);
    }
}

/*
 * Q5_0 . Q8_0: x = dx * (q - 16).  ggml's AVX2 ggml_vec_dot_q5_0_q8_0 (and tinyBLAS_Q0_AVX,
 * llama.cpp's path for batches, which runs the same per-block operations): the Q4_0 order.
 */
static void vec_dot_q5_0_q8_0(int n, float *s, const void *vx, const void *vy)
{
    const lc_block_q5_0 *x = vx;
    const lc_block_q8_0 *y = vy;
    const int nb = n / LC_QK5_0;
    float acc[8] = {0};
    for (int i = 0; i < nb; i++) {
        int q[32], p[32];
        q5_unpack(x[i].qs, x[i].qh, q);
        for (int j = 0; j < 32; j++)
            p[j] = (q[j] - 16) * y[i].qs[j];
        block_lanes(acc, LC_FP16_TO_FP32(x[i].d) * LC_FP16_TO_FP32(y[i].d), p);
    }
    *s = hsum8(acc);
}

/* Q5_1 . Q8_1: dx * dy * sum(q * p) + mx * sy per block, the Q4_1 order (ggml's AVX2 kernel). */
static void vec_dot_q5_1_q8_1(int n, float *s, const void *vx, const void *vy)
{
    const lc_block_q5_1 *x = vx;
    const lc_block_q8_1 *y = vy;
    const int nb = n / LC_QK5_1;
    float acc[8] = {0};
    float summs = 0.0f;
    for (int i = 0; i < nb; i++)
        q5_1_block(acc, &summs, x + i, y + i);
    *s = hsum8(acc) + summs;
}

static void q5_1_block(float acc[8], float *summs, const lc_block_q5_1 *x, const lc_block_q8_1 *y)
{
    int q[32], p[32];
    *summs += LC_FP16_TO_FP32(x->m) * LC_FP16_TO_FP32(y->s);
    q5_unpack(x->qs, x->qh, q);
    for (int j = 0; j < 32; j++)
        p[j] = q[j] * y->qs[j];
    block_lanes(acc, LC_FP16_TO_FP32(x->d) * LC_FP16_TO_FP32(y->d), p);
}

/* the 32 products of an IQ4_NL block with a Q8_0 block, unpacked order */
static void iq4_nl_products(const lc_block_iq4_nl *x, const lc_block_q8_0 *y, int p[32])
{
    for (int j = 0; j < 16; j++) {
        p[j] = lc_kvalues_iq4nl[x->qs[j] & 0x0F] * y->qs[j];
        p[j + 16] = lc_kvalues_iq4nl[x->qs[j] >> 4] * y->qs[j + 16];
    }
}

/*
 * IQ4_NL . Q8_0 as ggml's AVX2 ggml_vec_dot_iq4_nl_q8_0 (one token): blocks taken in pairs,
 * the even ones into accumulator 1 and the odd ones into accumulator 2 (8 lanes each, fused
 * d * lane), hsum_float_8(acc1 + acc2); a last odd block is added after that as
 * sumf += d * (int sum) (GCC fuses it: -mfma and fp-contract=fast in ggml-cpu).
 */
static void vec_dot_iq4_nl_q8_0(int n, float *s, const void *vx, const void *vy)
{
    const lc_block_iq4_nl *x = vx;
    const lc_block_q8_0 *y = vy;
    const int nb = n / LC_QK4_NL;
    float acc1[8] = {0}, acc2[8] = {0};
    int ib = 0;
    for (; ib + 1 < nb; ib += 2) {
        int p[32];
        iq4_nl_products(x + ib, y + ib, p);
        block_lanes(acc1, LC_FP16_TO_FP32(y[ib].d) * LC_FP16_TO_FP32(x[ib].d), p);
        iq4_nl_products(x + ib + 1, y + ib + 1, p);
        block_lanes(acc2, LC_FP16_TO_FP32(y[ib + 1].d) * LC_FP16_TO_FP32(x[ib + 1].d), p);
    }
    for (int k = 0; k < 8; k++)
        acc1[k] += acc2[k];
    float sumf = hsum8(acc1);
    for (; ib < nb; ib++) {
        int p[32], isum = 0;
        iq4_nl_products(x + ib, y + ib, p);
        for (int j = 0; j < 32; j++)
            isum += p[j];
        sumf = fmaf(LC_FP16_TO_FP32(y[ib].d) * LC_FP16_TO_FP32(x[ib].d), (float)isum, sumf);
    }
    *s = sumf;
}

/*
 * IQ4_NL for batches: llama.cpp runs tinyBLAS_Q0_AVX there (llamafile_sgemm takes IQ4_NL . Q8_0
 * on x86), whose order is not vec_dot's: one 8-lane accumulator per output over all blocks
 * (acc = fma(dx * dy, lanes, acc)), then hsum.  Same as Q5_0's vec_dot, with other quants.
 */
static float iq4_nl_tiny_dot(int nb, const lc_block_iq4_nl *x, const lc_block_q8_0 *y)
{
    float acc[8] = {0};
    for (int i = 0; i < nb; i++) {
        int p[32];
        iq4_nl_products(x + i, y + i, p);
        block_lanes(acc, LC_FP16_TO_FP32(x[i].d) * LC_FP16_TO_FP32(y[i].d), p);
    }
    return hsum8(acc);
}

static void gemm_iq4_nl(int n, float *s, size_t ld_s, const void *w, size_t w_stride, int nr,
                        const void *a, size_t a_stride, int nc)
{
    const int nb = n / LC_QK4_NL;
    for (int c = 0; c < nc; c++)
        for (int r = 0; r < nr; r++)
            s[(size_t)c * ld_s + r] =
                iq4_nl_tiny_dot(nb, (const lc_block_iq4_nl *)((const uint8_t *)w + (size_t)r * w_stride),
                                (const lc_block_q8_0 *)((const uint8_t *)a + (size_t)c * a_stride));
}

/* kernels.h recode: the weights of a Q5_0 / IQ4_NL block as a Q8_0 block's bytes */
static void to_q8_0_q5_0(const void *vx, void *vy, int nb)
{
    const lc_block_q5_0 *x = vx;
    lc_block_q8_0 *y = vy;
    for (int i = 0; i < nb; i++) {
        uint32_t qh;
        memcpy(&qh, x[i].qh, 4);
        y[i].d = x[i].d;
        for (int j = 0; j < 16; j++) {
            y[i].qs[j] = (int8_t)(((x[i].qs[j] & 15) | ((qh >> j & 1) << 4)) - 16);
            y[i].qs[j + 16] = (int8_t)(((x[i].qs[j] >> 4) | ((qh >> (j + 16) & 1) << 4)) - 16);
        }
    }
}

static void to_q8_0_iq4_nl(const void *vx, void *vy, int nb)
{
    const lc_block_iq4_nl *x = vx;
    lc_block_q8_0 *y = vy;
    for (int i = 0; i < nb; i++) {
        y[i].d = x[i].d;
        for (int j = 0; j < 16; j++) {
            y[i].qs[j] = lc_kvalues_iq4nl[x[i].qs[j] & 15];
            y[i].qs[j + 16] = lc_kvalues_iq4nl[x[i].qs[j] >> 4];
        }
    }
}

/* ---------------------------------------------------------------- Q2_K Q3_K Q4_K Q5_K IQ4_XS */

/*
 * ggml's AVX2 kernels of these types share the Q6_K pattern (scalar.c, q6_K_block): the exact
 * integer products of a super-block, times their sub-block scale, are summed in 8 int32 lanes,
 * lane k collecting the weights 32g + 4k .. 32g + 4k + 3 of every group g of 32; then
 * acc[k] = fma(d, lane, acc[k]) with d = dy * dx, and hsum_float_8 at the end.  The mins
 * (Q2_K, Q4_K, Q5_K) are summed as described at each kernel.
 */

/* Q2_K . Q8_K: the mins go into the same accumulator first, per block:
 * acc[k] = fma(-dy * dmin, m[2k] * bsums[2k] + m[2k+1] * bsums[2k+1], acc[k]), then the scales. */
static void vec_dot_q2_K_q8_K(int n, float *s, const void *vx, const void *vy)
{
    const lc_block_q2_K *x = vx;
    const lc_block_q8_K *y = vy;
    const int nb = n / LC_QK_K;
    float acc[8] = {0};
    for (int i = 0; i < nb; i++) {
        const float d = y[i].d * LC_FP16_TO_FP32(x[i].d);
        const float dmin = -y[i].d * LC_FP16_TO_FP32(x[i].dmin);
        const uint8_t *sc = x[i].scales;
        for (int k = 0; k < 8; k++) {
            const int prod = (sc[2 * k] >> 4) * y[i].bsums[2 * k] + (sc[2 * k + 1] >> 4) * y[i].bsums[2 * k + 1];
            acc[k] = fmaf(dmin, (float)prod, acc[k]);
        }
        int lanes[8] = {0};
        for (int h = 0; h < 2; h++)
            for (int v = 0; v < 4; v++)
                for (int l = 0; l < 32; l++) {
                    const int q = (x[i].qs[32 * h + l] >> (2 * v)) & 3;
                    lanes[l / 4] += (sc[8 * h + 2 * v + l / 16] & 0xF) * q * y[i].qs[128 * h + 32 * v + l];
                }
        for (int k = 0; k < 8; k++)
            acc[k] = fmaf(d, (float)lanes[k], acc[k]);
    }
    *s = hsum8(acc);
}

/*
 * kernels.h recode: a Q3_K block as the Q6_K block of the same weights: d and the 16 scales
 * (6 bits - 32) kept, weight 128h + 32v + l (q in -4..3, as below) stored as q + 32 in Q6_K's
 * places (q6_K_block: the low nibble of ql[64h + 32(v & 1) + l] for v < 2, else the high one;
 * bits 2v, 2v+1 of qh[32h + l]).
 */
static void q3_K_to_q6_K(const void *vx, void *vy, int nb)
{
    const lc_block_q3_K *x = vx;
    lc_block_q6_K *y = vy;
    for (int i = 0; i < nb; i++) {
        lc_q3_K_scales(x[i].scales, y[i].scales);
        y[i].d = x[i].d;
        memset(y[i].ql, 0, sizeof y[i].ql);
        memset(y[i].qh, 0, sizeof y[i].qh);
        for (int h = 0; h < 2; h++)
            for (int v = 0; v < 4; v++)
                for (int l = 0; l < 32; l++) {
                    const int q = ((x[i].qs[32 * h + l] >> (2 * v)) & 3) -
                                  (((x[i].hmask[l] >> (4 * h + v)) & 1) ? 0 : 4);
                    const int q6 = q + 32;
                    y[i].ql[64 * h + 32 * (v & 1) + l] |= (uint8_t)((q6 & 15) << (v < 2 ? 0 : 4));
                    y[i].qh[32 * h + l] |= (uint8_t)((q6 >> 4) << (2 * v));
                }
    }
}

/* Q3_K . Q8_K: q = low 2 bits - (high bit clear ? 4 : 0), scales 6 bits - 32; no mins. */
static void vec_dot_q3_K_q8_K(int n, float *s, const void *vx, const void *vy)
{
    const lc_block_q3_K *x = vx;
    const lc_block_q8_K *y = vy;
    const int nb = n / LC_QK_K;
    float acc[8] = {0};
    for (int i = 0; i < nb; i++) {
        const float d = y[i].d * LC_FP16_TO_FP32(x[i].d);
        int8_t sc[16];
        lc_q3_K_scales(x[i].scales, sc);
        int lanes[8] = {0};
        for (int h = 0; h < 2; h++)
            for (int v = 0; v < 4; v++)
                for (int l = 0; l < 32; l++) {
                    const int q = ((x[i].qs[32 * h + l] >> (2 * v)) & 3) -
                                  (((x[i].hmask[l] >> (4 * h + v)) & 1) ? 0 : 4);
                    lanes[l / 4] += sc[8 * h + 2 * v + l / 16] * q * y[i].qs[128 * h + 32 * v + l];
                }
        for (int k = 0; k < 8; k++)
            acc[k] = fmaf(d, (float)lanes[k], acc[k]);
    }
    *s = hsum8(acc);
}

/* the 8 scales and 8 mins of a Q4_K / Q5_K block */
static void k4_scales(const uint8_t *packed, int sc[8], int mn[8])
{
    for (int j = 0; j < 8; j++) {
        uint8_t d, m;
        lc_get_scale_min_k4(j, packed, &d, &m);
        sc[j] = d;
        mn[j] = m;
    }
}

/* lanes of a Q4_K / Q5_K super-block: weight 64j + l (low nibbles) and 64j + 32 + l (high) */
static void k45_lanes(const uint8_t *qs, const uint8_t *qh, const int sc[8], const int8_t *q8,
                      int lanes[8])
{
    for (int k = 0; k < 8; k++)
        lanes[k] = 0;
    for (int j = 0; j < 4; j++)
        for (int l = 0; l < 32; l++) {
            int lo = qs[32 * j + l] & 0x0F, hi = qs[32 * j + l] >> 4;
            if (qh) {
                lo |= ((qh[l] >> (2 * j)) & 1) << 4;
                hi |= ((qh[l] >> (2 * j + 1)) & 1) << 4;
            }
            lanes[l / 4] += sc[2 * j] * lo * q8[64 * j + l] + sc[2 * j + 1] * hi * q8[64 * j + 32 + l];
        }
}

/*
 * Q4_K . Q8_K: the mins in a separate 4-lane accumulator:
 *   acc_m[m] = fma(-dy * dmin, mn[2m] * S[2m] + mn[2m+1] * S[2m+1], acc_m[m]),
 * S[j] = bsums[2j] + bsums[2j+1] (the 32 activations of sub-block j); at the end
 * hsum_float_8(acc) + ((acc_m[0] + acc_m[2]) + (acc_m[1] + acc_m[3])).
 */
static void vec_dot_q4_K_q8_K(int n, float *s, const void *vx, const void *vy)
{
    const lc_block_q4_K *x = vx;
    const lc_block_q8_K *y = vy;
    const int nb = n / LC_QK_K;
    float acc[8] = {0}, acc_m[4] = {0};
    for (int i = 0; i < nb; i++)
        q4_K_block(acc, acc_m, x + i, y + i);
    *s = hsum8(acc) + ((acc_m[0] + acc_m[2]) + (acc_m[1] + acc_m[3]));
}

static void q4_K_block(float acc[8], float acc_m[4], const lc_block_q4_K *x, const lc_block_q8_K *y)
{
    const float d = y->d * LC_FP16_TO_FP32(x->d);
    const float dmin = -y->d * LC_FP16_TO_FP32(x->dmin);
    int sc[8], mn[8], lanes[8];
    k4_scales(x->scales, sc, mn);
    for (int m = 0; m < 4; m++) {
        const int s0 = y->bsums[4 * m] + y->bsums[4 * m + 1];
        const int s1 = y->bsums[4 * m + 2] + y->bsums[4 * m + 3];
        acc_m[m] = fmaf(dmin, (float)(mn[2 * m] * s0 + mn[2 * m + 1] * s1), acc_m[m]);
    }
    k45_lanes(x->qs, NULL, sc, y->qs, lanes);
    for (int k = 0; k < 8; k++)
        acc[k] = fmaf(d, (float)lanes[k], acc[k]);
}

/*
 * Q5_K . Q8_K: the mins as one exact integer per block, summs += -dy * dmin * that (a plain
 * float multiply-add in ggml's source: GCC fuses it, -mfma and fp-contract=fast), and
 * hsum_float_8(acc) + summs at the end.
 */
static void vec_dot_q5_K_q8_K(int n, float *s, const void *vx, const void *vy)
{
    const lc_block_q5_K *x = vx;
    const lc_block_q8_K *y = vy;
    const int nb = n / LC_QK_K;
    float acc[8] = {0};
    float summs = 0.0f;
    for (int i = 0; i < nb; i++)
        q5_K_block(acc, &summs, x + i, y + i);
    *s = hsum8(acc) + summs;
}

static void q5_K_block(float acc[8], float *summs, const lc_block_q5_K *x, const lc_block_q8_K *y)
{
    const float d = y->d * LC_FP16_TO_FP32(x->d);
    const float dmin = -y->d * LC_FP16_TO_FP32(x->dmin);
    int sc[8], mn[8], lanes[8];
    k4_scales(x->scales, sc, mn);
    int msum = 0;
    for (int j = 0; j < 8; j++)
        msum += mn[j] * (y->bsums[2 * j] + y->bsums[2 * j + 1]);
    *summs = fmaf(dmin, (float)msum, *summs);
    k45_lanes(x->qs, x->qh, sc, y->qs, lanes);
    for (int k = 0; k < 8; k++)
        acc[k] = fmaf(d, (float)lanes[k], acc[k]);
}

/* IQ4_XS . Q8_K: 8 IQ4_NL sub-blocks with 6-bit scales ls - 32; d = dx * dy. */
static void vec_dot_iq4_xs_q8_K(int n, float *s, const void *vx, const void *vy)
{
    const lc_block_iq4_xs *x = vx;
    const lc_block_q8_K *y = vy;
    const int nb = n / LC_QK_K;
    float acc[8] = {0};
    for (int i = 0; i < nb; i++) {
        int lanes[8] = {0};
        for (int ib = 0; ib < 8; ib++) {
            const int ls = (((x[i].scales_l[ib / 2] >> 4 * (ib % 2)) & 0xf) |
                            (((x[i].scales_h >> 2 * ib) & 3) << 4)) - 32;
            const uint8_t *qs = x[i].qs + 16 * ib;
            const int8_t *q8 = y[i].qs + 32 * ib;
            for (int l = 0; l < 32; l++) {
                const int w = lc_kvalues_iq4nl[l < 16 ? qs[l] & 0x0F : qs[l - 16] >> 4];
                lanes[l / 4] += ls * w * q8[l];
            }
        }
        const float d = LC_FP16_TO_FP32(x[i].d) * y[i].d;
        for (int k = 0; k < 8; k++)
            acc[k] = fmaf(d, (float)lanes[k], acc[k]);
    }
    *s = hsum8(acc);
}

/* ---------------------------------------------------------------- element-wise */

/*
 * RMS norm as ggml_compute_forward_rms_norm_f32 followed by the llama graph's ggml_mul:
 * the squares are formed in float and summed in double, mean = sum / n rounded to float,
 * scale = 1/sqrtf(mean + eps), y = (x * scale) * w.
 */
static void rms_norm(float *y, const float *x, const float *w, int n, float eps)
{
    double sum = 0.0;
    for (int i = 0; i < n; i++)
        sum += (double)(x[i] * x[i]);
    const float mean = (float)(sum / n);
    const float scale = 1.0f / sqrtf(mean + eps);
    for (int i = 0; i < n; i++)
        y[i] = (x[i] * scale) * w[i];
}

static void axpy_f16(float *y, float a, const lc_fp16 *x, int n)
{
    for (int i = 0; i < n; i++)
        y[i] += a * LC_FP16_TO_FP32(x[i]);
}

static void axpy_f32(float *y, float a, const float *x, int n)
{
    for (int i = 0; i < n; i++)
        y[i] += a * x[i];
}

static void mad_f16(lc_fp16 *y, float v, const lc_fp16 *x, int n)
{
    for (int i = 0; i < n; i++)
        y[i] = lc_fp32_to_fp16(fmaf(LC_FP16_TO_FP32(x[i]), v, LC_FP16_TO_FP32(y[i])));
}

static void scale_f16(lc_fp16 *y, float v, int n)
{
    for (int i = 0; i < n; i++)
        y[i] = lc_fp32_to_fp16(LC_FP16_TO_FP32(y[i]) * v);
}

static void mad_f32(float *y, float v, const float *x, int n)
{
    for (int i = 0; i < n; i++)
        y[i] = fmaf(x[i], v, y[i]);
}

/*
 * mad_f16_rows / mad_f32_rows (kernels.h): the fused attention's p.V over a chunk of keys for
 * the heads of one GQA group; each output element is one chain of fused multiply-adds over the
 * rows in order, which is what every ISA's version computes.
 */
/* qk_f16_rows (kernels.h): one fused multiply-add chain per row and query */
static void qk_f16_rows(float *const *s, int ny, const float *const *q, const lc_fp16 *x,
                        size_t x_stride, int nr, int n)
{
    for (int r = 0; r < nr; r++)
        for (int j = 0; j < ny; j++) {
            float sum = 0.0f;
            for (int i = 0; i < n; i++)
                sum = fmaf(LC_FP16_TO_FP32(x[(size_t)r * x_stride + (size_t)i]), q[j][i], sum);
            s[j][r] = sum;
        }
}

static void mad_f16_rows(float *const *y, int ny, const float *const *p, const lc_fp16 *x,
                         size_t x_stride, int nr, int n)
{
    for (int r = 0; r < nr; r++)
        for (int j = 0; j < ny; j++)
            for (int i = 0; i < n; i++)
                y[j][i] = fmaf(LC_FP16_TO_FP32(x[(size_t)r * x_stride + (size_t)i]), p[j][r], y[j][i]);
}

static void mad_f32_rows(float *const *y, int ny, const float *const *p, const float *x,
                         size_t x_stride, int nr, int n)
{
    for (int r = 0; r < nr; r++)
        for (int j = 0; j < ny; j++)
            for (int i = 0; i < n; i++)
                y[j][i] = fmaf(x[(size_t)r * x_stride + (size_t)i], p[j][r], y[j][i]);
}

/* ---------------------------------------------------------------- the table */


/* ---------------------------------------------------------------- quantizer search (Q4_1/Q5_1) */

/* qsearch-lanes.h with 4 blocks a vector: plain C lanes (SSE2 on x86-64), F16 rounding and
 * square roots one lane at a time with the library's own functions. */
#define VL 4
typedef float qs_vf __attribute__((vector_size(4 * VL)));
typedef int32_t qs_vi __attribute__((vector_size(4 * VL)));

static inline qs_vf qs_sqrt(qs_vf v)
{
    for (int k = 0; k < VL; k++)
        v[k] = sqrtf(v[k]);
    return v;
}

static inline qs_vf qs_gather32(const float *p)
{
    qs_vf v;
    for (int k = 0; k < VL; k++)
        v[k] = p[32 * k];
    return v;
}

static inline qs_vf qs_round_f16(qs_vf v, qs_vi *bits)
{
    for (int k = 0; k < VL; k++) {
        const lc_fp16 h = lc_fp32_to_fp16(v[k]);
        (*bits)[k] = h;
        v[k] = LC_FP16_TO_FP32(h);
    }
    return v;
}

#include "qsearch-lanes.h"
#undef VL

const struct lc_kernels lc_kernels_scalar = {
    .isa = "scalar",
    .vec_dot = {
        [LC_TYPE_F32] = vec_dot_f32,
        [LC_TYPE_F16] = vec_dot_f16,
        [LC_TYPE_BF16] = vec_dot_bf16,
        [LC_TYPE_Q4_0] = vec_dot_q4_0_q8_0,
        [LC_TYPE_Q4_1] = vec_dot_q4_1_q8_1,
        [LC_TYPE_Q8_0] = vec_dot_q8_0_q8_0,
        [LC_TYPE_Q6_K] = vec_dot_q6_K_q8_K,
        [LC_TYPE_Q5_0] = vec_dot_q5_0_q8_0,
        [LC_TYPE_Q5_1] = vec_dot_q5_1_q8_1,
        [LC_TYPE_IQ4_NL] = vec_dot_iq4_nl_q8_0,
        [LC_TYPE_Q2_K] = vec_dot_q2_K_q8_K,
        [LC_TYPE_Q3_K] = vec_dot_q3_K_q8_K,
        [LC_TYPE_Q4_K] = vec_dot_q4_K_q8_K,
        [LC_TYPE_Q5_K] = vec_dot_q5_K_q8_K,
        [LC_TYPE_IQ4_XS] = vec_dot_iq4_xs_q8_K,
    },
    .quantize_row = {
        [LC_TYPE_F32] = quantize_row_f32,
        [LC_TYPE_F16] = quantize_row_f16,
        [LC_TYPE_BF16] = quantize_row_bf16,
        [LC_TYPE_Q8_0] = quantize_row_q8_0,
        [LC_TYPE_Q8_1] = quantize_row_q8_1,
        [LC_TYPE_Q8_K] = quantize_row_q8_K,
    },
    .gemm = {
        [LC_TYPE_F32] = gemm_f32,
        [LC_TYPE_F16] = gemm_f16,
        /* quantized types: vec_dot's order is also tinyBLAS's (callers loop vec_dot), except
         * IQ4_NL's, whose vec_dot takes blocks in pairs */
        [LC_TYPE_IQ4_NL] = gemm_iq4_nl,
    },
    .vec_dot_q4_0x8 = vec_dot_q4_0x8_q8_0,
    .gemv_x16 = {[LC_TYPE_Q4_0] = gemv_x16_q4_0, [LC_TYPE_Q4_1] = gemv_x16_q4_1,
                 [LC_TYPE_Q6_K] = gemv_x16_q6_K, [LC_TYPE_Q4_K] = gemv_x16_q4_K,
                 [LC_TYPE_Q5_K] = gemv_x16_q5_K, [LC_TYPE_Q5_1] = gemv_x16_q5_1,
                 [LC_TYPE_Q8_0] = gemv_x16_q8_0},
    .gemm_x16 = {[LC_TYPE_Q4_0] = gemm_x16_q4_0, [LC_TYPE_Q4_1] = gemm_x16_q4_1,
                 [LC_TYPE_Q6_K] = gemm_x16_q6_K, [LC_TYPE_Q4_K] = gemm_x16_q4_K,
                 [LC_TYPE_Q5_K] = gemm_x16_q5_K, [LC_TYPE_Q5_1] = gemm_x16_q5_1,
                 [LC_TYPE_Q8_0] = gemm_x16_q8_0},
    .x16_native = 0, /* readable, slow: never worth a repack */
    .recode = {[LC_TYPE_Q5_0] = to_q8_0_q5_0, [LC_TYPE_IQ4_NL] = to_q8_0_iq4_nl,
               [LC_TYPE_Q3_K] = q3_K_to_q6_K},
    .rms_norm = rms_norm,
    .softmax = ew_softmax,
    .swiglu = ew_swiglu,
    .dot_f32 = dot_f32,
    .dot_f16 = dot_f16,
    .axpy_f16 = axpy_f16,
    .axpy_f32 = axpy_f32,
    .mad_f16 = mad_f16,
    .scale_f16 = scale_f16,
    .mad_f32 = mad_f32,
    .exp_sum = ew_exp_sum,
    .qk_f16_rows = qk_f16_rows,
    .mad_f16_rows = mad_f16_rows,
    .mad_f32_rows = mad_f32_rows,
    .qsearch_asym = qsearch_asym,
};
