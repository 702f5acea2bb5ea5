/*
 * x86-qdot.h - the quantized dot products and GEMM tiles shared by x86-avx2.c and x86-avx512.c.
 *
 * Included by each, after it defines INLINE, QDOT_TILE_COLS, dot_us8(u8 x s8 -> 8 float
 * lanes, lane j = the sum of the products of bytes 4j..4j+3: maddubs + madd on AVX2, vpdpbusd
 * on AVX-512 VNNI, as ggml's mul_sum_us8_pairs_float), dot_us8_acc (the same integer lanes
 * added to an accumulator) and unpack_nibbles_bcast (unpack_nibbles without cross-lane
 * shuffles).  Everything here is static: each ISA file gets its own copy compiled with its own
 * flags.
 *
 * The order of the float operations is ggml's x86 one (see scalar.c): per block, 8 lanes of
 * integer sums, converted and accumulated with a fused multiply-add by dx*dy; hsum_float_8 at
 * the end; for Q4_1 the m_x * s_y terms summed apart in block order and added last.  So these
 * kernels, the GEMM tiles included, return scalar.c's values bit for bit.
 */
#ifndef LC_X86_QDOT_H
#define LC_X86_QDOT_H

#include <stddef.h>
#include <stdint.h>

/*
 * The tiles' per-(row, column) scale dx * dy: a float product broadcast (two instructions), or,
 * with QDOT_VECTOR_SCALES (enough registers: AVX-512), the product of two broadcast vectors
 * (one instruction).  Both round the same product, so the results are the same bits.
 */
#ifdef QDOT_VECTOR_SCALES
#define QDOT_SCALE_T __m256
#define QDOT_SCALE(f) _mm256_set1_ps(f)
#define QDOT_MUL(a, b) _mm256_mul_ps(a, b)
#else
#define QDOT_SCALE_T float
#define QDOT_SCALE(f) (f)
#define QDOT_MUL(a, b) _mm256_set1_ps((a) * (b))

#endif


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

/* signed x signed: |x| as unsigned times y with x's sign (x, y in -127..127) */
INLINE __m256 dot_ss8(__m256i x, __m256i y)
{
    return dot_us8(_mm256_sign_epi8(x, x), _mm256_sign_epi8(y, x));
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

/* [d, m] (or [d, s]) of a Q4_1 / Q8_1 block as floats, lanes 0 and 1 */
INLINE __m128 hdr(const void *blk)
{
    uint32_t u;
    memcpy(&u, blk, 4);
    return _mm_cvtph_ps(_mm_cvtsi32_si128((int)u));
}

static void vec_dot_q4_1_q8_1(int n, float *s, const void *vx, const void *vy)
{
    const lc_block_q4_1 *x = vx;
    const lc_block_q8_1 *y = vy;
    const int nb = n / LC_QK4_1;
    __m256 acc = _mm256_setzero_ps();
    __m128 msum = _mm_setzero_ps(); /* lane 1: sum of m_x * s_y in block order */
    for (int i = 0; i < nb; i++) {
        const __m128 p = _mm_mul_ps(hdr(x + i), hdr(y + i)); /* [dx*dy, mx*sy] */
        acc = _mm256_fmadd_ps(_mm256_broadcastss_ps(p), blk_q4_1(x + i, y + i), acc);
        msum = _mm_add_ps(msum, p);
    }
    *s = hsum_ps(acc) + _mm_cvtss_f32(_mm_movehdup_ps(msum));
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

/* ---------------------------------------------------------------- Q5_0 Q5_1 IQ4_NL (issue 13) */

/* 32 bits of qh -> 32 bytes, 0xFF where the bit is set (ggml's bytes_from_bits_32) */
INLINE __m256i bits_to_bytes(const uint8_t *qh)
{
    uint32_t x32;
    memcpy(&x32, qh, sizeof x32);
    const __m256i shuf = _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202,
                                           0x0101010101010101, 0x0000000000000000);
    __m256i bytes = _mm256_shuffle_epi8(_mm256_set1_epi32((int)x32), shuf);
    bytes = _mm256_or_si256(bytes, _mm256_set1_epi64x(0x7fbfdfeff7fbfdfe));
    return _mm256_cmpeq_epi8(bytes, _mm256_set1_epi64x(-1));
}

/* Q5_0: q - 16 as a signed byte is the nibble with 0xF0 or-ed in where the fifth bit is clear */
INLINE __m256 blk_q5_0(const lc_block_q5_0 *x, const lc_block_q8_0 *y)
{
    const __m256i hi = _mm256_andnot_si256(bits_to_bytes(x->qh), _mm256_set1_epi8((char)0xF0));
    return dot_ss8(_mm256_or_si256(unpack_nibbles(x->qs), hi),
                   _mm256_loadu_si256((const __m256i *)y->qs));
}

INLINE __m256 blk_q5_1(const lc_block_q5_1 *x, const lc_block_q8_1 *y)
{
    const __m256i hi = _mm256_and_si256(bits_to_bytes(x->qh), _mm256_set1_epi8(0x10));
    return dot_us8(_mm256_or_si256(unpack_nibbles(x->qs), hi),
                   _mm256_loadu_si256((const __m256i *)y->qs));
}

INLINE __m256 blk_iq4_nl(const lc_block_iq4_nl *x, const lc_block_q8_0 *y)
{
    const __m256i values =
        _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)lc_kvalues_iq4nl));
    return dot_ss8(_mm256_shuffle_epi8(values, unpack_nibbles(x->qs)),
                   _mm256_loadu_si256((const __m256i *)y->qs));
}

