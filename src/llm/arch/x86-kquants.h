/*
 * x86-kquants.h - Q2_K, Q3_K, Q4_K, Q5_K and IQ4_XS . Q8_K for x86-avx2.c and x86-avx512.c.
 *
 * Included by each after x86-qdot.h (for INLINE, h2f, hsum_ps); every function is static, so
 * each ISA file compiles its own copy with its own flags.  These are ggml's __AVX2__ kernels
 * (llama.cpp runs them on AVX-512 machines too): per super-block the integer products are
 * formed with vpmaddubsw (u8 x s8 -> pairs in s16; none of these types can saturate it), then
 * vpmaddwd with the sub-block scales widened to 16 bits sums four products per 32-bit lane,
 * so lane k holds the exact sum over the weights 32g + 4k .. 32g + 4k + 3 of every group g of
 * 32 -- the lanes scalar.c computes.  The float operations are scalar.c's, in its order:
 * acc = fma(d, float(lanes), acc) with d = dy * dx, hsum_float_8 at the end, and the mins
 * term of each type as described there.  So the results are scalar.c's bit for bit.
 */
#ifndef LC_X86_KQUANTS_H
#define LC_X86_KQUANTS_H

#include <stdint.h>
#include <string.h>

/* vpshufb patterns: 16-bit element i of each 128-bit lane, broadcast over that lane */
INLINE __m256i k_bcast16(int i)
{
    return _mm256_set1_epi16((short)(((2 * i + 1) << 8) | (2 * i)));
}

/* element 2i in the low 128-bit lane and 2i + 1 in the high one (ggml get_scale_shuffle_q3k) */
INLINE __m256i k_pair16(int i)
{
    return _mm256_set_m128i(_mm_set1_epi16((short)(((4 * i + 3) << 8) | (4 * i + 2))),
                            _mm_set1_epi16((short)(((4 * i + 1) << 8) | (4 * i))));
}

/* the 8 scales (bytes 0..7) and 8 mins (bytes 8..15) of a Q4_K / Q5_K block, as ggml's utmp */
INLINE __m128i k4_scales_mins(const uint8_t *packed)
{
    const uint32_t kmask1 = 0x3f3f3f3f, kmask2 = 0x0f0f0f0f, kmask3 = 0x03030303;
    uint32_t u[4];
    memcpy(u, packed, 12);
    u[3] = ((u[2] >> 4) & kmask2) | (((u[1] >> 6) & kmask3) << 4);
    const uint32_t uaux = u[1] & kmask1;
    u[1] = (u[2] & kmask2) | (((u[0] >> 6) & kmask3) << 4);
    u[2] = uaux;
    u[0] &= kmask1;
    return _mm_set_epi32((int)u[3], (int)u[2], (int)u[1], (int)u[0]);
}

/* the 16 6-bit scales of a Q3_K block, minus 32, as signed bytes (ggml's aux / kmask unpacking) */
INLINE __m128i k3_scales(const uint8_t *packed)
{
    const uint32_t kmask1 = 0x03030303, kmask2 = 0x0f0f0f0f;
    uint32_t aux[3];
    memcpy(aux, packed, 12);
    return _mm_sub_epi8(_mm_set_epi32((int)(((aux[1] >> 4) & kmask2) | (((aux[2] >> 6) & kmask1) << 4)),
                                      (int)(((aux[0] >> 4) & kmask2) | (((aux[2] >> 4) & kmask1) << 4)),
                                      (int)((aux[1] & kmask2) | (((aux[2] >> 2) & kmask1) << 4)),
                                      (int)((aux[0] & kmask2) | (((aux[2] >> 0) & kmask1) << 4))),
                        _mm_set1_epi8(32));
}

/* lane m: mins[2m] * S[2m] + mins[2m+1] * S[2m+1], S[j] = bsums[2j] + bsums[2j+1] */
INLINE __m128i k4_mins_prod(__m256i mins_and_scales, const int16_t *bsums)
{
    const __m256i q8sums = _mm256_loadu_si256((const __m256i *)bsums);
    const __m128i q8s = _mm_hadd_epi16(_mm256_castsi256_si128(q8sums),
                                       _mm256_extracti128_si256(q8sums, 1));
    return _mm_madd_epi16(_mm256_extracti128_si256(mins_and_scales, 1), q8s);
}

