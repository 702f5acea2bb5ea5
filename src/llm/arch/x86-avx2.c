/*
 * x86-avx2.c - AVX2 + FMA + F16C kernels (compiled with those -m flags only).
 *
 * Quantized dots follow ggml's AVX2 scheme: a block's 32 byte products are summed pairwise
 * (maddubs: u8 x s8 -> s16, then madd with ones -> 8 x s32), converted to float and
 * accumulated lane-wise with a fused multiply-add by the block's dx*dy; the lanes are added at
 * the end.  Integer parts are exact, so the result differs from scalar.c only in the order of
 * the float additions.  The Q4_1 offset term m_x * s_y is summed in a separate float in block
 * order (the GEMM tiles repeat exactly the same sequences, so gemm == vec_dot
 * bit for bit).
 */
#include <immintrin.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"
#include "ggml-order-ew.h" /* softmax, SwiGLU: same bits as scalar.c, hardware FMA */

#define INLINE static inline __attribute__((always_inline))

/* ---------------------------------------------------------------- helpers */

/* sum of u8 x s8 products per 4 bytes -> 8 x s32 (|u8| <= 15 or |s8 products| fit s16) */
INLINE __m256 dot_us8(__m256i ux, __m256i sy)
{
    const __m256i p16 = _mm256_maddubs_epi16(ux, sy);
    return _mm256_cvtepi32_ps(_mm256_madd_epi16(p16, _mm256_set1_epi16(1)));
}

/* acc + (u8 x s8 products summed per 4 bytes), in 8 x s32 lanes (|u8| <= 15: no saturation) */
INLINE __m256i dot_us8_acc(__m256i acc, __m256i ux, __m256i sy)
{
    return _mm256_add_epi32(
        acc, _mm256_madd_epi16(_mm256_maddubs_epi16(ux, sy), _mm256_set1_epi16(1)));
}

/* unpack_nibbles from a broadcast load: the upper copy shifted and blended (no cross-lane shuffle) */
INLINE __m256i unpack_nibbles_bcast(const uint8_t *qs)
{
    const __m256i v = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)qs));
    return _mm256_and_si256(_mm256_blend_epi32(v, _mm256_srli_epi16(v, 4), 0xF0),
                            _mm256_set1_epi8(0x0F));
}

#define QDOT_TILE_COLS 2 /* 4 x 2 tiles: 8 accumulators of the 16 ymm registers */
#include "x86-qdot.h"
#include "x86-kquants.h" /* Q2_K Q3_K Q4_K Q5_K IQ4_XS . Q8_K */

/* ---------------------------------------------------------------- prompt GEMM */

#include "x86-pk.h"

/*
 * AVX2: 4 rows x 2 columns per pass (8 accumulators of the 16 registers; the rows in registers,
 * the activations as memory operands of vpmaddubsw), two passes per group of 4 columns.  The
 * products dx * dy of a pass are one 256-bit multiply per block, stored a few blocks ahead and
 * read back as broadcast loads.  Q4_0's offset is folded into the lanes (its nibbles 0..15 times
 * activations fit vpmaddubsw's 16-bit pairs: at most 2 * 15 * 127); Q8_0 (x + 128 would not fit)
 * keeps x86-qdot.h's tiles.
 */
INLINE __m256i pk_lanes(__m256i x, __m256i y)
{
    return _mm256_madd_epi16(_mm256_maddubs_epi16(x, y), _mm256_set1_epi16(1));
}

INLINE void pk_tile(enum pk_kind kind, int nb, const struct pk_rows *R, const struct pk_cols *C,
                    const uint8_t *const a[4], size_t blk, size_t qoff, float out[16])
{
    if (kind == PK_Q4_0X8) {
        pk_tile_q4_0x8(nb, R, C, a, blk, qoff, out);
        return;
    }
    for (int h = 0; h < 2; h++) {
        const __m256i sel = _mm256_setr_epi32(2 * h, 2 * h, 2 * h, 2 * h, 2 * h + 1, 2 * h + 1,
                                              2 * h + 1, 2 * h + 1);
        const __m256i sel_s = _mm256_add_epi32(sel, _mm256_set1_epi32(4));
        __m256 acc[4][2];
        _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++)
            _Pragma("GCC unroll 2") for (int c = 0; c < 2; c++) acc[r][c] = _mm256_setzero_ps();
        __m256 ms = _mm256_setzero_ps(); /* Q4_1: lane r + 4c, the m * s sums */
        enum { AHEAD = 4 };
        float pp[AHEAD][8] __attribute__((aligned(32)));
#define PK2_P(i)                                                                                  \
    _mm256_mul_ps(_mm256_broadcast_ps((const __m128 *)R->d[i]),                                   \
                  _mm256_permutevar8x32_ps(_mm256_load_ps(C[i].ds), sel))
        _Pragma("GCC unroll 4") for (int i = 0; i < AHEAD && i < nb; i++)
            _mm256_store_ps(pp[i], PK2_P(i));
        for (int i = 0; i < nb; i++) {
            const float *p = pp[i % AHEAD];
            if (kind == PK_Q4_1)
                ms = _mm256_add_ps(ms, _mm256_mul_ps(_mm256_broadcast_ps((const __m128 *)R->m[i]),
                                                     _mm256_permutevar8x32_ps(
                                                         _mm256_load_ps(C[i].ds), sel_s)));
            __m256i x[4];
            _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++) x[r] =
                _mm256_load_si256((const __m256i *)R->q[i][r]);
            _Pragma("GCC unroll 2") for (int c = 0; c < 2; c++)
            {
                const __m256i y =
                    _mm256_loadu_si256((const __m256i *)(a[2 * h + c] + i * blk + qoff));
                const __m256i z = kind == PK_Q4_1
                                      ? _mm256_setzero_si256()
                                      : _mm256_load_si256((const __m256i *)C[i].bias[2 * h + c]);
                _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++)
                {
                    __m256i l = pk_lanes(x[r], y);
                    if (kind != PK_Q4_1)
                        l = _mm256_add_epi32(l, z);
                    acc[r][c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(l), _mm256_set1_ps(p[r + 4 * c]),
                                                acc[r][c]);
                }
            }
            if (i + AHEAD < nb)
                _mm256_store_ps(pp[i % AHEAD], PK2_P(i + AHEAD));
            __asm__ volatile("" : "+m"(pp));
        }
#undef PK2_P
        float msv[8];
        _mm256_storeu_ps(msv, ms);
        _Pragma("GCC unroll 2") for (int c = 0; c < 2; c++)
            _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++)
        {
            float v = hsum_ps(acc[r][c]);
            if (kind == PK_Q4_1)
                v += msv[r + 4 * c];
            out[r + 4 * (2 * h + c)] = v;
        }
    }
}

/* ---------------------------------------------------------------- x16 layout (repack.h) */

/*
 * Decode GEMVs over x16 groups with 256-bit registers: one 32-bit lane per row, 8 rows per
 * register, so a group of 16 is two passes (rows 0..7: the first 32 bytes of every 64-byte
 * chunk, and the first 8 of every 16 fp16; rows 8..15: the second halves).  The 16 rows x 8
 * float lanes that vec_dot's order keeps per row would need all 16 ymm registers; the second
 * pass reads the group from L1/L2 (16 rows: 18 KB for a Q4_1 n = 2048, 56 KB for 5632), so
 * memory still sees one sequential stream.  The integer lanes come from vpmaddubsw (u8 x s8
 * pairs, exact for these types) and vpmaddwd (by ones, or Q4_K/Q5_K's sub-block scale), so the
 * float operations are those of the AVX-512 x16 kernels and of vec_dot: same bits.  Q4_0 (the
 * Q4_0x8 order: one float per row) takes a group in one pass.  All seven x16 types have their
 * own kernels here (x16_native), so LLAMACHAT_ISA=avx2 repacks every one of them.
 */
INLINE int32_t ld_i32(const void *p)
{
    int32_t v;
    memcpy(&v, p, 4);
    return v;
}

#define X16_YB_MAX 1024

/* the 8 output floats of a pass: hsum_float_8 lane-wise plus the mins / m * s sums */
INLINE __m256 x16_hsum8(const __m256 acc[8])
{
    return _mm256_add_ps(
        _mm256_add_ps(_mm256_add_ps(acc[0], acc[4]), _mm256_add_ps(acc[2], acc[6])),
        _mm256_add_ps(_mm256_add_ps(acc[1], acc[5]), _mm256_add_ps(acc[3], acc[7])));
}

#ifndef X16_PF
#define X16_PF 4096
#endif
/* first pass over a group: prefetch the len bytes at pos + X16_PF of the stream at G (left
 * bytes to the end of the rows: nothing past them) into L2.  One thread from DRAM on this
 * Xeon (bench-gemv 131072 5, loaded machine): Q6_K x16 2.6 GB/s without, 7.1-7.3 with 4 or
 * 12 KB ahead into L1; Q4_1 4.9 without, 5.1-5.6 with (see BENCHMARKS.md).  Into L2 rather
 * than L1 (bench-gemv 131072 8, 64-row calls, medians of 5): Q4_0 10.1 -> 13.4 GB/s, Q4_1
 * 9.2 -> 11.2, Q5_1 8.1 -> 9.5, Q8_0 12.3 -> 13.2; Q6_K stays in L1 (x16_prefetch_l1) */
#ifndef X16_PF_HINT
#define X16_PF_HINT _MM_HINT_T1
#endif
INLINE void x16_prefetch(const uint8_t *G, size_t pos, size_t len, size_t left)
{
    for (size_t o = pos + X16_PF; o < pos + X16_PF + len && o < left; o += 64)
        _mm_prefetch((const char *)G + o, X16_PF_HINT);
}

/* the same into L1 (Q6_K: into L2 it read 4 % slower) */
INLINE void x16_prefetch_l1(const uint8_t *G, size_t pos, size_t len, size_t left)
{
    for (size_t o = pos + X16_PF; o < pos + X16_PF + len && o < left; o += 64)
        _mm_prefetch((const char *)G + o, _MM_HINT_T0);
}

static void gemv_x16_q4_1(int n, float *s, const void *vw, size_t w_stride, int nr,
                          const void *va)
{
    const int nb = n / 32;
    const lc_block_q8_1 *y = va;
    const __m256i m4 = _mm256_set1_epi8(0x0F), ones = _mm256_set1_epi16(1);
    float ds[X16_YB_MAX][2];
    const bool pre = nb <= X16_YB_MAX;
    for (int i = 0; pre && i < nb; i++) {
        ds[i][0] = h2f(y[i].d);
        ds[i][1] = h2f(y[i].s);
    }
    for (int g = 0; g < nr / 16; g++)
        for (int h = 0; h < 2; h++) {
            const uint8_t *G = (const uint8_t *)vw + (size_t)g * 16 * w_stride;
            const size_t left = (size_t)(nr / 16 - g) * 16 * w_stride;
            __m256 acc[8];
            _Pragma("GCC unroll 8") for (int k = 0; k < 8; k++) acc[k] = _mm256_setzero_ps();
            __m256 msum = _mm256_setzero_ps();
            for (int i = 0; i < nb; i++) {
                const float dy = pre ? ds[i][0] : h2f(y[i].d), sy = pre ? ds[i][1] : h2f(y[i].s);
                const uint8_t *sc = G + (size_t)i * 320; /* lc_x16_sc_off, lc_x16_qs_off */
                if (X16_PF && h == 0)
                    x16_prefetch(G, (size_t)i * 320, 320, left);
                const __m256 dx = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(sc + 16 * h)));
                const __m256 mx = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(sc + 32 + 16 * h)));
                const __m256 d = _mm256_mul_ps(dx, _mm256_set1_ps(dy));
                msum = _mm256_add_ps(msum, _mm256_mul_ps(mx, _mm256_set1_ps(sy)));
                const uint8_t *q = sc + 64 + 32 * h;
                _Pragma("GCC unroll 4") for (int k = 0; k < 4; k++) {
                    const __m256i v = _mm256_loadu_si256((const __m256i *)(q + 64 * k));
                    const __m256i lo = _mm256_and_si256(v, m4);
                    const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
                    const __m256i ilo = _mm256_madd_epi16(
                        _mm256_maddubs_epi16(lo, _mm256_set1_epi32(ld_i32(y[i].qs + 4 * k))), ones);
                    const __m256i ihi = _mm256_madd_epi16(
                        _mm256_maddubs_epi16(hi, _mm256_set1_epi32(ld_i32(y[i].qs + 16 + 4 * k))), ones);
                    acc[k] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(ilo), d, acc[k]);
                    acc[4 + k] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(ihi), d, acc[4 + k]);
                }
            }
            _mm256_storeu_ps(s + 16 * g + 8 * h, _mm256_add_ps(x16_hsum8(acc), msum));
        }
}

/* Q4_K / Q5_K: as the AVX-512 gemv_x16_k45; per chunk vpmaddubsw gives the 16-bit pairs, and
 * one vpmaddwd by (scale, scale) both multiplies by the sub-block scale and sums the pair.  The
 * first pass over a group prefetches the super-block X16_PF_K ahead into L2, an eighth per lane
 * k (on the Xeon of BENCHMARKS.md neither a gain nor a loss, 2 or 3 ahead; into L1 a loss: the
 * first pass reads every line of a group already, the second pass finds them in L1) */
#ifndef X16_PF_K
#define X16_PF_K 3 /* super-blocks ahead */
#endif
struct x16_q8_K {
    float d;
    int32_t spair[4]; /* S[2m] | S[2m+1] << 16, S[j] = bsums[2j] + bsums[2j+1] */
};

INLINE struct x16_q8_K x16_q8_K_of(const lc_block_q8_K *y)
{
    struct x16_q8_K r = {y->d, {0}};
    for (int m = 0; m < 4; m++) {
        const int s0 = y->bsums[4 * m] + y->bsums[4 * m + 1];
        const int s1 = y->bsums[4 * m + 2] + y->bsums[4 * m + 3];
        r.spair[m] = (int32_t)(((uint32_t)s0 & 0xFFFFu) | ((uint32_t)s1 << 16));
    }
    return r;
}

/* vpshufb pattern: byte b of every dword to its bytes 0 and 2 (b2: the second one, or -1: 0) */
INLINE __m256i k_byte_pat(int b, int b2)
{
    const int z = 0x80;
    char p[16];
    for (int d = 0; d < 4; d++) {
        p[4 * d] = (char)(4 * d + b);
        p[4 * d + 1] = (char)z;
        p[4 * d + 2] = (char)(4 * d + b2);
        p[4 * d + 3] = (char)z;
    }
    return _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)p));
}

#define X16_K_YB_MAX 128

