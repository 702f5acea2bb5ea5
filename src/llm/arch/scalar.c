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
static float reduce16(const float v[16])
{
    float t8[8], t4[4];
    for (int i = 0; i < 8; i++)
        t8[i] = v[i + 8] + v[i];
    for (int i = 0; i < 4; i++)
        t4[i] = t8[i + 4] + t8[i];
    const float a = t4[0] + t4[2], b = t4[1] + t4[3];
    return a + b;
}

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
        (out) = reduce16(acc_[0]);                                                               \
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

static void vec_dot_f32(int n, float *s, const void *x, const void *y)
{
    *s = dot_f32(x, y, n);
}

static void vec_dot_f16(int n, float *s, const void *x, const void *y)
{
    *s = dot_f16(x, y, n);
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
    return reduce16(acc);
}

static float tiny_dot_f16(const lc_fp16 *x, const lc_fp16 *y, int n)
{
    if (n % 16)
        return dot_f16(x, y, n);
    float acc[16] = {0};
    for (int l = 0; l < n; l += 16)
        for (int m = 0; m < 16; m++)
            acc[m] = fmaf(LC_FP16_TO_FP32(x[l + m]), LC_FP16_TO_FP32(y[l + m]), acc[m]);
    return reduce16(acc);
}

static void gemm_f32(int n, float *s, size_t ld_s, const void *w, size_t w_stride, int nr,
                     const void *a, size_t a_stride, int nc)
{
    for (int c = 0; c < nc; c++)
        for (int r = 0; r < nr; r++)
            s[(size_t)c * ld_s + (size_t)r] =
                tiny_dot_f32((const float *)((const uint8_t *)w + (size_t)r * w_stride),
                             (const float *)((const uint8_t *)a + (size_t)c * a_stride), n);
}

