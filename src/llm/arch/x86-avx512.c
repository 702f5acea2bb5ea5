/*
 * x86-avx512.c - AVX-512 (F/BW/VL/DQ) + VNNI kernels, compiled with those -m flags only.
 *
 * The quantized dots work on two blocks at a time: one 512-bit register holds the 64 weights of
 * blocks i and i+1 (block i in the low 256 bits, in ggml's order: low nibbles = weights 0..15,
 * high nibbles = 16..31), another their 64 activations.  vpdpbusd multiplies unsigned bytes by
 * signed bytes and sums each group of four into a 32-bit lane, so lanes 0..7 hold block i's
 * partial sums and lanes 8..15 block i+1's:
 *   Q4_1: nibbles 0..15 are the unsigned operand as they are;
 *   Q4_0: sum((q - 8) * y) = sum(q * y) - sum(8 * y), both by vpdpbusd;
 *   Q8_0: |x| times y with x's sign (x, y never -128: the quantizers produce -127..127).
 * The partial sums are converted to float and accumulated with a fused multiply-add by
 * dx*dy (per half); an odd last block is paired with an all-zero block (d = 0).  Lanes are
 * summed at the end; the Q4_1 offset term m_x*s_y is summed in a separate float in block order.
 * The GEMM tiles repeat exactly these operations per (row, column), so gemm == vec_dot bit for
 * bit.  Anything not here (quantizers, element-wise kernels) comes from the AVX2 table.
 */
#include <immintrin.h>
#include <string.h>

#include "kernels.h"

#define INLINE static inline __attribute__((always_inline))

static const lc_block_q4_1 zero_q4_1;
static const lc_block_q4_0 zero_q4_0;
static const lc_block_q8_0 zero_q8_0;
static const lc_block_q8_1 zero_q8_1;

INLINE float h2f(lc_fp16 h)
{
    return _cvtsh_ss(h);
}

/* [d0 x 8, d1 x 8] from two fp16 scales */
INLINE __m512 pair_scale(lc_fp16 d0, lc_fp16 d1)
{
    const __m128 v = _mm_cvtph_ps(_mm_cvtsi32_si128((int)((uint32_t)d0 | (uint32_t)d1 << 16)));
    const __m512i idx = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
    return _mm512_permutexvar_ps(idx, _mm512_castps128_ps512(v));
}

/* two blocks' 16 nibble bytes -> 64 bytes 0..15: [lo0, hi0, lo1, hi1] (16 bytes each) */
INLINE __m512i unpack_nibbles2(const uint8_t *q0, const uint8_t *q1)
{
    const __m256i t = _mm256_set_m128i(_mm_loadu_si128((const __m128i *)q1),
                                       _mm_loadu_si128((const __m128i *)q0));
    const __m512i z = _mm512_inserti64x4(_mm512_castsi256_si512(t), _mm256_srli_epi16(t, 4), 1);
    /* z = [q0, q1, q0>>4, q1>>4] -> [q0, q0>>4, q1, q1>>4] */
    return _mm512_and_si512(_mm512_shuffle_i64x2(z, z, _MM_SHUFFLE(3, 1, 2, 0)),
                            _mm512_set1_epi8(0x0F));
}

INLINE __m512i load2(const int8_t *q0, const int8_t *q1)
{
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)q0)),
                              _mm256_loadu_si256((const __m256i *)q1), 1);
}

/* ---------------------------------------------------------------- per type: operands, dots */

/* weight operand of a pair of blocks */
INLINE __m512i q4_1_x(const lc_block_q4_1 *x0, const lc_block_q4_1 *x1)
{
    return unpack_nibbles2(x0->qs, x1->qs);
}
INLINE __m512i q4_0_x(const lc_block_q4_0 *x0, const lc_block_q4_0 *x1)
{
    return unpack_nibbles2(x0->qs, x1->qs);
}
INLINE __m512i q8_0_x(const lc_block_q8_0 *x0, const lc_block_q8_0 *x1)
{
    return load2(x0->qs, x1->qs);
}