INLINE void gemv_x16_k45(int q5, int pf_on, int n, float *s, const void *vw, size_t w_stride,
                         int nr, const void *va)
{
    const enum lc_type type = q5 ? LC_TYPE_Q5_K : LC_TYPE_Q4_K;
    const int nb = n / LC_QK_K;
    const lc_block_q8_K *y = va;
    struct x16_q8_K yb[X16_K_YB_MAX];
    const bool pre = nb <= X16_K_YB_MAX;
    for (int i = 0; pre && i < nb; i++)
        yb[i] = x16_q8_K_of(y + i);
    const __m256i m4 = _mm256_set1_epi8(0x0F), m10 = _mm256_set1_epi8(0x10);
    const __m256i k3f = _mm256_set1_epi32(0x3f3f3f3f), k0f = _mm256_set1_epi32(0x0f0f0f0f);
    const __m256i k30 = _mm256_set1_epi32(0x30303030);
    const size_t blk = lc_x16_part_off(type, 1, LC_X16_P_D); /* bytes of a super-block */
    const int lines = (int)(blk / 64);
    for (int g = 0; g < nr / 16; g++)
        for (int hf = 0; hf < 2; hf++) {
            const uint8_t *G0 = (const uint8_t *)vw + (size_t)g * 16 * w_stride;
            const size_t left = (size_t)(nr / 16 - g) * 16 * w_stride; /* bytes from G0 to the end */
            const uint8_t *G = (const uint8_t *)vw + (size_t)g * 16 * w_stride + 32 * hf;
            const uint8_t *G2 = (const uint8_t *)vw + (size_t)g * 16 * w_stride + 16 * hf;
            __m256 acc[8];
            _Pragma("GCC unroll 8") for (int k = 0; k < 8; k++) acc[k] = _mm256_setzero_ps();
            __m256 acc_m[4];
            _Pragma("GCC unroll 4") for (int m = 0; m < 4; m++) acc_m[m] = _mm256_setzero_ps();
            for (int i = 0; i < nb; i++) {
                const struct x16_q8_K ys = pre ? yb[i] : x16_q8_K_of(y + i);
                const int8_t *q8 = y[i].qs;
                const __m256 d = _mm256_mul_ps(_mm256_set1_ps(ys.d), _mm256_cvtph_ps(_mm_loadu_si128(
                                                   (const __m128i *)(G2 + lc_x16_part_off(type, i, LC_X16_P_D)))));
                const __m256 dmin = _mm256_mul_ps(_mm256_set1_ps(-ys.d), _mm256_cvtph_ps(_mm_loadu_si128(
                                                      (const __m128i *)(G2 + lc_x16_part_off(type, i, LC_X16_P_DMIN)))));
                const uint8_t *sc = G + lc_x16_part_off(type, i, LC_X16_P_SC);
                const __m256i u0 = _mm256_loadu_si256((const __m256i *)sc);
                const __m256i u1 = _mm256_loadu_si256((const __m256i *)(sc + 64));
                const __m256i u2 = _mm256_loadu_si256((const __m256i *)(sc + 128));
                const __m256i sc03 = _mm256_and_si256(u0, k3f);
                const __m256i sc47 = _mm256_or_si256(_mm256_and_si256(u2, k0f),
                                                     _mm256_and_si256(_mm256_srli_epi32(u0, 2), k30));
                const __m256i mn03 = _mm256_and_si256(u1, k3f);
                const __m256i mn47 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(u2, 4), k0f),
                                                     _mm256_and_si256(_mm256_srli_epi32(u1, 2), k30));
                __m256i mp[4];
                _Pragma("GCC unroll 4") for (int m = 0; m < 4; m++) mp[m] = _mm256_madd_epi16(
                    _mm256_shuffle_epi8(m < 2 ? mn03 : mn47, k_byte_pat(2 * (m & 1), 2 * (m & 1) + 1)),
                    _mm256_set1_epi32(ys.spair[m]));
                if (q5) {
                    const __m256i msum = _mm256_add_epi32(_mm256_add_epi32(mp[0], mp[1]),
                                                          _mm256_add_epi32(mp[2], mp[3]));
                    acc_m[0] = _mm256_fmadd_ps(dmin, _mm256_cvtepi32_ps(msum), acc_m[0]);
                } else {
                    _Pragma("GCC unroll 4") for (int m = 0; m < 4; m++)
                        acc_m[m] = _mm256_fmadd_ps(dmin, _mm256_cvtepi32_ps(mp[m]), acc_m[m]);
                }
                /* (scale j, scale j) of 8 rows, 16 bits each, for vpmaddwd; kept in memory */
                __m256i scl[8];
                _Pragma("GCC unroll 8") for (int j = 0; j < 8; j++)
                    scl[j] = _mm256_shuffle_epi8(j < 4 ? sc03 : sc47, k_byte_pat(j & 3, j & 3));
                const size_t pf = (size_t)(i + X16_PF_K) * blk;
                _Pragma("GCC unroll 8") for (int k = 0; k < 8; k++) {
                    for (int l = lines * k / 8; X16_PF_K && pf_on && hf == 0 && l < lines * (k + 1) / 8; l++)
                        if (pf + 64 * (size_t)l < left)
                            _mm_prefetch((const char *)G0 + pf + 64 * l, X16_PF_HINT);
                    __m256i lane = _mm256_setzero_si256();
                    const __m256i hb = q5 ? _mm256_loadu_si256((const __m256i *)(G + lc_x16_k_qh_off(i, k)))
                                          : _mm256_setzero_si256();
                    _Pragma("GCC unroll 4") for (int j = 0; j < 4; j++) {
                        const __m256i v = _mm256_loadu_si256((const __m256i *)(G + lc_x16_k_qs_off(type, i, j, k)));
                        __m256i lo = _mm256_and_si256(v, m4);
                        __m256i hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
                        if (q5) {
                            const __m256i hl = j == 0 ? _mm256_slli_epi16(hb, 4) : j == 1 ? _mm256_slli_epi16(hb, 2)
                                               : j == 2 ? hb : _mm256_srli_epi16(hb, 2);
                            const __m256i hh = j == 0 ? _mm256_slli_epi16(hb, 3) : j == 1 ? _mm256_slli_epi16(hb, 1)
                                               : j == 2 ? _mm256_srli_epi16(hb, 1) : _mm256_srli_epi16(hb, 3);
                            lo = _mm256_or_si256(lo, _mm256_and_si256(hl, m10));
                            hi = _mm256_or_si256(hi, _mm256_and_si256(hh, m10));
                        }
                        const __m256i pl = _mm256_maddubs_epi16(lo, _mm256_set1_epi32(ld_i32(q8 + 64 * j + 4 * k)));
                        const __m256i ph = _mm256_maddubs_epi16(hi, _mm256_set1_epi32(ld_i32(q8 + 64 * j + 32 + 4 * k)));
                        lane = _mm256_add_epi32(lane, _mm256_add_epi32(_mm256_madd_epi16(pl, scl[2 * j]),
                                                                       _mm256_madd_epi16(ph, scl[2 * j + 1])));
                    }
                    acc[k] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(lane), acc[k]);
                }
            }
            const __m256 ms = q5 ? acc_m[0]
                                 : _mm256_add_ps(_mm256_add_ps(acc_m[0], acc_m[2]),
                                                 _mm256_add_ps(acc_m[1], acc_m[3]));
            _mm256_storeu_ps(s + 16 * g + 8 * hf, _mm256_add_ps(x16_hsum8(acc), ms));
        }
}

static void gemv_x16_q4_K(int n, float *s, const void *vw, size_t w_stride, int nr,
                          const void *va)
{
    gemv_x16_k45(0, 1, n, s, vw, w_stride, nr, va);
}

static void gemv_x16_q5_K(int n, float *s, const void *vw, size_t w_stride, int nr,
                          const void *va)
{
    gemv_x16_k45(1, 1, n, s, vw, w_stride, nr, va);
}

/* without the prefetch, for prompt batches (DEFINE_X16_GEMM_BY_GROUP_NOPF) */
static void x16_q4_K_nopf(int n, float *s, const void *vw, size_t w_stride, int nr,
                          const void *va)
{
    gemv_x16_k45(0, 0, n, s, vw, w_stride, nr, va);
}

static void x16_q5_K_nopf(int n, float *s, const void *vw, size_t w_stride, int nr,
                          const void *va)
{
    gemv_x16_k45(1, 0, n, s, vw, w_stride, nr, va);
}

/*
 * Q4_0 over x16 groups in the Q4_0x8 order (vec_dot_q4_0x8_q8_0, which the x16 Q4_0 matrices
 * follow): per block and row the exact integer sum(q * y) - 8 * sum(y), then acc =
 * fma(float(isum), dx * dy, acc).  One float accumulator per row, so a group is one pass (rows
 * 0..7 from the first 32 bytes of every chunk, rows 8..15 from the second).  A block's 8
 * vpmaddubsw results (4 chunks, low and high nibbles; each 16-bit pair |q0 y0 + q1 y1| <=
 * 2 * 15 * 128 = 3840) are added as 16-bit values (at most 30720: exact) before one vpmaddwd.
 */
struct x16_q8_0 {
    float d;
    int32_t bias; /* -8 * sum(y) */
};

INLINE struct x16_q8_0 x16_q8_0_of(const lc_block_q8_0 *y)
{
    const __m256i yv = _mm256_loadu_si256((const __m256i *)y->qs);
    const int ysum = hsum_epi32(dot_us8_acc(_mm256_setzero_si256(), _mm256_set1_epi8(1), yv));
    return (struct x16_q8_0){h2f(y->d), -8 * ysum};
}

/* one Q4_0 block of 16 rows (d16: 16 fp16, q: 4 chunks of 64 bytes) into acc[0] (rows 0..7)
 * and acc[1] (rows 8..15) */
INLINE void x16_q4_0_block(__m256 acc[2], const uint8_t *d16, const uint8_t *q,
                           const lc_block_q8_0 *y, struct x16_q8_0 ys)
{
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    __m256i p[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
    _Pragma("GCC unroll 4") for (int k = 0; k < 4; k++) {
        const __m256i ylo = _mm256_set1_epi32(ld_i32(y->qs + 4 * k));
        const __m256i yhi = _mm256_set1_epi32(ld_i32(y->qs + 16 + 4 * k));
        _Pragma("GCC unroll 2") for (int h = 0; h < 2; h++) {
            const __m256i v = _mm256_loadu_si256((const __m256i *)(q + 64 * k + 32 * h));
            p[h] = _mm256_add_epi16(p[h], _mm256_maddubs_epi16(_mm256_and_si256(v, m4), ylo));
            p[h] = _mm256_add_epi16(
                p[h], _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(v, 4), m4), yhi));
        }
    }
    const __m256 dy = _mm256_set1_ps(ys.d);
    _Pragma("GCC unroll 2") for (int h = 0; h < 2; h++) {
        const __m256i isum = _mm256_add_epi32(_mm256_madd_epi16(p[h], _mm256_set1_epi16(1)),
                                              _mm256_set1_epi32(ys.bias));
        const __m256 dx = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(d16 + 16 * h)));
        acc[h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(dx, dy), acc[h]);
    }
}

static void gemv_x16_q4_0(int n, float *s, const void *vw, size_t w_stride, int nr,
                          const void *va)
{
    const int nb = n / 32;
    const lc_block_q8_0 *y = va;
    struct x16_q8_0 yb[X16_YB_MAX];
    const bool pre = nb <= X16_YB_MAX;
    for (int i = 0; pre && i < nb; i++)
        yb[i] = x16_q8_0_of(y + i);
#define YB(i) (pre ? yb[i] : x16_q8_0_of(y + (i)))
    for (int g = 0; g < nr / 16; g++) {
        const uint8_t *G = (const uint8_t *)vw + (size_t)g * 16 * w_stride;
        const size_t left = (size_t)(nr / 16 - g) * 16 * w_stride;
        __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
        int i = 0;
        for (; i + 2 <= nb; i += 2) { /* a pair: [d d | qs | qs], 576 bytes (repack.h) */
            const uint8_t *P = G + (size_t)i * 288;
            if (X16_PF)
                x16_prefetch(G, (size_t)i * 288, 576, left);
            x16_q4_0_block(acc, P, P + 64, y + i, YB(i));
            x16_q4_0_block(acc, P + 32, P + 320, y + i + 1, YB(i + 1));
        }
        if (i < nb) /* an odd last block: [d | qs] */
            x16_q4_0_block(acc, G + (size_t)i * 288, G + (size_t)i * 288 + 32, y + i, YB(i));
        _mm256_storeu_ps(s + 16 * g, acc[0]);
        _mm256_storeu_ps(s + 16 * g + 8, acc[1]);
    }
#undef YB
}

/*
 * Q8_0 over x16 groups, vec_dot_q8_0_q8_0's order (x86-qdot.h dot_ss8, ggml's AVX2
 * mul_sum_i8_pairs_float): per block lane k = the 4 products 4k .. 4k+3, as |x| (vpsignb x, x)
 * times y with x's sign (vpsignb y, x) through vpmaddubsw + vpmaddwd; acc[k] = fma(dx * dy,
 * float(lane k), acc[k]); hsum_float_8 lane-wise.  The same byte pairs meet in the same
 * instructions as in vec_dot, so the lanes are the same integers for every x and y.  Two passes
 * per group, as gemv_x16_q4_1.
 */
static void gemv_x16_q8_0(int n, float *s, const void *vw, size_t w_stride, int nr,
                          const void *va)
{
    const int nb = n / 32;
    const lc_block_q8_0 *y = va;
    const __m256i ones = _mm256_set1_epi16(1);
    float dys[X16_YB_MAX];
    const bool pre = nb <= X16_YB_MAX;
    for (int i = 0; pre && i < nb; i++)
        dys[i] = h2f(y[i].d);
    for (int g = 0; g < nr / 16; g++)
        for (int h = 0; h < 2; h++) {
            const uint8_t *G = (const uint8_t *)vw + (size_t)g * 16 * w_stride;
            const size_t left = (size_t)(nr / 16 - g) * 16 * w_stride;
            __m256 acc[8];
            _Pragma("GCC unroll 8") for (int k = 0; k < 8; k++) acc[k] = _mm256_setzero_ps();
            for (int i = 0; i < nb; i++) {
                const uint8_t *B = G + lc_x16_part_off(LC_TYPE_Q8_0, i, LC_X16_P_D);
                if (X16_PF && h == 0)
                    x16_prefetch(G, (size_t)i * 544, 544, left);
                const __m256 d = _mm256_mul_ps(
                    _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(B + 16 * h))),
                    _mm256_set1_ps(pre ? dys[i] : h2f(y[i].d)));
                _Pragma("GCC unroll 8") for (int k = 0; k < 8; k++) {
                    const __m256i v = _mm256_loadu_si256((const __m256i *)(B + 32 + 64 * k + 32 * h));
                    const __m256i yk = _mm256_set1_epi32(ld_i32(y[i].qs + 4 * k));
                    const __m256i lane = _mm256_madd_epi16(
                        _mm256_maddubs_epi16(_mm256_sign_epi8(v, v), _mm256_sign_epi8(yk, v)), ones);
                    acc[k] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(lane), acc[k]);
                }
            }
            _mm256_storeu_ps(s + 16 * g + 8 * h, x16_hsum8(acc));
        }
}

/*
 * Q5_1 over x16 groups: gemv_x16_q4_1 with the fifth bits (vec_dot_q5_1_q8_1's lanes: the
 * nibble plus 16 where the bit is set).  Chunk k's low nibbles are weights 4k + t (t = 0..3),
 * whose fifth bits are bits 4 * (k & 1) + t of byte k / 2 of each row's qh dword; the high
 * nibbles' (weights 16 + 4k + t) the same bits of byte 2 + k / 2.  That byte is copied to the
 * four bytes of its dword (vpshufb, once per pair of chunks), and-ed with 1 << (4 * (k & 1) + t)
 * in byte t, compared (vpcmpeqb), and 0x10 taken where equal: blk_q5_1's bytes.
 */