static void vec_dot_q5_0_q8_0(int n, float *s, const void *vx, const void *vy)
{
    const lc_block_q5_0 *x = vx;
    const lc_block_q8_0 *y = vy;
    const int nb = n / LC_QK5_0;
    __m256 acc = _mm256_setzero_ps();
    for (int i = 0; i < nb; i++)
        acc = _mm256_fmadd_ps(_mm256_set1_ps(h2f(x[i].d) * h2f(y[i].d)), blk_q5_0(x + i, y + i),
                              acc);
    *s = hsum_ps(acc);
}

/* as vec_dot_q4_1_q8_1: the Q5_1 header [d, m] is laid out as Q4_1's */
static void vec_dot_q5_1_q8_1(int n, float *s, const void *vx, const void *vy)
{
    const lc_block_q5_1 *x = vx;
    const lc_block_q8_1 *y = vy;
    const int nb = n / LC_QK5_1;
    __m256 acc = _mm256_setzero_ps();
    __m128 msum = _mm_setzero_ps();
    for (int i = 0; i < nb; i++) {
        const __m128 p = _mm_mul_ps(hdr(x + i), hdr(y + i)); /* [dx*dy, mx*sy] */
        acc = _mm256_fmadd_ps(_mm256_broadcastss_ps(p), blk_q5_1(x + i, y + i), acc);
        msum = _mm_add_ps(msum, p);
    }
    *s = hsum_ps(acc) + _mm_cvtss_f32(_mm_movehdup_ps(msum));
}

/* ggml's AVX2 order: pairs of blocks into two accumulators, a last odd block added apart */
static void vec_dot_iq4_nl_q8_0(int n, float *s, const void *vx, const void *vy)
{
    const lc_block_iq4_nl *x = vx;
    const lc_block_q8_0 *y = vy;
    const int nb = n / LC_QK4_NL;
    __m256 acc1 = _mm256_setzero_ps(), acc2 = _mm256_setzero_ps();
    int ib = 0;
    for (; ib + 1 < nb; ib += 2) {
        acc1 = _mm256_fmadd_ps(_mm256_set1_ps(h2f(y[ib].d) * h2f(x[ib].d)),
                               blk_iq4_nl(x + ib, y + ib), acc1);
        acc2 = _mm256_fmadd_ps(_mm256_set1_ps(h2f(y[ib + 1].d) * h2f(x[ib + 1].d)),
                               blk_iq4_nl(x + ib + 1, y + ib + 1), acc2);
    }
    float sumf = hsum_ps(_mm256_add_ps(acc1, acc2));
    for (; ib < nb; ib++) {
        const __m256 l = blk_iq4_nl(x + ib, y + ib); /* exact integers in float lanes */
        const int isum = hsum_epi32(_mm256_cvtps_epi32(l));
        sumf = fmaf(h2f(y[ib].d) * h2f(x[ib].d), (float)isum, sumf);
    }
    *s = sumf;
}

/* ---------------------------------------------------------------- GEMM tiles */

/*
 * An RM x CN tile: every weight block is unpacked once and multiplied with CN activation
 * blocks.  Per (row, column) pair the operations are exactly those of vec_dot, in the same
 * order, so the results are bit-identical to vec_dot's.
 */