static void vec_dot_q4_K_q8_K(int n, float *s, const void *vx, const void *vy)
{
    const lc_block_q4_K *x = vx;
    const lc_block_q8_K *y = vy;
    const int nb = n / LC_QK_K;
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    __m256 acc = _mm256_setzero_ps();
    __m128 acc_m = _mm_setzero_ps();
    for (int i = 0; i < nb; i++) {
        const float d = y[i].d * h2f(x[i].d);
        const float dmin = -y[i].d * h2f(x[i].dmin);
        const __m256i mins_and_scales = _mm256_cvtepu8_epi16(k4_scales_mins(x[i].scales));
        acc_m = _mm_fmadd_ps(_mm_set1_ps(dmin),
                             _mm_cvtepi32_ps(k4_mins_prod(mins_and_scales, y[i].bsums)), acc_m);
        const __m128i sc128 = _mm256_castsi256_si128(mins_and_scales);
        const __m256i scales = _mm256_set_m128i(sc128, sc128);
        const uint8_t *q4 = x[i].qs;
        const int8_t *q8 = y[i].qs;
        __m256i sumi = _mm256_setzero_si256();
        for (int j = 0; j < 4; j++, q4 += 32, q8 += 64) {
            const __m256i q4bits = _mm256_loadu_si256((const __m256i *)q4);
            const __m256i q4l = _mm256_and_si256(q4bits, m4);
            const __m256i q4h = _mm256_and_si256(_mm256_srli_epi16(q4bits, 4), m4);
            const __m256i pl = _mm256_madd_epi16(
                _mm256_shuffle_epi8(scales, k_bcast16(2 * j)),
                _mm256_maddubs_epi16(q4l, _mm256_loadu_si256((const __m256i *)q8)));
            const __m256i ph = _mm256_madd_epi16(
                _mm256_shuffle_epi8(scales, k_bcast16(2 * j + 1)),
                _mm256_maddubs_epi16(q4h, _mm256_loadu_si256((const __m256i *)(q8 + 32))));
            sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(pl, ph));
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
    }
    acc_m = _mm_add_ps(acc_m, _mm_movehl_ps(acc_m, acc_m));
    acc_m = _mm_add_ss(acc_m, _mm_movehdup_ps(acc_m));
    *s = hsum_ps(acc) + _mm_cvtss_f32(acc_m);
}

static void vec_dot_q5_K_q8_K(int n, float *s, const void *vx, const void *vy)
{
    const lc_block_q5_K *x = vx;
    const lc_block_q8_K *y = vy;
    const int nb = n / LC_QK_K;
    const __m256i m4 = _mm256_set1_epi8(0x0F), m16 = _mm256_set1_epi8(0x10);
    __m256 acc = _mm256_setzero_ps();
    float summs = 0.0f;
    for (int i = 0; i < nb; i++) {
        const float d = y[i].d * h2f(x[i].d);
        const float dmin = -y[i].d * h2f(x[i].dmin);
        const __m256i mins_and_scales = _mm256_cvtepu8_epi16(k4_scales_mins(x[i].scales));
        __m128i prod = k4_mins_prod(mins_and_scales, y[i].bsums);
        prod = _mm_add_epi32(prod, _mm_unpackhi_epi64(prod, prod));
        prod = _mm_add_epi32(prod, _mm_shuffle_epi32(prod, 1));
        summs = fmaf(dmin, (float)_mm_cvtsi128_si32(prod), summs);
        const __m128i sc128 = _mm256_castsi256_si128(mins_and_scales);
        const __m256i scales = _mm256_set_m128i(sc128, sc128);
        const __m256i hbits = _mm256_loadu_si256((const __m256i *)x[i].qh);
        const uint8_t *q5 = x[i].qs;
        const int8_t *q8 = y[i].qs;
        __m256i sumi = _mm256_setzero_si256();
        for (int j = 0; j < 4; j++, q5 += 32, q8 += 64) {
            const __m256i q5bits = _mm256_loadu_si256((const __m256i *)q5);
            /* bit 2j of qh[l] -> bit 4 of the low quant, bit 2j + 1 -> of the high one */
            const __m256i h0 = _mm256_and_si256(_mm256_srli_epi16(hbits, 2 * j), _mm256_set1_epi8(1));
            const __m256i h1 = _mm256_and_si256(_mm256_srli_epi16(hbits, 2 * j + 1), _mm256_set1_epi8(1));
            const __m256i q5l = _mm256_or_si256(_mm256_and_si256(q5bits, m4),
                                                _mm256_and_si256(_mm256_slli_epi16(h0, 4), m16));
            const __m256i q5h = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q5bits, 4), m4),
                                                _mm256_and_si256(_mm256_slli_epi16(h1, 4), m16));
            const __m256i pl = _mm256_madd_epi16(
                _mm256_shuffle_epi8(scales, k_bcast16(2 * j)),
                _mm256_maddubs_epi16(q5l, _mm256_loadu_si256((const __m256i *)q8)));
            const __m256i ph = _mm256_madd_epi16(
                _mm256_shuffle_epi8(scales, k_bcast16(2 * j + 1)),
                _mm256_maddubs_epi16(q5h, _mm256_loadu_si256((const __m256i *)(q8 + 32))));
            sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(pl, ph));
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
    }
    *s = hsum_ps(acc) + summs;
}

