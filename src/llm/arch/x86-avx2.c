/*
 * x86-avx2.c - AVX2 + FMA + F16C kernels (compiled with those -m flags only).
 *
 * Quantized dots follow ggml's AVX2 scheme: a block's 32 byte products are summed pairwise
 * (maddubs: u8 x s8 -> s16, then madd with ones -> 8 x s32), converted to float and
 * accumulated lane-wise with a fused multiply-add by the block's dx*dy; the lanes are added at
 * the end.  Integer parts are exact, so the result differs from scalar.c only in the order of
 * the float additions.  The Q4_1 offset term m_x * s_y is summed in a separate float in block
 * order (the GEMM tiles repeat exactly the same sequence, so gemm == vec_dot bit for bit).
 */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "kernels.h"

#define INLINE static inline __attribute__((always_inline))

/* ---------------------------------------------------------------- helpers */

INLINE float hsum_ps(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

INLINE int hsum_epi32(__m256i v)
{
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 1));
    return _mm_cvtsi128_si32(s);
}

INLINE float h2f(lc_fp16 h)
{
    return _cvtsh_ss(h);
}

/* 16 bytes of nibbles -> 32 bytes 0..15: low nibbles first (weights 0..15), then high (16..31) */
INLINE __m256i unpack_nibbles(const uint8_t *qs)
{
    const __m128i q = _mm_loadu_si128((const __m128i *)qs);
    return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(q, 4), q), _mm256_set1_epi8(0x0F));
}

/* sum of u8 x s8 products per 4 bytes -> 8 x s32 (|u8| <= 15 or |s8 products| fit s16) */
INLINE __m256 dot_us8(__m256i ux, __m256i sy)
{
    const __m256i p16 = _mm256_maddubs_epi16(ux, sy);
    return _mm256_cvtepi32_ps(_mm256_madd_epi16(p16, _mm256_set1_epi16(1)));
}

/* signed x signed: |x| as unsigned times y with x's sign (x, y in -127..127) */
INLINE __m256 dot_ss8(__m256i x, __m256i y)
{
    return dot_us8(_mm256_sign_epi8(x, x), _mm256_sign_epi8(y, x));
}

/* ---------------------------------------------------------------- activation quantizers */

/*
 * One 32-float block -> 32 int8 with ggml's AVX rounding (see scalar.c): d = amax / 127,
 * q = round_half_even(x * (127 / amax)).  Returns d; *sum = sum(q).
 */
INLINE float quantize_block_q8(const float *x, int8_t *qs, int *sum)
{
    __m256 v0 = _mm256_loadu_ps(x), v1 = _mm256_loadu_ps(x + 8);
    __m256 v2 = _mm256_loadu_ps(x + 16), v3 = _mm256_loadu_ps(x + 24);
    const __m256 sign = _mm256_set1_ps(-0.0f);
    __m256 m = _mm256_andnot_ps(sign, v0);
    m = _mm256_max_ps(m, _mm256_andnot_ps(sign, v1));
    m = _mm256_max_ps(m, _mm256_andnot_ps(sign, v2));
    m = _mm256_max_ps(m, _mm256_andnot_ps(sign, v3));
    __m128 m4 = _mm_max_ps(_mm256_extractf128_ps(m, 1), _mm256_castps256_ps128(m));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
    const float amax = _mm_cvtss_f32(m4);
    const float d = amax / 127.f;
    const __m256 id = _mm256_set1_ps(amax != 0.0f ? 127.f / amax : 0.0f);
    const int rnd = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
    __m256i i0 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v0, id), rnd));
    __m256i i1 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v1, id), rnd));
    __m256i i2 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v2, id), rnd));
    __m256i i3 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v3, id), rnd));
    *sum = hsum_epi32(_mm256_add_epi32(_mm256_add_epi32(i0, i1), _mm256_add_epi32(i2, i3)));
    /* packs work per 128-bit lane: the result is in dword order 0 4 1 5 2 6 3 7 */
    i0 = _mm256_packs_epi32(i0, i1);
    i2 = _mm256_packs_epi32(i2, i3);
    i0 = _mm256_packs_epi16(i0, i2);
    i0 = _mm256_permutevar8x32_epi32(i0, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256((__m256i *)qs, i0);
    return d;
}

static void quantize_row_q8_0(const float *x, void *vy, int64_t n)
{
    lc_block_q8_0 *y = vy;
    for (int64_t i = 0; i < n / LC_QK8_0; i++) {
        int sum;
        y[i].d = lc_fp32_to_fp16(quantize_block_q8(x + i * LC_QK8_0, y[i].qs, &sum));
    }
}