#define DEFINE_TILE(NAME, WT, AT, BLK, HAS_M)                                                     \
    INLINE void NAME##_tile(int nb, float *s, size_t ld_s, const uint8_t *w, size_t w_stride,     \
                            const uint8_t *a, size_t a_stride, const int RM, const int CN)        \
    {                                                                                             \
        __m256 acc[4][4];                                                                         \
        _Pragma("GCC unroll 4") for (int r = 0; r < RM; r++)                                      \
            _Pragma("GCC unroll 4") for (int c = 0; c < CN; c++) acc[r][c] = _mm256_setzero_ps(); \
        for (int i = 0; i < nb; i++) {                                                            \
            __m256i bx[4];                                                                        \
            QDOT_SCALE_T dw[4];                                                                   \
            _Pragma("GCC unroll 4") for (int r = 0; r < RM; r++)                                  \
            {                                                                                     \
                const WT *x = (const WT *)(const void *)(w + r * w_stride) + i;                   \
                bx[r] = BLK##_x(x);                                                               \
                dw[r] = QDOT_SCALE(h2f(x->d));                                                    \
            }                                                                                     \
            _Pragma("GCC unroll 4") for (int c = 0; c < CN; c++)                                  \
            {                                                                                     \
                const AT *y = (const AT *)(const void *)(a + c * a_stride) + i;                   \
                const __m256i by = _mm256_loadu_si256((const __m256i *)y->qs);                    \
                const QDOT_SCALE_T da = QDOT_SCALE(h2f(y->d));                                    \
                _Pragma("GCC unroll 4") for (int r = 0; r < RM; r++) acc[r][c] =                  \
                    _mm256_fmadd_ps(QDOT_MUL(dw[r], da), BLK##_xy(bx[r], by), acc[r][c]);         \
            }                                                                                     \
        }                                                                                         \
        /* Q4_1: the m_x * s_y sums, each in block order; lane r of ms[c] is row r (4 rows at */  \
        /* once, each lane doing the scalar sequence: multiply, then add) */                      \
        __m128 ms[4];                                                                             \
        _Pragma("GCC unroll 4") for (int c = 0; c < CN; c++) ms[c] = _mm_setzero_ps();            \
        if (HAS_M)                                                                                \
            for (int i = 0; i < nb; i++) {                                                        \
                uint16_t mh[4] = {0, 0, 0, 0};                                                    \
                _Pragma("GCC unroll 4") for (int r = 0; r < RM; r++) mh[r] =                      \
                    ((const lc_block_q4_1 *)(const void *)(w + r * w_stride))[i].m;               \
                uint64_t m64;                                                                     \
                memcpy(&m64, mh, 8);                                                              \
                const __m128 mr = _mm_cvtph_ps(_mm_cvtsi64_si128((long long)m64));                \
                _Pragma("GCC unroll 4") for (int c = 0; c < CN; c++) ms[c] = _mm_add_ps(ms[c],    \
                    _mm_mul_ps(mr, _mm_set1_ps(h2f(((const lc_block_q8_1 *)(const void *)(a + c * a_stride))[i].s)))); \
            }                                                                                     \
        _Pragma("GCC unroll 4") for (int c = 0; c < CN; c++)                                      \
        {                                                                                         \
            float msc[4];                                                                         \
            _mm_storeu_ps(msc, ms[c]);                                                            \
            _Pragma("GCC unroll 4") for (int r = 0; r < RM; r++)                                  \
            {                                                                                     \
                float v = hsum_ps(acc[r][c]);                                                     \
                if (HAS_M)                                                                        \
                    v += msc[r];                                                                  \
                s[c * ld_s + r] = v;                                                              \
            }                                                                                     \
        }                                                                                         \
    }                                                                                             \
    static void gemm_##NAME(int n, float *s, size_t ld_s, const void *vw, size_t w_stride,        \
                            int nr, const void *va, size_t a_stride, int nc)                      \
    {                                                                                             \
        const uint8_t *w = vw, *a = va;                                                           \
        const int nb = n / 32;                                                                    \
        int r = 0;                                                                                \
        for (; r + 4 <= nr; r += 4) {                                                             \
            int c = 0;                                                                            \
            for (; c + QDOT_TILE_COLS <= nc; c += QDOT_TILE_COLS)                                 \
                NAME##_tile(nb, s + c * ld_s + r, ld_s, w + r * w_stride, w_stride,               \
                            a + c * a_stride, a_stride, 4, QDOT_TILE_COLS);                       \
            for (; c < nc; c++)                                                                   \
                NAME##_tile(nb, s + c * ld_s + r, ld_s, w + r * w_stride, w_stride,               \
                            a + c * a_stride, a_stride, 4, 1);                                    \
        }                                                                                         \
        for (; r < nr; r++) {                                                                     \
            int c = 0;                                                                            \
            for (; c + 4 <= nc; c += 4)                                                           \
                NAME##_tile(nb, s + c * ld_s + r, ld_s, w + r * w_stride, w_stride,               \
                            a + c * a_stride, a_stride, 1, 4);                                    \
            for (; c < nc; c++)                                                                   \
                NAME##_tile(nb, s + c * ld_s + r, ld_s, w + r * w_stride, w_stride,               \
                            a + c * a_stride, a_stride, 1, 1);                                    \
        }                                                                                         \
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