static void gemm_f16(int n, float *s, size_t ld_s, const void *w, size_t w_stride, int nr,
                     const void *a, size_t a_stride, int nc)
{
    for (int c = 0; c < nc; c++)
        for (int r = 0; r < nr; r++)
            s[(size_t)c * ld_s + (size_t)r] =
                tiny_dot_f16((const lc_fp16 *)((const uint8_t *)w + (size_t)r * w_stride),
                             (const lc_fp16 *)((const uint8_t *)a + (size_t)c * a_stride), n);
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
 * The quantized dot products below keep the summation order of ggml's AVX2 kernels, which is
 * what llama.cpp runs on x86 (AVX-512 machines included, and its tinyBLAS Q8_0/Q4_0 path has
 * the same order): eight float lanes, lane l accumulating, block after block,
 * fma(dx * dy, integer sum of elements 4l..4l+3, acc[l]), then hsum_float_8.  The integer sums
 * are exact in any order; keeping the float order too makes greedy decoding agree with
 * llama.cpp token for token instead of drifting apart at a near-tie after a few dozen tokens.
 * SIMD versions must use the same lanes.
 */
/* hsum_float_8: (lanes l + l+4), then (0+2, 1+3), then the two halves. */
static float hsum8(const float acc[8])
{
    float r4[4];
    for (int l = 0; l < 4; l++)
        r4[l] = acc[l] + acc[l + 4];
    const float r0 = r4[0] + r4[2], r1 = r4[1] + r4[3];
    return r0 + r1;
}

/*
 * Q4_0 . Q8_0: sum over blocks of dx * dy * sum((q - 8) * p).  llama.cpp (since late 2024)
 * repacks Q4_0 weights with a multiple of 8 rows into its interleaved Q4_0x8 layout on AVX2
 * machines and multiplies them with ggml_gemv/gemm_q4_0_8x8_q8_0, which keep one float
 * accumulator per output: acc = fma((float)block_sum, dx * dy, acc), block after block.
 * That order is the one reproduced here.
 */
static void vec_dot_q4_0_q8_0(int n, float *s, const void *vx, const void *vy)
{
    const lc_block_q4_0 *x = vx;
    const lc_block_q8_0 *y = vy;
    const int nb = n / LC_QK4_0;
    float acc = 0.0f;
    for (int i = 0; i < nb; i++) {
        int sumi = 0;
        for (int j = 0; j < LC_QK4_0 / 2; j++) {
            sumi += ((x[i].qs[j] & 0x0F) - 8) * y[i].qs[j];
            sumi += ((x[i].qs[j] >> 4) - 8) * y[i].qs[j + LC_QK4_0 / 2];
        }
        acc = fmaf((float)sumi, LC_FP16_TO_FP32(x[i].d) * LC_FP16_TO_FP32(y[i].d), acc);
    }
    *s = acc;
}

/*
 * Q4_1 . Q8_1: x = dx * q + mx, y = dy * p, sy = dy * sum(p) (stored in the Q8_1 block):
 *   sum_j x_j y_j = dx * dy * sum(q * p) + mx * sy
 * exactly ggml_vec_dot_q4_1_q8_1's formula, per block, summed in float.
 */
static void vec_dot_q4_1_q8_1(int n, float *s, const void *vx, const void *vy)
{
    const lc_block_q4_1 *x = vx;
    const lc_block_q8_1 *y = vy;
    const int nb = n / LC_QK4_1;
    /*
     * The summation order of ggml's AVX2 kernel (what llama.cpp runs on x86, AVX-512 machines
     * included): eight float lanes, lane l accumulating, block after block, fma(dx*dy, the
     * integer sum of weights 4l..4l+3, acc[l]); the m * s terms summed apart in block order;
     * then hsum_float_8 (lanes l and l+4, then pairs, then the two halves) + that sum.
     * Reproducing it makes greedy decoding agree with llama.cpp token for token.
     */
    float acc[8] = {0};
    float summs = 0.0f;
    for (int i = 0; i < nb; i++) {
        summs += LC_FP16_TO_FP32(x[i].m) * LC_FP16_TO_FP32(y[i].s);
        const float d0d1 = LC_FP16_TO_FP32(x[i].d) * LC_FP16_TO_FP32(y[i].d);
        for (int l = 0; l < 8; l++) {
            int sumi = 0;
            for (int e = 4 * l; e < 4 * l + 4; e++) {
                const int q = e < 16 ? (x[i].qs[e] & 0x0F) : (x[i].qs[e - 16] >> 4);
                sumi += q * y[i].qs[e];
            }
            acc[l] = fmaf(d0d1, (float)sumi, acc[l]);
        }
    }
    *s = hsum8(acc) + summs;
}

/* Q8_0 . Q8_0: sum over blocks of dx * dy * sum(q * p), in ggml's AVX2 lane order. */
static void vec_dot_q8_0_q8_0(int n, float *s, const void *vx, const void *vy)
{
    const lc_block_q8_0 *x = vx;
    const lc_block_q8_0 *y = vy;
    const int nb = n / LC_QK8_0;
    float acc[8] = {0};
    for (int i = 0; i < nb; i++) {
        const float d = LC_FP16_TO_FP32(x[i].d) * LC_FP16_TO_FP32(y[i].d);
        for (int l = 0; l < 8; l++) {
            int sumi = 0;
            for (int e = 4 * l; e < 4 * l + 4; e++)
                sumi += x[i].qs[e] * y[i].qs[e];
            acc[l] = fmaf(d, (float)sumi, acc[l]);
        }
    }
    *s = hsum8(acc);
}

/*
 * Q6_K . Q8_K in the lane order of ggml's AVX2 ggml_vec_dot_q6_K_q8_K: per 256-weight block,
 * eight integer lanes, lane m collecting, in each 32-weight chunk, weights 4m..4m+3 times their
 * 16-weight sub-block scale; then acc[m] = fma(dy * dx, lane m, acc[m]) and hsum8 at the end.
 * q = 6-bit value - 32; low 4 bits in ql, high 2 bits in qh (ggml's layout, see quant_k.c).
 */
static void vec_dot_q6_K_q8_K(int n, float *s, const void *vx, const void *vy)
{
    const lc_block_q6_K *x = vx;
    const lc_block_q8_K *y = vy;
    const int nb = n / LC_QK_K;
    float acc[8] = {0};
    for (int i = 0; i < nb; i++) {
        int8_t q[LC_QK_K];
        const uint8_t *ql = x[i].ql, *qh = x[i].qh;
        for (int j = 0; j < LC_QK_K; j += 128) {
            for (int l = 0; l < 32; l++) {
                q[j + l + 0] = (int8_t)(((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32);
                q[j + l + 32] = (int8_t)(((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32);
                q[j + l + 64] = (int8_t)(((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
                q[j + l + 96] = (int8_t)(((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
            }
            ql += 64;
            qh += 32;
        }
        int lanes[8] = {0};
        for (int e = 0; e < LC_QK_K; e++)
            lanes[(e % 32) / 4] += x[i].scales[e / 16] * q[e] * y[i].qs[e];
        const float d = y[i].d * LC_FP16_TO_FP32(x[i].d);
        for (int m = 0; m < 8; m++)
            acc[m] = fmaf(d, (float)lanes[m], acc[m]);
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
 * expf as ggml_v_expf (AVX-512), lane by lane: n = round(x / ln 2) by the 1.5 * 2^23 trick,
 * b = x - n ln 2 in two fused steps, a degree-5 polynomial in b, scaled by 2^n; |n| > 192
 * saturates to +inf or 0.  Within 1.5 ulp of expf, but not equal to it, hence the copy.
 */
static float v_expf(float x)
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
    return ldexpf(j, (int)n);
}

/*
 * Softmax as ggml's soft_max on AVX-512: max in float; exp(x - max) by v_expf in blocks of 16,
 * each block's 16 values summed by reduce16 and added in double (the tail, n % 16, by expf one
 * at a time); every value then multiplied by the float reciprocal of the sum.  The caller pads
 * n to llama.cpp's KV length (a multiple of 32) with -INFINITY, which become exactly 0.
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
    int i = 0;
    for (; i + 15 < n; i += 16) {
        for (int m = 0; m < 16; m++)
            x[i + m] = v_expf(x[i + m] - max);
        sum += (double)reduce16(x + i);
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
 * SwiGLU as llama.cpp's graph computes it (ggml_silu, then ggml_mul): silu(v) = v / (1 + e^-v)
 * with v_expf in blocks of 16 (ggml_v_silu), libm expf for the tail; then times u.
 */
static void swiglu(float *y, const float *g, const float *u, int n)
{
    int i = 0;
    for (; i + 15 < n; i += 16)
        for (int m = 0; m < 16; m++)
            y[i + m] = (g[i + m] / (1.0f + v_expf(0.0f - g[i + m]))) * u[i + m];
    for (; i < n; i++)
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
    .gemm = {
        [LC_TYPE_F32] = gemm_f32,
        [LC_TYPE_F16] = gemm_f16,
        /* quantized types: vec_dot's order is also tinyBLAS's; callers loop vec_dot */
    },
    .rms_norm = rms_norm,
    .softmax = softmax,
    .swiglu = swiglu,
    .dot_f32 = dot_f32,
    .dot_f16 = dot_f16,
    .axpy_f16 = axpy_f16,
    .axpy_f32 = axpy_f32,
};