/*
 * The four quarters v of a Q2_K / Q3_K half (128 weights): quarter v is bits 2v, 2v + 1 of the
 * 32 bytes qbits, against the activations q8 + 32v; weights 0..15 of it are scaled by 16-bit
 * element 2v of sc's low lane, 16..31 by element 2v + 1 of its high lane (sc: the half's 8
 * scales in both lanes).  Q3_K (q3 = 1) subtracts 4 * y where bit v of nh (the half's high
 * bits, inverted, shifted to bits 0..3) is set: q = low bits - 4, by two exact maddubs.
 */
INLINE __m256i kq_half(__m256i qbits, __m256i nh, int q3, const int8_t *q8, __m256i sc)
{
    const __m256i m3 = _mm256_set1_epi8(3), one = _mm256_set1_epi8(1);
    __m256i sum = _mm256_setzero_si256();
    for (int v = 0; v < 4; v++) {
        const __m256i q = _mm256_and_si256(_mm256_srli_epi16(qbits, 2 * v), m3);
        const __m256i y8 = _mm256_loadu_si256((const __m256i *)(q8 + 32 * v));
        __m256i p16 = _mm256_maddubs_epi16(q, y8);
        if (q3) {
            const __m256i h4 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(nh, v), one), 2);
            p16 = _mm256_sub_epi16(p16, _mm256_maddubs_epi16(h4, y8));
        }
        sum = _mm256_add_epi32(sum, _mm256_madd_epi16(_mm256_shuffle_epi8(sc, k_pair16(v)), p16));
    }
    return sum;
}

__attribute__((unused)) /* x86-avx512.c has its own */
static void vec_dot_q3_K_q8_K(int n, float *s, const void *vx, const void *vy)
{
    const lc_block_q3_K *x = vx;
    const lc_block_q8_K *y = vy;
    const int nb = n / LC_QK_K;
    __m256 acc = _mm256_setzero_ps();
    for (int i = 0; i < nb; i++) {
        const float d = y[i].d * h2f(x[i].d);
        const __m128i sc8 = k3_scales(x[i].scales);
        const __m256i all = _mm256_cvtepi8_epi16(sc8);
        const __m128i lo = _mm256_castsi256_si128(all), hi = _mm256_extracti128_si256(all, 1);
        /* the high bits inverted; half h, quarter v is bit 4h + v of hmask[l] (bits 4..7 of
         * the first half's bytes are masked off in kq_half, after its shift by v <= 3) */
        const __m256i nh = _mm256_andnot_si256(_mm256_loadu_si256((const __m256i *)x[i].hmask),
                                               _mm256_set1_epi8((char)0xFF));
        const __m256i sumi = _mm256_add_epi32(
            kq_half(_mm256_loadu_si256((const __m256i *)x[i].qs), nh, 1, y[i].qs, _mm256_set_m128i(lo, lo)),
            kq_half(_mm256_loadu_si256((const __m256i *)(x[i].qs + 32)), _mm256_srli_epi16(nh, 4), 1,
                    y[i].qs + 128,
                    _mm256_set_m128i(hi, hi)));
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
    }
    *s = hsum_ps(acc);
}