/* Q5_0 and IQ4_NL as blk_q5_0 / blk_iq4_nl.  Q5_0's tile is vec_dot's order (one accumulator,
 * as tinyBLAS's); IQ4_NL's is tinyBLAS's (scalar.c's gemm_iq4_nl: one accumulator per output,
 * where vec_dot pairs the blocks), the order llama.cpp's prompt batches take */
INLINE __m256i q5_0_x(const lc_block_q5_0 *x)
{
    const __m256i hi = _mm256_andnot_si256(bits_to_bytes(x->qh), _mm256_set1_epi8((char)0xF0));
    return _mm256_or_si256(unpack_nibbles(x->qs), hi);
}
INLINE __m256 q5_0_xy(__m256i bx, __m256i by) { return dot_ss8(bx, by); }
INLINE __m256i iq4_nl_x(const lc_block_iq4_nl *x)
{
    const __m256i values =
        _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)lc_kvalues_iq4nl));
    return _mm256_shuffle_epi8(values, unpack_nibbles(x->qs));
}
INLINE __m256 iq4_nl_xy(__m256i bx, __m256i by) { return dot_ss8(bx, by); }

DEFINE_TILE(q4_1, lc_block_q4_1, lc_block_q8_1, q4_1, 1)
DEFINE_TILE(q4_0, lc_block_q4_0, lc_block_q8_0, q4_0, 0)
DEFINE_TILE(q8_0, lc_block_q8_0, lc_block_q8_0, q8_0, 0)
DEFINE_TILE(q5_0, lc_block_q5_0, lc_block_q8_0, q5_0, 0)
DEFINE_TILE(iq4_nl, lc_block_iq4_nl, lc_block_q8_0, iq4_nl, 0)

/* the prefetch of gemv_q5_0 / gemv_iq4_nl: the 4 rows at next (none at or past end) into L2 */
INLINE void gemv_prefetch4(const uint8_t *next, const uint8_t *end, size_t w_stride)
{
    for (size_t o = 0; o < 4 * w_stride && next + o < end; o += 64)
        _mm_prefetch((const char *)(next + o), _MM_HINT_T1);
}

/*
 * Q5_0's decode GEMV: its 4-row tiles against the one activation row (four independent FMA
 * chains where vec_dot has one; per row vec_dot's operations), the group of rows after the
 * next one prefetched into L2 a few lines per block as gemv4 does
 */
__attribute__((unused)) /* x86-avx512.c: gemv_q5_0_512 */
static void gemv_q5_0(int n, float *s, const void *vw, size_t w_stride, int nr, const void *va)
{
    const uint8_t *w = vw;
    const int nb = n / LC_QK5_0;
    int r = 0;
    for (; r + 4 <= nr; r += 4) {
        gemv_prefetch4(w + (size_t)(r + 8) * w_stride, w + (size_t)nr * w_stride, w_stride);
        q5_0_tile(nb, s + r, 1, w + (size_t)r * w_stride, w_stride, va, 0, 4, 1);
    }
    for (; r < nr; r++)
        q5_0_tile(nb, s + r, 1, w + (size_t)r * w_stride, w_stride, va, 0, 1, 1);
}

/* IQ4_NL's decode GEMV: vec_dot_iq4_nl_q8_0 (pairs of blocks into two accumulators, a last odd
 * block added apart) for 4 rows at once */