INLINE void x16_q5_1(int pf_on, int n, float *s, const void *vw, size_t w_stride, int nr,
                     const void *va)
{
    const int nb = n / 32;
    const lc_block_q8_1 *y = va;
    const __m256i m4 = _mm256_set1_epi8(0x0F), m10 = _mm256_set1_epi8(0x10);
    const __m256i ones = _mm256_set1_epi16(1);
    const __m256i bit_lo = _mm256_set1_epi32(0x08040201), bit_hi = _mm256_set1_epi32((int)0x80402010);
    /* vpshufb: byte 4d of its 128-bit lane to every byte of dword d (plus the byte wanted) */
    const __m256i dw = _mm256_setr_epi32(0, 0x04040404, 0x08080808, 0x0C0C0C0C, 0, 0x04040404,
                                         0x08080808, 0x0C0C0C0C);
    float ds[X16_YB_MAX][2];
    const bool pre = nb <= X16_YB_MAX;
    for (int i = 0; pre && i < nb; i++) {
        ds[i][0] = h2f(y[i].d);
        ds[i][1] = h2f(y[i].s);
    }
    for (int g = 0; g < nr / 16; g++)
        for (int hf = 0; hf < 2; hf++) {
            const uint8_t *G = (const uint8_t *)vw + (size_t)g * 16 * w_stride;
            const size_t left = (size_t)(nr / 16 - g) * 16 * w_stride;
            __m256 acc[8];
            _Pragma("GCC unroll 8") for (int k = 0; k < 8; k++) acc[k] = _mm256_setzero_ps();
            __m256 msum = _mm256_setzero_ps();
            for (int i = 0; i < nb; i++) {
                const float dy = pre ? ds[i][0] : h2f(y[i].d), sy = pre ? ds[i][1] : h2f(y[i].s);
                const uint8_t *B = G + lc_x16_part_off(LC_TYPE_Q5_1, i, LC_X16_P_D);
                if (X16_PF && pf_on && hf == 0)
                    x16_prefetch(G, (size_t)i * 384, 384, left);
                const __m256 dx = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(B + 16 * hf)));
                const __m256 mx = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(B + 32 + 16 * hf)));
                const __m256 d = _mm256_mul_ps(dx, _mm256_set1_ps(dy));
                msum = _mm256_add_ps(msum, _mm256_mul_ps(mx, _mm256_set1_ps(sy)));
                const __m256i qh = _mm256_loadu_si256((const __m256i *)(B + 64 + 32 * hf));
                const uint8_t *q = B + 128 + 32 * hf;
                _Pragma("GCC unroll 2") for (int pr = 0; pr < 2; pr++) {
                    const __m256i hl = _mm256_shuffle_epi8(qh, _mm256_add_epi8(dw, _mm256_set1_epi8((char)pr)));
                    const __m256i hh = _mm256_shuffle_epi8(qh, _mm256_add_epi8(dw, _mm256_set1_epi8((char)(2 + pr))));
                    _Pragma("GCC unroll 2") for (int kk = 0; kk < 2; kk++) {
                        const int k = 2 * pr + kk;
                        const __m256i bits = kk ? bit_hi : bit_lo;
                        const __m256i v = _mm256_loadu_si256((const __m256i *)(q + 64 * k));
                        const __m256i lo = _mm256_or_si256(
                            _mm256_and_si256(v, m4),
                            _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(hl, bits), bits), m10));
                        const __m256i hi = _mm256_or_si256(
                            _mm256_and_si256(_mm256_srli_epi16(v, 4), m4),
                            _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(hh, bits), bits), m10));
                        const __m256i ilo = _mm256_madd_epi16(
                            _mm256_maddubs_epi16(lo, _mm256_set1_epi32(ld_i32(y[i].qs + 4 * k))), ones);
                        const __m256i ihi = _mm256_madd_epi16(
                            _mm256_maddubs_epi16(hi, _mm256_set1_epi32(ld_i32(y[i].qs + 16 + 4 * k))), ones);
                        acc[k] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(ilo), d, acc[k]);
                        acc[4 + k] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(ihi), d, acc[4 + k]);
                    }
                }
            }
            _mm256_storeu_ps(s + 16 * g + 8 * hf, _mm256_add_ps(x16_hsum8(acc), msum));
        }
}

static void gemv_x16_q5_1(int n, float *s, const void *vw, size_t w_stride, int nr,
                          const void *va)
{
    x16_q5_1(1, n, s, vw, w_stride, nr, va);
}

/* without the prefetch, for prompt batches (DEFINE_X16_GEMM_BY_GROUP_NOPF) */
static void x16_q5_1_nopf(int n, float *s, const void *vw, size_t w_stride, int nr,
                          const void *va)
{
    x16_q5_1(0, n, s, vw, w_stride, nr, va);
}

/*
 * Q6_K over x16 groups (the output matrix of most quantized models, half of Q4_K_M's
 * ffn_down), vec_dot_q6_K_q8_K's order: per super-block and row 8 exact integer lanes, acc[k] =
 * fma(d, float(lane k), acc[k]) with d = dy * dx, hsum_float_8.  Lane k sums, over the halves h
 * and quarters v, the rows' 6-bit q (one ql chunk, one qh chunk) against the broadcast
 * activation dword 128h + 32v + 4k by vpmaddubsw, minus 32 * (the same activations) in 16-bit
 * pairs (precomputed once per call), times the quarter's scale of that lane in both 16-bit
 * halves of each row's dword by vpmaddwd: the 16-bit pairs of vec_dot, each times the same
 * scale, so the same integers.  k outermost, so that a lane is finished in one register; two
 * passes per group (8 rows each), as gemv_x16_q4_1.
 */
/* dword 32h + 8v + k of a super-block's bias: 32 * (the pairs of activations 128h + 32v + 4k ..
 * + 3) as two 16-bit sums, vec_dot's maddubs(32, y) */
INLINE void x16_q6_K_bias(int32_t bias[64], const int8_t *q8)
{
    _Pragma("GCC unroll 8") for (int t = 0; t < 8; t++) _mm256_storeu_si256(
        (__m256i *)(bias + 8 * t),
        _mm256_maddubs_epi16(_mm256_set1_epi8(32), _mm256_loadu_si256((const __m256i *)(q8 + 32 * t))));
}

#define Q6_BIAS_NB 128 /* super-blocks (n <= 32768) whose biases are computed once per call */

INLINE void x16_q6_K(int pf_on, int n, float *s, const void *vw, size_t w_stride, int nr,
                     const void *va)
{
    const int nb = n / LC_QK_K;
    const lc_block_q8_K *y = va;
    const bool pre = nb <= Q6_BIAS_NB;
    int32_t all_bias[Q6_BIAS_NB * 64] __attribute__((aligned(32)));
    for (int i = 0; pre && i < nb; i++)
        x16_q6_K_bias(all_bias + 64 * i, y[i].qs);
    const __m256i m4 = _mm256_set1_epi8(0x0F), m30 = _mm256_set1_epi8(0x30);
    /* vpshufb: the low 16 bits of every dword to both halves */
    const __m256i dup16 = _mm256_broadcastsi128_si256(
        _mm_setr_epi8(0, 1, 0, 1, 4, 5, 4, 5, 8, 9, 8, 9, 12, 13, 12, 13));
    for (int g = 0; g < nr / 16; g++)
        for (int hf = 0; hf < 2; hf++) {
            const uint8_t *G = (const uint8_t *)vw + (size_t)g * 16 * w_stride;
            const size_t left = (size_t)(nr / 16 - g) * 16 * w_stride;
            __m256 acc[8];
            _Pragma("GCC unroll 8") for (int k = 0; k < 8; k++) acc[k] = _mm256_setzero_ps();
            for (int i = 0; i < nb; i++) {
                if (X16_PF && pf_on && hf == 0)
                    x16_prefetch_l1(G, (size_t)i * 3360, 3360, left);
                const uint8_t *ql = G + lc_x16_q6_K_off(nb, i, LC_X16_QL) + 32 * hf;
                const uint8_t *qh = G + lc_x16_q6_K_off(nb, i, LC_X16_QH) + 32 * hf;
                const int8_t *sc = (const int8_t *)(G + lc_x16_q6_K_off(nb, i, LC_X16_SC)) + 8 * hf;
                const int8_t *q8 = y[i].qs;
                const int32_t *bias = all_bias + 64 * (pre ? i : 0);
                if (!pre)
                    x16_q6_K_bias(all_bias, q8);
                /* scale j of the 8 rows, sign-extended to 16 bits, in both halves of a dword */
                __m256i scl[16];
                _Pragma("GCC unroll 16") for (int j = 0; j < 16; j++) scl[j] = _mm256_shuffle_epi8(
                    _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(sc + 16 * j))), dup16);
                const __m256 d = _mm256_mul_ps(
                    _mm256_set1_ps(y[i].d),
                    _mm256_cvtph_ps(_mm_loadu_si128(
                        (const __m128i *)(G + lc_x16_q6_K_off(nb, i, LC_X16_D) + 16 * hf))));
                _Pragma("GCC unroll 8") for (int k = 0; k < 8; k++) {
                    __m256i lane = _mm256_setzero_si256();
                    _Pragma("GCC unroll 2") for (int h = 0; h < 2; h++) {
                        const __m256i bh = _mm256_loadu_si256((const __m256i *)(qh + 64 * (8 * h + k)));
                        const __m256i b0 = _mm256_loadu_si256((const __m256i *)(ql + 64 * (16 * h + k)));
                        const __m256i b1 = _mm256_loadu_si256((const __m256i *)(ql + 64 * (16 * h + 8 + k)));
                        _Pragma("GCC unroll 4") for (int v = 0; v < 4; v++) {
                            const __m256i b = v & 1 ? b1 : b0;
                            const __m256i lo4 = v < 2 ? b : _mm256_srli_epi16(b, 4);
                            /* qh bits 2v, 2v+1 moved to bits 4, 5 */
                            const __m256i hi2 = v == 0   ? _mm256_slli_epi16(bh, 4)
                                                : v == 1 ? _mm256_slli_epi16(bh, 2)
                                                : v == 2 ? bh
                                                         : _mm256_srli_epi16(bh, 2);
                            const __m256i q = _mm256_or_si256(_mm256_and_si256(lo4, m4),
                                                              _mm256_and_si256(hi2, m30));
                            const int o = 32 * h + 8 * v + k;
                            const __m256i p = _mm256_sub_epi16(
                                _mm256_maddubs_epi16(q, _mm256_set1_epi32(ld_i32(q8 + 4 * o))),
                                _mm256_set1_epi32(bias[o]));
                            lane = _mm256_add_epi32(lane, _mm256_madd_epi16(p, scl[8 * h + 2 * v + (k >= 4)]));
                        }
                    }
                    acc[k] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(lane), acc[k]);
                }
            }
            _mm256_storeu_ps(s + 16 * g + 8 * hf, x16_hsum8(acc));
        }
}

static void gemv_x16_q6_K(int n, float *s, const void *vw, size_t w_stride, int nr,
                          const void *va)
{
    x16_q6_K(1, n, s, vw, w_stride, nr, va);
}

/* without the prefetch, for prompt batches (DEFINE_X16_GEMM_BY_GROUP_NOPF) */
static void x16_q6_K_nopf(int n, float *s, const void *vw, size_t w_stride, int nr,
                          const void *va)
{
    x16_q6_K(0, n, s, vw, w_stride, nr, va);
}

DEFINE_PK_GEMM(q4_1, PK_Q4_1, gemm_q4_1)
DEFINE_PK_GEMM(q4_0, PK_Q4_0, gemm_q4_0)
DEFINE_PK_GEMM(q4_0x8, PK_Q4_0X8, gemm_q4_0x8_by_columns)
/* (gemm_x16_q4_0, _q4_K, _q5_K, _q6_K, _q5_1: only the fallbacks of the expanded GEMMs below,
 * gemm_x2e_q4_0, gemm_x2k and gemm_x2e_q5_1, for fewer than 4 columns or without scratch
 * memory; gemm_x16_q8_0_unpacked is gemm_x2e_q8_0's) */
DEFINE_X16_GEMM(q4_1, PK_Q4_1)
DEFINE_X16_GEMM_BY_GROUP_NOPF(q4_K)
DEFINE_X16_GEMM_BY_GROUP_NOPF(q5_K)
DEFINE_X16_GEMM(q4_0, PK_Q4_0X8)
DEFINE_X16_GEMM_BY_GROUP_NOPF(q6_K)
DEFINE_X16_GEMM_BY_GROUP_NOPF(q5_1)
DEFINE_X16_GEMM_BY_GROUP(q8_0) /* only gemm_x16_q8_0_unpacked's fallback */

/* ---------------------------------------------------------------- x16 prompt GEMMs (expanded) */

/* prefetch into L2 lines [l0, l1) of the bytes at p (the next group, while a tile runs) */
INLINE void x2e_prefetch(const uint8_t *p, size_t l0, size_t l1)
{
    for (size_t l = l0; l < l1; l++)
        _mm_prefetch((const char *)p + 64 * l, _MM_HINT_T1);
}

/*
 * Q4_0 prompt GEMM over x16 groups (gemm_x16[LC_TYPE_Q4_0]), in the Q4_0x8 order of
 * gemv_x16_q4_0 (llama.cpp's ggml_gemm_q4_0_8x8_q8_0): per (row, column) and block the exact
 * integer sum(q * y) - 8 * sum(y), then acc = fma(float(isum), dx * dy, acc) from 0 in block
 * order; acc is the output.  Only the float chain fixes the bits, so the integer work is grouped
 * as AVX2 likes (test-kernels compares every output with the scalar vec_dot_q4_0x8):
 *
 *   - each group of 16 rows is expanded once per call (x2e_expand_q4_0) into 576 bytes per
 *     block: 8 units of 64 bytes, unit j = the weights 4j .. 4j+3 of every row as bytes 0..15
 *     (row r at bytes 4r .. 4r+3; rows 0..7 the first 32 bytes), then the 16 dx as floats;
 *   - the column terms dy and -8 * sum(y) (x16_q8_0_of) once per call;
 *   - tiles of 16 rows x 4 columns: per block and unit, the two row registers against each
 *     column's activation dword (a vpbroadcastd from memory, a load) by vpmaddubsw, summed in
 *     16-bit lanes over the 8 units (each pair at most 2 * 15 * 128, the 8 at most 30720: exact),
 *     then per 8 rows and column one vpmaddwd by ones, the bias, vcvtdq2ps, dx * dy and the FMA.
 *     About 160 vector operations per 2048 products, where the GEMV per column needs about 300.
 */
struct x2e_q4_0 {
    uint8_t q[8][64]; /* unit j, row r: bytes 4r .. 4r+3 = the row's weights 4j .. 4j+3 */
    float d[16];      /* dx of the 16 rows */
};

/* one group (G: nb blocks of repack.h's Q4_0 x16 layout) into E */
static void x2e_expand_q4_0(struct x2e_q4_0 *E, const uint8_t *G, int nb)
{
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    for (int i = 0; i < nb; i++) {
        const uint8_t *q = G + lc_x16_qs_off(LC_TYPE_Q4_0, nb, i);
        /* chunk k: low nibbles are weights 4k .. 4k+3, high ones 16 + 4k .. 16 + 4k + 3 */
        _Pragma("GCC unroll 4") for (int k = 0; k < 4; k++)
            _Pragma("GCC unroll 2") for (int h = 0; h < 2; h++) {
                const __m256i v = _mm256_loadu_si256((const __m256i *)(q + 64 * k + 32 * h));
                _mm256_store_si256((__m256i *)(E[i].q[k] + 32 * h), _mm256_and_si256(v, m4));
                _mm256_store_si256((__m256i *)(E[i].q[4 + k] + 32 * h),
                                   _mm256_and_si256(_mm256_srli_epi16(v, 4), m4));
            }
        const uint8_t *d16 = G + lc_x16_sc_off(LC_TYPE_Q4_0, nb, i);
        _mm256_store_ps(E[i].d, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)d16)));
        _mm256_store_ps(E[i].d + 8, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(d16 + 16))));
    }
}

#define X2E0_COLS 4
/* the expanded group E (nb blocks) x X2E0_COLS columns y[c] (ys[c]: their x16_q8_0 terms per
 * block): s[c * ld_s + r] for r < 16, c < ncols (the other columns repeat one, not stored) */