static void quantize_row_q8_1(const float *x, void *vy, int64_t n)
{
    lc_block_q8_1 *y = vy;
    for (int64_t i = 0; i < n / LC_QK8_1; i++) {
        int sum;
        const float d = quantize_block_q8(x + i * LC_QK8_1, y[i].qs, &sum);
        y[i].d = lc_fp32_to_fp16(d);
        y[i].s = lc_fp32_to_fp16(d * (float)sum);
    }
}

static void quantize_row_f16(const float *x, void *vy, int64_t n)
{
    lc_fp16 *y = vy;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(y + i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++)
        y[i] = lc_fp32_to_fp16(x[i]);
}

/* ---------------------------------------------------------------- quantized dots */

/* Per-block integer dots as 8 float lanes. */
INLINE __m256 blk_q4_1(const lc_block_q4_1 *x, const lc_block_q8_1 *y)
{
    return dot_us8(unpack_nibbles(x->qs), _mm256_loadu_si256((const __m256i *)y->qs));
}

INLINE __m256 blk_q4_0(const lc_block_q4_0 *x, const lc_block_q8_0 *y)
{
    const __m256i bx = _mm256_sub_epi8(unpack_nibbles(x->qs), _mm256_set1_epi8(8));
    return dot_ss8(bx, _mm256_loadu_si256((const __m256i *)y->qs));
}

INLINE __m256 blk_q8_0(const lc_block_q8_0 *x, const lc_block_q8_0 *y)
{
    return dot_ss8(_mm256_loadu_si256((const __m256i *)x->qs),
                   _mm256_loadu_si256((const __m256i *)y->qs));
}

/* The offset term of Q4_1 . Q8_1: sum over blocks of m_x * s_y, in block order, in float. */
static float q4_1_summs(const lc_block_q4_1 *x, const lc_block_q8_1 *y, int nb)
{
    float summs = 0.0f;
    for (int i = 0; i < nb; i++)
        summs += h2f(x[i].m) * h2f(y[i].s);
    return summs;
}

static void vec_dot_q4_1_q8_1(int n, float *s, const void *vx, const void *vy)
{
    const lc_block_q4_1 *x = vx;
    const lc_block_q8_1 *y = vy;
    const int nb = n / LC_QK4_1;
    __m256 acc = _mm256_setzero_ps();
    for (int i = 0; i < nb; i++)
        acc = _mm256_fmadd_ps(_mm256_set1_ps(h2f(x[i].d) * h2f(y[i].d)), blk_q4_1(x + i, y + i),
                              acc);
    *s = hsum_ps(acc) + q4_1_summs(x, y, nb);
}

static void vec_dot_q4_0_q8_0(int n, float *s, const void *vx, const void *vy)
{
    const lc_block_q4_0 *x = vx;
    const lc_block_q8_0 *y = vy;
    const int nb = n / LC_QK4_0;
    __m256 acc = _mm256_setzero_ps();
    for (int i = 0; i < nb; i++)
        acc = _mm256_fmadd_ps(_mm256_set1_ps(h2f(x[i].d) * h2f(y[i].d)), blk_q4_0(x + i, y + i),
                              acc);
    *s = hsum_ps(acc);
}

static void vec_dot_q8_0_q8_0(int n, float *s, const void *vx, const void *vy)
{
    const lc_block_q8_0 *x = vx;
    const lc_block_q8_0 *y = vy;
    const int nb = n / LC_QK8_0;
    __m256 acc = _mm256_setzero_ps();
    for (int i = 0; i < nb; i++)
        acc = _mm256_fmadd_ps(_mm256_set1_ps(h2f(x[i].d) * h2f(y[i].d)), blk_q8_0(x + i, y + i),
                              acc);
    *s = hsum_ps(acc);
}

/* ---------------------------------------------------------------- GEMM tiles */

/*
 * An RM x CN tile: every weight block is unpacked once and multiplied with CN activation
 * blocks.  Per (row, column) pair the operations are exactly those of vec_dot, in the same
 * order, so the results are bit-identical to vec_dot's.
 */