__attribute__((unused)) /* x86-avx512.c: gemv_iq4_nl_512 */
static void gemv_iq4_nl(int n, float *s, const void *vw, size_t w_stride, int nr, const void *va)
{
    const uint8_t *w = vw;
    const lc_block_q8_0 *y = va;
    const int nb = n / LC_QK4_NL;
    int r = 0;
    for (; r + 4 <= nr; r += 4) {
        gemv_prefetch4(w + (size_t)(r + 8) * w_stride, w + (size_t)nr * w_stride, w_stride);
        const lc_block_iq4_nl *x[4];
        __m256 acc1[4], acc2[4];
        _Pragma("GCC unroll 4") for (int k = 0; k < 4; k++) {
            x[k] = (const lc_block_iq4_nl *)(const void *)(w + (size_t)(r + k) * w_stride);
            acc1[k] = acc2[k] = _mm256_setzero_ps();
        }
        int ib = 0;
        for (; ib + 1 < nb; ib += 2) {
            const __m256i y1 = _mm256_loadu_si256((const __m256i *)y[ib].qs);
            const __m256i y2 = _mm256_loadu_si256((const __m256i *)y[ib + 1].qs);
            const float d1 = h2f(y[ib].d), d2 = h2f(y[ib + 1].d);
            _Pragma("GCC unroll 4") for (int k = 0; k < 4; k++) {
                acc1[k] = _mm256_fmadd_ps(_mm256_set1_ps(d1 * h2f(x[k][ib].d)),
                                          iq4_nl_xy(iq4_nl_x(x[k] + ib), y1), acc1[k]);
                acc2[k] = _mm256_fmadd_ps(_mm256_set1_ps(d2 * h2f(x[k][ib + 1].d)),
                                          iq4_nl_xy(iq4_nl_x(x[k] + ib + 1), y2), acc2[k]);
            }
        }
        _Pragma("GCC unroll 4") for (int k = 0; k < 4; k++) {
            float sumf = hsum_ps(_mm256_add_ps(acc1[k], acc2[k]));
            if (ib < nb) { /* exact integers in float lanes */
                const __m256 l = blk_iq4_nl(x[k] + ib, y + ib);
                sumf = fmaf(h2f(y[ib].d) * h2f(x[k][ib].d),
                            (float)hsum_epi32(_mm256_cvtps_epi32(l)), sumf);
            }
            s[r + k] = sumf;
        }
    }
    for (; r < nr; r++)
        vec_dot_iq4_nl_q8_0(n, s + r, w + (size_t)r * w_stride, va);
}

/* kernels.h recode: the bytes q5_0_x / iq4_nl_x give, stored as Q8_0 blocks */
static void to_q8_0_q5_0(const void *vx, void *vy, int nb)
{
    const lc_block_q5_0 *x = vx;
    lc_block_q8_0 *y = vy;
    for (int i = 0; i < nb; i++) {
        y[i].d = x[i].d;
        _mm256_storeu_si256((__m256i *)y[i].qs, q5_0_x(x + i));
    }
}

/* kernels.h recode, Q3_K -> Q6_K (scalar.c's q3_K_to_q6_K), 32 weights (l) at a time: for each
 * half h and quarter v, q + 32 = (2 low bits) + 4 * (hmask bit) + 28 */
static void q3_K_to_q6_K(const void *vx, void *vy, int nb)
{
    const lc_block_q3_K *x = vx;
    lc_block_q6_K *y = vy;
    const __m256i m3 = _mm256_set1_epi8(3), m15 = _mm256_set1_epi8(15), c28 = _mm256_set1_epi8(28);
    for (int i = 0; i < nb; i++) {
        const __m256i hm = _mm256_loadu_si256((const __m256i *)x[i].hmask);
        for (int h = 0; h < 2; h++) {
            const __m256i q2 = _mm256_loadu_si256((const __m256i *)(x[i].qs + 32 * h));
            __m256i lo[4], hi[4];
            for (int v = 0; v < 4; v++) {
                const __m256i b = _mm256_set1_epi8((char)(1 << (4 * h + v)));
                const __m256i hb = _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(hm, b), b),
                                                    _mm256_set1_epi8(4));
                const __m256i q6 = _mm256_add_epi8(
                    _mm256_add_epi8(_mm256_and_si256(_mm256_srli_epi16(q2, 2 * v), m3), hb), c28);
                lo[v] = _mm256_and_si256(q6, m15);
                hi[v] = _mm256_srli_epi16(_mm256_andnot_si256(m15, q6), 4); /* 1 or 2 */
            }
            _mm256_storeu_si256((__m256i *)(y[i].ql + 64 * h),
                                _mm256_or_si256(lo[0], _mm256_slli_epi16(lo[2], 4)));
            _mm256_storeu_si256((__m256i *)(y[i].ql + 64 * h + 32),
                                _mm256_or_si256(lo[1], _mm256_slli_epi16(lo[3], 4)));
            _mm256_storeu_si256(
                (__m256i *)(y[i].qh + 32 * h),
                _mm256_or_si256(_mm256_or_si256(hi[0], _mm256_slli_epi16(hi[1], 2)),
                                _mm256_or_si256(_mm256_slli_epi16(hi[2], 4),
                                                _mm256_slli_epi16(hi[3], 6))));
        }
        lc_q3_K_scales(x[i].scales, y[i].scales);
        y[i].d = x[i].d;
    }
}