INLINE void x2e_q4_0_tile(int nb, float *s, size_t ld_s, const struct x2e_q4_0 *E,
                          const lc_block_q8_0 *const y[X2E0_COLS],
                          const struct x16_q8_0 *const ys[X2E0_COLS], int ncols)
{
    const __m256i ones = _mm256_set1_epi16(1);
    /* the 8 float accumulators in memory (the 16 registers hold the 16-bit sums, the row
     * units and the broadcasts): a load and a store each per block */
    float acc[2][X2E0_COLS][8] __attribute__((aligned(32)));
    for (int i = 0; i < nb; i++) {
        __m256i p[2][X2E0_COLS];
        _Pragma("GCC unroll 8") for (int j = 0; j < 8; j++) {
            const __m256i w0 = _mm256_load_si256((const __m256i *)E[i].q[j]);
            const __m256i w1 = _mm256_load_si256((const __m256i *)(E[i].q[j] + 32));
            _Pragma("GCC unroll 4") for (int c = 0; c < X2E0_COLS; c++) {
                const __m256i yb = _mm256_set1_epi32(ld_i32(y[c][i].qs + 4 * j));
                const __m256i t0 = _mm256_maddubs_epi16(w0, yb), t1 = _mm256_maddubs_epi16(w1, yb);
                p[0][c] = j ? _mm256_add_epi16(p[0][c], t0) : t0;
                p[1][c] = j ? _mm256_add_epi16(p[1][c], t1) : t1;
                /* a chain per accumulator: GCC would otherwise make each sum a tree of all 8
                 * products, computed first and spilled */
                __asm__("" : "+x"(p[0][c]), "+x"(p[1][c]));
            }
        }
        const __m256 dx0 = _mm256_load_ps(E[i].d), dx1 = _mm256_load_ps(E[i].d + 8);
        _Pragma("GCC unroll 4") for (int c = 0; c < X2E0_COLS; c++) {
            const __m256 dy = _mm256_set1_ps(ys[c][i].d);
            const __m256i bias = _mm256_set1_epi32(ys[c][i].bias);
            const __m256 a0 = i ? _mm256_load_ps(acc[0][c]) : _mm256_setzero_ps();
            const __m256 a1 = i ? _mm256_load_ps(acc[1][c]) : _mm256_setzero_ps();
            _mm256_store_ps(acc[0][c], _mm256_fmadd_ps(
                _mm256_cvtepi32_ps(_mm256_add_epi32(_mm256_madd_epi16(p[0][c], ones), bias)),
                _mm256_mul_ps(dx0, dy), a0));
            _mm256_store_ps(acc[1][c], _mm256_fmadd_ps(
                _mm256_cvtepi32_ps(_mm256_add_epi32(_mm256_madd_epi16(p[1][c], ones), bias)),
                _mm256_mul_ps(dx1, dy), a1));
        }
        __asm__ volatile("" : "+m"(acc));
    }
    _Pragma("GCC unroll 4") for (int c = 0; c < X2E0_COLS; c++) if (c < ncols) {
        _mm256_storeu_ps(s + (size_t)c * ld_s, _mm256_load_ps(acc[0][c]));
        _mm256_storeu_ps(s + (size_t)c * ld_s + 8, _mm256_load_ps(acc[1][c]));
    }
}

/*
 * kernels.h's gemm_x16 for Q4_0 (see above): nr rows (nr % 16 == 0, w the first of a group) x
 * nc columns of Q8_0 activations, s[c * ld_s + r] as vec_dot_q4_0x8.  Scratch (lc_kernel_scratch):
 * one expanded group and the column terms, (576 + 8 * nc) bytes per block.  Fewer than 4
 * columns, or no memory: the earlier path (pk_gemm's tiles, else the GEMV per column), the
 * same bits.
 */
static void gemm_x2e_q4_0(int n, float *s, size_t ld_s, const void *w, size_t w_stride, int nr,
                          const void *a, size_t a_stride, int nc)
{
    const int nb = n / 32, ngr = nr / 16;
    const size_t esz = (size_t)nb * sizeof(struct x2e_q4_0);
    const size_t csz = (size_t)nc * (size_t)nb * sizeof(struct x16_q8_0);
    uint8_t *mem = nb > 0 && nc >= X2E0_COLS ? lc_kernel_scratch(esz + csz) : NULL;
    if (!mem) {
        gemm_x16_q4_0(n, s, ld_s, w, w_stride, nr, a, a_stride, nc);
        return;
    }
    struct x2e_q4_0 *E = (struct x2e_q4_0 *)(void *)mem;
    struct x16_q8_0 *ys = (struct x16_q8_0 *)(void *)(mem + esz);
    for (int c = 0; c < nc; c++) {
        const lc_block_q8_0 *y = (const void *)((const uint8_t *)a + (size_t)c * a_stride);
        for (int i = 0; i < nb; i++)
            ys[(size_t)c * nb + i] = x16_q8_0_of(y + i);
    }
    const int ntiles = (nc + X2E0_COLS - 1) / X2E0_COLS;
    const size_t glines = 16 * w_stride / 64;
    for (int g = 0; g < ngr; g++) {
        const uint8_t *G = (const uint8_t *)w + (size_t)g * 16 * w_stride;
        x2e_expand_q4_0(E, G, nb);
        for (int c0 = 0, t = 0; c0 < nc; c0 += X2E0_COLS, t++) {
            if (g + 1 < ngr) /* the next group into L2, a share before each tile */
                x2e_prefetch(G + 16 * w_stride, glines * (size_t)t / (size_t)ntiles,
                             glines * (size_t)(t + 1) / (size_t)ntiles);
            const int k = nc - c0 < X2E0_COLS ? nc - c0 : X2E0_COLS;
            const lc_block_q8_0 *y[X2E0_COLS];
            const struct x16_q8_0 *yc[X2E0_COLS];
            for (int c = 0; c < X2E0_COLS; c++) { /* missing columns repeat the last one */
                const int cc = c0 + (c < k ? c : k - 1);
                y[c] = (const void *)((const uint8_t *)a + (size_t)cc * a_stride);
                yc[c] = ys + (size_t)cc * nb;
            }
            x2e_q4_0_tile(nb, s + (size_t)c0 * ld_s + 16 * g, ld_s, E, y, yc, k);
        }
    }
}

/*
 * K-quant prompt GEMMs over x16 groups (gemm_x16[Q4_K / Q5_K / Q6_K]): per (row, column) the
 * integer lanes and float operations of gemv_x16_k45 / x16_q6_K in their order (llama.cpp's
 * AVX2 vec_dot_q4_K_q8_K / q5_K / q6_K: per super-block 8 exact integer lanes, acc[k] =
 * fma(dy * dx, float(lane k), acc[k]), the mins as those GEMVs add them, hsum_float_8), so the
 * same bits (test-kernels compares every output with the scalar vec_dot), with the unpacking
 * done once per call instead of once per column:
 *
 *   - each group of 16 rows is expanded (x2k_expand) into XK2_BLK bytes per super-block: the
 *     quants as bytes, lane k's 8 units at 512 k + 64 t (rows 0..7 the first 32 bytes of a
 *     unit, the layout of x86-avx512.c's xk_expand_*): Q4_K / Q5_K unit t = sub-block t's
 *     weights 32 t + 4k .. + 3 (Q5_K with the fifth bit), unsigned; Q6_K unit t = 4h + v the
 *     weights 128h + 32v + 4k .. + 3 as q - 32, signed; then the rows' scales as the GEMVs
 *     spread them for vpmaddwd, the Q4_K / Q5_K mins in 16-bit pairs, dx and dmin as floats,
 *     and for Q6_K per lane and row the constant -128 * sum_t scale_t * sum(q - 32) (below);
 *   - tiles of 8 rows x 4 columns (XK2_COLS), super-block by super-block: per lane k and unit
 *     t, one row register and its scales against each column's activation dword (a vpbroadcastd
 *     from memory): vpmaddubsw, vpmaddwd by the scales, vpaddd into the lane; per column and lane
 *     one conversion and one FMA (the float accumulators in memory).  Q6_K takes the
 *     activations as the unsigned operand, y + 128 (y ^ 0x80, made once per call), against the
 *     signed q - 32: scale * sum((q - 32)(y + 128)) - 128 * scale * sum(q - 32) is the GEMV's
 *     scale * (sum(q y) - 32 sum(y)), exactly (pairs at most 2 * 255 * 32 in 16 bits), and the
 *     second term, which depends on the weights alone, starts the lane: no subtraction of the
 *     activations' bias per product as in the GEMV.
 *
 * Fewer than 4 columns, or no scratch memory: the GEMV per column and group (the same bits).
 */
#define XK2_COLS 4
#define XK2_BLK 6144 /* bytes of an expanded super-block of 16 rows */
enum {
    XK2_SCL = 4096,  /* [half][16] x 32 bytes: the vpmaddwd scale operands */
    XK2_PAIR = 5120, /* [half][4] x 32 bytes: Q4_K / Q5_K min pairs */
    XK2_DX = 5376,   /* 16 floats */
    XK2_DMIN = 5440, /* 16 floats */
    XK2_CORR = 5504, /* [lane 8][16 rows] int32: Q6_K's -128 * sum_t scale_t * sum(q - 32) */
};
_Static_assert(XK2_CORR + 512 <= XK2_BLK, "expanded super-block overflows");
enum { XK2_Q4, XK2_Q5, XK2_Q6 };

/* Q4_K / Q5_K: nb super-blocks of the group G (repack.h's layout) into E */
static void x2k_expand_k45(int q5, uint8_t *E, const uint8_t *G, int nb)
{
    const enum lc_type type = q5 ? LC_TYPE_Q5_K : LC_TYPE_Q4_K;
    const __m256i m4 = _mm256_set1_epi8(0x0F), m10 = _mm256_set1_epi8(0x10);
    const __m256i k3f = _mm256_set1_epi32(0x3f3f3f3f), k0f = _mm256_set1_epi32(0x0f0f0f0f);
    const __m256i k30 = _mm256_set1_epi32(0x30303030);
    for (int i = 0; i < nb; i++) {
        uint8_t *Ei = E + (size_t)i * XK2_BLK;
        for (int k = 0; k < 8; k++)
            _Pragma("GCC unroll 2") for (int h = 0; h < 2; h++) {
                const __m256i hb = q5 ? _mm256_loadu_si256((const __m256i *)(G + lc_x16_k_qh_off(i, k) + 32 * h))
                                      : _mm256_setzero_si256();
                _Pragma("GCC unroll 4") for (int j = 0; j < 4; j++) {
                    const __m256i v = _mm256_loadu_si256((const __m256i *)(G + lc_x16_k_qs_off(type, i, j, k) + 32 * h));
                    __m256i lo = _mm256_and_si256(v, m4);
                    __m256i hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
                    if (q5) { /* as gemv_x16_k45 merges them */
                        const __m256i hl = j == 0 ? _mm256_slli_epi16(hb, 4) : j == 1 ? _mm256_slli_epi16(hb, 2)
                                           : j == 2 ? hb : _mm256_srli_epi16(hb, 2);
                        const __m256i hh = j == 0 ? _mm256_slli_epi16(hb, 3) : j == 1 ? _mm256_slli_epi16(hb, 1)
                                           : j == 2 ? _mm256_srli_epi16(hb, 1) : _mm256_srli_epi16(hb, 3);
                        lo = _mm256_or_si256(lo, _mm256_and_si256(hl, m10));
                        hi = _mm256_or_si256(hi, _mm256_and_si256(hh, m10));
                    }
                    _mm256_store_si256((__m256i *)(Ei + 512 * k + 128 * j + 32 * h), lo);
                    _mm256_store_si256((__m256i *)(Ei + 512 * k + 128 * j + 64 + 32 * h), hi);
                }
            }
        _Pragma("GCC unroll 2") for (int h = 0; h < 2; h++) {
            /* ggml's utmp as gemv_x16_k45 unpacks it */
            const uint8_t *sc = G + lc_x16_part_off(type, i, LC_X16_P_SC) + 32 * h;
            const __m256i u0 = _mm256_loadu_si256((const __m256i *)sc);
            const __m256i u1 = _mm256_loadu_si256((const __m256i *)(sc + 64));
            const __m256i u2 = _mm256_loadu_si256((const __m256i *)(sc + 128));
            const __m256i sc03 = _mm256_and_si256(u0, k3f);
            const __m256i sc47 = _mm256_or_si256(_mm256_and_si256(u2, k0f),
                                                 _mm256_and_si256(_mm256_srli_epi32(u0, 2), k30));
            const __m256i mn03 = _mm256_and_si256(u1, k3f);
            const __m256i mn47 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(u2, 4), k0f),
                                                 _mm256_and_si256(_mm256_srli_epi32(u1, 2), k30));
            _Pragma("GCC unroll 8") for (int j = 0; j < 8; j++)
                _mm256_store_si256((__m256i *)(Ei + XK2_SCL + 512 * h + 32 * j),
                                   _mm256_shuffle_epi8(j < 4 ? sc03 : sc47, k_byte_pat(j & 3, j & 3)));
            _Pragma("GCC unroll 4") for (int m = 0; m < 4; m++)
                _mm256_store_si256((__m256i *)(Ei + XK2_PAIR + 128 * h + 32 * m),
                                   _mm256_shuffle_epi8(m < 2 ? mn03 : mn47, k_byte_pat(2 * (m & 1), 2 * (m & 1) + 1)));
            _mm256_store_ps((float *)(void *)(Ei + XK2_DX) + 8 * h, _mm256_cvtph_ps(_mm_loadu_si128(
                (const __m128i *)(G + lc_x16_part_off(type, i, LC_X16_P_D) + 16 * h))));
            _mm256_store_ps((float *)(void *)(Ei + XK2_DMIN) + 8 * h, _mm256_cvtph_ps(_mm_loadu_si128(
                (const __m128i *)(G + lc_x16_part_off(type, i, LC_X16_P_DMIN) + 16 * h))));
        }
    }
}

/* Q6_K: nb super-blocks of the group G into E (q - 32 as signed bytes, the scales, dx, the
 * lanes' constant terms) */
static void x2k_expand_q6_K(uint8_t *E, const uint8_t *G, int nb)
{
    const __m256i m4 = _mm256_set1_epi8(0x0F), m30 = _mm256_set1_epi8(0x30);
    const __m256i k32 = _mm256_set1_epi8(32), one8 = _mm256_set1_epi8(1);
    const __m256i dup16 = _mm256_broadcastsi128_si256(
        _mm_setr_epi8(0, 1, 0, 1, 4, 5, 4, 5, 8, 9, 8, 9, 12, 13, 12, 13));
    for (int i = 0; i < nb; i++) {
        uint8_t *Ei = E + (size_t)i * XK2_BLK;
        const uint8_t *ql = G + lc_x16_q6_K_off(nb, i, LC_X16_QL);
        const uint8_t *qh = G + lc_x16_q6_K_off(nb, i, LC_X16_QH);
        const int8_t *sc = (const int8_t *)(G + lc_x16_q6_K_off(nb, i, LC_X16_SC));
        _Pragma("GCC unroll 2") for (int hf = 0; hf < 2; hf++) {
            /* scale j of the 8 rows, sign-extended to 16 bits, in both halves of a dword */
            __m256i scl[16];
            _Pragma("GCC unroll 16") for (int j = 0; j < 16; j++) {
                scl[j] = _mm256_shuffle_epi8(
                    _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(sc + 16 * j + 8 * hf))), dup16);
                _mm256_store_si256((__m256i *)(Ei + XK2_SCL + 512 * hf + 32 * j), scl[j]);
            }
            _mm256_store_ps((float *)(void *)(Ei + XK2_DX) + 8 * hf, _mm256_cvtph_ps(_mm_loadu_si128(
                (const __m128i *)(G + lc_x16_q6_K_off(nb, i, LC_X16_D) + 16 * hf))));
            for (int k = 0; k < 8; k++) {
                __m256i corr = _mm256_setzero_si256();
                _Pragma("GCC unroll 2") for (int h = 0; h < 2; h++) {
                    const __m256i bh = _mm256_loadu_si256((const __m256i *)(qh + 64 * (8 * h + k) + 32 * hf));
                    const __m256i b0 = _mm256_loadu_si256((const __m256i *)(ql + 64 * (16 * h + k) + 32 * hf));
                    const __m256i b1 = _mm256_loadu_si256((const __m256i *)(ql + 64 * (16 * h + 8 + k) + 32 * hf));
                    _Pragma("GCC unroll 4") for (int v = 0; v < 4; v++) {
                        const __m256i b = v & 1 ? b1 : b0;
                        const __m256i lo4 = v < 2 ? b : _mm256_srli_epi16(b, 4);
                        const __m256i hi2 = v == 0   ? _mm256_slli_epi16(bh, 4)
                                            : v == 1 ? _mm256_slli_epi16(bh, 2)
                                            : v == 2 ? bh
                                                     : _mm256_srli_epi16(bh, 2);
                        const __m256i q = _mm256_sub_epi8(
                            _mm256_or_si256(_mm256_and_si256(lo4, m4), _mm256_and_si256(hi2, m30)), k32);
                        _mm256_store_si256((__m256i *)(Ei + 512 * k + 64 * (4 * h + v) + 32 * hf), q);
                        corr = _mm256_add_epi32(corr, _mm256_madd_epi16(_mm256_maddubs_epi16(one8, q),
                                                                        scl[8 * h + 2 * v + (k >= 4)]));
                    }
                }
                _mm256_store_si256((__m256i *)(Ei + XK2_CORR + 64 * k + 32 * hf),
                                   _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(corr, 7)));
            }
        }
    }
}