/*
 * IQ4_XS prompt batches: vec_dot_iq4_xs_q8_K for a tile of up to 2 rows x 4 columns, each row's
 * levels looked up (and their signs taken) once per super-block for all the columns.  Per
 * (row, column) the same integers (one int32 sum per lane instead of vec_dot's two, added per
 * block: exact either way) and the same float operations in the same order, so vec_dot's bits.
 */
INLINE void iq4_xs_tile(int nb, float *s, size_t ld_s, const uint8_t *w, size_t w_stride,
                        const uint8_t *a, size_t a_stride, const int RM, const int CN)
{
    const __m128i values = _mm_loadu_si128((const __m128i *)lc_kvalues_iq4nl);
    const __m128i m4 = _mm_set1_epi8(0x0F);
    __m256 acc[2][4];
    _Pragma("GCC unroll 2") for (int r = 0; r < RM; r++)
        _Pragma("GCC unroll 4") for (int c = 0; c < CN; c++) acc[r][c] = _mm256_setzero_ps();
    for (int i = 0; i < nb; i++) {
        const lc_block_iq4_xs *x[2];
        const lc_block_q8_K *y[4];
        _Pragma("GCC unroll 2") for (int r = 0; r < RM; r++)
            x[r] = (const lc_block_iq4_xs *)(const void *)(w + (size_t)r * w_stride) + i;
        _Pragma("GCC unroll 4") for (int c = 0; c < CN; c++)
            y[c] = (const lc_block_q8_K *)(const void *)(a + (size_t)c * a_stride) + i;
        __m256i sumi[2][4];
        _Pragma("GCC unroll 2") for (int r = 0; r < RM; r++)
            _Pragma("GCC unroll 4") for (int c = 0; c < CN; c++) sumi[r][c] = _mm256_setzero_si256();
        for (int ib = 0; ib < 8; ib += 2) {
            __m256i w1[2], w2[2], a1[2], a2[2], l1[2], l2[2];
            _Pragma("GCC unroll 2") for (int r = 0; r < RM; r++) {
                const uint8_t *qs = x[r]->qs + 16 * ib;
                const __m128i b1 = _mm_loadu_si128((const __m128i *)qs);
                const __m128i b2 = _mm_loadu_si128((const __m128i *)(qs + 16));
                w1[r] = _mm256_set_m128i(_mm_shuffle_epi8(values, _mm_and_si128(_mm_srli_epi16(b1, 4), m4)),
                                         _mm_shuffle_epi8(values, _mm_and_si128(b1, m4)));
                w2[r] = _mm256_set_m128i(_mm_shuffle_epi8(values, _mm_and_si128(_mm_srli_epi16(b2, 4), m4)),
                                         _mm_shuffle_epi8(values, _mm_and_si128(b2, m4)));
                a1[r] = _mm256_sign_epi8(w1[r], w1[r]);
                a2[r] = _mm256_sign_epi8(w2[r], w2[r]);
                const unsigned sh = x[r]->scales_h >> (2 * ib);
                l1[r] = _mm256_set1_epi16((short)(((x[r]->scales_l[ib / 2] & 0xf) | ((sh << 4) & 0x30)) - 32));
                l2[r] = _mm256_set1_epi16((short)(((x[r]->scales_l[ib / 2] >> 4) | ((sh << 2) & 0x30)) - 32));
            }
            _Pragma("GCC unroll 4") for (int c = 0; c < CN; c++) {
                const __m256i y1 = _mm256_loadu_si256((const __m256i *)(y[c]->qs + 32 * ib));
                const __m256i y2 = _mm256_loadu_si256((const __m256i *)(y[c]->qs + 32 * ib + 32));
                _Pragma("GCC unroll 2") for (int r = 0; r < RM; r++) {
                    const __m256i p1 = _mm256_maddubs_epi16(a1[r], _mm256_sign_epi8(y1, w1[r]));
                    const __m256i p2 = _mm256_maddubs_epi16(a2[r], _mm256_sign_epi8(y2, w2[r]));
                    sumi[r][c] = _mm256_add_epi32(
                        sumi[r][c], _mm256_add_epi32(_mm256_madd_epi16(p1, l1[r]),
                                                     _mm256_madd_epi16(p2, l2[r])));
                }
            }
        }
        _Pragma("GCC unroll 2") for (int r = 0; r < RM; r++)
            _Pragma("GCC unroll 4") for (int c = 0; c < CN; c++) acc[r][c] = _mm256_fmadd_ps(
                _mm256_set1_ps(h2f(x[r]->d) * y[c]->d), _mm256_cvtepi32_ps(sumi[r][c]), acc[r][c]);
    }
    _Pragma("GCC unroll 2") for (int r = 0; r < RM; r++)
        _Pragma("GCC unroll 4") for (int c = 0; c < CN; c++) s[(size_t)c * ld_s + r] = hsum_ps(acc[r][c]);
}