static void to_q8_0_iq4_nl(const void *vx, void *vy, int nb)
{
    const lc_block_iq4_nl *x = vx;
    lc_block_q8_0 *y = vy;
    for (int i = 0; i < nb; i++) {
        y[i].d = x[i].d;
        _mm256_storeu_si256((__m256i *)y[i].qs, iq4_nl_x(x + i));
    }
}

/* ---------------------------------------------------------------- decode GEMV */

/*
 * Weight rows against one activation row (text generation), 4 rows per step.  vec_dot's single
 * FMA chain per row is latency-bound (one block per FMA latency); four independent rows are
 * not, and the activation block, its scales and (Q4_0) its lane sums are shared.  Needs from
 * the ISA file unpack_nibbles_bcast (unpack_nibbles without cross-lane shuffles) and
 * dot_us8_acc (acc + dot_us8's integer lanes).
 *
 * Per row the operations are vec_dot's: per block acc = fma(float(lanes), dx * dy, acc),
 * hsum_float_8, for Q4_1 the m * s sum (multiply, then add, in block order) added last.  Q4_0's
 * lanes sum((q - 8) * y) are computed as sum(q * y) - 8 * sum(y), the same integers.
 * The scale products of a block are stored a few blocks ahead and read back as broadcast
 * memory operands (a load that partly overlaps a recent store waits for it).
 */
enum gv_kind { GV_Q4_1, GV_Q4_0 };

/* a block's fp16 header: [d, m] / [d, s] (Q4_1 / Q8_1), or [d, 0] (Q4_0 / Q8_0) */
INLINE int gv_hdr(enum gv_kind kind, const uint8_t *blk)
{
    if (kind == GV_Q4_1) {
        uint32_t u;
        memcpy(&u, blk, 4);
        return (int)u;
    }
    uint16_t u;
    memcpy(&u, blk, 2);
    return (int)u;
}

/* [d0*dy, m0*sy, d1*dy, m1*sy, ..] (Q4_0: [d0*dy, 0, d1*dy, 0, ..]) of block i of 4 rows */
INLINE __m256 gv_scales(enum gv_kind kind, const uint8_t *const x[4], size_t xb,
                        const uint8_t *y, size_t yb, int i)
{
    const size_t o = (size_t)i * xb;
    const __m256 dm = _mm256_cvtph_ps(_mm_setr_epi32(gv_hdr(kind, x[0] + o), gv_hdr(kind, x[1] + o),
                                                     gv_hdr(kind, x[2] + o), gv_hdr(kind, x[3] + o)));
    return _mm256_mul_ps(dm, _mm256_cvtph_ps(_mm_set1_epi32(gv_hdr(kind, y + (size_t)i * yb))));
}