/*
 * Rows 8 hf .. 8 hf + 7 of the expanded group E (nb super-blocks) x C columns: y[c] the Q8_K
 * columns, ys[c] their x16_q8_K terms (Q4_K / Q5_K), yx[c] their quants ^ 0x80 (Q6_K, 256 bytes
 * per super-block); the 8 outputs of column c to s + c * ld_s.
 */
INLINE void x2k_tile(const int kind, const int C, int nb, float *s, size_t ld_s, const uint8_t *E,
                     int hf, const lc_block_q8_K *const *y, const struct x16_q8_K *const *ys,
                     const uint8_t *const *yx)
{
    float acc[XK2_COLS][8][8] __attribute__((aligned(32)));
    float accm[XK2_COLS][4][8] __attribute__((aligned(32)));
    for (int i = 0; i < nb; i++) {
        const uint8_t *Ei = E + (size_t)i * XK2_BLK;
        const __m256 dx = _mm256_load_ps((const float *)(const void *)(Ei + XK2_DX) + 8 * hf);
        __m256 d[XK2_COLS];
        _Pragma("GCC unroll 4") for (int c = 0; c < C; c++) d[c] = _mm256_mul_ps(_mm256_set1_ps(y[c][i].d), dx);
        if (kind != XK2_Q6) {
            const __m256 dminx = _mm256_load_ps((const float *)(const void *)(Ei + XK2_DMIN) + 8 * hf);
            const uint8_t *pr = Ei + XK2_PAIR + 128 * hf;
            _Pragma("GCC unroll 4") for (int c = 0; c < C; c++) {
                const struct x16_q8_K *yc = ys[c] + i;
                const __m256 dmin = _mm256_mul_ps(_mm256_set1_ps(-yc->d), dminx);
                __m256i mp[4];
                _Pragma("GCC unroll 4") for (int m = 0; m < 4; m++) mp[m] = _mm256_madd_epi16(
                    _mm256_load_si256((const __m256i *)(pr + 32 * m)), _mm256_set1_epi32(yc->spair[m]));
                if (kind == XK2_Q5) {
                    const __m256i msum = _mm256_add_epi32(_mm256_add_epi32(mp[0], mp[1]),
                                                          _mm256_add_epi32(mp[2], mp[3]));
                    _mm256_store_ps(accm[c][0], _mm256_fmadd_ps(dmin, _mm256_cvtepi32_ps(msum),
                                                                i ? _mm256_load_ps(accm[c][0]) : _mm256_setzero_ps()));
                } else {
                    _Pragma("GCC unroll 4") for (int m = 0; m < 4; m++)
                        _mm256_store_ps(accm[c][m], _mm256_fmadd_ps(dmin, _mm256_cvtepi32_ps(mp[m]),
                                                                    i ? _mm256_load_ps(accm[c][m]) : _mm256_setzero_ps()));
                }
            }
        }
        const uint8_t *scl = Ei + XK2_SCL + 512 * hf;
        for (int k = 0; k < 8; k++) {
            __m256i lane[XK2_COLS];
            const __m256i l0 = kind == XK2_Q6 ? _mm256_load_si256((const __m256i *)(Ei + XK2_CORR + 64 * k + 32 * hf))
                                              : _mm256_setzero_si256();
            _Pragma("GCC unroll 4") for (int c = 0; c < C; c++) lane[c] = l0;
            _Pragma("GCC unroll 8") for (int t = 0; t < 8; t++) {
                const __m256i w = _mm256_load_si256((const __m256i *)(Ei + 512 * k + 64 * t + 32 * hf));
                const __m256i sc = _mm256_load_si256(
                    (const __m256i *)(scl + 32 * (kind == XK2_Q6 ? 2 * t + (k >= 4) : t)));
                _Pragma("GCC unroll 4") for (int c = 0; c < C; c++) {
                    const __m256i p = kind == XK2_Q6
                                          ? _mm256_maddubs_epi16(_mm256_set1_epi32(ld_i32(yx[c] + 256 * (size_t)i + 32 * t + 4 * k)), w)
                                          : _mm256_maddubs_epi16(w, _mm256_set1_epi32(ld_i32(y[c][i].qs + 32 * t + 4 * k)));
                    lane[c] = _mm256_add_epi32(lane[c], _mm256_madd_epi16(p, sc));
                    __asm__("" : "+x"(lane[c])); /* one chain per lane (no tree of spills) */
                }
            }
            _Pragma("GCC unroll 4") for (int c = 0; c < C; c++)
                _mm256_store_ps(acc[c][k], _mm256_fmadd_ps(d[c], _mm256_cvtepi32_ps(lane[c]),
                                                           i ? _mm256_load_ps(acc[c][k]) : _mm256_setzero_ps()));
        }
        __asm__ volatile("" : "+m"(acc), "+m"(accm));
    }
    for (int c = 0; c < C; c++) {
        __m256 a[8];
        for (int k = 0; k < 8; k++)
            a[k] = _mm256_load_ps(acc[c][k]);
        __m256 r = x16_hsum8(a);
        if (kind == XK2_Q5)
            r = _mm256_add_ps(r, _mm256_load_ps(accm[c][0]));
        else if (kind == XK2_Q4)
            r = _mm256_add_ps(r, _mm256_add_ps(_mm256_add_ps(_mm256_load_ps(accm[c][0]), _mm256_load_ps(accm[c][2])),
                                               _mm256_add_ps(_mm256_load_ps(accm[c][1]), _mm256_load_ps(accm[c][3]))));
        _mm256_storeu_ps(s + (size_t)c * ld_s, r);
    }
}

/*
 * kernels.h's gemm_x16 for Q4_K, Q5_K and Q6_K (kind), see above: nr rows (nr % 16 == 0) x nc
 * columns of Q8_K activations.  Scratch (lc_kernel_scratch): one expanded group (6 KB per
 * super-block) and the column terms (Q4_K / Q5_K: 20 bytes per super-block and column, Q6_K:
 * the 256 shifted quants).
 */
INLINE void gemm_x2k(const int kind, int n, float *s, size_t ld_s, const void *w, size_t w_stride,
                     int nr, const void *a, size_t a_stride, int nc)
{
    const int nb = n / LC_QK_K, ngr = nr / 16;
    const size_t esz = (size_t)nb * XK2_BLK;
    const size_t per = kind == XK2_Q6 ? 256 : sizeof(struct x16_q8_K);
    uint8_t *mem = nb > 0 && nc >= XK2_COLS ? lc_kernel_scratch(esz + (size_t)nc * (size_t)nb * per) : NULL;
    if (!mem) {
        if (kind == XK2_Q4)
            gemm_x16_q4_K(n, s, ld_s, w, w_stride, nr, a, a_stride, nc);
        else if (kind == XK2_Q5)
            gemm_x16_q5_K(n, s, ld_s, w, w_stride, nr, a, a_stride, nc);
        else
            gemm_x16_q6_K(n, s, ld_s, w, w_stride, nr, a, a_stride, nc);
        return;
    }
    uint8_t *E = mem, *cols = mem + esz;
    for (int c = 0; c < nc; c++) {
        const lc_block_q8_K *y = (const void *)((const uint8_t *)a + (size_t)c * a_stride);
        for (int i = 0; i < nb; i++) {
            if (kind == XK2_Q6) {
                uint8_t *o = cols + ((size_t)c * nb + i) * 256;
                _Pragma("GCC unroll 8") for (int t = 0; t < 8; t++) _mm256_store_si256(
                    (__m256i *)(o + 32 * t),
                    _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(y[i].qs + 32 * t)),
                                     _mm256_set1_epi8((char)0x80)));
            } else {
                ((struct x16_q8_K *)(void *)cols)[(size_t)c * nb + i] = x16_q8_K_of(y + i);
            }
        }
    }
    const int ntiles = (nc + XK2_COLS - 1) / XK2_COLS;
    const size_t glines = 16 * w_stride / 64;
    for (int g = 0; g < ngr; g++) {
        const uint8_t *G = (const uint8_t *)w + (size_t)g * 16 * w_stride;
        if (kind == XK2_Q6)
            x2k_expand_q6_K(E, G, nb);
        else
            x2k_expand_k45(kind == XK2_Q5, E, G, nb);
        for (int c0 = 0, t = 0; c0 < nc; t++) {
            if (g + 1 < ngr) /* the next group into L2, a share before each tile */
                x2e_prefetch(G + 16 * w_stride, glines * (size_t)t / (size_t)ntiles,
                             glines * (size_t)(t + 1) / (size_t)ntiles);
            const int C = nc - c0 >= XK2_COLS ? XK2_COLS : 1;
            const lc_block_q8_K *y[XK2_COLS];
            const struct x16_q8_K *ys[XK2_COLS];
            const uint8_t *yx[XK2_COLS];
            for (int c = 0; c < C; c++) {
                y[c] = (const void *)((const uint8_t *)a + (size_t)(c0 + c) * a_stride);
                ys[c] = (const struct x16_q8_K *)(const void *)cols + (size_t)(c0 + c) * nb;
                /* only Q6_K's columns are expanded bytes (256 per super-block); elsewhere the
                 * pointer would run past the scratch */
                yx[c] = kind == XK2_Q6 ? cols + (size_t)(c0 + c) * nb * 256 : NULL;
            }
            for (int hf = 0; hf < 2; hf++) {
                float *so = s + (size_t)c0 * ld_s + 16 * g + 8 * hf;
                if (C == XK2_COLS)
                    x2k_tile(kind, XK2_COLS, nb, so, ld_s, E, hf, y, ys, yx);
                else
                    x2k_tile(kind, 1, nb, so, ld_s, E, hf, y, ys, yx);
            }
            c0 += C;
        }
    }
}

static void gemm_x2k_q4_K(int n, float *s, size_t ld_s, const void *w, size_t w_stride, int nr,
                          const void *a, size_t a_stride, int nc)
{
    gemm_x2k(XK2_Q4, n, s, ld_s, w, w_stride, nr, a, a_stride, nc);
}

static void gemm_x2k_q5_K(int n, float *s, size_t ld_s, const void *w, size_t w_stride, int nr,
                          const void *a, size_t a_stride, int nc)
{
    gemm_x2k(XK2_Q5, n, s, ld_s, w, w_stride, nr, a, a_stride, nc);
}

static void gemm_x2k_q6_K(int n, float *s, size_t ld_s, const void *w, size_t w_stride, int nr,
                          const void *a, size_t a_stride, int nc)
{
    gemm_x2k(XK2_Q6, n, s, ld_s, w, w_stride, nr, a, a_stride, nc);
}

/*
 * Q8_0 prompt GEMM over x16 groups (gemm_x16[LC_TYPE_Q8_0]) in vec_dot_q8_0_q8_0's order (ggml's
 * AVX2 mul_sum_i8_pairs_float, as gemv_x16_q8_0): per block and row 8 integer lanes, lane k =
 * the 4 products 4k .. 4k+3, acc[k] = fma(dx * dy, float(lane k), acc[k]), hsum_float_8 at the
 * end; so the same bits as vec_dot for every block whose activations avoid -128 (ggml's
 * vpsignb wraps on a -128 activation against a negative weight; llamachat's activation
 * quantizers give -127 .. 127 but for a NaN input).  A -128 weight alone is exact.  The lanes are computed
 * differently, in 16 bits, without vec_dot's vpsignb pair:
 *
 *   - each group of 16 rows is expanded once per call (x2e_expand_q8_0) into 1088 bytes per
 *     block: per lane k two units of 64 bytes holding, per row, the weights 4k and 4k+2 (A) and
 *     4k+1 and 4k+3 (B) sign-extended to 16 bits (rows 0..7 first), then the 16 dx as floats;
 *   - each column's activations the same way once per call (64 bytes per block) and dy;
 *   - tiles of 8 rows x 4 columns: per block, lane and column two vpmaddwd (A by the column's
 *     (y 4k, y 4k+2) dword, B by (y 4k+1, y 4k+3), vpbroadcastd from memory) and an add give
 *     the exact lane; one conversion and one FMA into the float accumulators (in memory).
 *     4 multiply-port operations per 32 products where the GEMV per column needs 5.
 * Fewer than 4 columns, or no scratch memory: gemm_x16_q8_0_unpacked (the same bits).
 */
#define X2E8_BLK 1088 /* bytes of an expanded block of 16 rows */

/* one group (G, nb blocks of repack.h's Q8_0 x16 layout) into E */
static void x2e_expand_q8_0(uint8_t *E, const uint8_t *G, int nb)
{
    for (int i = 0; i < nb; i++) {
        const uint8_t *B = G + lc_x16_part_off(LC_TYPE_Q8_0, i, LC_X16_P_D);
        uint8_t *Ei = E + (size_t)i * X2E8_BLK;
        _Pragma("GCC unroll 8") for (int k = 0; k < 8; k++)
            _Pragma("GCC unroll 2") for (int h = 0; h < 2; h++) {
                const __m256i v = _mm256_loadu_si256((const __m256i *)(B + 32 + 64 * k + 32 * h));
                _mm256_store_si256((__m256i *)(Ei + 128 * k + 32 * h),
                                   _mm256_srai_epi16(_mm256_slli_epi16(v, 8), 8));
                _mm256_store_si256((__m256i *)(Ei + 128 * k + 64 + 32 * h), _mm256_srai_epi16(v, 8));
            }
        _mm256_store_ps((float *)(void *)(Ei + 1024), _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)B)));
        _mm256_store_ps((float *)(void *)(Ei + 1024) + 8,
                        _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(B + 16))));
    }
}

#define X2E8_COLS 4
/* rows 8 hf .. 8 hf + 7 of the expanded group E (nb blocks) x C columns: yq[c] their expanded
 * activations (64 bytes per block), dy[c] their scales; outputs to s + c * ld_s */
INLINE void x2e_q8_0_tile(const int C, int nb, float *s, size_t ld_s, const uint8_t *E, int hf,
                          const uint8_t *const *yq, const float *const *dy)
{
    float acc[X2E8_COLS][8][8] __attribute__((aligned(32)));
    for (int i = 0; i < nb; i++) {
        const uint8_t *Ei = E + (size_t)i * X2E8_BLK;
        const __m256 dx = _mm256_load_ps((const float *)(const void *)(Ei + 1024) + 8 * hf);
        __m256 d[X2E8_COLS];
        _Pragma("GCC unroll 4") for (int c = 0; c < C; c++) d[c] = _mm256_mul_ps(dx, _mm256_set1_ps(dy[c][i]));
        _Pragma("GCC unroll 8") for (int k = 0; k < 8; k++) {
            const __m256i xa = _mm256_load_si256((const __m256i *)(Ei + 128 * k + 32 * hf));
            const __m256i xb = _mm256_load_si256((const __m256i *)(Ei + 128 * k + 64 + 32 * hf));
            _Pragma("GCC unroll 4") for (int c = 0; c < C; c++) {
                const uint8_t *yc = yq[c] + 64 * (size_t)i;
                const __m256i lane = _mm256_add_epi32(
                    _mm256_madd_epi16(xa, _mm256_set1_epi32(ld_i32(yc + 4 * k))),
                    _mm256_madd_epi16(xb, _mm256_set1_epi32(ld_i32(yc + 32 + 4 * k))));
                _mm256_store_ps(acc[c][k], _mm256_fmadd_ps(d[c], _mm256_cvtepi32_ps(lane),
                                                           i ? _mm256_load_ps(acc[c][k]) : _mm256_setzero_ps()));
            }
        }
        __asm__ volatile("" : "+m"(acc));
    }
    for (int c = 0; c < C; c++) {
        __m256 a[8];
        for (int k = 0; k < 8; k++)
            a[k] = _mm256_load_ps(acc[c][k]);
        _mm256_storeu_ps(s + (size_t)c * ld_s, x16_hsum8(a));
    }
}

