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
 * Float dots in the order llama.cpp uses on x86 (its AVX-512 build made the golden data).  In
 * F32/F16 models a one-ulp difference in a K or V value can flip its rounding to fp16 in the KV
 * cache and move the logits by 1e-3, so every ISA reproduces these orders exactly:
 *
 *  - n % 16 == 0: ggml_mul_mat hands the rows to llamafile's tinyBLAS (sgemm.cpp, KN = 16):
 *    16 lanes, lane j accumulating x[16t + j] * y[16t + j] over t with fused multiply-adds,
 *    then _mm512_reduce_add_ps (reduce16 below: GCC's order).
 *  - otherwise ggml_vec_dot_f32 / ggml_vec_dot_f16 (GGML_F32_STEP 64): 4 x 16 lanes over the
 *    first n & ~63 elements (vector k, lane j takes 64t + 16k + j), the vectors reduced as
 *    (v0 + v2) + (v1 + v3), reduce16, then the leftover elements one by one: in float with a
 *    fused multiply-add for f32 (GCC contracts `sumf += x[i]*y[i]`), in double for f16
 *    (`sumf += (ggml_float)(x*y)`).
 */
static float reduce16(const float l[16])
{
    float t3[8], t6[4];
    for (int k = 0; k < 8; k++)
        t3[k] = l[k + 8] + l[k];
    for (int k = 0; k < 4; k++)
        t6[k] = t3[k + 4] + t3[k];
    return (t6[0] + t6[2]) + (t6[1] + t6[3]);
}

#define DEFINE_FLOAT_DOT(NAME, T, LOAD, LEFTOVER)                                                 \
    static float NAME(const T *x, const T *y, int n)                                              \
    {                                                                                             \
        if (n % 16 == 0) {                                                                        \
            float acc[16] = {0};                                                                  \
            for (int i = 0; i < n; i += 16)                                                       \
                for (int j = 0; j < 16; j++)                                                      \
                    acc[j] = fmaf(LOAD(x[i + j]), LOAD(y[i + j]), acc[j]);                        \
            return reduce16(acc);                                                                 \
        }                                                                                         \
        const int np = n & ~63;                                                                   \
        float v[4][16] = {{0}};                                                                   \
        for (int i = 0; i < np; i += 64)                                                          \
            for (int k = 0; k < 4; k++)                                                           \
                for (int j = 0; j < 16; j++)                                                      \
                    v[k][j] = fmaf(LOAD(x[i + 16 * k + j]), LOAD(y[i + 16 * k + j]), v[k][j]);    \
        for (int j = 0; j < 16; j++)                                                              \
            v[0][j] = (v[0][j] + v[2][j]) + (v[1][j] + v[3][j]);                                  \
        LEFTOVER(reduce16(v[0]), x, y, np, n);                                                    \
    }

/* f32 leftovers: float sum, fused */
#define LEFTOVER_F32(r, x, y, np, n)                                                              \
    float sum = r;                                                                                \
    for (int i = np; i < n; i++)                                                                  \
        sum = fmaf(x[i], y[i], sum);                                                              \
    return sum
/* f16 leftovers: double sum of float products */
#define LEFTOVER_F16(r, x, y, np, n)                                                              \
    double sum = (double)(r);                                                                     \
    for (int i = np; i < n; i++)                                                                  \
        sum += (double)(LC_FP16_TO_FP32(x[i]) * LC_FP16_TO_FP32(y[i]));                           \
    return (float)sum
#define LOAD_F32(v) (v)

DEFINE_FLOAT_DOT(dot_f32, float, LOAD_F32, LEFTOVER_F32)
DEFINE_FLOAT_DOT(dot_f16, lc_fp16, LC_FP16_TO_FP32, LEFTOVER_F16)

static void vec_dot_f32(int n, float *s, const void *x, const void *y)
{
    *s = dot_f32(x, y, n);
}

static void vec_dot_f16(int n, float *s, const void *x, const void *y)
{
    *s = dot_f16(x, y, n);
}

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
    for (int i = 0; i < nb; i++) {
        int p[32];
        for (int j = 0; j < 16; j++) {
            p[j] = (x[i].qs[j] & 0x0F) * y[i].qs[j];
            p[j + 16] = (x[i].qs[j] >> 4) * y[i].qs[j + 16];
        }
        summs += LC_FP16_TO_FP32(x[i].m) * LC_FP16_TO_FP32(y[i].s);
        block_lanes(acc, LC_FP16_TO_FP32(x[i].d) * LC_FP16_TO_FP32(y[i].d), p);
    }
    *s = hsum8(acc) + summs;
}