INLINE void gemv4(enum gv_kind kind, int nb, float *s, const uint8_t *w, size_t w_stride,
                  const uint8_t *y)
{
    const size_t xb = kind == GV_Q4_1 ? sizeof(lc_block_q4_1) : sizeof(lc_block_q4_0);
    const size_t yb = kind == GV_Q4_1 ? sizeof(lc_block_q8_1) : sizeof(lc_block_q8_0);
    const size_t xq = kind == GV_Q4_1 ? offsetof(lc_block_q4_1, qs) : offsetof(lc_block_q4_0, qs);
    const size_t yq = kind == GV_Q4_1 ? offsetof(lc_block_q8_1, qs) : offsetof(lc_block_q8_0, qs);
    const uint8_t *x[4];
    _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++) x[r] = w + (size_t)r * w_stride;
    /*
     * Prefetch into L2 (into L1 the long rows of ffn_down would evict the group in use) the
     * group of rows after the next one, ~2 cache lines per step: 4 short interleaved streams
     * defeat the hardware prefetcher.  Measured on Zen 4, one core: 26 GB/s from DRAM against
     * 16 for vec_dot one row at a time; tg 34.5 t/s against 25.7 with the prefetch into L1.
     */
    const uintptr_t next = (uintptr_t)w + 8 * w_stride; /* may lie past the rows: only prefetched */
    const size_t pf_step = (4 * w_stride + (size_t)nb - 1) / (size_t)nb;
    __m256 acc[4];
    _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++) acc[r] = _mm256_setzero_ps();
    __m256 msum = _mm256_setzero_ps(); /* Q4_1, lanes 1, 3, 5, 7: rows 0..3's m * s sums */
    enum { AHEAD = 8 };
    float pp[AHEAD][8] __attribute__((aligned(32)));
    _Pragma("GCC unroll 8") for (int i = 0; i < AHEAD && i < nb; i++)
        _mm256_store_ps(pp[i], gv_scales(kind, x, xb, y, yb, i));
    for (int i = 0; i < nb; i++) {
        const float *p = pp[i % AHEAD];
        if (kind == GV_Q4_1)
            msum = _mm256_add_ps(msum, _mm256_load_ps(p));
        _mm_prefetch((const char *)(next + (size_t)i * pf_step), _MM_HINT_T1);
        _mm_prefetch((const char *)(next + (size_t)i * pf_step + 64), _MM_HINT_T1);
        const __m256i yv = _mm256_loadu_si256((const __m256i *)(y + (size_t)i * yb + yq));
        __m256i bias = _mm256_setzero_si256();
        if (kind == GV_Q4_0) /* -8 * (sum of the 4 activations of each lane) */
            bias = _mm256_sub_epi32(
                bias, _mm256_slli_epi32(dot_us8_acc(bias, _mm256_set1_epi8(1), yv), 3));
        _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++)
        {
            const __m256i lanes = dot_us8_acc(
                bias, unpack_nibbles_bcast(x[r] + (size_t)i * xb + xq), yv);
            acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(lanes), _mm256_set1_ps(p[2 * r]), acc[r]);
        }
        if (i + AHEAD < nb)
            _mm256_store_ps(pp[i % AHEAD], gv_scales(kind, x, xb, y, yb, i + AHEAD));
        __asm__ volatile("" : "+m"(pp));
    }
    float ms[8];
    _mm256_storeu_ps(ms, msum);
    _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++)
    {
        s[r] = hsum_ps(acc[r]);
        if (kind == GV_Q4_1)
            s[r] += ms[2 * r + 1];
    }
}

#define DEFINE_GEMV(NAME, KIND, QK, VEC_DOT)                                                      \
    static void gemv_##NAME(int n, float *s, const void *vw, size_t w_stride, int nr,             \
                            const void *va)                                                       \
    {                                                                                             \
        const uint8_t *w = vw;                                                                    \
        int r = 0;                                                                                \
        for (; n >= QK && r + 4 <= nr; r += 4)                                                    \
            gemv4(KIND, n / QK, s + r, w + (size_t)r * w_stride, w_stride, va);                   \
        for (; r < nr; r++)                                                                       \
            VEC_DOT(n, s + r, w + (size_t)r * w_stride, va);                                      \
    }
DEFINE_GEMV(q4_1, GV_Q4_1, LC_QK4_1, vec_dot_q4_1_q8_1)
DEFINE_GEMV(q4_0, GV_Q4_0, LC_QK4_0, vec_dot_q4_0_q8_0)

/* ---------------------------------------------------------------- Q4_0x8 order */

/*
 * Q4_0 . Q8_0 in the order of llama.cpp's repacked Q4_0x8 kernels (see scalar.c): per block
 * the exact integer sum of the 32 products, then acc = fma(float(isum), dx * dy, acc).
 * The integer lanes are those of the Q4_0 GEMV above (sum(q*y) - 8*sum(y)), summed
 * horizontally; integers, so the order of that sum does not matter.
 */
INLINE __m256i q4_0_lanes(const uint8_t *qs, __m256i yv, __m256i bias)
{
    return dot_us8_acc(bias, unpack_nibbles_bcast(qs), yv);
}