static void gemm_x16_q8_0_unpacked(int n, float *s, size_t ld_s, const void *w, size_t w_stride,
                                   int nr, const void *a, size_t a_stride, int nc);

/*
 * kernels.h's gemm_x16 for Q8_0 (see above): nr rows (nr % 16 == 0) x nc columns of Q8_0
 * activations.  Scratch (lc_kernel_scratch): one expanded group and the columns, (1088 + 68 nc)
 * bytes per block.
 */
static void gemm_x2e_q8_0(int n, float *s, size_t ld_s, const void *w, size_t w_stride, int nr,
                          const void *a, size_t a_stride, int nc)
{
    const int nb = n / 32, ngr = nr / 16;
    const size_t esz = (size_t)nb * X2E8_BLK, qsz = (size_t)nc * (size_t)nb * 64;
    uint8_t *mem = nb > 0 && nc >= X2E8_COLS ? lc_kernel_scratch(esz + qsz + (size_t)nc * (size_t)nb * 4) : NULL;
    if (!mem) {
        gemm_x16_q8_0_unpacked(n, s, ld_s, w, w_stride, nr, a, a_stride, nc);
        return;
    }
    uint8_t *E = mem, *Y = mem + esz;
    float *D = (float *)(void *)(mem + esz + qsz);
    for (int c = 0; c < nc; c++) {
        const lc_block_q8_0 *y = (const void *)((const uint8_t *)a + (size_t)c * a_stride);
        for (int i = 0; i < nb; i++) {
            uint8_t *o = Y + ((size_t)c * nb + i) * 64;
            const __m256i v = _mm256_loadu_si256((const __m256i *)y[i].qs);
            _mm256_store_si256((__m256i *)o, _mm256_srai_epi16(_mm256_slli_epi16(v, 8), 8));
            _mm256_store_si256((__m256i *)(o + 32), _mm256_srai_epi16(v, 8));
            D[(size_t)c * nb + i] = h2f(y[i].d);
        }
    }
    const int ntiles = (nc + X2E8_COLS - 1) / X2E8_COLS;
    const size_t glines = 16 * w_stride / 64;
    for (int g = 0; g < ngr; g++) {
        const uint8_t *G = (const uint8_t *)w + (size_t)g * 16 * w_stride;
        x2e_expand_q8_0(E, G, nb);
        for (int c0 = 0, t = 0; c0 < nc; t++) {
            if (g + 1 < ngr) /* the next group into L2, a share before each tile */
                x2e_prefetch(G + 16 * w_stride, glines * (size_t)t / (size_t)ntiles,
                             glines * (size_t)(t + 1) / (size_t)ntiles);
            const int C = nc - c0 >= X2E8_COLS ? X2E8_COLS : 1;
            const uint8_t *yq[X2E8_COLS];
            const float *dy[X2E8_COLS];
            for (int c = 0; c < C; c++) {
                yq[c] = Y + (size_t)(c0 + c) * nb * 64;
                dy[c] = D + (size_t)(c0 + c) * nb;
            }
            for (int hf = 0; hf < 2; hf++) {
                float *so = s + (size_t)c0 * ld_s + 16 * g + 8 * hf;
                if (C == X2E8_COLS)
                    x2e_q8_0_tile(X2E8_COLS, nb, so, ld_s, E, hf, yq, dy);
                else
                    x2e_q8_0_tile(1, nb, so, ld_s, E, hf, yq, dy);
            }
            c0 += C;
        }
    }
}

/*
 * Q5_1 prompt GEMM over x16 groups (gemm_x16[LC_TYPE_Q5_1]) in vec_dot_q5_1_q8_1's order (as
 * gemv_x16_q5_1): per block and row 8 integer lanes, lane L = the 4 products 4L .. 4L+3 (the
 * 5-bit q times y), acc[L] = fma(float(lane L), dx * dy, acc[L]); m * s_y summed apart in block
 * order (multiply, then add); hsum_float_8 plus that sum.  So the same bits (test-kernels).
 * Each group of 16 rows is expanded once per call (x2e_expand_q5_1: the 5-bit quants as bytes,
 * unit L = weights 4L .. 4L+3 of every row, rows 0..7 first; then dx and m as floats, 640
 * bytes per block), the columns' dy and s_y as floats once per call; tiles of 8 rows x 4
 * columns then take per lane and column a `vpmaddubsw`, a `vpmaddwd` by ones, the conversion
 * and the FMA (float accumulators in memory), without the GEMV's fifth-bit shuffles and
 * compares per column.  Fewer than 4 columns, or no scratch memory: the GEMV group by group.
 */
#define X2E5_BLK 640

/* one group (G, nb blocks of repack.h's Q5_1 x16 layout) into E, as x16_q5_1 forms the bytes */
static void x2e_expand_q5_1(uint8_t *E, const uint8_t *G, int nb)
{
    const __m256i m4 = _mm256_set1_epi8(0x0F), m10 = _mm256_set1_epi8(0x10);
    const __m256i bit_lo = _mm256_set1_epi32(0x08040201), bit_hi = _mm256_set1_epi32((int)0x80402010);
    const __m256i dw = _mm256_setr_epi32(0, 0x04040404, 0x08080808, 0x0C0C0C0C, 0, 0x04040404,
                                         0x08080808, 0x0C0C0C0C);
    for (int i = 0; i < nb; i++) {
        const uint8_t *B = G + lc_x16_part_off(LC_TYPE_Q5_1, i, LC_X16_P_D);
        uint8_t *Ei = E + (size_t)i * X2E5_BLK;
        _Pragma("GCC unroll 2") for (int hf = 0; hf < 2; hf++) {
            const __m256i qh = _mm256_loadu_si256((const __m256i *)(B + 64 + 32 * hf));
            const uint8_t *q = B + 128 + 32 * hf;
            _Pragma("GCC unroll 2") for (int pr = 0; pr < 2; pr++) {
                const __m256i hl = _mm256_shuffle_epi8(qh, _mm256_add_epi8(dw, _mm256_set1_epi8((char)pr)));
                const __m256i hh = _mm256_shuffle_epi8(qh, _mm256_add_epi8(dw, _mm256_set1_epi8((char)(2 + pr))));
                _Pragma("GCC unroll 2") for (int kk = 0; kk < 2; kk++) {
                    const int k = 2 * pr + kk;
                    const __m256i bits = kk ? bit_hi : bit_lo;
                    const __m256i v = _mm256_loadu_si256((const __m256i *)(q + 64 * k));
                    _mm256_store_si256((__m256i *)(Ei + 64 * k + 32 * hf), _mm256_or_si256(
                        _mm256_and_si256(v, m4),
                        _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(hl, bits), bits), m10)));
                    _mm256_store_si256((__m256i *)(Ei + 64 * (4 + k) + 32 * hf), _mm256_or_si256(
                        _mm256_and_si256(_mm256_srli_epi16(v, 4), m4),
                        _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(hh, bits), bits), m10)));
                }
            }
            _mm256_store_ps((float *)(void *)(Ei + 512) + 8 * hf,
                            _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(B + 16 * hf))));
            _mm256_store_ps((float *)(void *)(Ei + 576) + 8 * hf,
                            _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(B + 32 + 16 * hf))));
        }
    }
}

#define X2E5_COLS 4
/* rows 8 hf .. 8 hf + 7 of the expanded group E (nb blocks) x C columns y[c] (ds[c]: their
 * {dy, s_y} per block); outputs to s + c * ld_s */
INLINE void x2e_q5_1_tile(const int C, int nb, float *s, size_t ld_s, const uint8_t *E, int hf,
                          const lc_block_q8_1 *const *y, const float (*const *ds)[2])
{
    const __m256i ones = _mm256_set1_epi16(1);
    float acc[X2E5_COLS][8][8] __attribute__((aligned(32)));
    float ms[X2E5_COLS][8] __attribute__((aligned(32)));
    for (int i = 0; i < nb; i++) {
        const uint8_t *Ei = E + (size_t)i * X2E5_BLK;
        const __m256 dx = _mm256_load_ps((const float *)(const void *)(Ei + 512) + 8 * hf);
        const __m256 mx = _mm256_load_ps((const float *)(const void *)(Ei + 576) + 8 * hf);
        __m256 d[X2E5_COLS];
        _Pragma("GCC unroll 4") for (int c = 0; c < C; c++) {
            d[c] = _mm256_mul_ps(dx, _mm256_set1_ps(ds[c][i][0]));
            const __m256 m = _mm256_mul_ps(mx, _mm256_set1_ps(ds[c][i][1]));
            _mm256_store_ps(ms[c], i ? _mm256_add_ps(_mm256_load_ps(ms[c]), m) : _mm256_add_ps(_mm256_setzero_ps(), m));
        }
        _Pragma("GCC unroll 8") for (int L = 0; L < 8; L++) {
            const __m256i w = _mm256_load_si256((const __m256i *)(Ei + 64 * L + 32 * hf));
            _Pragma("GCC unroll 4") for (int c = 0; c < C; c++) {
                const __m256i lane = _mm256_madd_epi16(
                    _mm256_maddubs_epi16(w, _mm256_set1_epi32(ld_i32(y[c][i].qs + 4 * L))), ones);
                _mm256_store_ps(acc[c][L], _mm256_fmadd_ps(_mm256_cvtepi32_ps(lane), d[c],
                                                           i ? _mm256_load_ps(acc[c][L]) : _mm256_setzero_ps()));
            }
        }
        __asm__ volatile("" : "+m"(acc), "+m"(ms));
    }
    for (int c = 0; c < C; c++) {
        __m256 a[8];
        for (int L = 0; L < 8; L++)
            a[L] = _mm256_load_ps(acc[c][L]);
        _mm256_storeu_ps(s + (size_t)c * ld_s, _mm256_add_ps(x16_hsum8(a), _mm256_load_ps(ms[c])));
    }
}

/*
 * kernels.h's gemm_x16 for Q5_1 (see above): nr rows (nr % 16 == 0) x nc columns of Q8_1
 * activations.  Scratch (lc_kernel_scratch): one expanded group and the column scales, (640 + 8 nc)
 * bytes per block.
 */
static void gemm_x2e_q5_1(int n, float *s, size_t ld_s, const void *w, size_t w_stride, int nr,
                          const void *a, size_t a_stride, int nc)
{
    const int nb = n / 32, ngr = nr / 16;
    const size_t esz = (size_t)nb * X2E5_BLK;
    uint8_t *mem = nb > 0 && nc >= X2E5_COLS ? lc_kernel_scratch(esz + (size_t)nc * (size_t)nb * sizeof(float[2])) : NULL;
    if (!mem) {
        gemm_x16_q5_1(n, s, ld_s, w, w_stride, nr, a, a_stride, nc);
        return;
    }
    uint8_t *E = mem;
    float(*DS)[2] = (float(*)[2])(void *)(mem + esz);
    for (int c = 0; c < nc; c++) {
        const lc_block_q8_1 *y = (const void *)((const uint8_t *)a + (size_t)c * a_stride);
        for (int i = 0; i < nb; i++) {
            DS[(size_t)c * nb + i][0] = h2f(y[i].d);
            DS[(size_t)c * nb + i][1] = h2f(y[i].s);
        }
    }
    const int ntiles = (nc + X2E5_COLS - 1) / X2E5_COLS;
    const size_t glines = 16 * w_stride / 64;
    for (int g = 0; g < ngr; g++) {
        const uint8_t *G = (const uint8_t *)w + (size_t)g * 16 * w_stride;
        x2e_expand_q5_1(E, G, nb);
        for (int c0 = 0, t = 0; c0 < nc; t++) {
            if (g + 1 < ngr) /* the next group into L2, a share before each tile */
                x2e_prefetch(G + 16 * w_stride, glines * (size_t)t / (size_t)ntiles,
                             glines * (size_t)(t + 1) / (size_t)ntiles);
            const int C = nc - c0 >= X2E5_COLS ? X2E5_COLS : 1;
            const lc_block_q8_1 *y[X2E5_COLS];
            const float(*ds[X2E5_COLS])[2];
            for (int c = 0; c < C; c++) {
                y[c] = (const void *)((const uint8_t *)a + (size_t)(c0 + c) * a_stride);
                ds[c] = DS + (size_t)(c0 + c) * nb;
            }
            for (int hf = 0; hf < 2; hf++) {
                float *so = s + (size_t)c0 * ld_s + 16 * g + 8 * hf;
                if (C == X2E5_COLS)
                    x2e_q5_1_tile(X2E5_COLS, nb, so, ld_s, E, hf, y, ds);
                else
                    x2e_q5_1_tile(1, nb, so, ld_s, E, hf, y, ds);
            }
            c0 += C;
        }
    }
}

/*
 * Q8_0 prompt batches from the x16 layout: each group of 16 rows is rebuilt in ggml's layout
 * (a 4 x 4 dword transpose per 4 rows and 16 bytes) in a buffer of 16 rows, then multiplied by
 * x86-qdot.h's tiles (gemm_q8_0, ggml's layout's kernel: its bits, its speed, which the GEMV per
 * column does not reach); AVX2's pk tile cannot take Q8_0 (x + 128 overflows vpmaddubsw's
 * pairs).  Without memory for the buffer (16 * w_stride bytes from malloc: 34 KB for n = 2048),
 * group by group through the GEMV, same results.
 */