#define DEFINE_TILE(NAME, WT, AT, BLK, HAS_M)                                                  \
    INLINE void NAME##_tile(int nb, float *s, size_t ld_s, const uint8_t *w, size_t w_stride,   \
                            const uint8_t *a, size_t a_stride, const int RM, const int CN)      \
    {                                                                                         \
        __m256 acc[4][4];                                                                     \
        _Pragma("GCC unroll 4") for (int r = 0; r < RM; r++)                                  \
            _Pragma("GCC unroll 4") for (int c = 0; c < CN; c++) acc[r][c] =                  \
                _mm256_setzero_ps();                                                          \
        for (int i = 0; i < nb; i++) {                                                        \
            __m256i bx[4];                                                                    \
            float dw[4];                                                                      \
            _Pragma("GCC unroll 4") for (int r = 0; r < RM; r++)                              \
            {                                                                                 \
                const WT *x = (const WT *)(w + r * w_stride) + i;                             \
                bx[r] = BLK##_x(x);                                                           \
                dw[r] = h2f(x->d);                                                            \
            }                                                                                 \
            _Pragma("GCC unroll 4") for (int c = 0; c < CN; c++)                              \
            {                                                                                 \
                const AT *y = (const AT *)(a + c * a_stride) + i;                             \
                const __m256i by = _mm256_loadu_si256((const __m256i *)y->qs);                \
                const float da = h2f(y->d);                                                   \
                _Pragma("GCC unroll 4") for (int r = 0; r < RM; r++) acc[r][c] =              \
                    _mm256_fmadd_ps(_mm256_set1_ps(dw[r] * da), BLK##_xy(bx[r], by),          \
                                    acc[r][c]);                                               \
            }                                                                                 \
        }                                                                                     \
        _Pragma("GCC unroll 4") for (int c = 0; c < CN; c++)                                  \
            _Pragma("GCC unroll 4") for (int r = 0; r < RM; r++)                              \
        {                                                                                     \
            float v = hsum_ps(acc[r][c]);                                                     \
            if (HAS_M)                                                                        \
                v += q4_1_summs((const lc_block_q4_1 *)(const void *)(w + r * w_stride),      \
                                (const lc_block_q8_1 *)(const void *)(a + c * a_stride), nb); \
            s[c * ld_s + r] = v;                                                              \
        }                                                                                     \
    }                                                                                         \
    static void gemm_##NAME(int n, float *s, size_t ld_s, const void *vw, size_t w_stride,      \
                            int nr, const void *va, size_t a_stride, int nc)                    \
    {                                                                                         \
        const uint8_t *w = vw, *a = va;                                                       \
        const int nb = n / 32;                                                                \
        int r = 0;                                                                            \
        for (; r + 4 <= nr; r += 4) {                                                         \
            int c = 0;                                                                        \
            for (; c + 2 <= nc; c += 2)                                                       \
                NAME##_tile(nb, s + c * ld_s + r, ld_s, w + r * w_stride, w_stride,           \
                            a + c * a_stride, a_stride, 4, 2);                                \
            for (; c < nc; c++)                                                               \
                NAME##_tile(nb, s + c * ld_s + r, ld_s, w + r * w_stride, w_stride,           \
                            a + c * a_stride, a_stride, 4, 1);                                \
        }                                                                                     \
        for (; r < nr; r++) {                                                                 \
            int c = 0;                                                                        \
            for (; c + 4 <= nc; c += 4)                                                       \
                NAME##_tile(nb, s + c * ld_s + r, ld_s, w + r * w_stride, w_stride,           \
                            a + c * a_stride, a_stride, 1, 4);                                \
            for (; c < nc; c++)                                                               \
                NAME##_tile(nb, s + c * ld_s + r, ld_s, w + r * w_stride, w_stride,           \
                            a + c * a_stride, a_stride, 1, 1);                                \
        }                                                                                     \
    }

/* operand preparation and block dot per weight type, as in blk_* above */
INLINE __m256i q4_1_x(const lc_block_q4_1 *x) { return unpack_nibbles(x->qs); }
INLINE __m256 q4_1_xy(__m256i bx, __m256i by) { return dot_us8(bx, by); }
INLINE __m256i q4_0_x(const lc_block_q4_0 *x)
{
    return _mm256_sub_epi8(unpack_nibbles(x->qs), _mm256_set1_epi8(8));
}
INLINE __m256 q4_0_xy(__m256i bx, __m256i by) { return dot_ss8(bx, by); }
INLINE __m256i q8_0_x(const lc_block_q8_0 *x) { return _mm256_loadu_si256((const __m256i *)x->qs); }
INLINE __m256 q8_0_xy(__m256i bx, __m256i by) { return dot_ss8(bx, by); }

DEFINE_TILE(q4_1, lc_block_q4_1, lc_block_q8_1, q4_1, 1)
DEFINE_TILE(q4_0, lc_block_q4_0, lc_block_q8_0, q4_0, 0)
DEFINE_TILE(q8_0, lc_block_q8_0, lc_block_q8_0, q8_0, 0)

/* ---------------------------------------------------------------- float kernels */

static float dot_f32(const float *x, const float *y, int n)
{
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
    __m256 a2 = _mm256_setzero_ps(), a3 = _mm256_setzero_ps();
    int i = 0;
    for (; i + 32 <= n; i += 32) {
        a0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i), a0);
        a1 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 8), _mm256_loadu_ps(y + i + 8), a1);
        a2 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 16), _mm256_loadu_ps(y + i + 16), a2);
        a3 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 24), _mm256_loadu_ps(y + i + 24), a3);
    }
    for (; i + 8 <= n; i += 8)
        a0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i), a0);
    float sum = hsum_ps(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
    for (; i < n; i++)
        sum += x[i] * y[i];
    return sum;
}