/* -8 * (the sum of each lane's 4 activations) */
INLINE __m256i q4_0_bias(__m256i yv)
{
    const __m256i z = _mm256_setzero_si256();
    return _mm256_sub_epi32(z, _mm256_slli_epi32(dot_us8_acc(z, _mm256_set1_epi8(1), yv), 3));
}

/*
 * [sum(a), sum(b), sum(c), sum(d)] of four vectors of 8 int32 lanes, each lane within int16
 * range / 4 (Q4_0 lanes: 4 products of |q - 8| <= 8 and |y| <= 127, so |lane| <= 4064): pairs
 * of lanes summed by packing to int16 and vpmaddwd with ones, twice (exact: no saturation).
 */
INLINE __m128i hsum4_epi32(__m256i a, __m256i b, __m256i c, __m256i d)
{
    const __m256i ones = _mm256_set1_epi16(1);
    const __m256i ab = _mm256_madd_epi16(_mm256_packs_epi32(a, b), ones);
    const __m256i cd = _mm256_madd_epi16(_mm256_packs_epi32(c, d), ones);
    const __m256i h = _mm256_madd_epi16(_mm256_packs_epi32(ab, cd), ones);
    return _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
}

static void vec_dot_q4_0x8_q8_0(int n, float *s, const void *vx, const void *vy)
{
    const lc_block_q4_0 *x = vx;
    const lc_block_q8_0 *y = vy;
    const int nb = n / LC_QK4_0;
    float acc = 0.0f;
    for (int i = 0; i < nb; i++) {
        const __m256i yv = _mm256_loadu_si256((const __m256i *)y[i].qs);
        const int isum = hsum_epi32(q4_0_lanes(x[i].qs, yv, q4_0_bias(yv)));
        acc = fmaf((float)isum, h2f(x[i].d) * h2f(y[i].d), acc);
    }
    *s = acc;
}

/* 4 rows of the GEMV in the Q4_0x8 order: the 4 accumulators are the lanes of one vector */
static void gemv4_q4_0x8(int nb, float *s, const uint8_t *w, size_t w_stride, const uint8_t *y)
{
    const lc_block_q4_0 *x[4];
    _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++) x[r] =
        (const lc_block_q4_0 *)(const void *)(w + (size_t)r * w_stride);
    const lc_block_q8_0 *yb = (const lc_block_q8_0 *)(const void *)y;
    const uintptr_t next = (uintptr_t)w + 8 * w_stride; /* see gemv4: prefetch only */
    const size_t pf_step = (4 * w_stride + (size_t)nb - 1) / (size_t)nb;
    __m128 acc = _mm_setzero_ps();
    for (int i = 0; i < nb; i++) {
        _mm_prefetch((const char *)(next + (size_t)i * pf_step), _MM_HINT_T1);
        _mm_prefetch((const char *)(next + (size_t)i * pf_step + 64), _MM_HINT_T1);
        const __m256i yv = _mm256_loadu_si256((const __m256i *)yb[i].qs);
        const __m256i bias = q4_0_bias(yv);
        const __m128i isum = hsum4_epi32(q4_0_lanes(x[0][i].qs, yv, bias),
                                         q4_0_lanes(x[1][i].qs, yv, bias),
                                         q4_0_lanes(x[2][i].qs, yv, bias),
                                         q4_0_lanes(x[3][i].qs, yv, bias));
        const __m128 dx = _mm_cvtph_ps(_mm_setr_epi16((short)x[0][i].d, (short)x[1][i].d,
                                                      (short)x[2][i].d, (short)x[3][i].d, 0, 0,
                                                      0, 0));
        const __m128 p = _mm_mul_ps(dx, _mm_set1_ps(h2f(yb[i].d)));
        acc = _mm_fmadd_ps(_mm_cvtepi32_ps(isum), p, acc);
    }
    _mm_storeu_ps(s, acc);
}

static void gemv_q4_0x8(int n, float *s, const void *vw, size_t w_stride, int nr, const void *va)
{
    const uint8_t *w = vw;
    int r = 0;
    for (; n >= LC_QK4_0 && r + 4 <= nr; r += 4)
        gemv4_q4_0x8(n / LC_QK4_0, s + r, w + (size_t)r * w_stride, w_stride, va);
    for (; r < nr; r++)
        vec_dot_q4_0x8_q8_0(n, s + r, w + (size_t)r * w_stride, va);
}

#endif