static void gemm_x16_q8_0_unpacked(int n, float *s, size_t ld_s, const void *w, size_t w_stride,
                                   int nr, const void *a, size_t a_stride, int nc)
{
    const int nb = n / 32;
    uint8_t *buf = malloc(16 * w_stride);
    if (!buf) {
        gemm_x16_q8_0(n, s, ld_s, w, w_stride, nr, a, a_stride, nc);
        return;
    }
    for (int g = 0; g < nr / 16; g++) {
        const uint8_t *G = (const uint8_t *)w + (size_t)g * 16 * w_stride;
        for (int i = 0; i < nb; i++) {
            const uint8_t *B = G + lc_x16_part_off(LC_TYPE_Q8_0, i, LC_X16_P_D);
            for (int sub = 0; sub < 16; sub += 4) {
                const uint8_t *q = B + 32 + 4 * sub;
                __m128i lo[4], hi[4];
                pk_transpose4(_mm_loadu_si128((const __m128i *)q), _mm_loadu_si128((const __m128i *)(q + 64)),
                              _mm_loadu_si128((const __m128i *)(q + 128)),
                              _mm_loadu_si128((const __m128i *)(q + 192)), lo);
                pk_transpose4(_mm_loadu_si128((const __m128i *)(q + 256)),
                              _mm_loadu_si128((const __m128i *)(q + 320)),
                              _mm_loadu_si128((const __m128i *)(q + 384)),
                              _mm_loadu_si128((const __m128i *)(q + 448)), hi);
                for (int r = 0; r < 4; r++) {
                    lc_block_q8_0 *x = (lc_block_q8_0 *)(void *)(buf + (size_t)(sub + r) * w_stride) + i;
                    memcpy(&x->d, B + 2 * (sub + r), sizeof x->d);
                    _mm_storeu_si128((__m128i *)x->qs, lo[r]);
                    _mm_storeu_si128((__m128i *)(x->qs + 16), hi[r]);
                }
            }
        }
        gemm_q8_0(n, s + 16 * g, ld_s, buf, w_stride, 16, a, a_stride, nc);
    }
    free(buf);
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

/*
 * Q8_K activations (the K-quants' vec_dot_type) as lc_quantize_row_q8_K_ref (ggml's
 * quantize_row_q8_K_ref): per super-block of 256, max = the first x of largest |x|, iscale =
 * -127 / max, q = min(127, nearest_int(iscale * x)) by the same magic-number rounding (a
 * multiply, then an add: no FMA), bsums per 16, d = 1 / iscale; all zero when every |x| is 0.
 * The same bytes (test-kernels' check_quantize_stress: ties of |max|, -0.0, near-halves).
 * n a multiple of 256; y: n / 256 blocks.
 */
static void quantize_row_q8_K(const float *x, void *vy, int64_t n)
{
    lc_block_q8_K *y = vy;
    const __m256 sign = _mm256_set1_ps(-0.0f), magic = _mm256_set1_ps(12582912.f);
    const __m256i mant = _mm256_set1_epi32(0x007fffff), half = _mm256_set1_epi32(0x00400000);
    const __m256i m127 = _mm256_set1_epi32(127);
    for (int64_t i = 0; i < n / LC_QK_K; i++, x += LC_QK_K) {
        /* max(|x|, am): a NaN |x| leaves am, as the reference's (ax > amax) */
        __m256 am = _mm256_setzero_ps();
        for (int j = 0; j < LC_QK_K / 8; j++)
            am = _mm256_max_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(x + 8 * j)), am);
        __m128 m4 = _mm_max_ps(_mm256_extractf128_ps(am, 1), _mm256_castps256_ps128(am));
        m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
        const float amax = _mm_cvtss_f32(m4);
        if (amax == 0.0f) {
            memset(&y[i], 0, sizeof y[i]);
            continue;
        }
        float max = 0.0f;
        for (int j = 0; j < LC_QK_K / 8; j++) {
            const int eq = _mm256_movemask_ps(_mm256_cmp_ps(
                _mm256_andnot_ps(sign, _mm256_loadu_ps(x + 8 * j)), _mm256_set1_ps(amax), _CMP_EQ_OQ));
            if (eq) {
                max = x[8 * j + __builtin_ctz((unsigned)eq)];
                break;
            }
        }
        const float iscale = -127.f / max;
        const __m256 vs = _mm256_set1_ps(iscale);
        for (int j = 0; j < LC_QK_K / 32; j++) {
            __m256i q[4];
            _Pragma("GCC unroll 4") for (int t = 0; t < 4; t++) {
                const __m256 v = _mm256_add_ps(_mm256_mul_ps(vs, _mm256_loadu_ps(x + 32 * j + 8 * t)), magic);
                q[t] = _mm256_min_epi32(_mm256_sub_epi32(_mm256_and_si256(_mm256_castps_si256(v), mant), half), m127);
                /* the reference's (int8_t) cast: |q| <= 127 whenever iscale is finite, but a
                 * block whose |max| is below ~3.7e-37 overflows iscale to inf and q to
                 * -4194304, which the cast wraps to 0 (and bsums sum the wrapped bytes) */
                q[t] = _mm256_srai_epi32(_mm256_slli_epi32(q[t], 24), 24);
            }
            /* now -128 <= q <= 127, so the saturating packs change nothing; packs work per
             * 128-bit lane: dword order 0 4 1 5 2 6 3 7 */
            y[i].bsums[2 * j] = (int16_t)hsum_epi32(_mm256_add_epi32(q[0], q[1]));
            y[i].bsums[2 * j + 1] = (int16_t)hsum_epi32(_mm256_add_epi32(q[2], q[3]));
            const __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
            _mm256_storeu_si256((__m256i *)(y[i].qs + 32 * j),
                                _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
        }
        y[i].d = 1 / iscale;
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

/* ---------------------------------------------------------------- Q6_K . Q8_K */

/*
 * As ggml's AVX2 ggml_vec_dot_q6_K_q8_K (see scalar.c for the layout and the order): each
 * 32-weight quarter is rebuilt as unsigned 6-bit values q, multiplied with the activations by
 * maddubs, and 32 * activations (maddubs again) subtracted, which is (q - 32) * y in pairs; madd
 * with the quarter's two scales widened to 16 bits sums four products per 32-bit lane.
 */
static void vec_dot_q6_K_q8_K(int n, float *s, const void *vx, const void *vy)
{
    const lc_block_q6_K *x = vx;
    const lc_block_q8_K *y = vy;
    const int nb = n / LC_QK_K;
    const __m256i m4 = _mm256_set1_epi8(0x0F), m2 = _mm256_set1_epi8(3);
    const __m256i m32s = _mm256_set1_epi8(32);
    __m256 acc = _mm256_setzero_ps();
    for (int i = 0; i < nb; i++) {
        const float d = y[i].d * h2f(x[i].d);
        const uint8_t *ql = x[i].ql, *qh = x[i].qh;
        const int8_t *q8 = y[i].qs;
        const __m128i scales = _mm_loadu_si128((const __m128i *)x[i].scales);
        __m256i sumi = _mm256_setzero_si256();
        for (int h = 0; h < 2; h++, ql += 64, qh += 32, q8 += 128) {
            const __m256i b1 = _mm256_loadu_si256((const __m256i *)ql);
            const __m256i b2 = _mm256_loadu_si256((const __m256i *)(ql + 32));
            const __m256i bh = _mm256_loadu_si256((const __m256i *)qh);
            __m256i q[4];
            q[0] = _mm256_or_si256(_mm256_and_si256(b1, m4),
                                   _mm256_slli_epi16(_mm256_and_si256(bh, m2), 4));
            q[1] = _mm256_or_si256(_mm256_and_si256(b2, m4),
                                   _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(bh, 2), m2), 4));
            q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(b1, 4), m4),
                                   _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(bh, 4), m2), 4));
            q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(b2, 4), m4),
                                   _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(bh, 6), m2), 4));
            for (int v = 0; v < 4; v++) {
                const __m256i y8 = _mm256_loadu_si256((const __m256i *)(q8 + 32 * v));
                const __m256i p16 =
                    _mm256_sub_epi16(_mm256_maddubs_epi16(q[v], y8), _mm256_maddubs_epi16(m32s, y8));
                const int k = 8 * h + 2 * v; /* scales k (weights 0..15) and k + 1 (16..31) */
                const __m128i idx = _mm_unpacklo_epi64(_mm_set1_epi8((char)k), _mm_set1_epi8((char)(k + 1)));
                const __m256i sc = _mm256_cvtepi8_epi16(_mm_shuffle_epi8(scales, idx));
                sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(sc, p16));
            }
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
    }
    *s = hsum_ps(acc);
}

/* ---------------------------------------------------------------- float kernels */

/*
 * Float dots in llama.cpp's x86 order (see scalar.c), its 16-lane vectors held as two 8-lane
 * halves (lo = lanes 0..7, hi = 8..15).
 */
INLINE __m256 load_h8(const lc_fp16 *p)
{
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
}

/* _mm512_reduce_add_ps's order (GCC): halves, then quarters, then (0 + 2) + (1 + 3) */
INLINE float reduce16(__m256 lo, __m256 hi)
{
    const __m256 t3 = _mm256_add_ps(hi, lo);
    const __m128 t6 = _mm_add_ps(_mm256_extractf128_ps(t3, 1), _mm256_castps256_ps128(t3));
    const __m128 t8 = _mm_add_ps(t6, _mm_movehl_ps(t6, t6));
    return _mm_cvtss_f32(_mm_add_ss(t8, _mm_movehdup_ps(t8)));
}

#define LOAD_F32(p) _mm256_loadu_ps(p)
#define DEFINE_FLOAT_DOT(NAME, T, LOADV, LEFTOVER, TINY)                                          \
    static float NAME(const T *x, const T *y, int n)                                              \
    {                                                                                             \
        if (TINY && n % 16 == 0) {                                                                \
            __m256 lo = _mm256_setzero_ps(), hi = lo;                                             \
            for (int i = 0; i < n; i += 16) {                                                     \
                lo = _mm256_fmadd_ps(LOADV(x + i), LOADV(y + i), lo);                             \
                hi = _mm256_fmadd_ps(LOADV(x + i + 8), LOADV(y + i + 8), hi);                     \
            }                                                                                     \
            return reduce16(lo, hi);                                                              \
        }                                                                                         \
        const int np = n & ~63;                                                                   \
        __m256 v[8];                                                                              \
        for (int k = 0; k < 8; k++)                                                               \
            v[k] = _mm256_setzero_ps();                                                           \
        for (int i = 0; i < np; i += 64)                                                          \
            for (int k = 0; k < 8; k++)                                                           \
                v[k] = _mm256_fmadd_ps(LOADV(x + i + 8 * k), LOADV(y + i + 8 * k), v[k]);         \
        /* 16-lane vector k is (v[2k], v[2k+1]); (v0 + v2) + (v1 + v3) */                         \
        const __m256 lo = _mm256_add_ps(_mm256_add_ps(v[0], v[4]), _mm256_add_ps(v[2], v[6]));    \
        const __m256 hi = _mm256_add_ps(_mm256_add_ps(v[1], v[5]), _mm256_add_ps(v[3], v[7]));    \
        LEFTOVER(reduce16(lo, hi), x, y, np, n);                                                  \
    }

#define LEFTOVER_F32(r, x, y, np, n)                                                              \
    float sum = r;                                                                                \
    for (int i = np; i < n; i++)                                                                  \
        sum = fmaf(x[i], y[i], sum);                                                              \
    return sum
#define LEFTOVER_F16(r, x, y, np, n)                                                              \
    double sum = (double)(r);                                                                     \
    for (int i = np; i < n; i++)                                                                  \
        sum += (double)(h2f(x[i]) * h2f(y[i]));                                                   \
    return (float)sum

/* dot_*: ggml_vec_dot's order (one token); tiny_dot_*: tinyBLAS's (batches), see scalar.c */
DEFINE_FLOAT_DOT(dot_f32, float, LOAD_F32, LEFTOVER_F32, 0)
DEFINE_FLOAT_DOT(dot_f16, lc_fp16, load_h8, LEFTOVER_F16, 0)
DEFINE_FLOAT_DOT(tiny_dot_f32, float, LOAD_F32, LEFTOVER_F32, 1)
DEFINE_FLOAT_DOT(tiny_dot_f16, lc_fp16, load_h8, LEFTOVER_F16, 1)

/*
 * dot_f16_rows_multi (kernels.h) in dot_f16's order above: the queries are widened to F32 once
 * (exact), so each product is the one dot_f16 forms, and the sums are its sums.  Rows of at
 * most one 64-element chunk (the keys of heads up to 127 wide) are widened once for every
 * query (the 16 registers hold the row's 8 vectors and one query's 8 products); longer rows
 * (values) take one query at a time with its 8 accumulators, the row widened per query,
 * fetched ROWS_PF elements ahead (into the next row's first n near the end: rows n_ctx apart
 * start a page each when n_ctx >= 2048, where the hardware prefetcher stops).
 */
#define ROWS_PF 1024

/* w[0..n) = y[0..n) widened to F32 (exact); returns w */
static const float *widen_h8(float *w, const lc_fp16 *y, int n)
{
    int e = 0;
    for (; e + 8 <= n; e += 8)
        _mm256_storeu_ps(w + e, load_h8(y + e));
    for (; e < n; e++)
        w[e] = h2f(y[e]);
    return w;
}

static void dot_f16_rows_multi(float *const *s, const lc_fp16 *x, size_t x_stride, int nr,
                               const lc_fp16 *const *y, int ny, int n, float *work)
{
    const int np = n & ~63;
    const bool short_rows = np <= 64;
    const float *y32[LC_ROWS_MULTI_MAX];
    /* all queries widened for short rows (n <= 127), one at a time into work for long ones */
    for (int j = 0; j < (short_rows ? ny : 0); j++)
        y32[j] = widen_h8(work + (size_t)j * (size_t)n, y[j], n);
    const __m256 z = _mm256_setzero_ps();
    if (short_rows) {
        const size_t row_bytes = (size_t)n * sizeof(lc_fp16);
        for (int r = 0; r < nr; r++) {
            const lc_fp16 *xr = x + (size_t)r * x_stride;
            if (r + 16 < nr)   /* the keys are rows a cache stride apart */
                for (size_t o = 0; o < row_bytes; o += 64)
                    _mm_prefetch((const char *)(xr + 16 * x_stride) + o, _MM_HINT_T0);
            __m256 xv[8];
            for (int k = 0; k < 8; k++)
                xv[k] = np ? load_h8(xr + 8 * k) : z;
            for (int j = 0; j < ny; j++) {
                float r0 = 0.0f;
                if (np) {
                    __m256 v[8];
                    for (int k = 0; k < 8; k++)
                        v[k] = _mm256_fmadd_ps(xv[k], _mm256_loadu_ps(y32[j] + 8 * k), z);
                    const __m256 lo = _mm256_add_ps(_mm256_add_ps(v[0], v[4]), _mm256_add_ps(v[2], v[6]));
                    const __m256 hi = _mm256_add_ps(_mm256_add_ps(v[1], v[5]), _mm256_add_ps(v[3], v[7]));
                    r0 = reduce16(lo, hi);
                } else {
                    r0 = reduce16(z, z);
                }
                double sum = (double)r0;
                for (int e = np; e < n; e++)
                    sum += (double)(h2f(xr[e]) * y32[j][e]);
                s[j][r] = (float)sum;
            }
        }
        return;
    }
    for (int j = 0; j < ny; j++) {
        const float *yj = widen_h8(work, y[j], n);
        for (int r = 0; r < nr; r++) {
            const lc_fp16 *xr = x + (size_t)r * x_stride;
            __m256 v[8];
            for (int k = 0; k < 8; k++)
                v[k] = z;
            for (int c = 0; c < np; c += 64) {
                if (c + ROWS_PF < n || (r + 1 < nr && c + ROWS_PF - n < n)) {
                    const lc_fp16 *pf = c + ROWS_PF < n ? xr + c + ROWS_PF : xr + x_stride + (c + ROWS_PF - n);
                    _mm_prefetch((const char *)pf, _MM_HINT_T0);
                    _mm_prefetch((const char *)(pf + 32), _MM_HINT_T0);
                }
                for (int k = 0; k < 8; k++)
                    v[k] = _mm256_fmadd_ps(load_h8(xr + c + 8 * k), _mm256_loadu_ps(yj + c + 8 * k), v[k]);
            }
            const __m256 lo = _mm256_add_ps(_mm256_add_ps(v[0], v[4]), _mm256_add_ps(v[2], v[6]));
            const __m256 hi = _mm256_add_ps(_mm256_add_ps(v[1], v[5]), _mm256_add_ps(v[3], v[7]));
            double sum = (double)reduce16(lo, hi);
            for (int e = np; e < n; e++)
                sum += (double)(h2f(xr[e]) * yj[e]);
            s[j][r] = (float)sum;
        }
    }
}

#include "float-rows.h"

/*
 * The F16 gemm entry for two columns or more (kernels.h; attention's prompt batches, context.c's
 * attention_batch, and F16 weights): x86-avx512.c's gemm_f16_cols with 8-lane halves.  Each block
 * of F16X_R rows is widened to F32 once per chunk of F16X_KC elements into the thread's scratch
 * (lc_kernel_scratch), step-major (the rows' 16 elements of step k side by side), and serves every
 * column: per column and step two widened activation vectors and 2 F16X_R FMAs from L1 instead of
 * 2 F16X_R + 2 conversions.  Each output keeps tiny_dot_f16's order: lo and hi accumulators from
 * k = 0, then reduce16 -- the same bits.  Rows longer than a chunk keep the accumulators of
 * F16X_CB columns between chunks in the scratch; a column's trailing zeros are skipped when the
 * chunk's rows are finite (fma(x, 0, acc) == acc; see x86-avx512.c).  n % 16 != 0, one column, or
 * no scratch memory: float-rows.h's gemm_f16.
 */