/* Q8_0 . Q8_0: sum over blocks of dx * dy * sum(q * p). */
static void vec_dot_q8_0_q8_0(int n, float *s, const void *vx, const void *vy)
{
    const lc_block_q8_0 *x = vx;
    const lc_block_q8_0 *y = vy;
    const int nb = n / LC_QK8_0;
    float acc[8] = {0};
    for (int i = 0; i < nb; i++) {
        int p[32];
        for (int j = 0; j < 32; j++)
            p[j] = x[i].qs[j] * y[i].qs[j];
        block_lanes(acc, LC_FP16_TO_FP32(x[i].d) * LC_FP16_TO_FP32(y[i].d), p);
    }
    *s = hsum8(acc);
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
    for (int i = 0; i < nb; i++) {
        int lanes[8] = {0};
        for (int h = 0; h < 2; h++) {
            const uint8_t *ql = x[i].ql + 64 * h, *qh = x[i].qh + 32 * h;
            const int8_t *q8 = y[i].qs + 128 * h;
            const int8_t *sc = x[i].scales + 8 * h;
            for (int v = 0; v < 4; v++)
                for (int l = 0; l < 32; l++) {
                    const int b = ql[32 * (v & 1) + l];
                    const int q = ((v < 2 ? b & 0x0F : b >> 4) | (((qh[l] >> (2 * v)) & 3) << 4)) - 32;
                    lanes[l / 4] += sc[2 * v + l / 16] * q * q8[32 * v + l];
                }
        }
        const float d = y[i].d * LC_FP16_TO_FP32(x[i].d);
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

/*
 * Softmax as ggml's soft_max: max in float, exp(x - max) summed in double, then every value
 * multiplied by the float reciprocal of the sum (ggml_vec_scale_f32 with 1/sum).
 * -INFINITY entries (masked positions) become exactly 0.
 */
static void softmax(float *x, int n)
{
    float max = -INFINITY;
    for (int i = 0; i < n; i++)
        max = fmaxf(max, x[i]);
    if (max == -INFINITY) { /* everything masked: define the result as all zeros */
        for (int i = 0; i < n; i++)
            x[i] = 0.0f;
        return;
    }
    double sum = 0.0;
    for (int i = 0; i < n; i++) {
        const float v = expf(x[i] - max);
        sum += (double)v;
        x[i] = v;
    }
    const float scale = (float)(1.0 / sum);
    for (int i = 0; i < n; i++)
        x[i] *= scale;
}

/* SwiGLU: silu(g) * u with silu(v) = v / (1 + exp(-v)) (ggml_silu_f32, then ggml_mul). */
static void swiglu(float *y, const float *g, const float *u, int n)
{
    for (int i = 0; i < n; i++)
        y[i] = (g[i] / (1.0f + expf(-g[i]))) * u[i];
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

/* ---------------------------------------------------------------- the table */

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
    },
    .quantize_row = {
        [LC_TYPE_F32] = quantize_row_f32,
        [LC_TYPE_F16] = quantize_row_f16,
        [LC_TYPE_BF16] = quantize_row_bf16,
        [LC_TYPE_Q8_0] = quantize_row_q8_0,
        [LC_TYPE_Q8_1] = quantize_row_q8_1,
        [LC_TYPE_Q8_K] = quantize_row_q8_K,
    },
    .gemm = {0}, /* NULL: callers loop vec_dot */
    .rms_norm = rms_norm,
    .softmax = softmax,
    .swiglu = swiglu,
    .dot_f32 = dot_f32,
    .dot_f16 = dot_f16,
    .axpy_f16 = axpy_f16,
    .axpy_f32 = axpy_f32,
};
