/*
 * x86-qdot.h - the quantized dot products and GEMM tiles shared by x86-avx2.c and x86-avx512.c.
 *
 * Included by each, after it defines INLINE, QDOT_TILE_COLS and dot_us8(u8 x s8 -> 8 float
 * lanes, lane j = the sum of the products of bytes 4j..4j+3): maddubs + madd on AVX2, vpdpbusd
 * on AVX-512 VNNI (as ggml's mul_sum_us8_pairs_float).  Everything here is static: each ISA file
 * gets its own copy compiled with its own flags.
 *
 * The order of the float operations is ggml's x86 one (see scalar.c): per block, 8 lanes of
 * integer sums, converted and accumulated with a fused multiply-add by dx*dy; hsum_float_8 at
 * the end; for Q4_1 the m_x * s_y terms summed apart in block order and added last.  So these
 * kernels, the GEMM tiles included, return scalar.c's values bit for bit.
 */
#ifndef LC_X86_QDOT_H
#define LC_X86_QDOT_H


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
            _Pragma("GCC unroll 4") for (int c = 0; c < CN; c++) acc[r][c] =                      \
                _mm256_setzero_ps();                                                              \
        for (int i = 0; i < nb; i++) {                                                            \
            __m256i bx[4];                                                                        \
            float dw[4];                                                                          \
            _Pragma("GCC unroll 4") for (int r = 0; r < RM; r++)                                  \
            {                                                                                     \
                const WT *x = (const WT *)(w + r * w_stride) + i;                                 \
                bx[r] = BLK##_x(x);                                                               \
                dw[r] = h2f(x->d);                                                                \
            }                                                                                     \
            _Pragma("GCC unroll 4") for (int c = 0; c < CN; c++)                                  \
            {                                                                                     \
                const AT *y = (const AT *)(a + c * a_stride) + i;                                 \
                const __m256i by = _mm256_loadu_si256((const __m256i *)y->qs);                    \
                const float da = h2f(y->d);                                                       \
                _Pragma("GCC unroll 4") for (int r = 0; r < RM; r++) acc[r][c] =                  \
                    _mm256_fmadd_ps(_mm256_set1_ps(dw[r] * da), BLK##_xy(bx[r], by),              \
                                    acc[r][c]);                                                   \
            }                                                                                     \
        }                                                                                         \
        float ms[4][4] = {{0}};                                                                   \
        if (HAS_M) /* the m_x * s_y sums, each in block order */                                  \
            for (int i = 0; i < nb; i++) {                                                        \
                float mr[4], sc[4];                                                               \
                _Pragma("GCC unroll 4") for (int r = 0; r < RM; r++) mr[r] =                      \
                    h2f(((const lc_block_q4_1 *)(const void *)(w + r * w_stride))[i].m);          \
                _Pragma("GCC unroll 4") for (int c = 0; c < CN; c++) sc[c] =                      \
                    h2f(((const lc_block_q8_1 *)(const void *)(a + c * a_stride))[i].s);          \
                _Pragma("GCC unroll 4") for (int r = 0; r < RM; r++)                              \
                    _Pragma("GCC unroll 4") for (int c = 0; c < CN; c++) ms[r][c] +=              \
                        mr[r] * sc[c];                                                            \
            }                                                                                     \
        _Pragma("GCC unroll 4") for (int c = 0; c < CN; c++)                                      \
            _Pragma("GCC unroll 4") for (int r = 0; r < RM; r++)                                  \
        {                                                                                         \
            float v = hsum_ps(acc[r][c]);                                                         \
            if (HAS_M)                                                                            \
                v += ms[r][c];                                                                    \
            s[c * ld_s + r] = v;                                                                  \
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

DEFINE_TILE(q4_1, lc_block_q4_1, lc_block_q8_1, q4_1, 1)
DEFINE_TILE(q4_0, lc_block_q4_0, lc_block_q8_0, q4_0, 0)
DEFINE_TILE(q8_0, lc_block_q8_0, lc_block_q8_0, q8_0, 0)

#endif