/*
 * Q2_K prompt batches: vec_dot_q2_K_q8_K for a tile of up to 2 rows x 4 columns, each row's
 * 2-bit quants (per half h and quarter v) and its scales shuffled for kq_half's vpmaddwd taken
 * once per super-block for all the columns; per (row, column) the integers of vec_dot (its
 * mins product, then kq_half's sums) and its float operations in its order.
 */
INLINE void q2_K_tile(int nb, float *s, size_t ld_s, const uint8_t *w, size_t w_stride,
                      const uint8_t *a, size_t a_stride, const int RM, const int CN)
{
    const __m128i m4 = _mm_set1_epi8(0x0F);
    const __m256i m3 = _mm256_set1_epi8(3);
    __m256 acc[2][4];
    _Pragma("GCC unroll 2") for (int r = 0; r < RM; r++)
        _Pragma("GCC unroll 4") for (int c = 0; c < CN; c++) acc[r][c] = _mm256_setzero_ps();
    for (int i = 0; i < nb; i++) {
        const lc_block_q2_K *x[2];
        const lc_block_q8_K *y[4];
        _Pragma("GCC unroll 2") for (int r = 0; r < RM; r++)
            x[r] = (const lc_block_q2_K *)(const void *)(w + (size_t)r * w_stride) + i;
        _Pragma("GCC unroll 4") for (int c = 0; c < CN; c++)
            y[c] = (const lc_block_q8_K *)(const void *)(a + (size_t)c * a_stride) + i;
        __m256i q[2][8], sc[2][8], mins[2];
        _Pragma("GCC unroll 2") for (int r = 0; r < RM; r++) {
            const __m128i ms = _mm_loadu_si128((const __m128i *)x[r]->scales);
            mins[r] = _mm256_cvtepi8_epi16(_mm_and_si128(_mm_srli_epi16(ms, 4), m4));
            const __m256i all = _mm256_cvtepi8_epi16(_mm_and_si128(ms, m4));
            const __m128i lo = _mm256_castsi256_si128(all), hi = _mm256_extracti128_si256(all, 1);
            const __m256i half_sc[2] = {_mm256_set_m128i(lo, lo), _mm256_set_m128i(hi, hi)};
            _Pragma("GCC unroll 2") for (int h = 0; h < 2; h++) {
                const __m256i qbits = _mm256_loadu_si256((const __m256i *)(x[r]->qs + 32 * h));
                _Pragma("GCC unroll 4") for (int v = 0; v < 4; v++) {
                    q[r][4 * h + v] = _mm256_and_si256(_mm256_srli_epi16(qbits, 2 * v), m3);
                    sc[r][4 * h + v] = _mm256_shuffle_epi8(half_sc[h], k_pair16(v));
                }
            }
        }
        _Pragma("GCC unroll 4") for (int c = 0; c < CN; c++) {
            const __m256i bsums = _mm256_loadu_si256((const __m256i *)y[c]->bsums);
            __m256i sumi[2];
            _Pragma("GCC unroll 2") for (int r = 0; r < RM; r++) sumi[r] = _mm256_setzero_si256();
            _Pragma("GCC unroll 8") for (int j = 0; j < 8; j++) {
                const __m256i y8 = _mm256_loadu_si256((const __m256i *)(y[c]->qs + 32 * j));
                _Pragma("GCC unroll 2") for (int r = 0; r < RM; r++) sumi[r] = _mm256_add_epi32(
                    sumi[r], _mm256_madd_epi16(sc[r][j], _mm256_maddubs_epi16(q[r][j], y8)));
            }
            _Pragma("GCC unroll 2") for (int r = 0; r < RM; r++) {
                const float d = y[c]->d * h2f(x[r]->d), dmin = -y[c]->d * h2f(x[r]->dmin);
                acc[r][c] = _mm256_fmadd_ps(_mm256_set1_ps(dmin),
                                            _mm256_cvtepi32_ps(_mm256_madd_epi16(mins[r], bsums)),
                                            acc[r][c]);
                acc[r][c] = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi[r]), acc[r][c]);
            }
        }
    }
    _Pragma("GCC unroll 2") for (int r = 0; r < RM; r++)
        _Pragma("GCC unroll 4") for (int c = 0; c < CN; c++) s[(size_t)c * ld_s + r] = hsum_ps(acc[r][c]);
}