INLINE __m256 load_h8(const lc_fp16 *p)
{
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
}

static float dot_f16(const lc_fp16 *x, const lc_fp16 *y, int n)
{
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
    __m256 a2 = _mm256_setzero_ps(), a3 = _mm256_setzero_ps();
    int i = 0;
    for (; i + 32 <= n; i += 32) {
        a0 = _mm256_fmadd_ps(load_h8(x + i), load_h8(y + i), a0);
        a1 = _mm256_fmadd_ps(load_h8(x + i + 8), load_h8(y + i + 8), a1);
        a2 = _mm256_fmadd_ps(load_h8(x + i + 16), load_h8(y + i + 16), a2);
        a3 = _mm256_fmadd_ps(load_h8(x + i + 24), load_h8(y + i + 24), a3);
    }
    for (; i + 8 <= n; i += 8)
        a0 = _mm256_fmadd_ps(load_h8(x + i), load_h8(y + i), a0);
    float sum = hsum_ps(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
    for (; i < n; i++)
        sum += h2f(x[i]) * h2f(y[i]);
    return sum;
}

static void vec_dot_f32(int n, float *s, const void *x, const void *y)
{
    *s = dot_f32(x, y, n);
}

static void vec_dot_f16(int n, float *s, const void *x, const void *y)
{
    *s = dot_f16(x, y, n);
}

/* RMS norm as scalar.c: float squares summed in double, then (x * scale) * w. */
static void rms_norm(float *y, const float *x, const float *w, int n, float eps)
{
    __m256d s0 = _mm256_setzero_pd(), s1 = _mm256_setzero_pd();
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 v = _mm256_loadu_ps(x + i);
        const __m256 sq = _mm256_mul_ps(v, v);
        s0 = _mm256_add_pd(s0, _mm256_cvtps_pd(_mm256_castps256_ps128(sq)));
        s1 = _mm256_add_pd(s1, _mm256_cvtps_pd(_mm256_extractf128_ps(sq, 1)));
    }
    double buf[4];
    _mm256_storeu_pd(buf, _mm256_add_pd(s0, s1));
    double sum = (buf[0] + buf[1]) + (buf[2] + buf[3]);
    for (int j = i; j < n; j++)
        sum += (double)(x[j] * x[j]);
    const float mean = (float)(sum / n);
    const float scale = 1.0f / sqrtf(mean + eps);
    const __m256 vs = _mm256_set1_ps(scale);
    for (i = 0; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i), vs),
                                              _mm256_loadu_ps(w + i)));
    for (; i < n; i++)
        y[i] = (x[i] * scale) * w[i];
}

/* y += a * x: separate multiply and add, rounding as scalar.c does */
static void axpy_f32(float *y, float a, const float *x, int n)
{
    const __m256 va = _mm256_set1_ps(a);
    int i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_add_ps(_mm256_loadu_ps(y + i),
                                              _mm256_mul_ps(va, _mm256_loadu_ps(x + i))));
    for (; i < n; i++)
        y[i] += a * x[i];
}

static void axpy_f16(float *y, float a, const lc_fp16 *x, int n)
{
    const __m256 va = _mm256_set1_ps(a);
    int i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i,
                         _mm256_add_ps(_mm256_loadu_ps(y + i), _mm256_mul_ps(va, load_h8(x + i))));
    for (; i < n; i++)
        y[i] += a * h2f(x[i]);
}

const struct lc_kernels lc_kernels_avx2 = {
    .isa = "avx2",
    .vec_dot = {
        [LC_TYPE_F32] = vec_dot_f32,
        [LC_TYPE_F16] = vec_dot_f16,
        [LC_TYPE_Q4_0] = vec_dot_q4_0_q8_0,
        [LC_TYPE_Q4_1] = vec_dot_q4_1_q8_1,
        [LC_TYPE_Q8_0] = vec_dot_q8_0_q8_0,
    },
    .quantize_row = {
        [LC_TYPE_F16] = quantize_row_f16,
        [LC_TYPE_Q8_0] = quantize_row_q8_0,
        [LC_TYPE_Q8_1] = quantize_row_q8_1,
    },
    .gemm = {
        [LC_TYPE_Q4_0] = gemm_q4_0,
        [LC_TYPE_Q4_1] = gemm_q4_1,
        [LC_TYPE_Q8_0] = gemm_q8_0,
    },
    .rms_norm = rms_norm,
    .dot_f32 = dot_f32,
    .dot_f16 = dot_f16,
    .axpy_f16 = axpy_f16,
    .axpy_f32 = axpy_f32,
};