/* integer partial sums of a pair: 16 x s32 */
INLINE __m512i q4_1_xy(__m512i bx, __m512i by)
{
    return _mm512_dpbusd_epi32(_mm512_setzero_si512(), bx, by);
}
INLINE __m512i q4_0_xy(__m512i bx, __m512i by)
{
    const __m512i p = _mm512_dpbusd_epi32(_mm512_setzero_si512(), bx, by);
    const __m512i c = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8(8), by);
    return _mm512_sub_epi32(p, c);
}
INLINE __m512i q8_0_xy(__m512i bx, __m512i by)
{
    const __m512i sy = _mm512_mask_sub_epi8(by, _mm512_movepi8_mask(bx), _mm512_setzero_si512(), by);
    return _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_abs_epi8(bx), sy);
}

/* The offset term of Q4_1 . Q8_1: sum over blocks of m_x * s_y, in block order, in float. */
static float q4_1_summs(const lc_block_q4_1 *x, const lc_block_q8_1 *y, int nb)
{
    float summs = 0.0f;
    for (int i = 0; i < nb; i++)
        summs += h2f(x[i].m) * h2f(y[i].s);
    return summs;
}

#define DEFINE_VEC_DOT(NAME, WT, AT, HAS_M)                                                    \
    static void vec_dot_##NAME(int n, float *s, const void *vx, const void *vy)                \
    {                                                                                         \
        const WT *x = vx;                                                                     \
        const AT *y = vy;                                                                     \
        const int nb = n / 32;                                                                \
        __m512 acc = _mm512_setzero_ps();                                                     \
        for (int i = 0; i < nb; i += 2) {                                                     \
            const WT *x1 = i + 1 < nb ? x + i + 1 : &zero_##NAME;                             \
            const AT *y1 = i + 1 < nb ? y + i + 1 : &zero_##AT##_blk;                         \
            const __m512 d = _mm512_mul_ps(pair_scale(x[i].d, x1->d), pair_scale(y[i].d, y1->d)); \
            const __m512i dot = NAME##_xy(NAME##_x(x + i, x1), load2(y[i].qs, y1->qs));       \
            acc = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(dot), acc);                           \
        }                                                                                     \
        float v = _mm512_reduce_add_ps(acc);                                                  \
        if (HAS_M)                                                                            \
            v += q4_1_summs((const lc_block_q4_1 *)vx, (const lc_block_q8_1 *)vy, nb);        \
        *s = v;                                                                               \
    }

#define zero_lc_block_q8_1_blk zero_q8_1
#define zero_lc_block_q8_0_blk zero_q8_0
DEFINE_VEC_DOT(q4_1, lc_block_q4_1, lc_block_q8_1, 1)
DEFINE_VEC_DOT(q4_0, lc_block_q4_0, lc_block_q8_0, 0)
DEFINE_VEC_DOT(q8_0, lc_block_q8_0, lc_block_q8_0, 0)

/* ---------------------------------------------------------------- GEMM tiles */

/*
 * RM x CN tile (up to 4 x 4: 16 accumulators + 4 weight operands + scales fit the 32 zmm
 * registers).  Each pair of weight blocks is unpacked once per tile and used for CN columns.
 */