/* the 2 x 4 tiles of a (row, column) range, their remainders by narrower tiles */
#define DEFINE_K_TILE_GEMM(NAME)                                                                  \
    static void gemm_##NAME(int n, float *s, size_t ld_s, const void *vw, size_t w_stride,        \
                            int nr, const void *va, size_t a_stride, int nc)                      \
    {                                                                                             \
        const uint8_t *w = vw, *a = va;                                                           \
        const int nb = n / LC_QK_K;                                                               \
        for (int r = 0; r < nr; r += 2) {                                                         \
            const int rm = nr - r >= 2 ? 2 : 1;                                                   \
            const uint8_t *wr = w + (size_t)r * w_stride;                                         \
            int c = 0;                                                                            \
            for (; c + 4 <= nc; c += 4)                                                           \
                rm == 2 ? NAME##_tile(nb, s + (size_t)c * ld_s + r, ld_s, wr, w_stride,           \
                                      a + (size_t)c * a_stride, a_stride, 2, 4)                   \
                        : NAME##_tile(nb, s + (size_t)c * ld_s + r, ld_s, wr, w_stride,           \
                                      a + (size_t)c * a_stride, a_stride, 1, 4);                  \
            for (; c < nc; c++)                                                                   \
                rm == 2 ? NAME##_tile(nb, s + (size_t)c * ld_s + r, ld_s, wr, w_stride,           \
                                      a + (size_t)c * a_stride, a_stride, 2, 1)                   \
                        : NAME##_tile(nb, s + (size_t)c * ld_s + r, ld_s, wr, w_stride,           \
                                      a + (size_t)c * a_stride, a_stride, 1, 1);                  \
        }                                                                                         \
    }
DEFINE_K_TILE_GEMM(q2_K)

/* Q2_K . Q8_K: the 1 x 1 tile (ggml's AVX2 kernel: per super-block the mins product into the
 * accumulator, then kq_half's scaled sums) */
__attribute__((unused)) /* x86-avx512.c has its own */
static void vec_dot_q2_K_q8_K(int n, float *s, const void *vx, const void *vy)
{
    q2_K_tile(n / LC_QK_K, s, 1, vx, 0, vy, 0, 1, 1);
}

/* IQ4_XS . Q8_K: the 1 x 1 tile (ggml's AVX2 kernel: the IQ4_NL levels looked up with vpshufb
 * and multiplied by sign transfer, |levels| <= 127 and |y| <= 127, no saturation; the scales
 * ls - 32 by vpmaddwd) */
__attribute__((unused)) /* x86-avx512.c has its own (vec_dot_iq4_xs_q8_K_512) */
static void vec_dot_iq4_xs_q8_K(int n, float *s, const void *vx, const void *vy)
{
    iq4_xs_tile(n / LC_QK_K, s, 1, vx, 0, vy, 0, 1, 1);
}

DEFINE_K_TILE_GEMM(iq4_xs)

#endif