#define F16X_R 6    /* rows per block: 12 accumulators + 2 activation vectors of the 16 registers */
#define F16X_KC 256 /* elements of a row chunk: 6 KB widened */
#define F16X_CB 32  /* columns per pass over rows longer than a chunk: 12 KB of partial sums */
#define F16X_SCRATCH ((size_t)F16X_R * F16X_KC * sizeof(float) + (size_t)F16X_CB * 16 * F16X_R * sizeof(float))

static void gemm_f16_cols(int n, float *s, size_t ld_s, const void *w, size_t w_stride, int nr,
                          const void *a, size_t a_stride, int nc, float *X, float *part)
{
    const int cb = n > F16X_KC ? F16X_CB : nc;
    const __m256 z = _mm256_setzero_ps();
    for (int c0 = 0; c0 < nc; c0 += cb) {
        const int c1 = nc - c0 < cb ? nc : c0 + cb;
        for (int r = 0; r < nr; r += F16X_R) {
            const int rows = nr - r < F16X_R ? nr - r : F16X_R;
            const char *x0 = (const char *)w + (size_t)r * w_stride;
            for (int k0 = 0; k0 < n; k0 += F16X_KC) {
                const int kc = n - k0 < F16X_KC ? n - k0 : F16X_KC;
                const bool last = k0 + kc == n;
                /* x * 0 is +-0 for finite x, NaN otherwise; OR-ed, a NaN iff one was */
                __m256 probe = z;
                for (int i = 0; i < F16X_R; i++) {
                    const lc_fp16 *xi = (const lc_fp16 *)(const void *)(x0 + (size_t)i * w_stride) + k0;
                    float *d = X + 16 * i;
                    for (int k = 0; k < kc; k += 16) {
                        const __m256 lo = i < rows ? load_h8(xi + k) : z;
                        const __m256 hi = i < rows ? load_h8(xi + k + 8) : z;
                        probe = _mm256_or_ps(probe, _mm256_or_ps(_mm256_mul_ps(lo, z), _mm256_mul_ps(hi, z)));
                        _mm256_store_ps(d + F16X_R * k, lo);
                        _mm256_store_ps(d + F16X_R * k + 8, hi);
                    }
                }
                const bool nonfinite = _mm256_movemask_ps(_mm256_cmp_ps(probe, probe, _CMP_UNORD_Q)) != 0;
                for (int c = c0; c < c1; c++) {
                    const lc_fp16 *y = (const lc_fp16 *)(const void *)((const char *)a + (size_t)c * a_stride) + k0;
                    float *pc = part + (size_t)(c - c0) * 16 * F16X_R;
                    __m256 acc[2 * F16X_R];
#pragma GCC unroll 12
                    for (int j = 0; j < 2 * F16X_R; j++)
                        acc[j] = k0 ? _mm256_load_ps(pc + 8 * j) : z;
                    int kend = kc;
                    while (!nonfinite && kend > 0 &&
                           _mm256_testz_si256(_mm256_loadu_si256((const __m256i *)(y + kend - 16)),
                                              _mm256_set1_epi16(0x7FFF)))
                        kend -= 16;
                    const float *xk = X;
                    for (int k = 0; k < kend; k += 16, xk += 16 * F16X_R) {
                        const __m256 ylo = load_h8(y + k), yhi = load_h8(y + k + 8);
#pragma GCC unroll 6
                        for (int i = 0; i < F16X_R; i++) {
                            acc[2 * i] = _mm256_fmadd_ps(_mm256_load_ps(xk + 16 * i), ylo, acc[2 * i]);
                            acc[2 * i + 1] = _mm256_fmadd_ps(_mm256_load_ps(xk + 16 * i + 8), yhi, acc[2 * i + 1]);
                        }
                    }
                    if (!last) {
#pragma GCC unroll 12
                        for (int j = 0; j < 2 * F16X_R; j++)
                            _mm256_store_ps(pc + 8 * j, acc[j]);
                    } else {
                        float *sc = s + (size_t)c * ld_s + r;
                        for (int i = 0; i < rows; i++)
                            sc[i] = reduce16(acc[2 * i], acc[2 * i + 1]);
                    }
                }
            }
        }
    }
}

static void gemm_f16_x(int n, float *s, size_t ld_s, const void *w, size_t w_stride, int nr,
                       const void *a, size_t a_stride, int nc)
{
    if (n % 16 == 0 && nc > 1 && nr > 0) {
        float *X = (float *)(void *)lc_kernel_scratch(F16X_SCRATCH);
        if (X) {
            gemm_f16_cols(n, s, ld_s, w, w_stride, nr, a, a_stride, nc, X, X + F16X_R * F16X_KC);
            return;
        }
    }
    gemm_f16(n, s, ld_s, w, w_stride, nr, a, a_stride, nc);
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

/* The fused-attention steps (kernels.h): per element, so any width gives the same bits. */
static void mad_f16(lc_fp16 *y, float v, const lc_fp16 *x, int n)
{
    const __m256 vv = _mm256_set1_ps(v);
    int i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(y + i),
                         _mm256_cvtps_ph(_mm256_fmadd_ps(load_h8(x + i), vv, load_h8(y + i)), 0));
    for (; i < n; i++)
        y[i] = _cvtss_sh(fmaf(h2f(x[i]), v, h2f(y[i])), 0);
}

static void scale_f16(lc_fp16 *y, float v, int n)
{
    const __m256 vv = _mm256_set1_ps(v);
    int i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(y + i), _mm256_cvtps_ph(_mm256_mul_ps(load_h8(y + i), vv), 0));
    for (; i < n; i++)
        y[i] = _cvtss_sh(h2f(y[i]) * v, 0);
}

static void mad_f32(float *y, float v, const float *x, int n)
{
    const __m256 vv = _mm256_set1_ps(v);
    int i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_fmadd_ps(_mm256_loadu_ps(x + i), vv, _mm256_loadu_ps(y + i)));
    for (; i < n; i++)
        y[i] = fmaf(x[i], v, y[i]);
}


/*
 * mad_f16_rows / mad_f32_rows (kernels.h): 32 elements of up to 2 heads' accumulators in 8
 * registers while the rows stream by, each row's 32 elements widened once; one fused
 * multiply-add per element and row, in row order (scalar.c's bits).  The n % 8 last elements
 * one by one, in the same order.
 */
INLINE void mad_rows_block(float *const *y, const float *const *p, const void *x, size_t x_stride,
                           bool f16, int nr, int i0, const int M, const int NV)
{
    __m256 acc[2][4];
    for (int j = 0; j < M; j++)
        for (int v = 0; v < NV; v++)
            acc[j][v] = _mm256_loadu_ps(y[j] + i0 + 8 * v);
    for (int r = 0; r < nr; r++) {
        __m256 xv[4];
        for (int v = 0; v < NV; v++)
            xv[v] = f16 ? load_h8((const lc_fp16 *)x + (size_t)r * x_stride + (size_t)(i0 + 8 * v))
                        : _mm256_loadu_ps((const float *)x + (size_t)r * x_stride + (size_t)(i0 + 8 * v));
        for (int j = 0; j < M; j++) {
            const __m256 pj = _mm256_set1_ps(p[j][r]);
            for (int v = 0; v < NV; v++)
                acc[j][v] = _mm256_fmadd_ps(xv[v], pj, acc[j][v]);
        }
    }
    for (int j = 0; j < M; j++)
        for (int v = 0; v < NV; v++)
            _mm256_storeu_ps(y[j] + i0 + 8 * v, acc[j][v]);
}

static void mad_rows(float *const *y, int ny, const float *const *p, const void *x,
                     size_t x_stride, bool f16, int nr, int n)
{
    const int n8 = n & ~7;
    for (int j0 = 0; j0 < ny; j0 += 2) {
        const int m = ny - j0 < 2 ? ny - j0 : 2;
        int i0 = 0;
        for (; i0 + 32 <= n8; i0 += 32)
            if (m == 2)
                mad_rows_block(y + j0, p + j0, x, x_stride, f16, nr, i0, 2, 4);
            else
                mad_rows_block(y + j0, p + j0, x, x_stride, f16, nr, i0, 1, 4);
        for (; i0 < n8; i0 += 8)
            if (m == 2)
                mad_rows_block(y + j0, p + j0, x, x_stride, f16, nr, i0, 2, 1);
            else
                mad_rows_block(y + j0, p + j0, x, x_stride, f16, nr, i0, 1, 1);
    }
    for (int i = n8; i < n; i++)
        for (int r = 0; r < nr; r++) {
            const float xf = f16 ? h2f(((const lc_fp16 *)x)[(size_t)r * x_stride + (size_t)i])
                                 : ((const float *)x)[(size_t)r * x_stride + (size_t)i];
            for (int j = 0; j < ny; j++)
                y[j][i] = fmaf(xf, p[j][r], y[j][i]);
        }
}

static void mad_f16_rows(float *const *y, int ny, const float *const *p, const lc_fp16 *x,
                         size_t x_stride, int nr, int n)
{
    mad_rows(y, ny, p, x, x_stride, true, nr, n);
}

static void mad_f32_rows(float *const *y, int ny, const float *const *p, const float *x,
                         size_t x_stride, int nr, int n)
{
    mad_rows(y, ny, p, x, x_stride, false, nr, n);
}

/* ---------------------------------------------------------------- quantizer search (Q4_1/Q5_1) */

/* qsearch-lanes.h with 8 blocks a vector; F16C rounds to F16 as lc_fp32_to_fp16 does (to
 * nearest even, subnormals, overflow to inf), so the lanes give scalar.c's bits. */
#define VL 8
typedef float qs_vf __attribute__((vector_size(4 * VL)));
typedef int32_t qs_vi __attribute__((vector_size(4 * VL)));

static inline qs_vf qs_sqrt(qs_vf v)
{
    return (qs_vf)_mm256_sqrt_ps((__m256)v);
}

static inline qs_vf qs_gather32(const float *p)
{
    return (qs_vf)_mm256_i32gather_ps(p, _mm256_setr_epi32(0, 32, 64, 96, 128, 160, 192, 224), 4);
}

static inline qs_vf qs_round_f16(qs_vf v, qs_vi *bits)
{
    const __m128i h = _mm256_cvtps_ph((__m256)v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    *bits = (qs_vi)_mm256_cvtepu16_epi32(h);
    return (qs_vf)_mm256_cvtph_ps(h);
}

#include "qsearch-lanes.h"
#undef VL

const struct lc_kernels lc_kernels_avx2 = {
    .isa = "avx2",
    .vec_dot = {
        [LC_TYPE_F32] = vec_dot_f32,
        [LC_TYPE_F16] = vec_dot_f16,
        [LC_TYPE_Q4_0] = vec_dot_q4_0_q8_0,
        [LC_TYPE_Q4_1] = vec_dot_q4_1_q8_1,
        [LC_TYPE_Q8_0] = vec_dot_q8_0_q8_0,
        [LC_TYPE_Q5_0] = vec_dot_q5_0_q8_0,
        [LC_TYPE_Q5_1] = vec_dot_q5_1_q8_1,
        [LC_TYPE_IQ4_NL] = vec_dot_iq4_nl_q8_0,
        [LC_TYPE_Q2_K] = vec_dot_q2_K_q8_K,
        [LC_TYPE_Q3_K] = vec_dot_q3_K_q8_K,
        [LC_TYPE_Q4_K] = vec_dot_q4_K_q8_K,
        [LC_TYPE_Q5_K] = vec_dot_q5_K_q8_K,
        [LC_TYPE_IQ4_XS] = vec_dot_iq4_xs_q8_K,
        [LC_TYPE_Q6_K] = vec_dot_q6_K_q8_K,
    },
    .quantize_row = {
        [LC_TYPE_F16] = quantize_row_f16,
        [LC_TYPE_Q8_0] = quantize_row_q8_0,
        [LC_TYPE_Q8_1] = quantize_row_q8_1,
        [LC_TYPE_Q8_K] = quantize_row_q8_K,
    },
    .gemm = {
        [LC_TYPE_F32] = gemm_f32,
        [LC_TYPE_F16] = gemm_f16_x,
        [LC_TYPE_Q4_0] = pk_gemm_q4_0,
        [LC_TYPE_Q4_1] = pk_gemm_q4_1,
        [LC_TYPE_Q8_0] = gemm_q8_0,
        [LC_TYPE_IQ4_NL] = gemm_iq4_nl,
        [LC_TYPE_Q5_0] = gemm_q5_0,
        [LC_TYPE_IQ4_XS] = gemm_iq4_xs,
        [LC_TYPE_Q2_K] = gemm_q2_K,
    },
    .gemv = {
        [LC_TYPE_Q4_0] = gemv_q4_0,
        [LC_TYPE_Q4_1] = gemv_q4_1,
        [LC_TYPE_Q5_0] = gemv_q5_0,
        [LC_TYPE_IQ4_NL] = gemv_iq4_nl,
    },
    .rms_norm = rms_norm,
    .softmax = ew_softmax,
    .swiglu = ew_swiglu,
    .vec_dot_q4_0x8 = vec_dot_q4_0x8_q8_0,
    .gemm_q4_0x8 = pk_gemm_q4_0x8,
    .gemv_q4_0x8 = gemv_q4_0x8,
    .gemv_x16 = {[LC_TYPE_Q4_0] = gemv_x16_q4_0, [LC_TYPE_Q4_1] = gemv_x16_q4_1,
                 [LC_TYPE_Q6_K] = gemv_x16_q6_K, [LC_TYPE_Q4_K] = gemv_x16_q4_K,
                 [LC_TYPE_Q5_K] = gemv_x16_q5_K, [LC_TYPE_Q5_1] = gemv_x16_q5_1,
                 [LC_TYPE_Q8_0] = gemv_x16_q8_0},
    .gemm_x16 = {[LC_TYPE_Q4_0] = gemm_x2e_q4_0, [LC_TYPE_Q4_1] = gemm_x16_q4_1,
                 [LC_TYPE_Q6_K] = gemm_x2k_q6_K, [LC_TYPE_Q4_K] = gemm_x2k_q4_K,
                 [LC_TYPE_Q5_K] = gemm_x2k_q5_K, [LC_TYPE_Q5_1] = gemm_x2e_q5_1,
                 [LC_TYPE_Q8_0] = gemm_x2e_q8_0},
    .recode = {[LC_TYPE_Q5_0] = to_q8_0_q5_0, [LC_TYPE_IQ4_NL] = to_q8_0_iq4_nl,
               [LC_TYPE_Q3_K] = q3_K_to_q6_K},
    .x16_native = (1u << LC_TYPE_Q4_0) | (1u << LC_TYPE_Q4_1) | (1u << LC_TYPE_Q6_K) |
                  (1u << LC_TYPE_Q4_K) | (1u << LC_TYPE_Q5_K) | (1u << LC_TYPE_Q5_1) |
                  (1u << LC_TYPE_Q8_0),
    .dot_f32 = dot_f32,
    .dot_f16 = dot_f16,
    .dot_f16_rows_multi = dot_f16_rows_multi,
    .axpy_f16 = axpy_f16,
    .axpy_f32 = axpy_f32,
    .mad_f16 = mad_f16,
    .scale_f16 = scale_f16,
    .mad_f32 = mad_f32,
    .exp_sum = ew_exp_sum, /* ggml-order-ew.h with hardware FMA: the same bits */
    .mad_f16_rows = mad_f16_rows,
    .mad_f32_rows = mad_f32_rows,
    .qsearch_asym = qsearch_asym,
};