#define DEFINE_GEMM(NAME, WT, AT, HAS_M)                                                       \
    INLINE void NAME##_tile(int nb, float *s, size_t ld_s, const uint8_t *w, size_t w_stride,   \
                            const uint8_t *a, size_t a_stride, const int RM, const int CN)      \
    {                                                                                         \
        __m512 acc[4][4];                                                                     \
        _Pragma("GCC unroll 4") for (int r = 0; r < RM; r++)                                  \
            _Pragma("GCC unroll 4") for (int c = 0; c < CN; c++) acc[r][c] =                  \
                _mm512_setzero_ps();                                                          \
        for (int i = 0; i < nb; i += 2) {                                                     \
            __m512i bx[4];                                                                    \
            __m512 dw[4];                                                                     \
            _Pragma("GCC unroll 4") for (int r = 0; r < RM; r++)                              \
            {                                                                                 \
                const WT *x = (const WT *)(const void *)(w + r * w_stride) + i;               \
                const WT *x1 = i + 1 < nb ? x + 1 : &zero_##NAME;                             \
                bx[r] = NAME##_x(x, x1);                                                      \
                dw[r] = pair_scale(x->d, x1->d);                                              \
            }                                                                                 \
            _Pragma("GCC unroll 4") for (int c = 0; c < CN; c++)                              \
            {                                                                                 \
                const AT *y = (const AT *)(const void *)(a + c * a_stride) + i;               \
                const AT *y1 = i + 1 < nb ? y + 1 : &zero_##AT##_blk;                         \
                const __m512i by = load2(y->qs, y1->qs);                                      \
                const __m512 da = pair_scale(y->d, y1->d);                                    \
                _Pragma("GCC unroll 4") for (int r = 0; r < RM; r++) acc[r][c] =              \
                    _mm512_fmadd_ps(_mm512_mul_ps(dw[r], da),                                 \
                                    _mm512_cvtepi32_ps(NAME##_xy(bx[r], by)), acc[r][c]);     \
            }                                                                                 \
        }                                                                                     \
        _Pragma("GCC unroll 4") for (int c = 0; c < CN; c++)                                  \
            _Pragma("GCC unroll 4") for (int r = 0; r < RM; r++)                              \
        {                                                                                     \
            float v = _mm512_reduce_add_ps(acc[r][c]);                                        \
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
            for (; c + 4 <= nc; c += 4)                                                       \
                NAME##_tile(nb, s + c * ld_s + r, ld_s, w + r * w_stride, w_stride,           \
                            a + c * a_stride, a_stride, 4, 4);                                \
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

DEFINE_GEMM(q4_1, lc_block_q4_1, lc_block_q8_1, 1)
DEFINE_GEMM(q4_0, lc_block_q4_0, lc_block_q8_0, 0)
DEFINE_GEMM(q8_0, lc_block_q8_0, lc_block_q8_0, 0)

/* ---------------------------------------------------------------- float dots */

static float dot_f32(const float *x, const float *y, int n)
{
    __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
    __m512 a2 = _mm512_setzero_ps(), a3 = _mm512_setzero_ps();
    int i = 0;
    for (; i + 64 <= n; i += 64) {
        a0 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i), _mm512_loadu_ps(y + i), a0);
        a1 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i + 16), _mm512_loadu_ps(y + i + 16), a1);
        a2 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i + 32), _mm512_loadu_ps(y + i + 32), a2);
        a3 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i + 48), _mm512_loadu_ps(y + i + 48), a3);
    }
    for (; i + 16 <= n; i += 16)
        a0 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i), _mm512_loadu_ps(y + i), a0);
    if (i < n) { /* masked tail: the missing lanes load as 0 */
        const __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
        a1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, x + i), _mm512_maskz_loadu_ps(m, y + i), a1);
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
}

INLINE __m512 load_h16(const lc_fp16 *p)
{
    return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p));
}

static float dot_f16(const lc_fp16 *x, const lc_fp16 *y, int n)
{
    __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
    __m512 a2 = _mm512_setzero_ps(), a3 = _mm512_setzero_ps();
    int i = 0;
    for (; i + 64 <= n; i += 64) {
        a0 = _mm512_fmadd_ps(load_h16(x + i), load_h16(y + i), a0);
        a1 = _mm512_fmadd_ps(load_h16(x + i + 16), load_h16(y + i + 16), a1);
        a2 = _mm512_fmadd_ps(load_h16(x + i + 32), load_h16(y + i + 32), a2);
        a3 = _mm512_fmadd_ps(load_h16(x + i + 48), load_h16(y + i + 48), a3);
    }
    for (; i + 16 <= n; i += 16)
        a0 = _mm512_fmadd_ps(load_h16(x + i), load_h16(y + i), a0);
    if (i < n) {
        const __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
        a1 = _mm512_fmadd_ps(_mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, x + i)),
                             _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, y + i)), a1);
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
}

static void vec_dot_f32(int n, float *s, const void *x, const void *y)
{
    *s = dot_f32(x, y, n);
}

static void vec_dot_f16(int n, float *s, const void *x, const void *y)
{
    *s = dot_f16(x, y, n);
}

const struct lc_kernels lc_kernels_avx512 = {
    .isa = "avx512",
    .vec_dot = {
        [LC_TYPE_F32] = vec_dot_f32,
        [LC_TYPE_F16] = vec_dot_f16,
        [LC_TYPE_Q4_0] = vec_dot_q4_0,
        [LC_TYPE_Q4_1] = vec_dot_q4_1,
        [LC_TYPE_Q8_0] = vec_dot_q8_0,
    },
    .gemm = {
        [LC_TYPE_Q4_0] = gemm_q4_0,
        [LC_TYPE_Q4_1] = gemm_q4_1,
        [LC_TYPE_Q8_0] = gemm_q8_0,
    },
    .dot_f32 = dot_f32,
    .dot_f16 = dot_f16,
};
