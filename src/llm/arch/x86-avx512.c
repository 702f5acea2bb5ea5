/*
 * x86-avx512.c - AVX-512 (F/BW/VL/DQ) + VNNI kernels, compiled with those -m flags only.
 *
 * The quantized dots and GEMM tiles are x86-qdot.h's, with the integer part done by 256-bit
 * vpdpbusd (u8 x s8, four products summed per 32-bit lane), exactly as llama.cpp does it on these
 * machines: the golden data came from that order of float operations (see scalar.c), so the
 * blocks are not processed two per 512-bit register, which would reorder the sums.  The GEMM
 * tiles are 4 x 4 (the 32 vector registers hold the 16 accumulators).  The float dots follow
 * llama.cpp's orders with 512-bit FMAs (see scalar.c).  The quantizers but Q8_K's, and the
 * element-wise kernels not defined here, come from the AVX2 table.
 */
#include <immintrin.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"
#include "repack.h"

#define INLINE static inline __attribute__((always_inline))

/* ggml's mul_sum_us8_pairs_float with AVX512-VNNI/VL: u8 x s8, 4 bytes summed per lane */
INLINE __m256 dot_us8(__m256i ux, __m256i sy)
{
    return _mm256_cvtepi32_ps(_mm256_dpbusd_epi32(_mm256_setzero_si256(), ux, sy));
}

/* acc + (u8 x s8 products summed per 4 bytes), in 8 x s32 lanes: one vpdpbusd */
INLINE __m256i dot_us8_acc(__m256i acc, __m256i ux, __m256i sy)
{
    return _mm256_dpbusd_epi32(acc, ux, sy);
}

/* unpack_nibbles from a broadcast load, the upper copy shifted under a mask (no shuffle) */
INLINE __m256i unpack_nibbles_bcast(const uint8_t *qs)
{
    const __m256i v = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)qs));
    return _mm256_and_si256(_mm256_mask_srli_epi16(v, (__mmask16)0xFF00, v, 4),
                            _mm256_set1_epi8(0x0F));
}

#define QDOT_TILE_COLS 4 /* 4 x 4 tiles: 16 ymm accumulators of the 32 registers */
#define QDOT_VECTOR_SCALES 1
#include "x86-qdot.h"
#include "x86-kquants.h" /* Q2_K Q3_K Q4_K Q5_K IQ4_XS . Q8_K */

/* ---------------------------------------------------------------- prompt GEMM */

#include "x86-pk.h"

/* AVX-512: a 4 x 4 tile, 16 accumulators of the 32 registers; the 16 scale products of a block
 * are one 512-bit multiply */
/*
 * One 4 x 4 tile: out[r + 4c] = dot(row r, column c) for the rows in R and the columns
 * a0..a3 (blk bytes per block, quants at byte qoff of each block), C their scales.
 */
INLINE void pk_tile(enum pk_kind kind, int nb, const struct pk_rows *R, const struct pk_cols *C,
                    const uint8_t *const a[4], size_t blk, size_t qoff, float out[16])
{
    const __m512i by_col = _mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0);
    if (kind == PK_Q4_0X8) {
        pk_tile_q4_0x8(nb, R, C, a, blk, qoff, out);
        return;
    }
    __m256 acc[4][4];
    _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++)
        _Pragma("GCC unroll 4") for (int c = 0; c < 4; c++) acc[r][c] = _mm256_setzero_ps();
    __m512 ms = _mm512_setzero_ps();
    const __m512i by_col_s = _mm512_add_epi32(by_col, _mm512_set1_epi32(4));
    /*
     * The products of block i are stored one iteration ahead (pp[i & 1]) and read back as
     * broadcast memory operands of the FMAs (load ports, not 16 register permutes); a step
     * ahead so that the loads never wait for the store.
     */
    float pp[2][16] __attribute__((aligned(64)));
    _mm512_store_ps(pp[0], _mm512_mul_ps(_mm512_broadcast_f32x4(_mm_load_ps(R->d[0])),
                                         _mm512_permutexvar_ps(by_col, _mm512_castps256_ps512(
                                                                           _mm256_load_ps(C[0].ds)))));
    for (int i = 0; i < nb; i++) {
        const __m512 cds = _mm512_castps256_ps512(_mm256_load_ps(C[i].ds));
        if (i + 1 < nb)
            _mm512_store_ps(pp[(i + 1) & 1],
                            _mm512_mul_ps(_mm512_broadcast_f32x4(_mm_load_ps(R->d[i + 1])),
                                          _mm512_permutexvar_ps(by_col, _mm512_castps256_ps512(
                                                                            _mm256_load_ps(C[i + 1].ds)))));
        __asm__ volatile("" : "+m"(pp));
        const float *p = pp[i & 1];
        if (kind == PK_Q4_1)
            ms = _mm512_add_ps(ms, _mm512_mul_ps(_mm512_broadcast_f32x4(_mm_load_ps(R->m[i])),
                                                 _mm512_permutexvar_ps(by_col_s, cds)));
        __m256i x[4];
        _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++)
            x[r] = _mm256_load_si256((const __m256i *)R->q[i][r]);
        _Pragma("GCC unroll 4") for (int c = 0; c < 4; c++) {
            const __m256i y = _mm256_loadu_si256((const __m256i *)(a[c] + i * blk + qoff));
            const __m256i z = kind == PK_Q4_1
                                  ? _mm256_setzero_si256()
                                  : _mm256_load_si256((const __m256i *)C[i].bias[c]);
            _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++)
                acc[r][c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_dpbusd_epi32(z, x[r], y)),
                                            _mm256_set1_ps(p[r + 4 * c]), acc[r][c]);
        }
    }
    float msv[16] __attribute__((aligned(64)));
    _mm512_store_ps(msv, ms);
    _Pragma("GCC unroll 4") for (int c = 0; c < 4; c++)
        _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++) {
            float v = hsum_ps(acc[r][c]);
            if (kind == PK_Q4_1)
                v += msv[r + 4 * c];
            out[r + 4 * c] = v;
        }
}

DEFINE_PK_GEMM(q4_1, PK_Q4_1, gemm_q4_1)
DEFINE_PK_GEMM(q4_0, PK_Q4_0, gemm_q4_0)
DEFINE_PK_GEMM(q8_0, PK_Q8_0, gemm_q8_0)
DEFINE_PK_GEMM(q4_0x8, PK_Q4_0X8, gemm_q4_0x8_by_columns)

/* ---------------------------------------------------------------- x16 layout (repack.h) */

/*
 * Decode GEMV over x16 groups: one 32-bit lane per row, 16 rows per 512-bit register, so every
 * operation is vertical.  Per block and chunk k (rows' qs[4k..4k+3]) the low nibbles against
 * the activations y[4k..4k+3] (one broadcast dword) give ggml's integer lane k of all 16 rows
 * in one vpdpbusd, the high nibbles against y[16+4k..] lane 4+k.  Then per row exactly
 * vec_dot's float operations: Q4_1 acc[lane] = fma(float(lane), dx*dy, acc[lane]) over the
 * blocks, hsum_float_8 as ((0+4)+(2+6))+((1+5)+(3+7)) done lane-wise by 7 vector adds, plus the
 * m*s sum (multiply, then add, in block order); Q4_0 (the Q4_0x8 order) the block's integer
 * sum, minus 8 * sum(y), acc = fma(float(isum), dx*dy, acc).
 *
 * The matrix is read as one sequential stream (group after group, block after block).  On
 * Zen 4 the hardware prefetcher followed it on its own (the 1.1B Q4_1 model, one thread: 40.1
 * t/s without a software prefetch, 38.5 with 6 KB ahead into L1, 31.8 with 12 KB into L2); on
 * the Intel Xeon of BENCHMARKS.md it does not: Q4_0, Q4_1, Q5_1 and Q8_0 prefetch the stream
 * X16_PF512 bytes ahead into L2, a block's lines per block (x16_pf_lines; bench-gemv from DRAM,
 * one thread, 64-row calls as in decode, medians of 6: Q4_1 10.5 -> 13.0 GB/s, Q4_0 11.0 ->
 * 13.7, Q5_1 10.1 -> 11.7, Q8_0 11.5 -> 14.0; into L1 or 2 / 8 / 12 KB ahead no better).
 */
#ifndef X16_PF512
#define X16_PF512 4096 /* bytes ahead (0: none) */
#endif
#ifndef X16_PF_HINT
#define X16_PF_HINT _MM_HINT_T1
#endif
/* prefetch the n lines at pos + X16_PF512 of the stream at G (none at or past left, the bytes
 * from G to the end of the rows) */
INLINE void x16_pf_lines(const uint8_t *G, size_t pos, int n, size_t left)
{
    _Pragma("GCC unroll 16") for (int l = 0; l < n; l++)
        if (pos + X16_PF512 + 64 * (size_t)l < left)
            _mm_prefetch((const char *)G + pos + X16_PF512 + 64 * l, X16_PF_HINT);
}

INLINE int32_t ld_i32(const void *p)
{
    int32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* activation blocks whose scales and sums are computed once per call (8 KB of stack), not per
 * group of rows; longer rows compute them per group */
#define X16_YB_MAX 1024 /* n <= 32768; test-kernels checks 1025 blocks too */

static void gemv_x16_q4_1(int n, float *s, const void *vw, size_t w_stride, int nr,
                          const void *va)
{
    const int nb = n / 32;
    const lc_block_q8_1 *y = va;
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    float ds[X16_YB_MAX][2]; /* [dy, sy] of each activation block, once per call */
    const bool pre = nb <= X16_YB_MAX;
    for (int i = 0; pre && i < nb; i++) {
        ds[i][0] = h2f(y[i].d);
        ds[i][1] = h2f(y[i].s);
    }
    for (int g = 0; g < nr / 16; g++) {
        const uint8_t *G = (const uint8_t *)vw + (size_t)g * 16 * w_stride;
        const size_t left = (size_t)(nr / 16 - g) * 16 * w_stride;
        __m512 acc[8];
        _Pragma("GCC unroll 8") for (int k = 0; k < 8; k++) acc[k] = _mm512_setzero_ps();
        __m512 msum = _mm512_setzero_ps();
        for (int i = 0; i < nb; i++) {
            const float dy = pre ? ds[i][0] : h2f(y[i].d), sy = pre ? ds[i][1] : h2f(y[i].s);
            const uint8_t *sc = G + (size_t)i * 320; /* lc_x16_sc_off, lc_x16_qs_off */
            if (X16_PF512)
                x16_pf_lines(G, (size_t)i * 320, 5, left);
            const __m512 dx = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)sc));
            const __m512 mx = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(sc + 32)));
            const __m512 d = _mm512_mul_ps(dx, _mm512_set1_ps(dy));
            msum = _mm512_add_ps(msum, _mm512_mul_ps(mx, _mm512_set1_ps(sy)));
            const uint8_t *q = sc + 64;
            _Pragma("GCC unroll 4") for (int k = 0; k < 4; k++) {
                const __m512i v = _mm512_loadu_si512(q + 64 * k);
                const __m512i lo = _mm512_and_si512(v, m4);
                const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
                const __m512i ilo = _mm512_dpbusd_epi32(_mm512_setzero_si512(), lo,
                                                        _mm512_set1_epi32(ld_i32(y[i].qs + 4 * k)));
                const __m512i ihi = _mm512_dpbusd_epi32(_mm512_setzero_si512(), hi,
                                                        _mm512_set1_epi32(ld_i32(y[i].qs + 16 + 4 * k)));
                acc[k] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ilo), d, acc[k]);
                acc[4 + k] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ihi), d, acc[4 + k]);
            }
        }
        const __m512 h = _mm512_add_ps(
            _mm512_add_ps(_mm512_add_ps(acc[0], acc[4]), _mm512_add_ps(acc[2], acc[6])),
            _mm512_add_ps(_mm512_add_ps(acc[1], acc[5]), _mm512_add_ps(acc[3], acc[7])));
        _mm512_storeu_ps(s + 16 * g, _mm512_add_ps(h, msum));
    }
}

/*
 * Q4_1 prompt batches straight from the x16 layout: a tile of 16 rows (a group) x 2 columns.
 * Per block the group's 4 chunks are unpacked once (8 registers: low and high nibbles) and
 * serve both columns: lane k of the 16 rows for column c is one vpdpbusd against column c's
 * activation dword (ggml's integer lane, as in gemv_x16_q4_1), then acc[c][k] = fma(float(lane),
 * dx * dy_c, acc[c][k]); m * s_y summed apart (multiply, then add, in block order);
 * hsum_float_8 lane-wise at the end: vec_dot's operations, so the same bits.  A 16 x 2 tile
 * takes 16 vpdpbusd per block for 1024 products (the 4 x 4 tile of pk_gemm: 16 for 512), with
 * no unpacked copy of the rows.  The group (16 * row bytes: 20 KB for n = 2048) stays in L1/L2
 * while every column pair passes over it.
 */
INLINE void x16_q4_1_tile2(int nb, float *s, size_t ld_s, const uint8_t *G,
                           const lc_block_q8_1 *y0, const lc_block_q8_1 *y1, int two)
{
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    __m512 acc[2][8], msum[2];
    _Pragma("GCC unroll 2") for (int c = 0; c < 2; c++) {
        msum[c] = _mm512_setzero_ps();
        _Pragma("GCC unroll 8") for (int k = 0; k < 8; k++) acc[c][k] = _mm512_setzero_ps();
    }
    for (int i = 0; i < nb; i++) {
        const uint8_t *sc = G + (size_t)i * 320;
        const __m512 dx = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)sc));
        const __m512 mx = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(sc + 32)));
        __m512i lo[4], hi[4];
        _Pragma("GCC unroll 4") for (int k = 0; k < 4; k++) {
            const __m512i v = _mm512_loadu_si512(sc + 64 + 64 * k);
            lo[k] = _mm512_and_si512(v, m4);
            hi[k] = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
        }
        _Pragma("GCC unroll 2") for (int c = 0; c < 2; c++) {
            const lc_block_q8_1 *yc = (c ? y1 : y0) + i;
            const __m512 d = _mm512_mul_ps(dx, _mm512_set1_ps(h2f(yc->d)));
            msum[c] = _mm512_add_ps(msum[c], _mm512_mul_ps(mx, _mm512_set1_ps(h2f(yc->s))));
            _Pragma("GCC unroll 4") for (int k = 0; k < 4; k++) {
                const __m512i ilo = _mm512_dpbusd_epi32(_mm512_setzero_si512(), lo[k],
                                                        _mm512_set1_epi32(ld_i32(yc->qs + 4 * k)));
                const __m512i ihi = _mm512_dpbusd_epi32(_mm512_setzero_si512(), hi[k],
                                                        _mm512_set1_epi32(ld_i32(yc->qs + 16 + 4 * k)));
                acc[c][k] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ilo), d, acc[c][k]);
                acc[c][4 + k] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ihi), d, acc[c][4 + k]);
            }
        }
    }
    _Pragma("GCC unroll 2") for (int c = 0; c < 2; c++) {
        if (c == 1 && !two)
            break;
        const __m512 h = _mm512_add_ps(
            _mm512_add_ps(_mm512_add_ps(acc[c][0], acc[c][4]), _mm512_add_ps(acc[c][2], acc[c][6])),
            _mm512_add_ps(_mm512_add_ps(acc[c][1], acc[c][5]), _mm512_add_ps(acc[c][3], acc[c][7])));
        _mm512_storeu_ps(s + (size_t)c * ld_s, _mm512_add_ps(h, msum[c]));
    }
}

/*
 * The Q4_1 prompt GEMM, with the integer products and scale work that do not depend on the
 * column taken out of the column loop (the approach of ik_llama.cpp's PR #534, Q8_1_R8: a chunk
 * of rows expanded once to bytes and reused across the whole batch; here with ggml's order):
 *
 *   - Each group of 16 rows is expanded once per call into x16e blocks (640 bytes per block:
 *     n = 2048 is 40 KB, in L1; n = 5632, 110 KB, in L2): chunk k's low and high nibbles as
 *     bytes (q[2k], q[2k+1]: 16 rows x 4 bytes, the unsigned operand of vpdpbusd as it is), dx
 *     and m of the 16 rows as floats.
 *   - The activation scales dy and s_y of every column and block are converted once per call
 *     (the ds array of gemm_x16_q4_1), and read as broadcast memory operands.
 *   - The 16 x 2 tile is then only what the bits need, per block and column: 8 vpdpbusd from
 *     zero with the activation dword as a {1to16} memory operand (dpbusd_z: the zeroing is a
 *     rename-time idiom, not a copy of a zero register), 8 vcvtdq2ps, 8 FMAs, dx * dy (one
 *     multiply) and m * s_y (multiply, then add): 27 vector operations for 512 products where
 *     x16_q4_1_tile2 has about 48 (unpacking, fp16 conversions, register copies).
 *
 * The float operations per (row, column) are x16_q4_1_tile2's, i.e. vec_dot_q4_1_q8_1's: per
 * block acc[k] = fma(float(lane k), dx * dy, acc[k]) for the 8 integer lanes k (4 bytes each),
 * m * s_y summed apart in block order, hsum_float_8 as ((0+4)+(2+6))+((1+5)+(3+7)), plus the
 * m * s sum: the same bits (test-kernels compares them with the scalar vec_dot).
 */
struct x16e_blk {
    uint8_t q[8][64]; /* q[2k]: chunk k's low nibbles, q[2k + 1] its high nibbles, as bytes */
    float d[16];      /* dx of the 16 rows */
    float m[16];      /* m of the 16 rows */
};

/* one group (G, nb blocks of repack.h's Q4_1 x16 layout) into E */
static void x16e_expand_q4_1(struct x16e_blk *E, const uint8_t *G, int nb)
{
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    for (int i = 0; i < nb; i++) {
        const uint8_t *sc = G + (size_t)i * 320; /* lc_x16_sc_off, lc_x16_qs_off */
        _Pragma("GCC unroll 4") for (int k = 0; k < 4; k++) {
            const __m512i v = _mm512_loadu_si512(sc + 64 + 64 * k);
            _mm512_store_si512(E[i].q[2 * k], _mm512_and_si512(v, m4));
            _mm512_store_si512(E[i].q[2 * k + 1], _mm512_and_si512(_mm512_srli_epi16(v, 4), m4));
        }
        _mm512_store_ps(E[i].d, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)sc)));
        _mm512_store_ps(E[i].m, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(sc + 32))));
    }
}

/* t = 0 + (4 u8 of w x 4 s8 at y, summed) per lane, the s8 dword broadcast from memory */
INLINE __m512i dpbusd_z(__m512i w, const int8_t *y)
{
    __m512i t;
    __asm__("vpxord %x0, %x0, %x0\n\t"
            "vpdpbusd %2%{1to16%}, %1, %0"
            : "=&v"(t)
            : "v"(w), "m"(*(const int32_t *)(const void *)y));
    return t;
}

/* 16 rows (E) x columns y0, y1 (ds0, ds1: their [dy, s_y] per block); two == 0: y1 is a copy of
 * y0 and its results are not stored */
INLINE void x16e_q4_1_tile2(int nb, float *s, size_t ld_s, const struct x16e_blk *E,
                            const lc_block_q8_1 *y0, const lc_block_q8_1 *y1,
                            const float (*ds0)[2], const float (*ds1)[2], int two)
{
    __m512 acc[2][8], msum[2];
    _Pragma("GCC unroll 2") for (int c = 0; c < 2; c++) {
        msum[c] = _mm512_setzero_ps();
        _Pragma("GCC unroll 8") for (int k = 0; k < 8; k++) acc[c][k] = _mm512_setzero_ps();
    }
    for (int i = 0; i < nb; i++) {
        const struct x16e_blk *B = E + i;
        const __m512 dx = _mm512_load_ps(B->d), mx = _mm512_load_ps(B->m);
        const __m512 d0 = _mm512_mul_ps(dx, _mm512_set1_ps(ds0[i][0]));
        const __m512 d1 = _mm512_mul_ps(dx, _mm512_set1_ps(ds1[i][0]));
        msum[0] = _mm512_add_ps(msum[0], _mm512_mul_ps(mx, _mm512_set1_ps(ds0[i][1])));
        msum[1] = _mm512_add_ps(msum[1], _mm512_mul_ps(mx, _mm512_set1_ps(ds1[i][1])));
        const int8_t *q0 = y0[i].qs, *q1 = y1[i].qs;
        _Pragma("GCC unroll 4") for (int k = 0; k < 4; k++) {
            const __m512i lo = _mm512_load_si512(B->q[2 * k]);
            const __m512i hi = _mm512_load_si512(B->q[2 * k + 1]);
            acc[0][k] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dpbusd_z(lo, q0 + 4 * k)), d0, acc[0][k]);
            acc[1][k] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dpbusd_z(lo, q1 + 4 * k)), d1, acc[1][k]);
            acc[0][4 + k] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dpbusd_z(hi, q0 + 16 + 4 * k)), d0,
                                            acc[0][4 + k]);
            acc[1][4 + k] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dpbusd_z(hi, q1 + 16 + 4 * k)), d1,
                                            acc[1][4 + k]);
        }
    }
    _Pragma("GCC unroll 2") for (int c = 0; c < 2; c++) {
        if (c == 1 && !two)
            break;
        const __m512 h = _mm512_add_ps(
            _mm512_add_ps(_mm512_add_ps(acc[c][0], acc[c][4]), _mm512_add_ps(acc[c][2], acc[c][6])),
            _mm512_add_ps(_mm512_add_ps(acc[c][1], acc[c][5]), _mm512_add_ps(acc[c][3], acc[c][7])));
        _mm512_storeu_ps(s + (size_t)c * ld_s, _mm512_add_ps(h, msum[c]));
    }
}

/* The scales of nc Q8_1 activation columns (a_stride bytes apart, nb blocks each) as floats:
 * ds[c * nb + i] = {dy, s_y} of column c's block i (ds: nc * nb pairs, the caller's). */
static void x16e_scales(float (*ds)[2], const void *a, size_t a_stride, int nc, int nb)
{
    for (int c = 0; c < nc; c++) {
        const lc_block_q8_1 *y = (const void *)((const uint8_t *)a + (size_t)c * a_stride);
        for (int i = 0; i < nb; i++) {
            ds[(size_t)c * nb + i][0] = h2f(y[i].d);
            ds[(size_t)c * nb + i][1] = h2f(y[i].s);
        }
    }
}

static void gemm_x16_q4_1(int n, float *s, size_t ld_s, const void *w, size_t w_stride,
                                int nr, const void *a, size_t a_stride, int nc)
{
    const int nb = n / 32;
    /* the calling thread's scratch (lc_kernel_scratch): one expanded group, the columns' scales; a
     * few columns (speculative verification) do not repay the expansion and go straight from
     * the x16 layout, as does a failed allocation */
    const size_t esz = (size_t)nb * sizeof(struct x16e_blk);
    uint8_t *mem = nb > 0 && nc >= 4 ? lc_kernel_scratch(esz + (size_t)nc * (size_t)nb * sizeof(float[2])) : NULL;
    if (mem) {
        struct x16e_blk *E = (struct x16e_blk *)mem;
        float(*ds)[2] = (float(*)[2])(mem + esz);
        x16e_scales(ds, a, a_stride, nc, nb);
        for (int g = 0; g < nr / 16; g++) {
            x16e_expand_q4_1(E, (const uint8_t *)w + (size_t)g * 16 * w_stride, nb);
            for (int c = 0; c < nc; c += 2) {
                const int two = c + 1 < nc, c1 = two ? c + 1 : c;
                x16e_q4_1_tile2(nb, s + (size_t)c * ld_s + 16 * g, ld_s, E,
                                (const void *)((const uint8_t *)a + (size_t)c * a_stride),
                                (const void *)((const uint8_t *)a + (size_t)c1 * a_stride),
                                ds + (size_t)c * nb, ds + (size_t)c1 * nb, two);
            }
        }
        return;
    }
    /* few columns or no memory for the scratch: straight from the x16 layout (same bits) */
    for (int g = 0; g < nr / 16; g++) {
        const uint8_t *G = (const uint8_t *)w + (size_t)g * 16 * w_stride;
        for (int c = 0; c < nc; c += 2) {
            const lc_block_q8_1 *y0 = (const void *)((const uint8_t *)a + (size_t)c * a_stride);
            const int two = c + 1 < nc;
            const lc_block_q8_1 *y1 = two ? (const void *)((const uint8_t *)y0 + a_stride) : y0;
            x16_q4_1_tile2(nb, s + (size_t)c * ld_s + 16 * g, ld_s, G, y0, y1, two);
        }
    }
}

/*
 * The opt-in Q4_1 prompt GEMM of lc_context_params.fast_math (--fast-math; default off), not
 * vec_dot's bits: per (row, column) and block the 32 products are summed as integers (the 8
 * vpdpbusd of x16e_q4_1_tile2 chained into two accumulators, then one integer add: exact), then
 * acc = fma(float(isum), dx * dy, acc) and macc = fma(m, s_y, macc), out = acc + macc.  That is
 * 13 vector operations per block for 512 products of a 16 x 1 strip where the same-bits tile
 * needs 27 (its 8 float lanes each take a conversion and an FMA): the order of ik_llama.cpp's
 * iqk_mul_mat Q4_1 x Q8_1 kernels (and of llama.cpp's Q4_0x8 repack), which sum the block in
 * integers too.  Tiles of 32 rows (two expanded groups) x 4 columns, 16 x 4 for an odd last
 * group, with the same operations per row.  bench/bench-gemm-x16 q4_1-fast, one thread, the
 * TinyLlama shapes: 225-234 GMAC/s (16 x 4 alone: 185-197; the same-bits GEMM: 110-117;
 * llamachat-int8peak: 425 for vpdpbusd alone, 142 for vec_dot's order).  The integer
 * sum is exact and the float steps are per block as ggml's, so the results differ from the
 * reference order by float rounding only (test-kernels bounds it; test-greedy --fast-math
 * checks the logits of the references within tolerance).
 */
INLINE __m512i dpbusd_b(__m512i acc, __m512i w, const int8_t *y)
{
    __asm__("vpdpbusd %2%{1to16%}, %1, %0"
            : "+v"(acc)
            : "v"(w), "m"(*(const int32_t *)(const void *)y));
    return acc;
}

#define X16F_COLS 4
INLINE void x16e_q4_1_fast_tile(int nb, float *s, size_t ld_s, const struct x16e_blk *E,
                                const lc_block_q8_1 *const y[X16F_COLS],
                                const float (*const ds[X16F_COLS])[2], int ncols)
{
    __m512 acc[X16F_COLS], macc[X16F_COLS];
    _Pragma("GCC unroll 4") for (int c = 0; c < X16F_COLS; c++) acc[c] = macc[c] =
        _mm512_setzero_ps();
    for (int i = 0; i < nb; i++) {
        const struct x16e_blk *B = E + i;
        const __m512 dx = _mm512_load_ps(B->d), mx = _mm512_load_ps(B->m);
        __m512i w[8];
        _Pragma("GCC unroll 8") for (int k = 0; k < 8; k++) w[k] = _mm512_load_si512(B->q[k]);
        _Pragma("GCC unroll 4") for (int c = 0; c < X16F_COLS; c++) {
            const int8_t *q = y[c][i].qs;
            __m512i t0 = dpbusd_z(w[0], q), t1 = dpbusd_z(w[1], q + 16);
            _Pragma("GCC unroll 3") for (int k = 1; k < 4; k++) {
                t0 = dpbusd_b(t0, w[2 * k], q + 4 * k);
                t1 = dpbusd_b(t1, w[2 * k + 1], q + 16 + 4 * k);
            }
            const __m512 d = _mm512_mul_ps(dx, _mm512_set1_ps(ds[c][i][0]));
            acc[c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(t0, t1)), d, acc[c]);
            macc[c] = _mm512_fmadd_ps(mx, _mm512_set1_ps(ds[c][i][1]), macc[c]);
        }
    }
    _Pragma("GCC unroll 4") for (int c = 0; c < X16F_COLS; c++) if (c < ncols)
        _mm512_storeu_ps(s + (size_t)c * ld_s, _mm512_add_ps(acc[c], macc[c]));
}

/*
 * Two groups (32 rows: EA, EB) x 4 columns: each activation dword is broadcast once into a
 * register and serves both groups' byte registers, which halves the broadcast loads of the
 * 16 x 4 tile (72 loads per 64 vpdpbusd instead of 100: that tile keeps both load ports as
 * busy as the vector ports).  Per row the same operations as x16e_q4_1_fast_tile (the integer
 * sum is exact in any order), so a row's result does not depend on which tile computed it.
 */
INLINE void x16e_q4_1_fast_tile2g(int nb, float *s, size_t ld_s, const struct x16e_blk *EA,
                                  const struct x16e_blk *EB,
                                  const lc_block_q8_1 *const y[X16F_COLS],
                                  const float (*const ds[X16F_COLS])[2], int ncols)
{
    __m512 acc[2][X16F_COLS], macc[2][X16F_COLS];
    _Pragma("GCC unroll 4") for (int c = 0; c < X16F_COLS; c++) {
        acc[0][c] = macc[0][c] = _mm512_setzero_ps();
        acc[1][c] = macc[1][c] = _mm512_setzero_ps();
    }
    for (int i = 0; i < nb; i++) {
        const struct x16e_blk *A = EA + i, *B = EB + i;
        __m512i ia[X16F_COLS], ib[X16F_COLS];
        _Pragma("GCC unroll 8") for (int k = 0; k < 8; k++) {
            const __m512i wa = _mm512_load_si512(A->q[k]), wb = _mm512_load_si512(B->q[k]);
            const int off = (k & 1) * 16 + (k >> 1) * 4; /* q[2k]: y[4k..], q[2k+1]: y[16+4k..] */
            _Pragma("GCC unroll 4") for (int c = 0; c < X16F_COLS; c++) {
                const __m512i yb = _mm512_set1_epi32(ld_i32(y[c][i].qs + off));
                if (k == 0) {
                    ia[c] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), wa, yb);
                    ib[c] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), wb, yb);
                } else {
                    ia[c] = _mm512_dpbusd_epi32(ia[c], wa, yb);
                    ib[c] = _mm512_dpbusd_epi32(ib[c], wb, yb);
                }
            }
        }
        _Pragma("GCC unroll 4") for (int c = 0; c < X16F_COLS; c++) {
            const __m512 dy = _mm512_set1_ps(ds[c][i][0]), sy = _mm512_set1_ps(ds[c][i][1]);
            acc[0][c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ia[c]),
                                        _mm512_mul_ps(_mm512_load_ps(A->d), dy), acc[0][c]);
            acc[1][c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ib[c]),
                                        _mm512_mul_ps(_mm512_load_ps(B->d), dy), acc[1][c]);
            macc[0][c] = _mm512_fmadd_ps(_mm512_load_ps(A->m), sy, macc[0][c]);
            macc[1][c] = _mm512_fmadd_ps(_mm512_load_ps(B->m), sy, macc[1][c]);
        }
    }
    _Pragma("GCC unroll 4") for (int c = 0; c < X16F_COLS; c++) if (c < ncols) {
        _mm512_storeu_ps(s + (size_t)c * ld_s, _mm512_add_ps(acc[0][c], macc[0][c]));
        _mm512_storeu_ps(s + (size_t)c * ld_s + 16, _mm512_add_ps(acc[1][c], macc[1][c]));
    }
}

static void gemm_x16_q4_1_fast(int n, float *s, size_t ld_s, const void *w, size_t w_stride,
                               int nr, const void *a, size_t a_stride, int nc)
{
    const int nb = n / 32;
    /* the calling thread's scratch: two expanded groups (the 32-row tile), the columns' scales */
    const size_t esz = 2 * (size_t)nb * sizeof(struct x16e_blk);
    uint8_t *mem = nb > 0 ? lc_kernel_scratch(esz + (size_t)nc * (size_t)nb * sizeof(float[2])) : NULL;
    if (!mem) { /* no memory for the scratch: the same-bits GEMM (its own fallback) */
        gemm_x16_q4_1(n, s, ld_s, w, w_stride, nr, a, a_stride, nc);
        return;
    }
    struct x16e_blk *E = (struct x16e_blk *)mem;
    float(*ds)[2] = (float(*)[2])(mem + esz);
    x16e_scales(ds, a, a_stride, nc, nb);
    for (int g = 0; g < nr / 16; g += 2) {
        const int two = g + 1 < nr / 16; /* a pair of groups, or the last one alone */
        x16e_expand_q4_1(E, (const uint8_t *)w + (size_t)g * 16 * w_stride, nb);
        if (two)
            x16e_expand_q4_1(E + nb, (const uint8_t *)w + (size_t)(g + 1) * 16 * w_stride, nb);
        for (int c0 = 0; c0 < nc; c0 += X16F_COLS) {
            const int k = nc - c0 < X16F_COLS ? nc - c0 : X16F_COLS;
            const lc_block_q8_1 *y[X16F_COLS];
            const float(*dsc[X16F_COLS])[2];
            for (int c = 0; c < X16F_COLS; c++) { /* missing columns repeat the last one */
                const int cc = c0 + (c < k ? c : k - 1);
                y[c] = (const void *)((const uint8_t *)a + (size_t)cc * a_stride);
                dsc[c] = ds + (size_t)cc * nb;
            }
            if (two)
                x16e_q4_1_fast_tile2g(nb, s + (size_t)c0 * ld_s + 16 * g, ld_s, E, E + nb, y, dsc,
                                      k);
            else
                x16e_q4_1_fast_tile(nb, s + (size_t)c0 * ld_s + 16 * g, ld_s, E, y, dsc, k);
        }
    }
}

/*
 * Q5_1 over x16 groups: the Q4_1 GEMV above with the fifth bits.  Chunk k's low nibbles are
 * weights 4k + t (t = 0..3), whose fifth bits are bits 4 * (k & 1) + t of byte k / 2 of each
 * row's qh dword; the high nibbles' (weights 16 + 4k + t) the same bits of byte 2 + k / 2.  That
 * byte is copied to the four bytes of its dword (vpshufb), tested against 1 << (4 * (k & 1) + t)
 * in byte t (a mask register), and 16 added where set (a masked vpaddb): blk_q5_1's bytes,
 * vec_dot's lanes.
 */
INLINE void x16_q5_1(int pf_on, int n, float *s, const void *vw, size_t w_stride, int nr,
                     const void *va)
{
    const int nb = n / 32;
    const lc_block_q8_1 *y = va;
    const __m512i m4 = _mm512_set1_epi8(0x0F), m10 = _mm512_set1_epi8(0x10);
    const __m512i bit_lo = _mm512_set1_epi32(0x08040201), bit_hi = _mm512_set1_epi32((int)0x80402010);
    /* vpshufb: byte 4d of its 128-bit lane to every byte of dword d (plus the byte wanted) */
    const __m512i dw = _mm512_broadcast_i32x4(_mm_set_epi32(0x0C0C0C0C, 0x08080808, 0x04040404, 0));
    float ds[X16_YB_MAX][2];
    const bool pre = nb <= X16_YB_MAX;
    for (int i = 0; pre && i < nb; i++) {
        ds[i][0] = h2f(y[i].d);
        ds[i][1] = h2f(y[i].s);
    }
    for (int g = 0; g < nr / 16; g++) {
        const uint8_t *G = (const uint8_t *)vw + (size_t)g * 16 * w_stride;
        __m512 acc[8];
        _Pragma("GCC unroll 8") for (int k = 0; k < 8; k++) acc[k] = _mm512_setzero_ps();
        __m512 msum = _mm512_setzero_ps();
        const size_t left = (size_t)(nr / 16 - g) * 16 * w_stride;
        for (int i = 0; i < nb; i++) {
            const float dy = pre ? ds[i][0] : h2f(y[i].d), sy = pre ? ds[i][1] : h2f(y[i].s);
            const uint8_t *B = G + lc_x16_part_off(LC_TYPE_Q5_1, i, LC_X16_P_D);
            if (X16_PF512 && pf_on)
                x16_pf_lines(G, (size_t)i * 384, 6, left);
            const __m512 dx = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)B));
            const __m512 mx = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(B + 32)));
            const __m512 d = _mm512_mul_ps(dx, _mm512_set1_ps(dy));
            msum = _mm512_add_ps(msum, _mm512_mul_ps(mx, _mm512_set1_ps(sy)));
            const __m512i qh = _mm512_loadu_si512(B + 64);
            const uint8_t *q = B + 128;
            _Pragma("GCC unroll 4") for (int k = 0; k < 4; k++) {
                const __m512i v = _mm512_loadu_si512(q + 64 * k);
                const __m512i hl = _mm512_shuffle_epi8(qh, _mm512_add_epi8(dw, _mm512_set1_epi8((char)(k / 2))));
                const __m512i hh = _mm512_shuffle_epi8(qh, _mm512_add_epi8(dw, _mm512_set1_epi8((char)(2 + k / 2))));
                const __m512i bits = k & 1 ? bit_hi : bit_lo;
                __m512i lo = _mm512_and_si512(v, m4);
                __m512i hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
                lo = _mm512_mask_add_epi8(lo, _mm512_test_epi8_mask(hl, bits), lo, m10);
                hi = _mm512_mask_add_epi8(hi, _mm512_test_epi8_mask(hh, bits), hi, m10);
                const __m512i ilo = _mm512_dpbusd_epi32(_mm512_setzero_si512(), lo,
                                                        _mm512_set1_epi32(ld_i32(y[i].qs + 4 * k)));
                const __m512i ihi = _mm512_dpbusd_epi32(_mm512_setzero_si512(), hi,
                                                        _mm512_set1_epi32(ld_i32(y[i].qs + 16 + 4 * k)));
                acc[k] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ilo), d, acc[k]);
                acc[4 + k] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ihi), d, acc[4 + k]);
            }
        }
        const __m512 h = _mm512_add_ps(
            _mm512_add_ps(_mm512_add_ps(acc[0], acc[4]), _mm512_add_ps(acc[2], acc[6])),
            _mm512_add_ps(_mm512_add_ps(acc[1], acc[5]), _mm512_add_ps(acc[3], acc[7])));
        _mm512_storeu_ps(s + 16 * g, _mm512_add_ps(h, msum));
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
 * Q8_0 over x16 groups, vec_dot_q8_0_q8_0's order: per block lane k = the 4 exact products
 * 4k .. 4k+3, acc[k] = fma(dx * dy, float(lane k), acc[k]), hsum_float_8.  AVX-512 has no
 * vpsignb, so the signed weights go to vpdpbusd as x + 128 (xor 0x80), the accumulator starting
 * from -128 * (y[4k] + .. + y[4k+3]): the same integer, for every x (-128 included).
 */
#define X16_Q8_YB_MAX 256 /* blocks (n <= 8192) whose offsets are computed once per call */

INLINE void x16_q8_0_bias(int32_t bias[8], const lc_block_q8_0 *y)
{
    const __m256i s4 = _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_set1_epi8(1),
                                           _mm256_loadu_si256((const __m256i *)y->qs));
    _mm256_storeu_si256((__m256i *)bias, _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(s4, 7)));
}

static void gemv_x16_q8_0(int n, float *s, const void *vw, size_t w_stride, int nr,
                          const void *va)
{
    const int nb = n / 32;
    const lc_block_q8_0 *y = va;
    int32_t bias[X16_Q8_YB_MAX][8];
    float dys[X16_Q8_YB_MAX];
    const bool pre = nb <= X16_Q8_YB_MAX;
    for (int i = 0; pre && i < nb; i++) {
        x16_q8_0_bias(bias[i], y + i);
        dys[i] = h2f(y[i].d);
    }
    const __m512i m80 = _mm512_set1_epi8((char)0x80);
    for (int g = 0; g < nr / 16; g++) {
        const uint8_t *G = (const uint8_t *)vw + (size_t)g * 16 * w_stride;
        __m512 acc[8];
        _Pragma("GCC unroll 8") for (int k = 0; k < 8; k++) acc[k] = _mm512_setzero_ps();
        const size_t left = (size_t)(nr / 16 - g) * 16 * w_stride;
        for (int i = 0; i < nb; i++) {
            const int32_t *b = bias[pre ? i : 0];
            if (X16_PF512)
                x16_pf_lines(G, (size_t)i * 544, 9, left);
            if (!pre)
                x16_q8_0_bias(bias[0], y + i);
            const float dy = pre ? dys[i] : h2f(y[i].d);
            const uint8_t *B = G + lc_x16_part_off(LC_TYPE_Q8_0, i, LC_X16_P_D);
            const __m512 d = _mm512_mul_ps(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)B)),
                                           _mm512_set1_ps(dy));
            _Pragma("GCC unroll 8") for (int k = 0; k < 8; k++) {
                const __m512i v = _mm512_xor_si512(_mm512_loadu_si512(B + 32 + 64 * k), m80);
                const __m512i t = _mm512_dpbusd_epi32(_mm512_set1_epi32(b[k]), v,
                                                      _mm512_set1_epi32(ld_i32(y[i].qs + 4 * k)));
                acc[k] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(t), d, acc[k]);
            }
        }
        _mm512_storeu_ps(s + 16 * g, _mm512_add_ps(
            _mm512_add_ps(_mm512_add_ps(acc[0], acc[4]), _mm512_add_ps(acc[2], acc[6])),
            _mm512_add_ps(_mm512_add_ps(acc[1], acc[5]), _mm512_add_ps(acc[3], acc[7]))));
    }
}

/*
 * The Q8_0 prompt GEMM (gemm_x16[LC_TYPE_Q8_0]), the x16e design of gemm_x16_q4_1 above (the
 * approach of ik_llama.cpp's PR #534: rows expanded once per call, reused across the batch):
 *
 *   - Each group of 16 rows is expanded once per call into x16e_q8_0 blocks (576 bytes per
 *     block: n = 2048 is 36 KB, in L1; n = 5632, 99 KB, in L2): lane k's 4 bytes of the 16 rows
 *     as (x + 128) (xor 0x80: the unsigned operand of vpdpbusd as it is), dx of the 16 rows as
 *     floats.
 *   - Per column and block, once per call (x16e_q8_0_col): dy as a float and the 8 lane
 *     corrections -128 * (y[4k] + .. + y[4k+3]) (x16_q8_0_bias, as gemv_x16_q8_0).
 *   - The 16 x 2 tile, per block and column: 8 vpdpbusd, each starting from its lane's
 *     correction (a broadcast load) with the activation dword as a {1to16} memory operand, 8
 *     vcvtdq2ps, 8 FMAs, and dx * dy.
 *
 * Each integer lane is then sum((x + 128) * y) - 128 * sum(y) = sum(x * y) over the 4 products
 * 4k .. 4k+3, exactly (|lane| <= 4 * 128 * 128: no overflow, and the int32 sums are exact), the
 * integer of vec_dot_q8_0_q8_0's lane k; the float operations are its own (acc[k] = fma(float(
 * lane k), dx * dy, acc[k]) in block order, hsum_float_8 as ((0+4)+(2+6))+((1+5)+(3+7))): the
 * same bits (test-kernels compares them with the scalar vec_dot).
 */
struct x16e_q8_0 {
    uint8_t q[8][64]; /* q[k]: lane k's 4 bytes of the 16 rows (as the x16 layout), xor 0x80 */
    float d[16];      /* dx of the 16 rows */
};

/* per column and block: dy, and -128 * sum(y) of the 4 bytes of each lane */
struct x16e_q8_0_col {
    int32_t bias[8];
    float d;
};

/* one group (G, nb blocks of repack.h's Q8_0 x16 layout: 32 bytes of fp16 dx, 8 x 64 bytes of
 * quants, 544 bytes per block) into E (nb blocks, 64-byte aligned) */
static void x16e_expand_q8_0(struct x16e_q8_0 *E, const uint8_t *G, int nb)
{
    const __m512i m80 = _mm512_set1_epi8((char)0x80);
    for (int i = 0; i < nb; i++) {
        const uint8_t *B = G + lc_x16_part_off(LC_TYPE_Q8_0, i, LC_X16_P_D);
        _Pragma("GCC unroll 8") for (int k = 0; k < 8; k++)
            _mm512_store_si512(E[i].q[k], _mm512_xor_si512(_mm512_loadu_si512(B + 32 + 64 * k), m80));
        _mm512_store_ps(E[i].d, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)B)));
    }
}

/* t = bias (broadcast from memory) + (4 u8 of w x 4 s8 at y, summed) per lane (the Q8_0 GEMM below,
 * the K-quants') */
INLINE __m512i dpbusd_bias(const int32_t *bias, __m512i w, const int8_t *y)
{
    __m512i t;
    __asm__("vpbroadcastd %3, %0\n\t"
            "vpdpbusd %2%{1to16%}, %1, %0"
            : "=&v"(t)
            : "v"(w), "m"(*(const int32_t *)(const void *)y), "m"(*bias));
    return t;
}

/* 16 rows (E, nb blocks) x columns y0, y1 (c0, c1: their x16e_q8_0_col per block): s[r] and
 * s[ld_s + r] = vec_dot_q8_0_q8_0 of row r with y0, y1; two == 0: y1 is a copy of y0 and its
 * results are not stored */
INLINE void x16e_q8_0_tile2(int nb, float *s, size_t ld_s, const struct x16e_q8_0 *E,
                            const lc_block_q8_0 *y0, const lc_block_q8_0 *y1,
                            const struct x16e_q8_0_col *c0, const struct x16e_q8_0_col *c1, int two)
{
    __m512 acc[2][8];
    _Pragma("GCC unroll 2") for (int c = 0; c < 2; c++)
        _Pragma("GCC unroll 8") for (int k = 0; k < 8; k++) acc[c][k] = _mm512_setzero_ps();
    for (int i = 0; i < nb; i++) {
        const struct x16e_q8_0 *B = E + i;
        const __m512 dx = _mm512_load_ps(B->d);
        const __m512 d0 = _mm512_mul_ps(dx, _mm512_set1_ps(c0[i].d));
        const __m512 d1 = _mm512_mul_ps(dx, _mm512_set1_ps(c1[i].d));
        const int8_t *q0 = y0[i].qs, *q1 = y1[i].qs;
        _Pragma("GCC unroll 8") for (int k = 0; k < 8; k++) {
            const __m512i v = _mm512_load_si512(B->q[k]);
            acc[0][k] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dpbusd_bias(&c0[i].bias[k], v, q0 + 4 * k)),
                                        d0, acc[0][k]);
            acc[1][k] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dpbusd_bias(&c1[i].bias[k], v, q1 + 4 * k)),
                                        d1, acc[1][k]);
        }
    }
    _Pragma("GCC unroll 2") for (int c = 0; c < 2; c++) {
        if (c == 1 && !two)
            break;
        _mm512_storeu_ps(s + (size_t)c * ld_s, _mm512_add_ps(
            _mm512_add_ps(_mm512_add_ps(acc[c][0], acc[c][4]), _mm512_add_ps(acc[c][2], acc[c][6])),
            _mm512_add_ps(_mm512_add_ps(acc[c][1], acc[c][5]), _mm512_add_ps(acc[c][3], acc[c][7]))));
    }
}

/*
 * gemm_x16[LC_TYPE_Q8_0]: s[c * ld_s + r] = vec_dot_q8_0_q8_0(row r, column c) for the nr rows
 * (nr % 16 == 0: whole x16 groups, w_stride bytes per row, of n = 32 * nb weights) and nc Q8_0
 * activation columns (a_stride bytes apart); s is the caller's.  Scratch: the calling thread's
 * lc_kernel_scratch (one expanded group, nb * 576 bytes, and nc * nb * 36 bytes of column terms).
 * Fewer than 4 columns (speculative verification: the expansion does not repay) or no memory
 * for the scratch: pk_gemm's 4 x 4 tiles, or column by column through gemv_x16_q8_0 when it
 * fails too (the same bits either way).
 */
static void gemm_x16_q8_0(int n, float *s, size_t ld_s, const void *w, size_t w_stride, int nr,
                          const void *a, size_t a_stride, int nc)
{
    const int nb = n / 32;
    const size_t esz = (size_t)nb * sizeof(struct x16e_q8_0);
    uint8_t *mem = nb > 0 && nc >= 4
                       ? lc_kernel_scratch(esz + (size_t)nc * (size_t)nb * sizeof(struct x16e_q8_0_col))
                       : NULL;
    if (mem) {
        struct x16e_q8_0 *E = (struct x16e_q8_0 *)(void *)mem;
        struct x16e_q8_0_col *cs = (struct x16e_q8_0_col *)(void *)(mem + esz);
        for (int c = 0; c < nc; c++) {
            const lc_block_q8_0 *y = (const void *)((const uint8_t *)a + (size_t)c * a_stride);
            for (int i = 0; i < nb; i++) {
                x16_q8_0_bias(cs[(size_t)c * nb + i].bias, y + i);
                cs[(size_t)c * nb + i].d = h2f(y[i].d);
            }
        }
        for (int g = 0; g < nr / 16; g++) {
            x16e_expand_q8_0(E, (const uint8_t *)w + (size_t)g * 16 * w_stride, nb);
            for (int c = 0; c < nc; c += 2) {
                const int two = c + 1 < nc, c1 = two ? c + 1 : c;
                x16e_q8_0_tile2(nb, s + (size_t)c * ld_s + 16 * g, ld_s, E,
                                (const void *)((const uint8_t *)a + (size_t)c * a_stride),
                                (const void *)((const uint8_t *)a + (size_t)c1 * a_stride),
                                cs + (size_t)c * nb, cs + (size_t)c1 * nb, two);
            }
        }
        return;
    }
    if (pk_gemm(PK_Q8_0, 1, n, s, ld_s, w, w_stride, nr, a, a_stride, nc) == 0)
        return;
    for (int c = 0; c < nc; c++)
        gemv_x16_q8_0(n, s + (size_t)c * ld_s, w, w_stride, nr, (const uint8_t *)a + (size_t)c * a_stride);
}

/*
 * The opt-in Q8_0 prompt GEMM of lc_context_params.fast_math (--fast-math; default off), not
 * vec_dot_q8_0_q8_0's bits: per (row, column) and block the 32 products are summed as one
 * integer (the 8 vpdpbusd of x16e_q8_0_tile2 chained from the block's whole correction
 * -128 * sum(y): exact, |isum| <= 32 * 128 * 128), then acc = fma(float(isum), dx * dy, acc):
 * one conversion and one FMA per block where vec_dot's order takes 8 of each (its 8 float
 * lanes), the order of llama.cpp's Q4_0x8 repack and of ik_llama.cpp's Q8_0 kernels.  Tiles
 * of 32 rows (two expanded groups, x16e_expand_q8_0) x 4 columns, 16 x 4 for an odd last group,
 * with the same operations per row (a row's result does not depend on its tile).  The results
 * differ from the reference order by float rounding only: test-kernels bounds every product,
 * test-greedy --fast-math checks the Q8_0 references within tolerance.  Scratch: two expanded
 * groups (2 * 576 bytes per block) and 8 bytes per column and block.
 */
struct x16f_q8_0_col {
    int32_t bias; /* -128 * (y[0] + .. + y[31]) */
    float d;      /* dy */
};

/* rows 0..15 (EA) and, two != 0, 16..31 (EB) x the X16F_COLS columns y (cs: their terms per
 * block; missing columns repeat the last one): s[c * ld_s + r] for c < ncols, r < 16 (two: 32);
 * EB is not read when two == 0 */
INLINE void x16f_q8_0_tile(int two, int nb, float *s, size_t ld_s, const struct x16e_q8_0 *EA,
                           const struct x16e_q8_0 *EB, const lc_block_q8_0 *const y[X16F_COLS],
                           const struct x16f_q8_0_col *const cs[X16F_COLS], int ncols)
{
    __m512 acc[2][X16F_COLS];
    _Pragma("GCC unroll 4") for (int c = 0; c < X16F_COLS; c++) acc[0][c] = acc[1][c] =
        _mm512_setzero_ps();
    for (int i = 0; i < nb; i++) {
        const struct x16e_q8_0 *A = EA + i, *B = EB + i;
        __m512i ia[X16F_COLS], ib[X16F_COLS];
        _Pragma("GCC unroll 4") for (int c = 0; c < X16F_COLS; c++) {
            ia[c] = _mm512_set1_epi32(cs[c][i].bias);
            ib[c] = ia[c];
        }
        _Pragma("GCC unroll 8") for (int k = 0; k < 8; k++) {
            const __m512i wa = _mm512_load_si512(A->q[k]);
            const __m512i wb = two ? _mm512_load_si512(B->q[k]) : wa;
            _Pragma("GCC unroll 4") for (int c = 0; c < X16F_COLS; c++) {
                const __m512i yb = _mm512_set1_epi32(ld_i32(y[c][i].qs + 4 * k));
                ia[c] = _mm512_dpbusd_epi32(ia[c], wa, yb);
                if (two)
                    ib[c] = _mm512_dpbusd_epi32(ib[c], wb, yb);
            }
        }
        const __m512 dxa = _mm512_load_ps(A->d), dxb = two ? _mm512_load_ps(B->d) : dxa;
        _Pragma("GCC unroll 4") for (int c = 0; c < X16F_COLS; c++) {
            const __m512 dy = _mm512_set1_ps(cs[c][i].d);
            acc[0][c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ia[c]), _mm512_mul_ps(dxa, dy), acc[0][c]);
            if (two)
                acc[1][c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ib[c]), _mm512_mul_ps(dxb, dy),
                                            acc[1][c]);
        }
    }
    _Pragma("GCC unroll 4") for (int c = 0; c < X16F_COLS; c++) if (c < ncols) {
        _mm512_storeu_ps(s + (size_t)c * ld_s, acc[0][c]);
        if (two)
            _mm512_storeu_ps(s + (size_t)c * ld_s + 16, acc[1][c]);
    }
}

/* gemm_x16_fast[LC_TYPE_Q8_0]: gemm_x16_q8_0's contract (shapes, ownership) in the order above;
 * no memory for the scratch: gemm_x16_q8_0 (the same-bits order) */
static void gemm_x16_q8_0_fast(int n, float *s, size_t ld_s, const void *w, size_t w_stride,
                               int nr, const void *a, size_t a_stride, int nc)
{
    const int nb = n / 32;
    const size_t esz = 2 * (size_t)nb * sizeof(struct x16e_q8_0);
    uint8_t *mem = nb > 0 ? lc_kernel_scratch(esz + (size_t)nc * (size_t)nb * sizeof(struct x16f_q8_0_col))
                          : NULL;
    if (!mem) {
        gemm_x16_q8_0(n, s, ld_s, w, w_stride, nr, a, a_stride, nc);
        return;
    }
    struct x16e_q8_0 *E = (struct x16e_q8_0 *)(void *)mem;
    struct x16f_q8_0_col *cs = (struct x16f_q8_0_col *)(void *)(mem + esz);
    for (int c = 0; c < nc; c++) {
        const lc_block_q8_0 *y = (const void *)((const uint8_t *)a + (size_t)c * a_stride);
        for (int i = 0; i < nb; i++) {
            const __m256i s4 = _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_set1_epi8(1),
                                                   _mm256_loadu_si256((const __m256i *)y[i].qs));
            const __m128i h = _mm_add_epi32(_mm256_castsi256_si128(s4), _mm256_extracti128_si256(s4, 1));
            const __m128i q = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0x4E));
            const __m128i o = _mm_add_epi32(q, _mm_shuffle_epi32(q, 0xB1));
            cs[(size_t)c * nb + i].bias = -128 * _mm_cvtsi128_si32(o);
            cs[(size_t)c * nb + i].d = h2f(y[i].d);
        }
    }
    for (int g = 0; g < nr / 16; g += 2) {
        const int two = g + 1 < nr / 16; /* a pair of groups, or the last one alone */
        x16e_expand_q8_0(E, (const uint8_t *)w + (size_t)g * 16 * w_stride, nb);
        if (two)
            x16e_expand_q8_0(E + nb, (const uint8_t *)w + (size_t)(g + 1) * 16 * w_stride, nb);
        for (int c0 = 0; c0 < nc; c0 += X16F_COLS) {
            const int k = nc - c0 < X16F_COLS ? nc - c0 : X16F_COLS;
            const lc_block_q8_0 *y[X16F_COLS];
            const struct x16f_q8_0_col *csc[X16F_COLS];
            for (int c = 0; c < X16F_COLS; c++) { /* missing columns repeat the last one */
                const int cc = c0 + (c < k ? c : k - 1);
                y[c] = (const void *)((const uint8_t *)a + (size_t)cc * a_stride);
                csc[c] = cs + (size_t)cc * nb;
            }
            float *so = s + (size_t)c0 * ld_s + 16 * g;
            if (two)
                x16f_q8_0_tile(1, nb, so, ld_s, E, E + nb, y, csc, k);
            else
                x16f_q8_0_tile(0, nb, so, ld_s, E, E, y, csc, k);
        }
    }
}

/* what a Q8_0 activation block gives every group: dy, and -8 * sum(y) (the Q4_0 offset
 * folded as in the Q4_0 GEMV) */
struct x16_q8_0 {
    float d;
    int32_t bias;
};

INLINE struct x16_q8_0 x16_q8_0_of(const lc_block_q8_0 *y)
{
    const __m256i yv = _mm256_loadu_si256((const __m256i *)y->qs);
    const int ysum = hsum_epi32(_mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_set1_epi8(1), yv));
    return (struct x16_q8_0){h2f(y->d), -8 * ysum};
}

/* one Q4_0 block of 16 rows (d: 16 fp16, q: 4 chunks), the Q4_0x8 order */
INLINE __m512 x16_q4_0_block(__m512 acc, const uint8_t *d16, const uint8_t *q,
                             const lc_block_q8_0 *y, struct x16_q8_0 ys)
{
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    __m512i isum = _mm512_set1_epi32(ys.bias);
    _Pragma("GCC unroll 4") for (int k = 0; k < 4; k++) {
        const __m512i v = _mm512_loadu_si512(q + 64 * k);
        isum = _mm512_dpbusd_epi32(isum, _mm512_and_si512(v, m4),
                                   _mm512_set1_epi32(ld_i32(y->qs + 4 * k)));
        isum = _mm512_dpbusd_epi32(isum, _mm512_and_si512(_mm512_srli_epi16(v, 4), m4),
                                   _mm512_set1_epi32(ld_i32(y->qs + 16 + 4 * k)));
    }
    const __m512 dx = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)d16));
    return _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(dx, _mm512_set1_ps(ys.d)), acc);
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
        __m512 acc = _mm512_setzero_ps();
        const size_t left = (size_t)(nr / 16 - g) * 16 * w_stride;
        int i = 0;
        for (; i + 2 <= nb; i += 2) { /* a pair: [d d | qs | qs], 576 bytes */
            const uint8_t *P = G + (size_t)i * 288;
            if (X16_PF512)
                x16_pf_lines(G, (size_t)i * 288, 9, left);
            acc = x16_q4_0_block(acc, P, P + 64, y + i, YB(i));
            acc = x16_q4_0_block(acc, P + 32, P + 320, y + i + 1, YB(i + 1));
        }
        if (i < nb) /* an odd last block: [d | qs] */
            acc = x16_q4_0_block(acc, G + (size_t)i * 288, G + (size_t)i * 288 + 32, y + i, YB(i));
        _mm512_storeu_ps(s + 16 * g, acc);
    }
#undef YB
}

/*
 * The Q4_0 prompt GEMM (gemm_x16[LC_TYPE_Q4_0]; Q4_0 is in the x16 layout only when it follows
 * llama.cpp's Q4_0x8 order, ggml_gemm_q4_0_8x8_q8_0): per (row, column) and block the 32
 * integer products (q - 8) * y summed exactly, then acc = fma(float(isum), dx * dy, acc) from
 * acc = 0 in block order, dx * dy one fp32 multiply of the two fp16 scales as floats; acc is
 * the result (no lanes, no horizontal sum).  The integer sum is exact in any order, so the
 * products are grouped as the vector unit likes; only the float chain per (row, column) is
 * vec_dot_q4_0x8's, hence the same bits (test-kernels compares them with the scalar one).
 *
 * As the Q4_1 GEMM above (x16e): each pair of groups (32 rows) is expanded once per call into
 * x16e_q4_0 blocks (576 bytes per block and group: n = 2048 is 36 KB per group, n = 5632 99 KB),
 * the column terms dy and -8 * sum(y) once per call (x16_q8_0_of), and then tiles of 32 rows x 4
 * columns take only what the bits need, per block: for each of the 8 activation dwords of a
 * column one broadcast serving both groups' byte registers, 16 vpdpbusd per column started
 * from -8 * sum(y) (the Q4_0 offset folded as in gemv_x16_q4_0: nibbles 0..15 are the unsigned
 * operand, the activations the signed one; |isum| <= 32 * 15 * 128 + 8 * 32 * 128), then per
 * group one vcvtdq2ps, one multiply dx * dy and one FMA: 88 vector operations for 4096
 * products (the 4 x 4 tile of pk_gemm: about 60 for 512).  The 24 float operations share the
 * two vpdpbusd ports, so this is about 2/3 of the int8 peak, the most these bits allow; 3
 * groups x 4 columns (fewer loads) and blocks in L1-sized slices were no faster.
 */
struct x16e_q4_0 {
    uint8_t q[8][64]; /* q[j], row r: bytes 4r..4r+3 = the row's weights 4j..4j+3 as 0..15 */
    float d[16];      /* dx of the 16 rows */
};

/* one group (G: nb blocks of repack.h's Q4_0 x16 layout, pairs and an odd last one) into E */
static void x16e_expand_q4_0(struct x16e_q4_0 *E, const uint8_t *G, int nb)
{
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    for (int i = 0; i < nb; i++) {
        const uint8_t *q = G + lc_x16_qs_off(LC_TYPE_Q4_0, nb, i);
        /* chunk k: low nibbles are weights 4k..4k+3, high ones 16 + 4k..16 + 4k + 3 */
        _Pragma("GCC unroll 4") for (int k = 0; k < 4; k++) {
            const __m512i v = _mm512_loadu_si512(q + 64 * k);
            _mm512_store_si512(E[i].q[k], _mm512_and_si512(v, m4));
            _mm512_store_si512(E[i].q[4 + k], _mm512_and_si512(_mm512_srli_epi16(v, 4), m4));
        }
        _mm512_store_ps(E[i].d, _mm512_cvtph_ps(_mm256_loadu_si256(
                                    (const __m256i *)(G + lc_x16_sc_off(LC_TYPE_Q4_0, nb, i)))));
    }
}

#define X16E0_COLS 4
/*
 * ng (1 or 2, a constant) expanded groups E[0..ng) x 4 columns y[c] (nb blocks each; ys[c]
 * their x16_q8_0 terms per block): s[c * ld_s + 16 g + r] = vec_dot_q4_0x8 of row r of group g
 * and column c, for c < ncols (the others repeat a column and are not stored).
 */
INLINE void x16e_q4_0_tile(int ng, int nb, float *s, size_t ld_s, const struct x16e_q4_0 *const E[2],
                           const lc_block_q8_0 *const y[X16E0_COLS],
                           const struct x16_q8_0 *const ys[X16E0_COLS], int ncols)
{
    __m512 acc[2][X16E0_COLS];
    _Pragma("GCC unroll 4") for (int c = 0; c < X16E0_COLS; c++) acc[0][c] = acc[1][c] =
        _mm512_setzero_ps();
    for (int i = 0; i < nb; i++) {
        __m512i is[2][X16E0_COLS];
        _Pragma("GCC unroll 4") for (int c = 0; c < X16E0_COLS; c++) is[0][c] = is[1][c] =
            _mm512_set1_epi32(ys[c][i].bias);
        _Pragma("GCC unroll 8") for (int j = 0; j < 8; j++) {
            const __m512i w0 = _mm512_load_si512(E[0][i].q[j]);
            const __m512i w1 = ng == 2 ? _mm512_load_si512(E[1][i].q[j]) : w0;
            _Pragma("GCC unroll 4") for (int c = 0; c < X16E0_COLS; c++) {
                const __m512i yb = _mm512_set1_epi32(ld_i32(y[c][i].qs + 4 * j));
                is[0][c] = _mm512_dpbusd_epi32(is[0][c], w0, yb);
                if (ng == 2)
                    is[1][c] = _mm512_dpbusd_epi32(is[1][c], w1, yb);
            }
        }
        _Pragma("GCC unroll 4") for (int c = 0; c < X16E0_COLS; c++) {
            const __m512 dy = _mm512_set1_ps(ys[c][i].d);
            _Pragma("GCC unroll 2") for (int g = 0; g < ng; g++)
                acc[g][c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(is[g][c]),
                                            _mm512_mul_ps(_mm512_load_ps(E[g][i].d), dy), acc[g][c]);
        }
    }
    _Pragma("GCC unroll 4") for (int c = 0; c < X16E0_COLS; c++) if (c < ncols)
        _Pragma("GCC unroll 2") for (int g = 0; g < ng; g++)
            _mm512_storeu_ps(s + (size_t)c * ld_s + 16 * g, acc[g][c]);
}

/* Step t of steps (1 <= t <= steps; 0: none) of the software prefetch of the pair of groups
 * from group g on (none past ngr) into L2: its lines in [(t-1) L / steps, t L / steps), L the
 * pair's lines. */
#ifndef X16E0_PF_HINT
#define X16E0_PF_HINT _MM_HINT_T1
#endif
INLINE void x16e_pf_pair(const void *w, size_t w_stride, int ngr, int g, int t, int steps)
{
    if (t < 1 || g >= ngr)
        return;
    const size_t bytes = (size_t)(ngr - g < 2 ? 1 : 2) * 16 * w_stride, lines = bytes / 64;
    const uint8_t *p = (const uint8_t *)w + (size_t)g * 16 * w_stride;
    for (size_t l = (size_t)(t - 1) * lines / (size_t)steps; l < (size_t)t * lines / (size_t)steps; l++)
        _mm_prefetch((const char *)p + 64 * l, X16E0_PF_HINT);
}


/*
 * kernels.h's gemm_x16 for Q4_0: nr rows (nr % 16 == 0, w the first of a group) x nc columns
 * of Q8_0 activations, s[c * ld_s + r] as vec_dot_q4_0x8.  Scratch (lc_kernel_scratch, the calling
 * thread's own): two expanded groups and the columns' terms, (2 * 576 + 8 * nc) bytes per
 * block.  Fewer than 4 columns (speculative verification) do not repay the expansion, and a
 * failed allocation takes none: both go through gemv_x16_q4_0 column by column (same bits).
 * bench-gemm-x16 q4_0 (one thread, 256 rows x 512 columns, n = 2048 and 5632, CPU time, Zen 4
 * under load): 260-310 GMAC/s best, where pk_gemm's 4 x 4 tile gave 50-70.
 */
static void gemm_x16_q4_0(int n, float *s, size_t ld_s, const void *w, size_t w_stride, int nr,
                          const void *a, size_t a_stride, int nc)
{
    const int nb = n / 32, ngr = nr / 16;
    const size_t esz = 2 * (size_t)nb * sizeof(struct x16e_q4_0);
    const size_t csz = (size_t)nc * (size_t)nb * sizeof(struct x16_q8_0);
    uint8_t *mem = nb > 0 && nc >= X16E0_COLS ? lc_kernel_scratch(esz + csz) : NULL;
    if (!mem) {
        for (int c = 0; c < nc; c++)
            gemv_x16_q4_0(n, s + (size_t)c * ld_s, w, w_stride, nr,
                          (const uint8_t *)a + (size_t)c * a_stride);
        return;
    }
    struct x16e_q4_0 *E = (struct x16e_q4_0 *)(void *)mem;
    struct x16_q8_0 *ys = (struct x16_q8_0 *)(void *)(mem + esz);
    /* the weights of the first pair of groups come into L2 while the column terms are
     * computed, those of the next pair while the tiles of this one run (x16e_pf_pair): the
     * expansion, the only reader of the weights, then no longer waits for memory */
    for (int c = 0; c < nc; c++) {
        const lc_block_q8_0 *y = (const void *)((const uint8_t *)a + (size_t)c * a_stride);
        for (int i = 0; i < nb; i++)
            ys[(size_t)c * nb + i] = x16_q8_0_of(y + i);
        x16e_pf_pair(w, w_stride, ngr, 0, c + 1, nc);
    }
    const int ntiles = (nc + X16E0_COLS - 1) / X16E0_COLS;
    for (int g = 0; g < ngr; g += 2) {
        const int two = g + 1 < ngr; /* a pair of groups, or the last one alone */
        const struct x16e_q4_0 *const Eg[2] = {E, E + nb};
        x16e_expand_q4_0(E, (const uint8_t *)w + (size_t)g * 16 * w_stride, nb);
        if (two)
            x16e_expand_q4_0(E + nb, (const uint8_t *)w + (size_t)(g + 1) * 16 * w_stride, nb);
        for (int c0 = 0; c0 < nc; c0 += X16E0_COLS) {
            x16e_pf_pair(w, w_stride, ngr, g + 2, c0 / X16E0_COLS + 1, ntiles);
            const int k = nc - c0 < X16E0_COLS ? nc - c0 : X16E0_COLS;
            const lc_block_q8_0 *y[X16E0_COLS];
            const struct x16_q8_0 *yc[X16E0_COLS];
            for (int c = 0; c < X16E0_COLS; c++) { /* missing columns repeat the last one */
                const int cc = c0 + (c < k ? c : k - 1);
                y[c] = (const void *)((const uint8_t *)a + (size_t)cc * a_stride);
                yc[c] = ys + (size_t)cc * nb;
            }
            float *sg = s + (size_t)c0 * ld_s + 16 * g;
            if (two)
                x16e_q4_0_tile(2, nb, sg, ld_s, Eg, y, yc, k);
            else
                x16e_q4_0_tile(1, nb, sg, ld_s, Eg, y, yc, k);
        }
    }
}

/*
 * Q6_K over x16 groups (the output matrix of most quantized models), in ggml's AVX2 order like
 * vec_dot_q6_K_q8_K: per super-block 8 exact integer lanes, acc[k] = fma(d, float(lane k),
 * acc[k]) with d = dy * dx, hsum_float_8.  Per half h, quarter v and lane k, the 6-bit q of 16
 * rows (one ql chunk and one qh chunk) against the activations 32v + 4k.. (a broadcast dword)
 * in one vpdpbusd started from -32 * their sum (so the result is sum((q - 32) * y)), times the
 * rows' scale of that quarter and lane and added to lane k in one vpdpwssd.
 */
/* dword j of bias: -32 * (activations 4j .. 4j+3) of a super-block */
INLINE void q6_K_bias(int32_t bias[64], const int8_t *q8)
{
    _Pragma("GCC unroll 4") for (int t = 0; t < 4; t++) {
        const __m512i s4 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8(1),
                                               _mm512_loadu_si512(q8 + 64 * t));
        _mm512_storeu_si512(bias + 16 * t,
                            _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(s4, 5)));
    }
}

/* super-blocks whose biases are computed once per call (32 KB of stack), not per group: read
 * back right after their 64-byte stores, they stalled every broadcast (store forwarding) */
#define Q6_BIAS_NB 128

static void gemv_x16_q6_K(int n, float *s, const void *vw, size_t w_stride, int nr,
                          const void *va)
{
    const int nb = n / LC_QK_K;
    const lc_block_q8_K *y = va;
    int32_t all_bias[Q6_BIAS_NB * 64] __attribute__((aligned(64)));
    for (int i = 0; i < nb && nb <= Q6_BIAS_NB; i++)
        q6_K_bias(all_bias + 64 * i, y[i].qs);
    const __m512i m4 = _mm512_set1_epi8(0x0F), m30 = _mm512_set1_epi8(0x30);
    for (int g = 0; g < nr / 16; g++) {
        const uint8_t *G = (const uint8_t *)vw + (size_t)g * 16 * w_stride;
        const size_t left = (size_t)(nr / 16 - g) * 16 * w_stride; /* bytes from G to the end */
        __m512 acc[8];
        _Pragma("GCC unroll 8") for (int k = 0; k < 8; k++) acc[k] = _mm512_setzero_ps();
        for (int i = 0; i < nb; i++) {
            const uint8_t *ql = G + lc_x16_q6_K_off(nb, i, LC_X16_QL);
            const uint8_t *qh = G + lc_x16_q6_K_off(nb, i, LC_X16_QH);
            const int8_t *sc = (const int8_t *)(G + lc_x16_q6_K_off(nb, i, LC_X16_SC));
            const int8_t *q8 = y[i].qs;
            /* the pair 3 pairs ahead, when it lies within the rows (none for the last ones) */
            const size_t pf_off = (size_t)(i / 2 + 3) * 6720;
            const uint8_t *pf = pf_off + 6720 <= left ? G + pf_off : NULL;
            const int32_t *bias = all_bias + 64 * (nb <= Q6_BIAS_NB ? i : 0);
            if (nb > Q6_BIAS_NB)
                q6_K_bias(all_bias, q8);
            __m512i lanes[8];
            _Pragma("GCC unroll 8") for (int k = 0; k < 8; k++) lanes[k] = _mm512_setzero_si512();
            _Pragma("GCC unroll 2") for (int h = 0; h < 2; h++)
                _Pragma("GCC unroll 4") for (int v = 0; v < 4; v++) {
                    /* the rows' scales 2v (lanes 0..3) and 2v+1 (4..7) of half h as 16-bit
                     * values zero-extended into 32-bit lanes, for vpdpwssd */
                    const __m512i s_lo = _mm512_cvtepu16_epi32(_mm256_cvtepi8_epi16(
                        _mm_loadu_si128((const __m128i *)(sc + 16 * (8 * h + 2 * v)))));
                    const __m512i s_hi = _mm512_cvtepu16_epi32(_mm256_cvtepi8_epi16(
                        _mm_loadu_si128((const __m128i *)(sc + 16 * (8 * h + 2 * v + 1)))));
                    _Pragma("GCC unroll 8") for (int k = 0; k < 8; k++) {
                        /* the pair of super-blocks 3 pairs ahead (105 lines; 20 KB) into L2, a line
                         * per step: without, 10 GB/s from DRAM (Zen 4, one core); 33 GB/s with */
                        const int li = 32 * h + 8 * v + k;
                        if (li < 53 && pf)
                            _mm_prefetch((const char *)pf + 64 * (53 * (i & 1) + li), _MM_HINT_T1);
                        const __m512i b = _mm512_loadu_si512(ql + 64 * (16 * h + 8 * (v & 1) + k));
                        const __m512i bh = _mm512_loadu_si512(qh + 64 * (8 * h + k));
                        const __m512i lo4 = v < 2 ? b : _mm512_srli_epi16(b, 4);
                        /* qh bits 2v, 2v+1 moved to bits 4, 5 */
                        const __m512i hi2 = v == 0   ? _mm512_slli_epi16(bh, 4)
                                            : v == 1 ? _mm512_slli_epi16(bh, 2)
                                            : v == 2 ? bh
                                                     : _mm512_srli_epi16(bh, 2);
                        /* (lo4 & 0x0F) | (hi2 & 0x30) */
                        const __m512i q = _mm512_ternarylogic_epi32(
                            _mm512_and_si512(lo4, m4), hi2, m30, 0xF8);
                        /* sum((q - 32) * y) over 4 weights: |t| <= 4 * 32 * 128, a 16-bit value */
                        const __m512i t = _mm512_dpbusd_epi32(
                            _mm512_set1_epi32(bias[32 * h + 8 * v + k]), q,
                            _mm512_set1_epi32(ld_i32(q8 + 128 * h + 32 * v + 4 * k)));
                        /* lane k += t * scale (the high halves: t's sign times 0) */
                        lanes[k] = _mm512_dpwssd_epi32(lanes[k], t, k < 4 ? s_lo : s_hi);
                    }
                }
            const __m512 d = _mm512_mul_ps(
                _mm512_set1_ps(y[i].d),
                _mm512_cvtph_ps(_mm256_loadu_si256(
                    (const __m256i *)(G + lc_x16_q6_K_off(nb, i, LC_X16_D)))));
            _Pragma("GCC unroll 8") for (int k = 0; k < 8; k++) acc[k] =
                _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(lanes[k]), acc[k]);
        }
        _mm512_storeu_ps(s + 16 * g, _mm512_add_ps(
            _mm512_add_ps(_mm512_add_ps(acc[0], acc[4]), _mm512_add_ps(acc[2], acc[6])),
            _mm512_add_ps(_mm512_add_ps(acc[1], acc[5]), _mm512_add_ps(acc[3], acc[7]))));
    }
}

/*
 * Q4_K and Q5_K over x16 groups, in ggml's AVX2 order like vec_dot_q4_K_q8_K /
 * vec_dot_q5_K_q8_K (x86-kquants.h, scalar.c): per super-block and row 8 exact integer lanes,
 * lane k = sum over j of sc[2j] * (low quants 64j + 4k.. . y) + sc[2j+1] * (high quants
 * 64j + 32 + 4k.. . y); acc[k] = fma(d, float(lane k), acc[k]) with d = dy * dx; the mins
 * Q4_K's way (acc_m[m] = fma(-dy * dmin, mn[2m] * S[2m] + mn[2m+1] * S[2m+1], acc_m[m]), S the
 * sub-block sums of y) or Q5_K's (summs = fma(-dy * dmin, sum of mn[j] * S[j], summs)); then
 * hsum_float_8 lane-wise and the mins.  Per chunk (same 4 bytes of qs of 16 rows) one vpdpbusd
 * per nibble against a broadcast activation dword (|t| <= 4 * 31 * 128: 16 bits), then
 * lane k += t * scale in one vpdpwssd (the scale zero-extended to 32 bits, so t's high half,
 * its sign, multiplies 0).  The 6-bit scales and mins of 16 rows are unpacked with ggml's
 * kmask arithmetic on the three dwords of each row (one 512-bit register each).
 *
 * The super-block X16_PF_K ahead in the stream is prefetched into L2 (X16_PF_HINT), an eighth
 * of its lines per lane k (none past the rows): the hardware prefetcher alone left the loads
 * waiting (bench-gemv from DRAM, one thread, 64-row calls, the Xeon of BENCHMARKS.md, medians
 * of 6: Q4_K 12.3 -> 13.4 GB/s, Q5_K 11.3 -> 13.2; 2, 3 or 5 ahead alike, 8 less; into L1
 * 3 ahead: no gain there).
 */
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

/*
 * ggml's utmp of 16 rows' K-quant scales (the x16 layout's three 64-byte units at sc): v[0]
 * scales 0..3, v[1] scales 4..7, v[2] mins 0..3, v[3] mins 4..7, a byte each per row dword
 * (6-bit values), as get_scale_min_k4 gives them
 */
INLINE void k_unpack_scmin(const uint8_t *sc, __m512i v[4])
{
    const __m512i k3f = _mm512_set1_epi32(0x3f3f3f3f), k0f = _mm512_set1_epi32(0x0f0f0f0f);
    const __m512i k30 = _mm512_set1_epi32(0x30303030);
    const __m512i u0 = _mm512_loadu_si512(sc), u1 = _mm512_loadu_si512(sc + 64);
    const __m512i u2 = _mm512_loadu_si512(sc + 128);
    v[0] = _mm512_and_si512(u0, k3f);
    v[1] = _mm512_ternarylogic_epi32(u2, k0f, _mm512_and_si512(_mm512_srli_epi32(u0, 2), k30), 0xEA);
    v[2] = _mm512_and_si512(u1, k3f);
    v[3] = _mm512_ternarylogic_epi32(_mm512_srli_epi32(u2, 4), k0f,
                                     _mm512_and_si512(_mm512_srli_epi32(u1, 2), k30), 0xEA);
}

/* vpshufb pattern: byte b of every dword to its low byte (zero-extended), b2 >= 0 also to byte 2 */
INLINE __m512i k_byte_pat(int b, int b2)
{
    const int z = 0x80;
    char p[16];
    for (int d = 0; d < 4; d++) {
        p[4 * d] = (char)(4 * d + b);
        p[4 * d + 1] = (char)z;
        p[4 * d + 2] = (char)(b2 >= 0 ? 4 * d + b2 : z);
        p[4 * d + 3] = (char)z;
    }
    return _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)p));
}

#define X16_K_YB_MAX 128 /* super-blocks (n <= 32768) whose activation terms are computed once */

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
    const __m512i m4 = _mm512_set1_epi8(0x0F), m10 = _mm512_set1_epi8(0x10);
    const size_t blk = lc_x16_part_off(type, 1, LC_X16_P_D); /* bytes of a super-block */
    const int lines = (int)(blk / 64);
    for (int g = 0; g < nr / 16; g++) {
        const uint8_t *G = (const uint8_t *)vw + (size_t)g * 16 * w_stride;
        const size_t left = (size_t)(nr / 16 - g) * 16 * w_stride; /* bytes from G to the end */
        __m512 acc[8];
        _Pragma("GCC unroll 8") for (int k = 0; k < 8; k++) acc[k] = _mm512_setzero_ps();
        __m512 acc_m[4];
        _Pragma("GCC unroll 4") for (int m = 0; m < 4; m++) acc_m[m] = _mm512_setzero_ps();
        for (int i = 0; i < nb; i++) {
            const struct x16_q8_K ys = pre ? yb[i] : x16_q8_K_of(y + i);
            const int8_t *q8 = y[i].qs;
            const __m512 dy = _mm512_set1_ps(ys.d), ndy = _mm512_set1_ps(-ys.d);
            const __m512 d = _mm512_mul_ps(dy, _mm512_cvtph_ps(_mm256_loadu_si256(
                                                   (const __m256i *)(G + lc_x16_part_off(type, i, LC_X16_P_D)))));
            const __m512 dmin = _mm512_mul_ps(ndy, _mm512_cvtph_ps(_mm256_loadu_si256(
                                                       (const __m256i *)(G + lc_x16_part_off(type, i, LC_X16_P_DMIN)))));
            /* ggml's utmp: u0 scales 0..3, u1' scales 4..7, u2' mins 0..3, u3 mins 4..7 */
            __m512i scm[4];
            k_unpack_scmin(G + lc_x16_part_off(type, i, LC_X16_P_SC), scm);
            const __m512i sc03 = scm[0], sc47 = scm[1], mn03 = scm[2], mn47 = scm[3];
            /* the mins: mn[2m] * S[2m] + mn[2m+1] * S[2m+1] per row, exact */
            __m512i mp[4];
            _Pragma("GCC unroll 4") for (int m = 0; m < 4; m++) {
                const __m512i pair = _mm512_shuffle_epi8(m < 2 ? mn03 : mn47, k_byte_pat(2 * (m & 1), 2 * (m & 1) + 1));
                mp[m] = _mm512_dpwssd_epi32(_mm512_setzero_si512(), pair, _mm512_set1_epi32(ys.spair[m]));
            }
            if (q5) {
                const __m512i msum = _mm512_add_epi32(_mm512_add_epi32(mp[0], mp[1]), _mm512_add_epi32(mp[2], mp[3]));
                acc_m[0] = _mm512_fmadd_ps(dmin, _mm512_cvtepi32_ps(msum), acc_m[0]);
            } else {
                _Pragma("GCC unroll 4") for (int m = 0; m < 4; m++)
                    acc_m[m] = _mm512_fmadd_ps(dmin, _mm512_cvtepi32_ps(mp[m]), acc_m[m]);
            }
            /* scale j of 16 rows, zero-extended into 32-bit lanes */
            __m512i scl[8];
            _Pragma("GCC unroll 8") for (int j = 0; j < 8; j++)
                scl[j] = _mm512_shuffle_epi8(j < 4 ? sc03 : sc47, k_byte_pat(j & 3, -1));
            const size_t pf = (size_t)(i + X16_PF_K) * blk;
            _Pragma("GCC unroll 8") for (int k = 0; k < 8; k++) {
                for (int l = lines * k / 8; X16_PF_K && pf_on && l < lines * (k + 1) / 8; l++)
                    if (pf + 64 * (size_t)l < left)
                        _mm_prefetch((const char *)G + pf + 64 * l, X16_PF_HINT);
                __m512i lane = _mm512_setzero_si512();
                const __m512i h = q5 ? _mm512_loadu_si512(G + lc_x16_k_qh_off(i, k)) : _mm512_setzero_si512();
                _Pragma("GCC unroll 4") for (int j = 0; j < 4; j++) {
                    const __m512i v = _mm512_loadu_si512(G + lc_x16_k_qs_off(type, i, j, k));
                    __m512i lo = _mm512_and_si512(v, m4);
                    __m512i hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
                    if (q5) { /* bit 2j of qh -> bit 4 of the low quant, bit 2j + 1 -> of the high */
                        const __m512i hl = j == 0 ? _mm512_slli_epi16(h, 4) : j == 1 ? _mm512_slli_epi16(h, 2)
                                           : j == 2 ? h : _mm512_srli_epi16(h, 2);
                        const __m512i hh = j == 0 ? _mm512_slli_epi16(h, 3) : j == 1 ? _mm512_slli_epi16(h, 1)
                                           : j == 2 ? _mm512_srli_epi16(h, 1) : _mm512_srli_epi16(h, 3);
                        lo = _mm512_ternarylogic_epi32(lo, hl, m10, 0xF8);
                        hi = _mm512_ternarylogic_epi32(hi, hh, m10, 0xF8);
                    }
                    const __m512i tl = _mm512_dpbusd_epi32(_mm512_setzero_si512(), lo,
                                                           _mm512_set1_epi32(ld_i32(q8 + 64 * j + 4 * k)));
                    const __m512i th = _mm512_dpbusd_epi32(_mm512_setzero_si512(), hi,
                                                           _mm512_set1_epi32(ld_i32(q8 + 64 * j + 32 + 4 * k)));
                    lane = _mm512_dpwssd_epi32(lane, tl, scl[2 * j]);
                    lane = _mm512_dpwssd_epi32(lane, th, scl[2 * j + 1]);
                }
                acc[k] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(lane), acc[k]);
            }
        }
        const __m512 hs = _mm512_add_ps(
            _mm512_add_ps(_mm512_add_ps(acc[0], acc[4]), _mm512_add_ps(acc[2], acc[6])),
            _mm512_add_ps(_mm512_add_ps(acc[1], acc[5]), _mm512_add_ps(acc[3], acc[7])));
        const __m512 ms = q5 ? acc_m[0]
                             : _mm512_add_ps(_mm512_add_ps(acc_m[0], acc_m[2]),
                                             _mm512_add_ps(acc_m[1], acc_m[3]));
        _mm512_storeu_ps(s + 16 * g, _mm512_add_ps(hs, ms));
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



/*
 * K-quant prompt batches (Q4_K, Q5_K, Q6_K) with the unpacking taken out of the column loop, as
 * the Q4_1 GEMM's x16e blocks: per (row, column) the integer lanes and the float operations of
 * gemv_x16_k45 / gemv_x16_q6_K, in their order, so the same bits, with about 170 vector
 * operations per super-block, 16 rows and column instead of about 280 (Q4_K) to 420 (Q6_K).
 *
 *   - Each group of 16 rows is expanded (xk_expand_q4_K / _q5_K / _q6_K) into 4096 bytes per
 *     super-block: every quant as a byte (Q5_K: with its fifth bit, Q6_K: its 6 bits, 0..63),
 *     the unsigned operand of vpdpbusd as it is, 16 rows x 4 bytes per 64-byte unit as in the
 *     x16 layout, lane by lane: super-block i, lane k at E + 4096 i + 512 k, then the 8 units
 *     of lane k: Q4_K / Q5_K unit (k, j) as its low nibbles (sub-block 2j, weights 64j + 4k..)
 *     at + 128 j and its high ones (2j + 1) at + 128 j + 64; Q6_K half h, quarter v (weights
 *     128h + 32v + 4k..) at + 64 (4h + v).
 *   - xk_tile then takes up to XK_COLS columns against the group, super-block by super-block:
 *     the rows' scales (and Q4_K / Q5_K mins, dmin) unpacked once per super-block for all its
 *     columns, each lane's 8 expanded registers loaded once for all of them; per column and
 *     lane k, 8 vpdpbusd (the activation dword a {1to16} memory operand; Q6_K: from -32 times
 *     the sum of the 4 activations, as gemv_x16_q6_K) and 8 vpdpwssd by the scales (the
 *     lane is an exact integer: Q4_K / Q5_K one chain, Q6_K two chains added), one conversion
 *     and one FMA.  The float
 *     accumulators live in a stack array (6 KB), not in the 32 registers: acc[c][k] =
 *     fma(d, float(lane k), acc[c][k]) with d = dy * dx; the mins Q4_K's way (4 accumulators)
 *     or Q5_K's (one); all in super-block order; then hsum_float_8 lane-wise and the mins as
 *     the GEMVs add them.
 *   - Every column passes over a group before the next group is expanded (expanding a group
 *     again for each chunk of columns, so that the chunk's activations stayed in L2, read the
 *     weights from memory each time: slower in the model, where nothing else has them in
 *     cache); the next group is prefetched meanwhile.
 *
 * bench/bench-gemm-x16 (one thread, 512 columns, TinyLlama shapes, BENCH_CPU_TIME=1, best of
 * 40 on an AMD EPYC (family 26) shared with other work), GMAC/s, GEMV per column -> these:
 * q4_K 93 / 85 -> 165 / 158, q5_K 54 / 51 -> 170 / 165, q6_K 65 / 54 -> 128 / 125
 * (2048 x 256 / 5632 x 256).  Every 512-bit operation counts there (a vpbroadcastd of the Q6_K
 * bias into dpbusd's accumulator costs as much as a vpdpbusd: Q6_K without it would be 155).
 */
#define XK_COLS 8      /* columns per tile */
#define XK_BLK 4096    /* bytes of an expanded super-block of 16 rows */
enum { XK_Q4, XK_Q5, XK_Q6 };

/* Q4_K: nb super-blocks of the group G (repack.h's layout) into E (XK_BLK bytes each) */
static void xk_expand_q4_K(uint8_t *E, const uint8_t *G, int nb)
{
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    for (int i = 0; i < nb; i++)
        for (int k = 0; k < 8; k++)
            _Pragma("GCC unroll 4") for (int j = 0; j < 4; j++) {
                const __m512i v = _mm512_loadu_si512(G + lc_x16_k_qs_off(LC_TYPE_Q4_K, i, j, k));
                uint8_t *e = E + (size_t)i * XK_BLK + 512 * k + 128 * j;
                _mm512_store_si512(e, _mm512_and_si512(v, m4));
                _mm512_store_si512(e + 64, _mm512_and_si512(_mm512_srli_epi16(v, 4), m4));
            }
}

/* Q5_K: the same with the fifth bits (bit 2j of the qh unit: low nibbles, 2j + 1: high), as
 * gemv_x16_k45 merges them */
static void xk_expand_q5_K(uint8_t *E, const uint8_t *G, int nb)
{
    const __m512i m4 = _mm512_set1_epi8(0x0F), m10 = _mm512_set1_epi8(0x10);
    for (int i = 0; i < nb; i++)
        for (int k = 0; k < 8; k++) {
            const __m512i h = _mm512_loadu_si512(G + lc_x16_k_qh_off(i, k));
            _Pragma("GCC unroll 4") for (int j = 0; j < 4; j++) {
                const __m512i v = _mm512_loadu_si512(G + lc_x16_k_qs_off(LC_TYPE_Q5_K, i, j, k));
                const __m512i hl = j == 0 ? _mm512_slli_epi16(h, 4) : j == 1 ? _mm512_slli_epi16(h, 2)
                                   : j == 2 ? h : _mm512_srli_epi16(h, 2);
                const __m512i hh = j == 0 ? _mm512_slli_epi16(h, 3) : j == 1 ? _mm512_slli_epi16(h, 1)
                                   : j == 2 ? _mm512_srli_epi16(h, 1) : _mm512_srli_epi16(h, 3);
                uint8_t *e = E + (size_t)i * XK_BLK + 512 * k + 128 * j;
                _mm512_store_si512(e, _mm512_ternarylogic_epi32(_mm512_and_si512(v, m4), hl, m10, 0xF8));
                _mm512_store_si512(e + 64, _mm512_ternarylogic_epi32(
                                               _mm512_and_si512(_mm512_srli_epi16(v, 4), m4), hh, m10, 0xF8));
            }
        }
}

/* Q6_K: the 6-bit quants of half h, quarter v, lane k (ql nibbles | qh bits 2v, 2v+1 as bits
 * 4, 5), as gemv_x16_q6_K forms them */
static void xk_expand_q6_K(uint8_t *E, const uint8_t *G, int nb)
{
    const __m512i m4 = _mm512_set1_epi8(0x0F), m30 = _mm512_set1_epi8(0x30);
    for (int i = 0; i < nb; i++) {
        const uint8_t *ql = G + lc_x16_q6_K_off(nb, i, LC_X16_QL);
        const uint8_t *qh = G + lc_x16_q6_K_off(nb, i, LC_X16_QH);
        for (int k = 0; k < 8; k++)
            _Pragma("GCC unroll 2") for (int h = 0; h < 2; h++) {
                const __m512i bh = _mm512_loadu_si512(qh + 64 * (8 * h + k));
                _Pragma("GCC unroll 4") for (int v = 0; v < 4; v++) {
                    const __m512i b = _mm512_loadu_si512(ql + 64 * (16 * h + 8 * (v & 1) + k));
                    const __m512i lo4 = v < 2 ? b : _mm512_srli_epi16(b, 4);
                    const __m512i hi2 = v == 0   ? _mm512_slli_epi16(bh, 4)
                                        : v == 1 ? _mm512_slli_epi16(bh, 2)
                                        : v == 2 ? bh
                                                 : _mm512_srli_epi16(bh, 2);
                    _mm512_store_si512(E + (size_t)i * XK_BLK + 512 * k + 64 * (4 * h + v),
                                       _mm512_ternarylogic_epi32(_mm512_and_si512(lo4, m4), hi2, m30, 0xF8));
                }
            }
    }
}

/* t + (2 s16 x 2 s16 of each lane, summed) */
INLINE __m512i dpwssd(__m512i t, __m512i a, __m512i b)
{
    return _mm512_dpwssd_epi32(t, a, b);
}

/* 0 + (2 s16 of w x 2 s16 at p, summed) per lane, and t + the same: p's dword broadcast as
 * the instruction's memory operand (a separate broadcast costs a vector operation here) */
INLINE __m512i dpwssd_z(__m512i w, const int32_t *p)
{
    __m512i t;
    __asm__("vpxord %x0, %x0, %x0\n\t"
            "vpdpwssd %2%{1to16%}, %1, %0"
            : "=&v"(t)
            : "v"(w), "m"(*p));
    return t;
}

INLINE __m512i dpwssd_b(__m512i t, __m512i w, const int32_t *p)
{
    __asm__("vpdpwssd %2%{1to16%}, %1, %0" : "+v"(t) : "v"(w), "m"(*p));
    return t;
}

/*
 * Q6_K: -32 * (activations 4j .. 4j+3) of super-block i of the C columns y into bias[c][j]
 * (gemv_x16_q6_K's q6_K_bias)
 */
INLINE void xk_q6_bias(const int C, int32_t (*bias)[64], const lc_block_q8_K *const *y, int i)
{
    for (int c = 0; c < C; c++)
        q6_K_bias(bias[c], y[c][i].qs);
}

/* an accumulator of xk_tile before super-block i: 0 for the first (no zeroing of the arrays
 * beforehand, which GCC made a rep stos of 4 KB per tile: 7 % of the Q4_K GEMM's samples) */
INLINE __m512 xk_acc(const float *p, int i)
{
    return i ? _mm512_load_ps(p) : _mm512_setzero_ps();
}

/* hsum_float_8 lane-wise: ((a0 + a4) + (a2 + a6)) + ((a1 + a5) + (a3 + a7)) of 8 accumulators
 * of 16 rows, vec_dot's hsum_ps order per row */
INLINE __m512 xk_hsum8(const float (*a)[16])
{
    return _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(_mm512_load_ps(a[0]), _mm512_load_ps(a[4])),
                                       _mm512_add_ps(_mm512_load_ps(a[2]), _mm512_load_ps(a[6]))),
                         _mm512_add_ps(_mm512_add_ps(_mm512_load_ps(a[1]), _mm512_load_ps(a[5])),
                                       _mm512_add_ps(_mm512_load_ps(a[3]), _mm512_load_ps(a[7]))));
}

/*
 * 16 rows (group G, expanded as E) x C columns y[0..C) (nb super-blocks each) of kind (XK_Q4,
 * XK_Q5, XK_Q6): the outputs of column c to s + c * ld_s (16 floats).  Per (row, column) the
 * GEMV's operations in its order (see above).
 */
INLINE void xk_tile(const int kind, const int C, int nb, float *s, size_t ld_s, const uint8_t *G,
                    const uint8_t *E, const lc_block_q8_K *const *y)
{
    const enum lc_type type = kind == XK_Q5 ? LC_TYPE_Q5_K : LC_TYPE_Q4_K;
    float acc[XK_COLS][8][16] __attribute__((aligned(64)));
    float accm[XK_COLS][4][16] __attribute__((aligned(64)));
    float dd[XK_COLS][16] __attribute__((aligned(64))); /* d = dy * dx of the super-block */
    /* Q6_K: the columns' biases of a super-block, computed one super-block ahead (read back
     * right after their stores, the broadcasts would wait for them) */
    int32_t bias[2][XK_COLS][64] __attribute__((aligned(64)));
    if (kind == XK_Q6)
        xk_q6_bias(C, bias[0], y, 0);
    for (int i = 0; i < nb; i++) {
        const uint8_t *Ei = E + (size_t)i * XK_BLK;
        if (kind == XK_Q6) {
            const __m512 dx = _mm512_cvtph_ps(_mm256_loadu_si256(
                (const __m256i *)(G + lc_x16_q6_K_off(nb, i, LC_X16_D))));
            for (int c = 0; c < C; c++)
                _mm512_store_ps(dd[c], _mm512_mul_ps(_mm512_set1_ps(y[c][i].d), dx));
            if (i + 1 < nb)
                xk_q6_bias(C, bias[(i + 1) & 1], y, i + 1);
            __asm__ volatile("" : "+m"(bias));
            const int8_t *sc = (const int8_t *)(G + lc_x16_q6_K_off(nb, i, LC_X16_SC));
            /* lanes 0..3 take the scales 8h + 2v of the rows, lanes 4..7 8h + 2v + 1 */
            for (int kh = 0; kh < 2; kh++) {
                __m512i scl[8];
                _Pragma("GCC unroll 8") for (int t = 0; t < 8; t++)
                    scl[t] = _mm512_cvtepu16_epi32(_mm256_cvtepi8_epi16(
                        _mm_loadu_si128((const __m128i *)(sc + 16 * (2 * t + kh)))));
                for (int k = 4 * kh; k < 4 * kh + 4; k++) {
                    __m512i w[8];
                    _Pragma("GCC unroll 8") for (int t = 0; t < 8; t++)
                        w[t] = _mm512_load_si512(Ei + 512 * k + 64 * t);
                    _Pragma("GCC unroll 8") for (int c = 0; c < C; c++) {
                        const int8_t *q8 = y[c][i].qs + 4 * k;
                        const int32_t *b = bias[i & 1][c] + k;
                        /* unit t = 4h + v: activations 128h + 32v + 4k, bias dword 32h + 8v + k;
                         * the first products of each chain by vpmaddwd (dpwssd from 0) */
                        __m512i l0 = _mm512_madd_epi16(dpbusd_bias(b, w[0], q8), scl[0]);
                        __m512i l1 = _mm512_madd_epi16(dpbusd_bias(b + 8, w[1], q8 + 32), scl[1]);
                        _Pragma("GCC unroll 3") for (int t = 2; t < 8; t += 2) {
                            l0 = dpwssd(l0, dpbusd_bias(b + 8 * t, w[t], q8 + 32 * t), scl[t]);
                            l1 = dpwssd(l1, dpbusd_bias(b + 8 * t + 8, w[t + 1], q8 + 32 * t + 32),
                                        scl[t + 1]);
                        }
                        const __m512i lane = _mm512_add_epi32(l0, l1);
                        _mm512_store_ps(acc[c][k], _mm512_fmadd_ps(_mm512_load_ps(dd[c]), _mm512_cvtepi32_ps(lane),
                                                                   xk_acc(acc[c][k], i)));
                    }
                }
            }
            continue;
        }
        const __m512 dx = _mm512_cvtph_ps(_mm256_loadu_si256(
            (const __m256i *)(G + lc_x16_part_off(type, i, LC_X16_P_D))));
        const __m512 dminx = _mm512_cvtph_ps(_mm256_loadu_si256(
            (const __m256i *)(G + lc_x16_part_off(type, i, LC_X16_P_DMIN))));
        /* ggml's utmp as gemv_x16_k45 unpacks it */
        __m512i scm[4];
        k_unpack_scmin(G + lc_x16_part_off(type, i, LC_X16_P_SC), scm);
        const __m512i sc03 = scm[0], sc47 = scm[1], mn03 = scm[2], mn47 = scm[3];
        /* the rows' min pairs mn[2m], mn[2m+1] as 16-bit values, for vpdpwssd */
        __m512i pair[4];
        _Pragma("GCC unroll 4") for (int m = 0; m < 4; m++)
            pair[m] = _mm512_shuffle_epi8(m < 2 ? mn03 : mn47, k_byte_pat(2 * (m & 1), 2 * (m & 1) + 1));
        /* the mins and d of every column */
        for (int c = 0; c < C; c++) {
            const lc_block_q8_K *yc = y[c] + i;
            _mm512_store_ps(dd[c], _mm512_mul_ps(_mm512_set1_ps(yc->d), dx));
            /* dy * dmin: the mins' fma(-dy * dmin, x, acc) as fnmadd(dy * dmin, x, acc), the
             * same value (negation is exact) */
            const __m512 pmin = _mm512_mul_ps(_mm512_set1_ps(yc->d), dminx);
            /* S[j] = bsums[2j] + bsums[2j+1]; sp[m] = S[2m] | S[2m+1] << 16 (|S| <= 4096) */
            const __m256i S = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)yc->bsums),
                                                _mm256_set1_epi16(1));
            int32_t sp[4] __attribute__((aligned(16)));
            _mm_store_si128((__m128i *)sp, _mm_packs_epi32(_mm256_castsi256_si128(S),
                                                           _mm256_extracti128_si256(S, 1)));
            /* mn[2m] * S[2m] + mn[2m+1] * S[2m+1] per row, exact (Q5_K: their sum, in one chain) */
            if (kind == XK_Q5) {
                __m512i msum = dpwssd_z(pair[0], sp);
                _Pragma("GCC unroll 3") for (int m = 1; m < 4; m++)
                    msum = dpwssd_b(msum, pair[m], sp + m);
                _mm512_store_ps(accm[c][0], _mm512_fnmadd_ps(pmin, _mm512_cvtepi32_ps(msum),
                                                             xk_acc(accm[c][0], i)));
            } else {
                _Pragma("GCC unroll 4") for (int m = 0; m < 4; m++)
                    _mm512_store_ps(accm[c][m], _mm512_fnmadd_ps(pmin, _mm512_cvtepi32_ps(dpwssd_z(pair[m], sp + m)),
                                                                 xk_acc(accm[c][m], i)));
            }
        }
        /* scale j of the 16 rows, zero-extended into 32-bit lanes */
        __m512i scl[8];
        _Pragma("GCC unroll 8") for (int j = 0; j < 8; j++)
            scl[j] = _mm512_shuffle_epi8(j < 4 ? sc03 : sc47, k_byte_pat(j & 3, -1));
        for (int k = 0; k < 8; k++) {
            __m512i w[8];
            _Pragma("GCC unroll 8") for (int t = 0; t < 8; t++)
                w[t] = _mm512_load_si512(Ei + 512 * k + 64 * t);
            _Pragma("GCC unroll 8") for (int c = 0; c < C; c++) {
                const int8_t *q8 = y[c][i].qs + 4 * k;
                /* one chain (the first product by vpmaddwd: dpwssd from 0); two chains
                 * and an add were no faster, the other columns hide its latency */
                __m512i lane = _mm512_madd_epi16(dpbusd_z(w[0], q8), scl[0]);
                lane = dpwssd(lane, dpbusd_z(w[1], q8 + 32), scl[1]);
                _Pragma("GCC unroll 3") for (int j = 1; j < 4; j++) {
                    lane = dpwssd(lane, dpbusd_z(w[2 * j], q8 + 64 * j), scl[2 * j]);
                    lane = dpwssd(lane, dpbusd_z(w[2 * j + 1], q8 + 64 * j + 32), scl[2 * j + 1]);
                }
                _mm512_store_ps(acc[c][k], _mm512_fmadd_ps(_mm512_load_ps(dd[c]), _mm512_cvtepi32_ps(lane),
                                                           xk_acc(acc[c][k], i)));
            }
        }
    }
    for (int c = 0; c < C; c++) {
        const __m512 hs = xk_hsum8(acc[c]);
        if (kind == XK_Q6) {
            _mm512_storeu_ps(s + (size_t)c * ld_s, hs);
            continue;
        }
        const __m512 ms = kind == XK_Q5
                              ? _mm512_load_ps(accm[c][0])
                              : _mm512_add_ps(_mm512_add_ps(_mm512_load_ps(accm[c][0]), _mm512_load_ps(accm[c][2])),
                                              _mm512_add_ps(_mm512_load_ps(accm[c][1]), _mm512_load_ps(accm[c][3])));
        _mm512_storeu_ps(s + (size_t)c * ld_s, _mm512_add_ps(hs, ms));
    }
}

/* the tile for nc columns at a (a_stride bytes apart) against one group, XK_COLS at a time,
 * then 4, 2, 1 (every column gets the same operations whatever tile takes it); meanwhile the
 * pf_bytes at pf (the next group, to be expanded next: from memory, the expansion waited for
 * it) are prefetched into L2, a share before each tile */
INLINE void xk_group(const int kind, int nb, float *s, size_t ld_s, const uint8_t *G,
                     const uint8_t *E, const uint8_t *a, size_t a_stride, int nc,
                     const uint8_t *pf, size_t pf_bytes)
{
    const size_t pf_lines = pf_bytes / 64, n_tiles = (size_t)(nc + XK_COLS - 1) / XK_COLS;
    const size_t per_tile = (pf_lines + n_tiles - 1) / n_tiles;
    size_t pf_next = 0;
    for (int c0 = 0; c0 < nc;) {
        for (size_t l = 0; l < per_tile && pf_next < pf_lines; l++, pf_next++)
            _mm_prefetch((const char *)pf + 64 * pf_next, _MM_HINT_T1);
        const int left = nc - c0;
        const int C = left >= XK_COLS ? XK_COLS : left >= 4 ? 4 : left >= 2 ? 2 : 1;
        const lc_block_q8_K *y[XK_COLS];
        for (int c = 0; c < C; c++)
            y[c] = (const void *)(a + (size_t)(c0 + c) * a_stride);
        float *sc = s + (size_t)c0 * ld_s;
        switch (C) {
        case XK_COLS: xk_tile(kind, XK_COLS, nb, sc, ld_s, G, E, y); break;
        case 4: xk_tile(kind, 4, nb, sc, ld_s, G, E, y); break;
        case 2: xk_tile(kind, 2, nb, sc, ld_s, G, E, y); break;
        default: xk_tile(kind, 1, nb, sc, ld_s, G, E, y); break;
        }
        c0 += C;
    }
}

/*
 * kernels.h's gemm_x16 for Q4_K, Q5_K and Q6_K (kind): the expanded groups for 4 columns or
 * more (in the calling thread's scratch, lc_kernel_scratch: 4 KB per super-block), else, or when
 * that allocation fails, the GEMV per column (the same bits).
 */
INLINE void gemm_x16_kq(const int kind, int n, float *s, size_t ld_s, const void *w,
                        size_t w_stride, int nr, const void *a, size_t a_stride, int nc)
{
    const int nb = n / LC_QK_K;
    /* the calling thread's scratch, as gemm_x16_q4_0's (64-byte aligned; kept between calls):
     * 96 KB on the stack made these frames 107 KB, more than some threads' stacks */
    uint8_t *E = nc >= 4 && nb > 0 ? lc_kernel_scratch((size_t)nb * XK_BLK) : NULL;
    if (!E) {
        for (int g = 0; g < nr / 16; g++) {
            const uint8_t *G = (const uint8_t *)w + (size_t)g * 16 * w_stride;
            for (int c = 0; c < nc; c++) {
                float *sg = s + (size_t)c * ld_s + 16 * g;
                const uint8_t *ac = (const uint8_t *)a + (size_t)c * a_stride;
                /* Q4_K / Q5_K: the first column through the decode GEMV (its prefetch streams
                 * the group in), the others without the prefetch */
                if (kind == XK_Q6)
                    gemv_x16_q6_K(n, sg, G, w_stride, 16, ac);
                else if (c == 0)
                    gemv_x16_k45(kind == XK_Q5, 1, n, sg, G, w_stride, 16, ac);
                else
                    gemv_x16_k45(kind == XK_Q5, 0, n, sg, G, w_stride, 16, ac);
            }
        }
        return;
    }
    for (int g = 0; g < nr / 16; g++) {
        const uint8_t *G = (const uint8_t *)w + (size_t)g * 16 * w_stride;
        if (kind == XK_Q4)
            xk_expand_q4_K(E, G, nb);
        else if (kind == XK_Q5)
            xk_expand_q5_K(E, G, nb);
        else
            xk_expand_q6_K(E, G, nb);
        xk_group(kind, nb, s + 16 * g, ld_s, G, E, a, a_stride, nc, G + 16 * w_stride,
                 g + 1 < nr / 16 ? 16 * w_stride : 0);
    }
}

static void gemm_x16_q4_K(int n, float *s, size_t ld_s, const void *w, size_t w_stride, int nr,
                          const void *a, size_t a_stride, int nc)
{
    gemm_x16_kq(XK_Q4, n, s, ld_s, w, w_stride, nr, a, a_stride, nc);
}

static void gemm_x16_q5_K(int n, float *s, size_t ld_s, const void *w, size_t w_stride, int nr,
                          const void *a, size_t a_stride, int nc)
{
    gemm_x16_kq(XK_Q5, n, s, ld_s, w, w_stride, nr, a, a_stride, nc);
}

static void gemm_x16_q6_K(int n, float *s, size_t ld_s, const void *w, size_t w_stride, int nr,
                          const void *a, size_t a_stride, int nc)
{
    gemm_x16_kq(XK_Q6, n, s, ld_s, w, w_stride, nr, a, a_stride, nc);
}

/*
 * IQ4_XS prompt batches on AVX-512: vec_dot_iq4_xs_q8_K's integer lanes and float operations
 * (x86-kquants.h: lane k of a super-block = sum over its sub-blocks t of (ls_t - 32) times the
 * products of the weights 32t + 4k .. 32t + 4k + 3, exact; then acc_k = fma(dx * dy,
 * float(lane k), acc_k) and hsum_float_8), so the same bits, for 16 rows at a time.
 * The levels need 8 bits (-127 .. 113), so no x16 layout of a 4- or 6-bit type holds them, and
 * a 4-product vpdpbusd unit (|sum| <= 4 * 127 * 127) does not fit the 16 bits that let xk_tile
 * scale it with one vpdpwssd.  Here the scale goes into the weights instead: each group of 16
 * rows is expanded, per super-block, into (ls - 32) * level as 16-bit values (|v| <= 32 * 127),
 * two of a row per dword, dword j (weights 2j, 2j + 1) of the 16 rows in one 64-byte unit at
 * E + XI_BLK * i + 64 * j; the activations are widened to 16 bits per tile and super-block.
 * Lane k of a column is then 16 vpdpwssd (dwords 16t + 2k and 16t + 2k + 1, t = 0..7; the
 * activation dword a {1to16} memory operand) -- 16 integer operations per 512 products, as
 * Q4_K's xk_tile -- one conversion and one FMA, in xk_tile's tile and accumulator scheme.
 */
/* bytes of an expanded IQ4_XS super-block of 16 rows (their dx: 64 bytes more per super-block,
 * all of them after the nb blocks) */
#define XI_BLK 8192

/* the 16 rows at w (w_stride bytes apart), nb super-blocks: the units into E, each row's dx of
 * super-block i as a float into D[16 * i + r] */
static void xi_expand(uint8_t *E, float *D, const uint8_t *w, size_t w_stride, int nb)
{
    const __m128i values = _mm_loadu_si128((const __m128i *)lc_kvalues_iq4nl);
    const __m128i m4 = _mm_set1_epi8(0x0F);
    const __m512i rows = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10,
                                                              11, 12, 13, 14, 15),
                                            _mm512_set1_epi32(LC_QK_K / 2 * 4));
    int32_t T[16][LC_QK_K / 2] __attribute__((aligned(64))); /* row r's dwords, in order */
    for (int i = 0; i < nb; i++) {
        for (int r = 0; r < 16; r++) {
            const lc_block_iq4_xs *x = (const lc_block_iq4_xs *)(const void *)(w + (size_t)r * w_stride) + i;
            D[16 * i + r] = h2f(x->d);
            for (int t = 0; t < 8; t++) {
                const int ls = ((x->scales_l[t / 2] >> 4 * (t & 1)) & 0xf) |
                               (((x->scales_h >> 2 * t) & 3) << 4);
                const __m128i b = _mm_loadu_si128((const __m128i *)(x->qs + 16 * t));
                const __m256i lv = _mm256_set_m128i(
                    _mm_shuffle_epi8(values, _mm_and_si128(_mm_srli_epi16(b, 4), m4)),
                    _mm_shuffle_epi8(values, _mm_and_si128(b, m4)));
                const __m512i v = _mm512_mullo_epi16(_mm512_cvtepi8_epi16(lv),
                                                     _mm512_set1_epi16((short)(ls - 32)));
                _mm512_store_si512(&T[r][16 * t], v);
            }
        }
        uint8_t *Ei = E + (size_t)i * XI_BLK;
        for (int j = 0; j < LC_QK_K / 2; j++)
            _mm512_store_si512(Ei + 64 * j, _mm512_i32gather_epi32(rows, &T[0][j], 1));
    }
}

/*
 * 16 rows (expanded as E, dx in D) x C columns y[0..C) (nb super-blocks each): the outputs of
 * column c to s + c * ld_s (16 floats), with vec_dot's operations per (row, column) in its order.
 */
INLINE void xi_tile(const int C, int nb, float *s, size_t ld_s, const uint8_t *E, const float *D,
                    const lc_block_q8_K *const *y)
{
    float acc[XK_COLS][8][16] __attribute__((aligned(64)));
    float dd[XK_COLS][16] __attribute__((aligned(64)));
    /* the columns' activations of a super-block as 16-bit values, widened one super-block
     * ahead (read back by the broadcasts right after their stores, they would wait for them) */
    int16_t y16[2][XK_COLS][LC_QK_K] __attribute__((aligned(64)));
    for (int c = 0; c < C; c++)
        for (int q = 0; q < 8; q++)
            _mm512_store_si512(&y16[0][c][32 * q], _mm512_cvtepi8_epi16(_mm256_loadu_si256(
                                                       (const __m256i *)(y[c][0].qs + 32 * q))));
    for (int i = 0; i < nb; i++) {
        const uint8_t *Ei = E + (size_t)i * XI_BLK;
        const __m512 dx = _mm512_loadu_ps(D + 16 * i);
        for (int c = 0; c < C; c++)
            _mm512_store_ps(dd[c], _mm512_mul_ps(_mm512_set1_ps(y[c][i].d), dx));
        if (i + 1 < nb)
            for (int c = 0; c < C; c++)
                for (int q = 0; q < 8; q++)
                    _mm512_store_si512(&y16[(i + 1) & 1][c][32 * q],
                                       _mm512_cvtepi8_epi16(_mm256_loadu_si256(
                                           (const __m256i *)(y[c][i + 1].qs + 32 * q))));
        __asm__ volatile("" : "+m"(y16));
        for (int k = 0; k < 8; k++) {
            __m512i wv[16];
            _Pragma("GCC unroll 8") for (int t = 0; t < 8; t++) {
                wv[2 * t] = _mm512_load_si512(Ei + 64 * (16 * t + 2 * k));
                wv[2 * t + 1] = _mm512_load_si512(Ei + 64 * (16 * t + 2 * k + 1));
            }
            _Pragma("GCC unroll 8") for (int c = 0; c < C; c++) {
                const int32_t *yd = (const int32_t *)(const void *)y16[i & 1][c] + 2 * k;
                __m512i lane = dpwssd_z(wv[0], yd);
                lane = dpwssd_b(lane, wv[1], yd + 1);
                _Pragma("GCC unroll 7") for (int t = 1; t < 8; t++) {
                    lane = dpwssd_b(lane, wv[2 * t], yd + 16 * t);
                    lane = dpwssd_b(lane, wv[2 * t + 1], yd + 16 * t + 1);
                }
                _mm512_store_ps(acc[c][k], _mm512_fmadd_ps(_mm512_load_ps(dd[c]), _mm512_cvtepi32_ps(lane),
                                                           xk_acc(acc[c][k], i)));
            }
        }
    }
    for (int c = 0; c < C; c++)
        _mm512_storeu_ps(s + (size_t)c * ld_s, xk_hsum8(acc[c]));
}

/*
 * Q2_K prompt batches on AVX-512: x86-kquants.h's q2_K_tile (vec_dot_q2_K_q8_K) integer lanes
 * and float operations, so the same bits, for 16 rows at a time.  A Q2_K weight's integer is
 * its 4-bit sub-block scale times its 2-bit quant, sc * q <= 45, and lane k of vec_dot sums
 * sc * q * y over the weights 32j + 4k .. 32j + 4k + 3 (j = 0..7), each 4 of them in one
 * sub-block of 16: so each group of 16 rows is expanded, per super-block, into the products
 * sc * q as bytes, dword 8j + k (those 4 weights) of the 16 rows in one 64-byte unit, the
 * unsigned operand of vpdpbusd as it is (the activation dword a {1to16} memory operand); the
 * rows' min pairs (mins[2m], mins[2m + 1] as 16-bit values) for vpdpwssd against the bsums
 * pairs, and dx, dmin as floats.  Per (row, column) and super-block then: the mins' lane m
 * exact (vpdpwssd), acc[m] = fma(-dy * dmin, float(it), acc[m]); lane k = 8 vpdpbusd, acc[k] =
 * fma(dy * dx, float(lane k), acc[k]); hsum_float_8 at the end, as q2_K_tile.
 */
#define X2_BLK 4736 /* bytes of an expanded Q2_K super-block of 16 rows */
enum { X2_MINS = 4096, X2_D = 4608, X2_DMIN = 4672 };

/* the 16 rows at w (w_stride bytes apart), nb super-blocks, into E (X2_BLK bytes each) */
static void x2_expand(uint8_t *E, const uint8_t *w, size_t w_stride, int nb)
{
    const __m512i rows_q = _mm512_mullo_epi32(
        _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), _mm512_set1_epi32(LC_QK_K));
    const __m512i rows_m = _mm512_mullo_epi32(
        _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), _mm512_set1_epi32(32));
    const __m256i m3 = _mm256_set1_epi8(3);
    uint8_t T[16][LC_QK_K] __attribute__((aligned(64)));  /* row r's sc * q, in weight order */
    int32_t M[16][8] __attribute__((aligned(64)));         /* row r's min pairs */
    for (int i = 0; i < nb; i++) {
        uint8_t *Ei = E + (size_t)i * X2_BLK;
        float *dx = (float *)(void *)(Ei + X2_D), *dm = (float *)(void *)(Ei + X2_DMIN);
        for (int r = 0; r < 16; r++) {
            const lc_block_q2_K *x = (const lc_block_q2_K *)(const void *)(w + (size_t)r * w_stride) + i;
            dx[r] = h2f(x->d);
            dm[r] = h2f(x->dmin);
            for (int m = 0; m < 8; m++)
                M[r][m] = (x->scales[2 * m] >> 4) | (x->scales[2 * m + 1] >> 4) << 16;
            _Pragma("GCC unroll 2") for (int h = 0; h < 2; h++) {
                const __m256i qbits = _mm256_loadu_si256((const __m256i *)(x->qs + 32 * h));
                _Pragma("GCC unroll 4") for (int v = 0; v < 4; v++) {
                    /* weights 128h + 32v + 0..31: scales 8h + 2v (0..15), 8h + 2v + 1 */
                    const int j = 4 * h + v;
                    const __m512i q16 = _mm512_cvtepu8_epi16(_mm256_and_si256(_mm256_srli_epi16(qbits, 2 * v), m3));
                    const __m512i sc = _mm512_inserti64x4(_mm512_set1_epi16((short)(x->scales[2 * j] & 0xF)),
                                                          _mm256_set1_epi16((short)(x->scales[2 * j + 1] & 0xF)), 1);
                    _mm256_store_si256((__m256i *)&T[r][32 * j], _mm512_cvtepi16_epi8(_mm512_mullo_epi16(q16, sc)));
                }
            }
        }
        for (int u = 0; u < LC_QK_K / 4; u++)
            _mm512_store_si512(Ei + 64 * u, _mm512_i32gather_epi32(rows_q, &T[0][4 * u], 1));
        for (int m = 0; m < 8; m++)
            _mm512_store_si512(Ei + X2_MINS + 64 * m, _mm512_i32gather_epi32(rows_m, &M[0][m], 1));
    }
}

/* 16 rows (expanded as E) x C columns y[0..C) (nb super-blocks each): the outputs of column c
 * to s + c * ld_s (16 floats), with q2_K_tile's operations per (row, column) in its order */
INLINE void x2_tile(const int C, int nb, float *s, size_t ld_s, const uint8_t *E,
                    const lc_block_q8_K *const *y)
{
    float acc[XK_COLS][8][16] __attribute__((aligned(64)));
    for (int i = 0; i < nb; i++) {
        const uint8_t *Ei = E + (size_t)i * X2_BLK;
        const __m512 dx = _mm512_load_ps((const float *)(const void *)(Ei + X2_D));
        const __m512 dmx = _mm512_load_ps((const float *)(const void *)(Ei + X2_DMIN));
        __m512 dd[XK_COLS];
        {
            __m512i mp[8];
            _Pragma("GCC unroll 8") for (int m = 0; m < 8; m++)
                mp[m] = _mm512_load_si512(Ei + X2_MINS + 64 * m);
            _Pragma("GCC unroll 8") for (int c = 0; c < C; c++) {
                dd[c] = _mm512_mul_ps(_mm512_set1_ps(y[c][i].d), dx);
                /* -dy * dmin: the negation of dy first, as q2_K_tile (exact either way) */
                const __m512 dmin = _mm512_mul_ps(_mm512_set1_ps(-y[c][i].d), dmx);
                const int32_t *bp = (const int32_t *)(const void *)y[c][i].bsums;
                _Pragma("GCC unroll 8") for (int m = 0; m < 8; m++)
                    _mm512_store_ps(acc[c][m], _mm512_fmadd_ps(dmin, _mm512_cvtepi32_ps(dpwssd_z(mp[m], bp + m)),
                                                               xk_acc(acc[c][m], i)));
            }
        }
        for (int k = 0; k < 8; k++) {
            __m512i wv[8];
            _Pragma("GCC unroll 8") for (int j = 0; j < 8; j++)
                wv[j] = _mm512_load_si512(Ei + 64 * (8 * j + k));
            _Pragma("GCC unroll 8") for (int c = 0; c < C; c++) {
                const int8_t *q8 = y[c][i].qs + 4 * k;
                __m512i lane = dpbusd_z(wv[0], q8);
                _Pragma("GCC unroll 7") for (int j = 1; j < 8; j++)
                    lane = dpbusd_b(lane, wv[j], q8 + 32 * j);
                _mm512_store_ps(acc[c][k], _mm512_fmadd_ps(dd[c], _mm512_cvtepi32_ps(lane), _mm512_load_ps(acc[c][k])));
            }
        }
    }
    for (int c = 0; c < C; c++)
        _mm512_storeu_ps(s + (size_t)c * ld_s, xk_hsum8(acc[c]));
}

/*
 * The columns of gemm_q2_K_x16 / gemm_iq4_xs_x16 (nc of them at a, a_stride bytes apart) against
 * their expanded group of rows r0 .. r0 + 15: TILE(C, nb, s, ld_s, <the expansion>, y) for
 * XK_COLS columns at a time, then 4, 2, 1 (every column gets the same operations whatever tile
 * takes it)
 */
#define XE_COLUMN_TILES(TILE, ...)                                                                \
    for (int c0 = 0; c0 < nc;) {                                                                  \
        const int left = nc - c0;                                                                 \
        const int C = left >= XK_COLS ? XK_COLS : left >= 4 ? 4 : left >= 2 ? 2 : 1;              \
        const lc_block_q8_K *y[XK_COLS];                                                          \
        for (int c = 0; c < C; c++)                                                               \
            y[c] = (const void *)(a + (size_t)(c0 + c) * a_stride);                               \
        float *sc = s + (size_t)c0 * ld_s + r0;                                                   \
        switch (C) {                                                                              \
        case XK_COLS: TILE(XK_COLS, nb, sc, ld_s, __VA_ARGS__, y); break;                         \
        case 4: TILE(4, nb, sc, ld_s, __VA_ARGS__, y); break;                                     \
        case 2: TILE(2, nb, sc, ld_s, __VA_ARGS__, y); break;                                     \
        default: TILE(1, nb, sc, ld_s, __VA_ARGS__, y); break;                                    \
        }                                                                                         \
        c0 += C;                                                                                  \
    }

/*
 * kernels.h's gemm for Q2_K on AVX-512: whole groups of 16 rows expanded into the calling
 * thread's scratch (lc_kernel_scratch: X2_BLK bytes per super-block) and multiplied by x2_tile,
 * XK_COLS columns at a time, then 4, 2, 1; the rows after the last whole group, fewer than 4
 * columns, or a failed allocation: x86-kquants.h's 2 x 4 tiles (the same bits).
 */
static void gemm_q2_K_x16(int n, float *s, size_t ld_s, const void *vw, size_t w_stride, int nr,
                          const void *va, size_t a_stride, int nc)
{
    const uint8_t *w = vw, *a = va;
    const int nb = n / LC_QK_K;
    uint8_t *E = nc >= 4 && nr >= 16 && nb > 0 ? lc_kernel_scratch((size_t)nb * X2_BLK) : NULL;
    int r0 = 0;
    if (E) {
        for (; r0 + 16 <= nr; r0 += 16) {
            x2_expand(E, w + (size_t)r0 * w_stride, w_stride, nb);
            XE_COLUMN_TILES(x2_tile, E);
        }
    }
    if (r0 < nr)
        gemm_q2_K(n, s + r0, ld_s, w + (size_t)r0 * w_stride, w_stride, nr - r0, a, a_stride, nc);
}

/*
 * Q5_0 and IQ4_NL decode GEMVs on AVX-512: two rows per vector, the 32 weights of a block of
 * row a in the low 256 bits and row b's in the high, as the unsigned operand of vpdpbusd (Q5_0:
 * q = nibble + fifth bit * 16, 0..31, by a masked add; IQ4_NL: level + 128, by vpshufb) against
 * the activation block in both halves; the dwords from -16 (-128) times the sums of 4
 * activations are then exactly vec_dot's integer lanes (sum of 4 (q - 16) * y, or level * y).
 * The float operations per row are vec_dot's, lane for lane: Q5_0 acc = fma(dx * dy,
 * float(lanes), acc) per block, IQ4_NL its pairs of blocks into two accumulators and a last odd
 * block added apart; hsum_float_8 per row.  So the same bits, with a quarter to a half of
 * vec_dot's operations per weight (no vpsignb pair, 64 weights per operation).
 */
enum { G2_Q5_0, G2_IQ4_NL };

/* the u8 operand of blocks xa, xb (see above) */
INLINE __m512i g2_weights(const int kind, const uint8_t *xa, const uint8_t *xb)
{
    const int qo = kind == G2_Q5_0 ? (int)offsetof(lc_block_q5_0, qs) : (int)offsetof(lc_block_iq4_nl, qs);
    const __m256i q = _mm256_set_m128i(_mm_loadu_si128((const __m128i *)(xb + qo)),
                                       _mm_loadu_si128((const __m128i *)(xa + qo)));
    const __m512i nib = _mm512_and_si512(
        _mm512_srlv_epi64(_mm512_permutexvar_epi64(_mm512_setr_epi64(0, 1, 0, 1, 2, 3, 2, 3),
                                                   _mm512_castsi256_si512(q)),
                          _mm512_setr_epi64(0, 0, 4, 4, 0, 0, 4, 4)),
        _mm512_set1_epi8(0x0F));
    if (kind == G2_IQ4_NL) {
        const __m128i lv = _mm_add_epi8(_mm_loadu_si128((const __m128i *)lc_kvalues_iq4nl),
                                        _mm_set1_epi8((char)0x80));
        return _mm512_shuffle_epi8(_mm512_broadcast_i32x4(lv), nib);
    }
    uint32_t ha, hb;
    memcpy(&ha, xa + offsetof(lc_block_q5_0, qh), 4);
    memcpy(&hb, xb + offsetof(lc_block_q5_0, qh), 4);
    return _mm512_mask_add_epi8(nib, _cvtu64_mask64((uint64_t)hb << 32 | ha), nib, _mm512_set1_epi8(0x10));
}

/* dx of blocks xa (low 8 lanes) and xb (high 8) times dy: both converted and multiplied in one
 * vector, then spread by vpermps */
INLINE __m512 g2_d(const uint8_t *xa, const uint8_t *xb, __m128 dy)
{
    lc_fp16 a, b;
    memcpy(&a, xa, sizeof a);
    memcpy(&b, xb, sizeof b);
    const __m128 d = _mm_mul_ps(_mm_cvtph_ps(_mm_cvtsi32_si128((int)((uint32_t)b << 16 | a))), dy);
    return _mm512_permutexvar_ps(_mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1),
                                 _mm512_castps128_ps512(d));
}

/* block ib of P pairs of rows from w into acc[0 .. P) */
INLINE void g2_block(const int kind, const int P, int ib, __m512 *acc, const uint8_t *w,
                     size_t w_stride, const lc_block_q8_0 *y)
{
    const size_t bs = kind == G2_Q5_0 ? sizeof(lc_block_q5_0) : sizeof(lc_block_iq4_nl);
    const __m512i off = _mm512_set1_epi8(kind == G2_Q5_0 ? 16 : (char)0x80);
    const __m512i yv = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)y[ib].qs));
    const __m512i bias = _mm512_sub_epi32(_mm512_setzero_si512(),
                                          _mm512_dpbusd_epi32(_mm512_setzero_si512(), off, yv));
    const __m128 dy = _mm_set1_ps(h2f(y[ib].d));
    _Pragma("GCC unroll 2") for (int p = 0; p < P; p++) {
        const uint8_t *xa = w + (size_t)(2 * p) * w_stride + (size_t)ib * bs;
        const uint8_t *xb = xa + w_stride;
        const __m512 l = _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(bias, g2_weights(kind, xa, xb), yv));
        acc[p] = _mm512_fmadd_ps(g2_d(xa, xb, dy), l, acc[p]);
    }
}

/* rows r0 .. r0 + 2P - 1 of w (P pairs, 1 or 2) against y: s[0 .. 2P) */
INLINE void g2_rows(const int kind, const int P, int nb, float *s, const uint8_t *w, size_t w_stride,
                    const lc_block_q8_0 *y)
{
    const size_t bs = kind == G2_Q5_0 ? sizeof(lc_block_q5_0) : sizeof(lc_block_iq4_nl);
    const __m512i off = _mm512_set1_epi8(kind == G2_Q5_0 ? 16 : (char)0x80);
    __m512 acc1[2], acc2[2];
    _Pragma("GCC unroll 2") for (int p = 0; p < P; p++) acc1[p] = acc2[p] = _mm512_setzero_ps();
    if (kind == G2_IQ4_NL) { /* pairs of blocks into two accumulators, the odd block apart */
        for (int ib = 0; ib + 1 < nb; ib += 2) {
            g2_block(kind, P, ib, acc1, w, w_stride, y);
            g2_block(kind, P, ib + 1, acc2, w, w_stride, y);
        }
    } else {
        for (int ib = 0; ib < nb; ib++)
            g2_block(kind, P, ib, acc1, w, w_stride, y);
    }
    _Pragma("GCC unroll 2") for (int p = 0; p < P; p++) {
        const __m512 a = kind == G2_IQ4_NL ? _mm512_add_ps(acc1[p], acc2[p]) : acc1[p];
        float f[2] = {hsum_ps(_mm512_castps512_ps256(a)), hsum_ps(_mm512_extractf32x8_ps(a, 1))};
        if (kind == G2_IQ4_NL && (nb & 1)) { /* exact integers, summed as vec_dot does */
            const int ib = nb - 1;
            const __m512i yv = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)y[ib].qs));
            const __m512i bias = _mm512_sub_epi32(_mm512_setzero_si512(),
                                                  _mm512_dpbusd_epi32(_mm512_setzero_si512(), off, yv));
            const uint8_t *xa = w + (size_t)(2 * p) * w_stride + (size_t)ib * bs;
            const __m512i l = _mm512_dpbusd_epi32(bias, g2_weights(kind, xa, xa + w_stride), yv);
            const float dy = h2f(y[ib].d);
            _Pragma("GCC unroll 2") for (int h = 0; h < 2; h++) {
                lc_fp16 dx;
                memcpy(&dx, xa + (size_t)h * w_stride, sizeof dx);
                const __m256i lh = h ? _mm512_extracti64x4_epi64(l, 1) : _mm512_castsi512_si256(l);
                f[h] = fmaf(dy * h2f(dx), (float)hsum_epi32(lh), f[h]);
            }
        }
        s[2 * p] = f[0];
        s[2 * p + 1] = f[1];
    }
}

/* 4 rows at a time, then 2, a last row by vec_dot; the rows after next prefetched into L2 */
INLINE void gemv_g2(const int kind, int n, float *s, const void *vw, size_t w_stride, int nr,
                    const void *va)
{
    const uint8_t *w = vw;
    const int nb = n / 32;
    int r = 0;
    for (; r + 4 <= nr; r += 4) {
        gemv_prefetch4(w + (size_t)(r + 8) * w_stride, w + (size_t)nr * w_stride, w_stride);
        g2_rows(kind, 2, nb, s + r, w + (size_t)r * w_stride, w_stride, va);
    }
    if (r + 2 <= nr) {
        g2_rows(kind, 1, nb, s + r, w + (size_t)r * w_stride, w_stride, va);
        r += 2;
    }
    if (r < nr)
        (kind == G2_Q5_0 ? vec_dot_q5_0_q8_0 : vec_dot_iq4_nl_q8_0)(n, s + r, w + (size_t)r * w_stride, va);
}

static void gemv_q5_0_512(int n, float *s, const void *vw, size_t w_stride, int nr, const void *va)
{
    gemv_g2(G2_Q5_0, n, s, vw, w_stride, nr, va);
}

static void gemv_iq4_nl_512(int n, float *s, const void *vw, size_t w_stride, int nr, const void *va)
{
    gemv_g2(G2_IQ4_NL, n, s, vw, w_stride, nr, va);
}

/*
 * Q2_K and Q3_K . Q8_K on AVX-512: the integer lanes and float operations of x86-kquants.h's
 * vec_dots (Q2_K: q2_K_tile), so the same bits, 64 weights per operation.  A vector holds
 * quarters v and v + 1 of half h (weights 128h + 32v + 0..63, their activations contiguous): the
 * two low bits (the half's 32 bytes in both 256-bit halves, shifted by 2v and 2v + 2), Q3_K plus
 * 4 where the high bit (hmask bit 4h + v, 4h + v + 1) is set, as the unsigned operand of
 * vpdpbusd (Q3_K from -4 times the sums of 4 activations): each dword is then the exact sum of 4
 * q * y (Q2_K, |sum| <= 4 * 3 * 127) or (q - 4) * y (Q3_K, <= 4 * 4 * 127), 16 bits, multiplied
 * by its sub-block's scale by vpdpwssd against the scale zero-extended into the dword (the dword
 * is its int16 and the sign extension, which meets the 0).  The 128-bit lanes of such a vector
 * are 4 consecutive sub-blocks of 16, so their scales come by one vpermw.  The 16 dwords are
 * vec_dot's lanes k and 8 + k of two quarters; the halves added at the end of the super-block
 * are its 8 exact lanes; per super-block Q2_K's mins product first (fma(-dy * dmin, ...)), then
 * acc = fma(dy * dx, float(lanes), acc); hsum_float_8 at the end.  bench-gemv (n = 2048, in L2,
 * one thread): Q3_K 5.6 -> 11.2 GB/s of weights, Q2_K 12.4 -> 13.6 against the AVX2 kernels.
 */
INLINE void vec_dot_k23_512(const int q3, int n, float *s, const void *vx, const void *vy)
{
    const lc_block_q2_K *x2 = vx;
    const lc_block_q3_K *x3 = vx;
    const lc_block_q8_K *y = vy;
    const int nb = n / LC_QK_K;
    const __m512i m3 = _mm512_set1_epi8(3), four = _mm512_set1_epi8(4);
    /* vpermw indices: unit u's 128-bit lane L gets scale word 4u + L in each dword and the zero
     * word 16 above it; unit u = half u / 2, quarters 2 (u % 2) and 2 (u % 2) + 1 */
    __m512i scale_of[4], shift_of[2], hbit_of[4];
    _Pragma("GCC unroll 4") for (int u = 0; u < 4; u++) {
        const int w0 = 4 * u | 16 << 16, w1 = w0 + 1, w2 = w0 + 2, w3 = w0 + 3; /* constants */
        scale_of[u] = _mm512_setr_epi32(w0, w0, w0, w0, w1, w1, w1, w1, w2, w2, w2, w2, w3, w3, w3, w3);
        const int h = u / 2, v = 2 * (u % 2);
        hbit_of[u] = _mm512_inserti64x4(_mm512_set1_epi8((char)(1 << (4 * h + v))),
                                        _mm256_set1_epi8((char)(1 << (4 * h + v + 1))), 1);
    }
    _Pragma("GCC unroll 2") for (int p = 0; p < 2; p++)
        shift_of[p] = _mm512_inserti64x4(_mm512_set1_epi16((short)(4 * p)),
                                         _mm256_set1_epi16((short)(4 * p + 2)), 1);
    __m256 acc = _mm256_setzero_ps();
    for (int i = 0; i < nb; i++) {
        __m512i sc, hm = _mm512_setzero_si512(); /* sc: words 0..15 the scales, 16..31 zero */
        if (q3) {
            sc = _mm512_zextsi256_si512(_mm256_cvtepi8_epi16(k3_scales(x3[i].scales)));
            hm = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)x3[i].hmask));
        } else {
            const __m128i ms = _mm_loadu_si128((const __m128i *)x2[i].scales);
            const __m256i mins = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(ms, 4), _mm_set1_epi8(0x0F)));
            sc = _mm512_zextsi256_si512(_mm256_cvtepu8_epi16(_mm_and_si128(ms, _mm_set1_epi8(0x0F))));
            const __m256i mprod = _mm256_madd_epi16(mins, _mm256_loadu_si256((const __m256i *)y[i].bsums));
            acc = _mm256_fmadd_ps(_mm256_set1_ps(-y[i].d * h2f(x2[i].dmin)), _mm256_cvtepi32_ps(mprod), acc);
        }
        const uint8_t *qs = q3 ? x3[i].qs : x2[i].qs;
        __m512i sumi = _mm512_setzero_si512();
        _Pragma("GCC unroll 2") for (int h = 0; h < 2; h++) {
            const __m512i qb = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(qs + 32 * h)));
            _Pragma("GCC unroll 2") for (int p = 0; p < 2; p++) {
                const int u = 2 * h + p;
                const __m512i yv = _mm512_loadu_si512(y[i].qs + 128 * h + 64 * p);
                __m512i q = _mm512_and_si512(_mm512_srlv_epi16(qb, shift_of[p]), m3);
                __m512i from = _mm512_setzero_si512();
                if (q3) {
                    from = _mm512_sub_epi32(from, _mm512_dpbusd_epi32(_mm512_setzero_si512(), four, yv));
                    q = _mm512_mask_add_epi8(q, _mm512_test_epi8_mask(hm, hbit_of[u]), q, four);
                }
                sumi = _mm512_dpwssd_epi32(sumi, _mm512_dpbusd_epi32(from, q, yv),
                                           _mm512_permutexvar_epi16(scale_of[u], sc));
            }
        }
        const __m256i lanes = _mm256_add_epi32(_mm512_castsi512_si256(sumi), _mm512_extracti64x4_epi64(sumi, 1));
        acc = _mm256_fmadd_ps(_mm256_set1_ps(y[i].d * h2f(q3 ? x3[i].d : x2[i].d)), _mm256_cvtepi32_ps(lanes), acc);
    }
    *s = hsum_ps(acc);
}

static void vec_dot_q2_K_q8_K_512(int n, float *s, const void *vx, const void *vy)
{
    vec_dot_k23_512(0, n, s, vx, vy);
}

static void vec_dot_q3_K_q8_K_512(int n, float *s, const void *vx, const void *vy)
{
    vec_dot_k23_512(1, n, s, vx, vy);
}

/*
 * IQ4_XS . Q8_K on AVX-512: the integer lanes and float operations of x86-kquants.h's
 * vec_dot_iq4_xs_q8_K, so the same bits, with 64 weights per vector operation instead of 32.
 * Per pair of sub-blocks t, t + 1: their 32 bytes of nibbles spread as [t low, t high, t+1 low,
 * t+1 high] (weights 0..15, 16..31 of each), the levels looked up, and |level| times y with the
 * level's sign (vpmaddubsw: |level| and |y| <= 127, no saturation; the sign by a masked
 * subtraction from 0, as vpsignb) summed in 16-bit pairs; vpdpwssd by the scales ls - 32 (t's in
 * the low 256 bits, t + 1's in the high) adds them into 16 dwords: dword k (< 8) holds sub-block
 * t's products 4k .. 4k+3, dword 8 + k sub-block t + 1's.  After the 4 pairs the two halves
 * added are vec_dot's 8 exact lanes; acc = fma(dx * dy, float(lanes), acc) per super-block and
 * hsum_float_8 at the end.  bench-gemv (n = 2048, in L2, one thread): 12.5-12.8 GB/s of weights
 * against the AVX2 kernel's 11.2.  (A 4-row GEMV of it was slower in the model than this row by
 * row with context.c's prefetch: 85-88 against 75-77 CPU ms per token.)
 */
static void vec_dot_iq4_xs_q8_K_512(int n, float *s, const void *vx, const void *vy)
{
    const lc_block_iq4_xs *x = vx;
    const lc_block_q8_K *y = vy;
    const int nb = n / LC_QK_K;
    const __m512i values = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)lc_kvalues_iq4nl));
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    const __m512i spread = _mm512_setr_epi64(0, 1, 0, 1, 2, 3, 2, 3);
    const __m512i shifts = _mm512_setr_epi64(0, 0, 4, 4, 0, 0, 4, 4);
    __m512i scale_of[4]; /* vpermw indices: words of scale 2p in the low half, 2p + 1 in the high */
    _Pragma("GCC unroll 4") for (int p = 0; p < 4; p++)
        scale_of[p] = _mm512_inserti64x4(_mm512_set1_epi16((short)(2 * p)),
                                         _mm256_set1_epi16((short)(2 * p + 1)), 1);
    __m256 acc = _mm256_setzero_ps();
    for (int i = 0; i < nb; i++) {
        /* the 8 scales ls - 32 as 16-bit values: scales_l's nibbles in order, scales_h's bit
         * pairs as bits 4, 5 */
        uint32_t l32;
        memcpy(&l32, x[i].scales_l, sizeof l32);
        const __m128i lb = _mm_cvtsi32_si128((int)l32);
        const __m128i lo = _mm_unpacklo_epi8(_mm_and_si128(lb, _mm_set1_epi8(0x0F)),
                                             _mm_and_si128(_mm_srli_epi16(lb, 4), _mm_set1_epi8(0x0F)));
        const __m128i hw = _mm_and_si128(_mm_srlv_epi16(_mm_set1_epi16((short)x[i].scales_h),
                                                        _mm_setr_epi16(0, 2, 4, 6, 8, 10, 12, 14)),
                                         _mm_set1_epi16(3));
        const __m512i sc = _mm512_castsi128_si512(_mm_sub_epi16(
            _mm_or_si128(_mm_cvtepu8_epi16(lo), _mm_slli_epi16(hw, 4)), _mm_set1_epi16(32)));
        __m512i sumi = _mm512_setzero_si512();
        _Pragma("GCC unroll 4") for (int p = 0; p < 4; p++) {
            const __m512i yv = _mm512_loadu_si512(y[i].qs + 64 * p);
            const __m512i q = _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(x[i].qs + 32 * p)));
            const __m512i nib = _mm512_and_si512(_mm512_srlv_epi64(_mm512_permutexvar_epi64(spread, q), shifts), m4);
            const __m512i lv = _mm512_shuffle_epi8(values, nib);
            const __m512i ys = _mm512_mask_sub_epi8(yv, _mm512_movepi8_mask(lv), _mm512_setzero_si512(), yv);
            sumi = _mm512_dpwssd_epi32(sumi, _mm512_maddubs_epi16(_mm512_abs_epi8(lv), ys),
                                       _mm512_permutexvar_epi16(scale_of[p], sc));
        }
        const __m256i lanes = _mm256_add_epi32(_mm512_castsi512_si256(sumi), _mm512_extracti64x4_epi64(sumi, 1));
        acc = _mm256_fmadd_ps(_mm256_set1_ps(h2f(x[i].d) * y[i].d), _mm256_cvtepi32_ps(lanes), acc);
    }
    *s = hsum_ps(acc);
}

/*
 * kernels.h's gemm for IQ4_XS on AVX-512: whole groups of 16 rows expanded into the calling
 * thread's scratch (lc_kernel_scratch: XI_BLK + 64 bytes per super-block) and multiplied by
 * xi_tile, XK_COLS columns at a time, then 4, 2, 1; the rows after the last whole group, fewer
 * than 4 columns, or a failed allocation: x86-kquants.h's 2 x 4 tiles (the same bits).
 */
static void gemm_iq4_xs_x16(int n, float *s, size_t ld_s, const void *vw, size_t w_stride,
                            int nr, const void *va, size_t a_stride, int nc)
{
    const uint8_t *w = vw, *a = va;
    const int nb = n / LC_QK_K;
    uint8_t *E = nc >= 4 && nr >= 16 && nb > 0 ? lc_kernel_scratch((size_t)nb * (XI_BLK + 64)) : NULL;
    int r0 = 0;
    if (E) {
        float *D = (float *)(void *)(E + (size_t)nb * XI_BLK);
        for (; r0 + 16 <= nr; r0 += 16) {
            const uint8_t *G = w + (size_t)r0 * w_stride;
            xi_expand(E, D, G, w_stride, nb);
            XE_COLUMN_TILES(xi_tile, E, D);
        }
    }
    if (r0 < nr)
        gemm_iq4_xs(n, s + r0, ld_s, w + (size_t)r0 * w_stride, w_stride, nr - r0, a, a_stride, nc);
}

/*
 * The opt-in Q4_K / Q5_K prompt GEMMs of lc_context_params.fast_math (--fast-math; default
 * off), not vec_dot's bits: per (row, column) and super-block the 256 products and their
 * sub-block scales are summed as ONE exact integer, where vec_dot_q4_K_q8_K keeps 8 integer
 * lanes (products 4k .. 4k+3 of every sub-block) and converts and accumulates each in float.
 * Per sub-block t (32 weights) and column: the expanded units (k, t) of the 8 lanes (xk_expand_*,
 * as xk_tile reads them) chained by vpdpbusd in chains short enough for 16 bits (Q4_K: 4 units,
 * |sum| <= 16 * 15 * 128 = 30720; Q5_K: 2 units, 8 * 31 * 128 = 31744), each chain multiplied by
 * the row's 6-bit scale by one vpdpwssd against the scale zero-extended into the dword (the
 * chain's dword is its int16 value and its sign extension, which meets the 0): Q4_K 10 vector
 * operations per sub-block, 16 rows and column (Q5_K 12) where xk_tile needs 18.  The super-block
 * total (|isum| <= 63 * 31 * 128 * 256 < 2^31) is converted once: acc = fma(float(isum),
 * dx * dy, acc); the mins as xk_tile's Q5_K way (one exact integer, macc = fnmadd(dmin * dy,
 * float(msum), macc)), out = acc + macc -- the integer scheme of llama.cpp's AMX/VNNI K-quant
 * kernels and ik_llama.cpp's, which also sum the super-block in integers (their float steps
 * differ: llama.cpp's subtracts the mins from the one accumulator per super-block).  Within float rounding of the
 * reference: test-kernels bounds every product, test-greedy --fast-math checks the K-quant
 * references.  Tiles of 16 rows x XKF_COLS columns (then 4, 2, 1: the same operations per
 * column), groups expanded and prefetched as gemm_x16_kq's.
 */
#define XKF_COLS 8

INLINE void xkf_tile(const int q5, const int C, int nb, float *s, size_t ld_s, const uint8_t *G,
                     const uint8_t *E, const lc_block_q8_K *const *y)
{
    const enum lc_type type = q5 ? LC_TYPE_Q5_K : LC_TYPE_Q4_K;
    __m512 acc[XKF_COLS], macc[XKF_COLS];
    _Pragma("GCC unroll 8") for (int c = 0; c < XKF_COLS; c++) acc[c] = macc[c] = _mm512_setzero_ps();
    for (int i = 0; i < nb; i++) {
        const uint8_t *Ei = E + (size_t)i * XK_BLK;
        __m512i scm[4];
        k_unpack_scmin(G + lc_x16_part_off(type, i, LC_X16_P_SC), scm);
        __m512i isum[XKF_COLS];
        _Pragma("GCC unroll 8") for (int t = 0; t < 8; t++) {
            /* sub-block t: unit (k, t) at Ei + 512 k + 64 t, activations 32 t + 4 k */
            const __m512i scl = _mm512_shuffle_epi8(t < 4 ? scm[0] : scm[1], k_byte_pat(t & 3, -1));
            __m512i w[8];
            _Pragma("GCC unroll 8") for (int k = 0; k < 8; k++)
                w[k] = _mm512_load_si512(Ei + 512 * k + 64 * t);
            _Pragma("GCC unroll 8") for (int c = 0; c < C; c++) {
                const int8_t *q8 = y[c][i].qs + 32 * t;
                const int L = q5 ? 2 : 4; /* units per chain (a constant once inlined) */
                for (int h = 0; h < 8 / L; h++) {
                    __m512i v = dpbusd_z(w[L * h], q8 + 4 * L * h);
                    for (int u = 1; u < L; u++)
                        v = dpbusd_b(v, w[L * h + u], q8 + 4 * (L * h + u));
                    isum[c] = t == 0 && h == 0 ? _mm512_madd_epi16(v, scl) : dpwssd(isum[c], v, scl);
                }
            }
        }
        const __m512 dx = _mm512_cvtph_ps(_mm256_loadu_si256(
            (const __m256i *)(G + lc_x16_part_off(type, i, LC_X16_P_D))));
        const __m512 dminx = _mm512_cvtph_ps(_mm256_loadu_si256(
            (const __m256i *)(G + lc_x16_part_off(type, i, LC_X16_P_DMIN))));
        /* the rows' min pairs mn[2m], mn[2m+1] as 16-bit values, for vpdpwssd (as xk_tile) */
        __m512i pair[4];
        _Pragma("GCC unroll 4") for (int m = 0; m < 4; m++)
            pair[m] = _mm512_shuffle_epi8(m < 2 ? scm[2] : scm[3], k_byte_pat(2 * (m & 1), 2 * (m & 1) + 1));
        _Pragma("GCC unroll 8") for (int c = 0; c < C; c++) {
            const lc_block_q8_K *yc = y[c] + i;
            const __m512 dy = _mm512_set1_ps(yc->d);
            acc[c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[c]), _mm512_mul_ps(dx, dy), acc[c]);
            /* S[j] = bsums[2j] + bsums[2j+1]; sp[m] = S[2m] | S[2m+1] << 16 (|S| <= 4096) */
            const __m256i S = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)yc->bsums),
                                                _mm256_set1_epi16(1));
            int32_t sp[4] __attribute__((aligned(16)));
            _mm_store_si128((__m128i *)sp, _mm_packs_epi32(_mm256_castsi256_si128(S),
                                                           _mm256_extracti128_si256(S, 1)));
            __m512i msum = dpwssd_z(pair[0], sp);
            _Pragma("GCC unroll 3") for (int m = 1; m < 4; m++) msum = dpwssd_b(msum, pair[m], sp + m);
            macc[c] = _mm512_fnmadd_ps(_mm512_mul_ps(dminx, dy), _mm512_cvtepi32_ps(msum), macc[c]);
        }
    }
    _Pragma("GCC unroll 8") for (int c = 0; c < C; c++)
        _mm512_storeu_ps(s + (size_t)c * ld_s, _mm512_add_ps(acc[c], macc[c]));
}

/* gemm_x16_fast[LC_TYPE_Q4_K / Q5_K]: gemm_x16_kq's contract and scratch in the order above,
 * for any number of columns (one order whatever the batch); no scratch: gemm_x16_kq (the
 * same-bits order) */
INLINE void gemm_x16_kq_fast(const int q5, int n, float *s, size_t ld_s, const void *w,
                             size_t w_stride, int nr, const void *a, size_t a_stride, int nc)
{
    const int nb = n / LC_QK_K;
    uint8_t *E = nb > 0 ? lc_kernel_scratch((size_t)nb * XK_BLK) : NULL;
    if (!E) {
        gemm_x16_kq(q5 ? XK_Q5 : XK_Q4, n, s, ld_s, w, w_stride, nr, a, a_stride, nc);
        return;
    }
    const size_t n_tiles = (size_t)(nc + XKF_COLS - 1) / XKF_COLS;
    for (int g = 0; g < nr / 16; g++) {
        const uint8_t *G = (const uint8_t *)w + (size_t)g * 16 * w_stride;
        if (q5)
            xk_expand_q5_K(E, G, nb);
        else
            xk_expand_q4_K(E, G, nb);
        /* the next group into L2, a share before each tile */
        const size_t pf_lines = g + 1 < nr / 16 ? 16 * w_stride / 64 : 0;
        const size_t per_tile = (pf_lines + n_tiles - 1) / n_tiles;
        size_t pf_next = 0;
        for (int c0 = 0; c0 < nc;) {
            for (size_t l = 0; l < per_tile && pf_next < pf_lines; l++, pf_next++)
                _mm_prefetch((const char *)G + 16 * w_stride + 64 * pf_next, _MM_HINT_T1);
            const int left = nc - c0;
            const int C = left >= XKF_COLS ? XKF_COLS : left >= 4 ? 4 : left >= 2 ? 2 : 1;
            const lc_block_q8_K *y[XKF_COLS];
            for (int c = 0; c < C; c++)
                y[c] = (const void *)((const uint8_t *)a + (size_t)(c0 + c) * a_stride);
            float *sc = s + (size_t)c0 * ld_s + 16 * g;
            switch (C) {
            case XKF_COLS: xkf_tile(q5, XKF_COLS, nb, sc, ld_s, G, E, y); break;
            case 4: xkf_tile(q5, 4, nb, sc, ld_s, G, E, y); break;
            case 2: xkf_tile(q5, 2, nb, sc, ld_s, G, E, y); break;
            default: xkf_tile(q5, 1, nb, sc, ld_s, G, E, y); break;
            }
            c0 += C;
        }
    }
}

static void gemm_x16_q4_K_fast(int n, float *s, size_t ld_s, const void *w, size_t w_stride,
                               int nr, const void *a, size_t a_stride, int nc)
{
    gemm_x16_kq_fast(0, n, s, ld_s, w, w_stride, nr, a, a_stride, nc);
}

static void gemm_x16_q5_K_fast(int n, float *s, size_t ld_s, const void *w, size_t w_stride,
                               int nr, const void *a, size_t a_stride, int nc)
{
    gemm_x16_kq_fast(1, n, s, ld_s, w, w_stride, nr, a, a_stride, nc);
}

DEFINE_X16_GEMM_BY_GROUP_NOPF(q5_1)

/* ---------------------------------------------------------------- float dots */

/*
 * In llama.cpp's order (see scalar.c): one 16-lane accumulator when n % 16 == 0 (tinyBLAS),
 * else four over 64-element steps with ggml's reduction and the leftovers one by one.
 */
INLINE __m512 load_h16(const lc_fp16 *p)
{
    return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p));
}

#define DEFINE_FLOAT_DOT(NAME, T, LOADV, LEFTOVER, TINY)                                          \
    static float NAME(const T *x, const T *y, int n)                                              \
    {                                                                                             \
        if (TINY && n % 16 == 0) {                                                                \
            __m512 acc = _mm512_setzero_ps();                                                     \
            for (int i = 0; i < n; i += 16)                                                       \
                acc = _mm512_fmadd_ps(LOADV(x + i), LOADV(y + i), acc);                           \
            return _mm512_reduce_add_ps(acc);                                                     \
        }                                                                                         \
        const int np = n & ~63;                                                                   \
        __m512 v0 = _mm512_setzero_ps(), v1 = v0, v2 = v0, v3 = v0;                               \
        for (int i = 0; i < np; i += 64) {                                                        \
            v0 = _mm512_fmadd_ps(LOADV(x + i), LOADV(y + i), v0);                                 \
            v1 = _mm512_fmadd_ps(LOADV(x + i + 16), LOADV(y + i + 16), v1);                       \
            v2 = _mm512_fmadd_ps(LOADV(x + i + 32), LOADV(y + i + 32), v2);                       \
            v3 = _mm512_fmadd_ps(LOADV(x + i + 48), LOADV(y + i + 48), v3);                       \
        }                                                                                         \
        v0 = _mm512_add_ps(_mm512_add_ps(v0, v2), _mm512_add_ps(v1, v3));                         \
        LEFTOVER(_mm512_reduce_add_ps(v0), x, y, np, n);                                          \
    }

#define LEFTOVER_F32(r, x, y, np, n)                                                              \
    float sum = r;                                                                                \
    for (int i = np; i < n; i++)                                                                  \
        sum = fmaf(x[i], y[i], sum);                                                              \
    return sum
#define LEFTOVER_F16(r, x, y, np, n)                                                              \
    double sum = (double)(r);                                                                     \
    for (int i = np; i < n; i++)                                                                  \
        sum += (double)(_cvtsh_ss(x[i]) * _cvtsh_ss(y[i]));                                       \
    return (float)sum

/* dot_*: ggml_vec_dot's order (one token); tiny_dot_*: tinyBLAS's (batches), see scalar.c */
DEFINE_FLOAT_DOT(dot_f32, float, _mm512_loadu_ps, LEFTOVER_F32, 0)
DEFINE_FLOAT_DOT(dot_f16, lc_fp16, load_h16, LEFTOVER_F16, 0)
DEFINE_FLOAT_DOT(tiny_dot_f32, float, _mm512_loadu_ps, LEFTOVER_F32, 1)
DEFINE_FLOAT_DOT(tiny_dot_f16, lc_fp16, load_h16, LEFTOVER_F16, 1)

#include "float-rows.h"

/*
 * dot_f16_rows (kernels.h): for n a multiple of 64, each row's four accumulators are summed as
 * dot_f16 sums them into one 16-lane vector; then 16 rows are reduced at once by a transposing
 * network that performs, lane for lane, the additions of _mm512_reduce_add_ps as GCC expands
 * it (256-bit halves, 128-bit halves, (0+2, 1+3), then the last two) -- the same bits as 16
 * dot_f16 calls, with 15 shuffles + adds per 16 rows instead of 16 serial reductions.  Other
 * n, and the last nr % 16 rows, go through dot_f16.
 */
static inline __m512 dot_f16_vec(const lc_fp16 *x, const lc_fp16 *y, int n)
{
    __m512 v0 = _mm512_setzero_ps(), v1 = v0, v2 = v0, v3 = v0;
    for (int i = 0; i < n; i += 64) {
        v0 = _mm512_fmadd_ps(load_h16(x + i), load_h16(y + i), v0);
        v1 = _mm512_fmadd_ps(load_h16(x + i + 16), load_h16(y + i + 16), v1);
        v2 = _mm512_fmadd_ps(load_h16(x + i + 32), load_h16(y + i + 32), v2);
        v3 = _mm512_fmadd_ps(load_h16(x + i + 48), load_h16(y + i + 48), v3);
    }
    return _mm512_add_ps(_mm512_add_ps(v0, v2), _mm512_add_ps(v1, v3));
}

/*
 * The horizontal sums of 16 rows' vectors a[0..16) at once, lane for lane the additions of
 * _mm512_reduce_add_ps as GCC expands it (256-bit halves, 128-bit halves, (0+2, 1+3), then the
 * last two): returns row i's sum in lane i.
 */
INLINE __m512 reduce_16x16(const __m512 a[16])
{
    /* out lane 4l + j of the last step holds row 4j + l (see below) */
    const __m512i perm = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    __m512 s1[8], s2[4], s3[2];
    /* 1: lanes i + (i + 8) of rows 2k (low half) and 2k + 1 (high half) */
#pragma GCC unroll 8
    for (int k = 0; k < 8; k++)
        s1[k] = _mm512_add_ps(_mm512_shuffle_f32x4(a[2 * k], a[2 * k + 1], 0x44),
                              _mm512_shuffle_f32x4(a[2 * k], a[2 * k + 1], 0xEE));
    /* 2: lanes i + (i + 4); quarter q of s2[m] = row 4m + q */
#pragma GCC unroll 8
    for (int m = 0; m < 4; m++)
        s2[m] = _mm512_add_ps(_mm512_shuffle_f32x4(s1[2 * m], s1[2 * m + 1], 0x88),
                              _mm512_shuffle_f32x4(s1[2 * m], s1[2 * m + 1], 0xDD));
    /* 3: (0+2, 1+3) per quarter; quarter q of s3[t] = rows 8t + q (lanes 0-1), 8t + 4 + q */
#pragma GCC unroll 8
    for (int t = 0; t < 2; t++)
        s3[t] = _mm512_add_ps(_mm512_shuffle_ps(s2[2 * t], s2[2 * t + 1], 0x44),
                              _mm512_shuffle_ps(s2[2 * t], s2[2 * t + 1], 0xEE));
    /* 4: lane 0 + lane 1; quarter q = rows q, 4 + q, 8 + q, 12 + q */
    const __m512 fin = _mm512_add_ps(_mm512_shuffle_ps(s3[0], s3[1], 0x88),
                                     _mm512_shuffle_ps(s3[0], s3[1], 0xDD));
    return _mm512_permutexvar_ps(perm, fin);
}

static void dot_f16_rows(float *s, const lc_fp16 *x, size_t x_stride, int nr, const lc_fp16 *y,
                         int n)
{
    int r = 0;
    if (n % 64 == 0) {
        for (; r + 16 <= nr; r += 16) {
            __m512 a[16];
            for (int i = 0; i < 16; i++)
                a[i] = dot_f16_vec(x + (size_t)(r + i) * x_stride, y, n);
            _mm512_storeu_ps(s + r, reduce_16x16(a));
        }
    }
    for (; r < nr; r++)
        s[r] = dot_f16(x + (size_t)r * x_stride, y, n);
}

/*
 * gemm_f16_rows16's path for several columns: each 16-row block is widened to F32 once, a chunk
 * of F16G_KC elements at a time, into the calling thread's scratch (lc_kernel_scratch), laid out
 * step-major (the 16 rows' vectors of elements 16k..16k+15 side by side, 1 KB per step), and then
 * serves every column: per column and step one widened activation vector and 16 FMAs whose
 * other operand is a load from L1, instead of 16 conversions per column.  Each output still sees
 * acc = fma(x[16k..], y[16k..], acc) from k = 0 and reduce_16x16 (a short last block: the
 * missing rows widened as zeros, their lanes not stored) -- tiny_dot_f16's bits.  Rows longer
 * than one chunk (attention's p.V: n = cached positions) keep the 16 accumulators of F16G_CB
 * columns between chunks in the scratch (32 KB: a block of 32 attention queries widens the
 * values once; 256-element chunks for 16 columns widened them twice: pp2048 14.7 -> 14.4 ms
 * per token).
 * A column's trailing zeros (a softmax row past its query's keys: half of a prompt's p.V) are
 * skipped when the chunk's weights are all finite: fma(x, 0, acc) is acc for finite x (acc
 * starts at +0 and a round-to-nearest sum is -0 only when both terms are), so the bits do not
 * change; an infinity or NaN among them (0 * inf is NaN) turns the skipping off for the chunk.
 * Attention's batches (context.c's attention_batch) call this with the queries of a block of
 * tokens and a GQA group as columns.
 */
#define F16G_KC 128 /* elements of a row chunk: 16 rows widened, 8 KB */
#define F16G_CB 32  /* columns per pass over rows longer than one chunk: 32 KB of partial sums */
#define F16G_SCRATCH ((size_t)16 * F16G_KC * sizeof(float) + (size_t)F16G_CB * 256 * sizeof(float))

static void gemm_f16_cols(int n, float *s, size_t ld_s, const void *w, size_t w_stride, int nr,
                          const void *a, size_t a_stride, int nc, float *X, float *part)
{
    const bool chunked = n > F16G_KC;
    const int cb = chunked ? F16G_CB : nc;
    for (int c0 = 0; c0 < nc; c0 += cb) {
        const int c1 = nc - c0 < cb ? nc : c0 + cb;
        for (int r = 0; r < nr; r += 16) {
            const int rows = nr - r < 16 ? nr - r : 16;
            const __mmask16 live = (__mmask16)((1u << rows) - 1);
            const char *x0 = (const char *)w + (size_t)r * w_stride;
            for (int k0 = 0; k0 < n; k0 += F16G_KC) {
                const int kc = n - k0 < F16G_KC ? n - k0 : F16G_KC;
                const bool last = k0 + kc == n;
                /* x * 0 is +-0 for finite x, NaN for an infinity or a NaN; OR-ed together (a
                 * one-cycle chain, not an FMA's four) they are a NaN iff one was */
                __m512 probe = _mm512_setzero_ps();
                for (int i = 0; i < 16; i++) {
                    const lc_fp16 *xi = (const lc_fp16 *)(const void *)(x0 + (size_t)i * w_stride) + k0;
                    float *d = X + 16 * i;
                    if (i < rows)
                        for (int k = 0; k < kc; k += 16) {
                            const __m512 v = load_h16(xi + k);
                            probe = _mm512_or_ps(probe, _mm512_mul_ps(v, _mm512_setzero_ps()));
                            _mm512_store_ps(d + 16 * k, v);
                        }
                    else
                        for (int k = 0; k < kc; k += 16)
                            _mm512_store_ps(d + 16 * k, _mm512_setzero_ps());
                }
                const bool nonfinite = _mm512_cmp_ps_mask(probe, probe, _CMP_UNORD_Q) != 0;
                for (int c = c0; c < c1; c++) {
                    const lc_fp16 *y = (const lc_fp16 *)(const void *)((const char *)a + (size_t)c * a_stride) + k0;
                    float *pc = part + (size_t)(c - c0) * 256;
                    __m512 acc[16];
#pragma GCC unroll 16
                    for (int i = 0; i < 16; i++)
                        acc[i] = k0 ? _mm512_load_ps(pc + 16 * i) : _mm512_setzero_ps();
                    /* the column's trailing zeros (a softmax row past its query's keys) add
                     * nothing to finite weights: the steps from the last nonzero one on are
                     * skipped */
                    int kend = kc;
                    while (!nonfinite && kend > 0 &&
                           !_mm256_test_epi16_mask(_mm256_loadu_si256((const __m256i *)(y + kend - 16)),
                                                   _mm256_set1_epi16(0x7FFF)))
                        kend -= 16;
                    const float *xk = X;
                    for (int k = 0; k < kend; k += 16, xk += 256) {
                        const __m512 yv = load_h16(y + k);
#pragma GCC unroll 16
                        for (int i = 0; i < 16; i++)
                            acc[i] = _mm512_fmadd_ps(_mm512_load_ps(xk + 16 * i), yv, acc[i]);
                    }
                    if (!last)
#pragma GCC unroll 16
                        for (int i = 0; i < 16; i++)
                            _mm512_store_ps(pc + 16 * i, acc[i]);
                    else
                        _mm512_mask_storeu_ps(s + (size_t)c * ld_s + r, live, reduce_16x16(acc));
                }
            }
        }
    }
}

/*
 * The F16 gemm entry (tinyBLAS's order, tiny_dot_f16: one 16-lane accumulator per output,
 * acc = fma(x[16k..], y[16k..], acc) from k = 0, then _mm512_reduce_add_ps) for 16 rows at a
 * time when n % 16 == 0: the 16 accumulators advance together (one activation load serves 16
 * rows, 16 independent FMA chains instead of one) and are reduced by reduce_16x16 -- the same
 * bits as 16 tiny_dot_f16 calls (test-kvcache compares them).  Attention's q.K (n = head size,
 * one row per key) and p.V (n = cached positions, one row per output element) of a prompt
 * batch: 13-16 % of a Q4_1 pp512 before, more after the Q4_1 GEMM got faster.  Several
 * columns: gemm_f16_cols (each row widened once for all of them; without scratch memory, the
 * path below per column, same bits).  Other n and the last nr % 16 rows of one column:
 * tiny_dot_f16.
 */
static void gemm_f16_rows16(int n, float *s, size_t ld_s, const void *w, size_t w_stride, int nr,
                            const void *a, size_t a_stride, int nc)
{
    if (n % 16) { /* float-rows.h's, row by row */
        gemm_f16(n, s, ld_s, w, w_stride, nr, a, a_stride, nc);
        return;
    }
    if (nc > 1 && nr > 0) {
        float *X = (float *)(void *)lc_kernel_scratch(F16G_SCRATCH);
        if (X) {
            gemm_f16_cols(n, s, ld_s, w, w_stride, nr, a, a_stride, nc, X, X + 16 * F16G_KC);
            return;
        }
    }
    for (int c = 0; c < nc; c++) {
        const lc_fp16 *y = (const lc_fp16 *)(const void *)((const char *)a + (size_t)c * a_stride);
        float *sc = s + (size_t)c * ld_s;
        int r = 0;
        {
            for (; r + 16 <= nr; r += 16) {
                const char *x0 = (const char *)w + (size_t)r * w_stride;
                __m512 acc[16];
                for (int i = 0; i < 16; i++)
                    acc[i] = _mm512_setzero_ps();
                for (int k = 0; k < n; k += 16) {
                    const __m512 yv = load_h16(y + k);
                    for (int i = 0; i < 16; i++)
                        acc[i] = _mm512_fmadd_ps(
                            load_h16((const lc_fp16 *)(const void *)(x0 + (size_t)i * w_stride) + k),
                            yv, acc[i]);
                }
                _mm512_storeu_ps(sc + r, reduce_16x16(acc));
            }
        }
        for (; r < nr; r++)
            sc[r] = tiny_dot_f16((const lc_fp16 *)(const void *)((const char *)w + (size_t)r * w_stride),
                                 y, n);
    }
}

/*
 * dot_f16_rows_multi (kernels.h): M <= 4 queries y32[0..M) (already F32: the F16 values widened,
 * which is exact) against the rows of one 16-row block.  Each 64-element chunk of a row is
 * widened once and multiplied into the four accumulators of every query, so each (row, query)
 * sees exactly dot_f16's fused multiply-adds; the block's sums go through reduce_16x16 (or
 * _mm512_reduce_add_ps for a short block) and the elements past the last whole chunk are added
 * in double as LEFTOVER_F16 adds them -- the bits of dot_f16 for any n.
 */
#define ROWS_PF 1024 /* elements: 2 KB */
INLINE void rows_multi_block(float *const *s, int r, const lc_fp16 *x, size_t x_stride, int nr,
                             int nr_all, const float *const *y32, int n, const int M)
{
    const int np = n & ~63;
    __m512 a[4][16];
    for (int i = 0; i < nr; i++) {
        const lc_fp16 *xr = x + (size_t)(r + i) * x_stride;
        __m512 v[4][4];
#pragma GCC unroll 4
        for (int j = 0; j < M; j++)
            v[j][0] = v[j][1] = v[j][2] = v[j][3] = _mm512_setzero_ps();
        /* long rows (values: one row per head dimension, n_ctx elements apart, so each starts
         * a page when n_ctx >= 2048) are fetched ROWS_PF elements ahead, into the next row's
         * first n near the end: the hardware prefetcher stops at page boundaries */
        const bool next = r + i + 1 < nr_all;
        for (int c = 0; c < np; c += 64) {
            if (n > 256 && (c + ROWS_PF < n || (next && c + ROWS_PF - n < n))) {
                const lc_fp16 *pf = c + ROWS_PF < n ? xr + c + ROWS_PF : xr + x_stride + (c + ROWS_PF - n);
                _mm_prefetch((const char *)pf, _MM_HINT_T0);
                _mm_prefetch((const char *)(pf + 32), _MM_HINT_T0);
            }
            const __m512 x0 = load_h16(xr + c), x1 = load_h16(xr + c + 16),
                         x2 = load_h16(xr + c + 32), x3 = load_h16(xr + c + 48);
#pragma GCC unroll 4
            for (int j = 0; j < M; j++) {
                v[j][0] = _mm512_fmadd_ps(x0, _mm512_loadu_ps(y32[j] + c), v[j][0]);
                v[j][1] = _mm512_fmadd_ps(x1, _mm512_loadu_ps(y32[j] + c + 16), v[j][1]);
                v[j][2] = _mm512_fmadd_ps(x2, _mm512_loadu_ps(y32[j] + c + 32), v[j][2]);
                v[j][3] = _mm512_fmadd_ps(x3, _mm512_loadu_ps(y32[j] + c + 48), v[j][3]);
            }
        }
#pragma GCC unroll 4
        for (int j = 0; j < M; j++)
            a[j][i] = _mm512_add_ps(_mm512_add_ps(v[j][0], v[j][2]), _mm512_add_ps(v[j][1], v[j][3]));
    }
    for (int j = 0; j < M; j++) {
        float *sj = s[j] + r;
        if (nr == 16)
            _mm512_storeu_ps(sj, reduce_16x16(a[j]));
        else
            for (int i = 0; i < nr; i++)
                sj[i] = _mm512_reduce_add_ps(a[j][i]);
        if (np < n)
            for (int i = 0; i < nr; i++) {
                const lc_fp16 *xr = x + (size_t)(r + i) * x_stride;
                double sum = (double)sj[i];
                for (int e = np; e < n; e++)
                    sum += (double)(_cvtsh_ss(xr[e]) * y32[j][e]);
                sj[i] = (float)sum;
            }
    }
}

static void rows_multi(float *const *s, int r, const lc_fp16 *x, size_t x_stride, int nr,
                       int nr_all, const float *const *y32, int n, int m)
{
    switch (m) {
    case 4: rows_multi_block(s, r, x, x_stride, nr, nr_all, y32, n, 4); break;
    case 3: rows_multi_block(s, r, x, x_stride, nr, nr_all, y32, n, 3); break;
    case 2: rows_multi_block(s, r, x, x_stride, nr, nr_all, y32, n, 2); break;
    default: rows_multi_block(s, r, x, x_stride, nr, nr_all, y32, n, 1); break;
    }
}

/*
 * Short rows (the keys, n = head size): each 16-row block is read from memory once and then
 * stays in L1 for every pass of 4 queries; long rows (the values, n = context length): one
 * pass of 4 queries over all rows after another, the queries' F32 copies staying in cache.
 */
static void dot_f16_rows_multi(float *const *s, const lc_fp16 *x, size_t x_stride, int nr,
                               const lc_fp16 *const *y, int ny, int n, float *work)
{
    const float *y32[LC_ROWS_MULTI_MAX];
    const bool short_rows = n <= 256;
    for (int j0 = 0; j0 < ny; j0 += 4) {
        const int m = ny - j0 < 4 ? ny - j0 : 4;
        for (int j = j0; j < j0 + m; j++) {
            float *w = work + (size_t)(short_rows ? j : j - j0) * (size_t)n;
            const lc_fp16 *yj = y[j];
            int e = 0;
            for (; e + 16 <= n; e += 16)
                _mm512_storeu_ps(w + e, load_h16(yj + e));
            for (; e < n; e++)
                w[e] = _cvtsh_ss(yj[e]);
            y32[j] = w;
        }
        if (short_rows)
            continue;
        for (int r = 0; r < nr; r += 16)
            rows_multi(s + j0, r, x, x_stride, nr - r < 16 ? nr - r : 16, nr, y32 + j0, n, m);
    }
    if (!short_rows)
        return;
    const size_t row_bytes = (size_t)n * sizeof(lc_fp16);
    for (int r = 0; r < nr; r += 16) {
        const int b = nr - r < 16 ? nr - r : 16;
        /* the next block's rows, a cache stride apart (one KV head's slice of each position) */
        for (int i = 16; i < 32 && r + i < nr; i++)
            for (size_t o = 0; o < row_bytes; o += 64)
                _mm_prefetch((const char *)(x + (size_t)(r + i) * x_stride) + o, _MM_HINT_T0);
        for (int j0 = 0; j0 < ny; j0 += 4)
            rows_multi(s + j0, r, x, x_stride, b, nr, y32 + j0, n, ny - j0 < 4 ? ny - j0 : 4);
    }
}

/* The fused-attention steps (kernels.h): per element, so any width gives the same bits. */
static void mad_f16(lc_fp16 *y, float v, const lc_fp16 *x, int n)
{
    const __m512 vv = _mm512_set1_ps(v);
    int i = 0;
    for (; i + 16 <= n; i += 16)
        _mm256_storeu_si256((__m256i *)(y + i),
                            _mm512_cvtps_ph(_mm512_fmadd_ps(load_h16(x + i), vv, load_h16(y + i)), 0));
    for (; i < n; i++)
        y[i] = _cvtss_sh(fmaf(_cvtsh_ss(x[i]), v, _cvtsh_ss(y[i])), 0);
}

static void scale_f16(lc_fp16 *y, float v, int n)
{
    const __m512 vv = _mm512_set1_ps(v);
    int i = 0;
    for (; i + 16 <= n; i += 16)
        _mm256_storeu_si256((__m256i *)(y + i), _mm512_cvtps_ph(_mm512_mul_ps(load_h16(y + i), vv), 0));
    for (; i < n; i++)
        y[i] = _cvtss_sh(_cvtsh_ss(y[i]) * v, 0);
}

static void mad_f32(float *y, float v, const float *x, int n)
{
    const __m512 vv = _mm512_set1_ps(v);
    int i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(y + i, _mm512_fmadd_ps(_mm512_loadu_ps(x + i), vv, _mm512_loadu_ps(y + i)));
    for (; i < n; i++)
        y[i] = fmaf(x[i], v, y[i]);
}

/*
 * ggml_v_expf on AVX-512 (ggml-cpu vec.h), 16 lanes: the arithmetic ggml-order-ew.h's v_expf
 * does lane by lane -- n = round(x / ln 2), b = x - n ln 2 in two fused steps, a degree-5
 * polynomial, scaled by 2^n with one rounding (vscalefps); |n| > 192 gives +inf or 0 -- so the
 * bits equal scalar.c's.
 */
INLINE __m512 v_expf16(__m512 x)
{
    const __m512 r = _mm512_set1_ps(0x1.8p23f);
    const __m512 z = _mm512_fmadd_ps(x, _mm512_set1_ps(0x1.715476p+0f), r);
    const __m512 n = _mm512_sub_ps(z, r);
    const __m512 b = _mm512_fnmadd_ps(n, _mm512_set1_ps(0x1.7f7d1cp-20f),
                                      _mm512_fnmadd_ps(n, _mm512_set1_ps(0x1.62e4p-1f), x));
    const __mmask16 d = _mm512_cmp_ps_mask(_mm512_abs_ps(n), _mm512_set1_ps(192.0f), _CMP_GT_OQ);
    const __mmask16 bad = d | _mm512_cmp_ps_mask(n, n, _CMP_UNORD_Q);
    const __m512 u = _mm512_mul_ps(b, b);
    const __m512 j = _mm512_fmadd_ps(
        _mm512_fmadd_ps(_mm512_fmadd_ps(_mm512_set1_ps(0x1.0e4020p-7f), b, _mm512_set1_ps(0x1.573e2ep-5f)),
                        u, _mm512_fmadd_ps(_mm512_set1_ps(0x1.555e66p-3f), b, _mm512_set1_ps(0x1.fffdb6p-2f))),
        u, _mm512_fmadd_ps(_mm512_set1_ps(0x1.ffffecp-1f), b, _mm512_set1_ps(1.0f)));
    const __m512 res = _mm512_scalef_ps(j, n);
    if (!bad)
        return res;
    /* saturated (and NaN, as the scalar version: 0) lanes */
    const __mmask16 pos = _mm512_cmp_ps_mask(n, _mm512_setzero_ps(), _CMP_GT_OQ);
    const __m512 alt = _mm512_mask_blend_ps(pos, _mm512_setzero_ps(), _mm512_set1_ps(INFINITY));
    return _mm512_mask_blend_ps(bad, res, alt);
}

/*
 * qk_f16_rows (kernels.h): blocks of 16 rows; for each 64-element chunk the M <= 4 queries'
 * chunks sit in 16 registers while the block's rows go by, each row's chunk widened once and
 * multiplied into one accumulator per query (one chain of fused multiply-adds, 16 lanes wide,
 * over the whole row); the 16 rows' vectors of a query are then summed by reduce_16x16 (no
 * serial horizontal sums).  Elements past n are masked to 0.  The rows of the block 3 ahead
 * are prefetched, past nr too (the next chunk of keys).
 */
#define QK_PF 48
INLINE void qk_block(float *const *s, const float *const *q, const lc_fp16 *x, size_t x_stride,
                     int r0, int nb, int n, bool pf, const int M)
{
    __m512 a[4][16];
    for (int c = 0; c < n; c += 64) {
        __mmask16 mk[4];
        __m512 qv[4][4];
#pragma GCC unroll 4
        for (int v = 0; v < 4; v++) {
            const int left = n - c - 16 * v;
            mk[v] = left >= 16 ? (__mmask16)0xFFFF : left <= 0 ? 0 : (__mmask16)((1u << left) - 1);
        }
#pragma GCC unroll 4
        for (int j = 0; j < M; j++)
#pragma GCC unroll 4
            for (int v = 0; v < 4; v++)
                qv[j][v] = _mm512_maskz_loadu_ps(mk[v], q[j] + c + 16 * v);
        for (int i = 0; i < nb; i++) {
            const lc_fp16 *xr = x + (size_t)(r0 + i) * x_stride + c;
            if (pf)
                for (int o = 0; o < (n - c < 64 ? n - c : 64); o += 32)
                    _mm_prefetch((const char *)(xr + QK_PF * x_stride + o), _MM_HINT_T0);
            __m512 xv[4];
#pragma GCC unroll 4
            for (int v = 0; v < 4; v++)
                xv[v] = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(mk[v], xr + 16 * v));
#pragma GCC unroll 4
            for (int j = 0; j < M; j++) {
                __m512 t = c ? a[j][i] : _mm512_setzero_ps();
#pragma GCC unroll 4
                for (int v = 0; v < 4; v++)
                    t = _mm512_fmadd_ps(xv[v], qv[j][v], t);
                a[j][i] = t;
            }
        }
    }
#pragma GCC unroll 4
    for (int j = 0; j < M; j++) {
        for (int i = nb; i < 16; i++)
            a[j][i] = _mm512_setzero_ps();
        _mm512_mask_storeu_ps(s[j] + r0, (__mmask16)((1u << nb) - 1), reduce_16x16(a[j]));
    }
}

static void qk_block_m(float *const *s, const float *const *q, const lc_fp16 *x, size_t x_stride,
                       int r0, int nb, int n, bool pf, int m)
{
    switch (m) {
    case 4: qk_block(s, q, x, x_stride, r0, nb, n, pf, 4); break;
    case 3: qk_block(s, q, x, x_stride, r0, nb, n, pf, 3); break;
    case 2: qk_block(s, q, x, x_stride, r0, nb, n, pf, 2); break;
    default: qk_block(s, q, x, x_stride, r0, nb, n, pf, 1); break;
    }
}

static void qk_f16_rows(float *const *s, int ny, const float *const *q, const lc_fp16 *x,
                        size_t x_stride, int nr, int n)
{
    for (int r = 0; r < nr; r += 16) {
        const int nb = nr - r < 16 ? nr - r : 16;
        for (int j0 = 0; j0 < ny; j0 += 4)
            qk_block_m(s + j0, q + j0, x, x_stride, r, nb, n, j0 == 0, ny - j0 < 4 ? ny - j0 : 4);
    }
}

/* ew_exp_sum (ggml-order-ew.h; kernels.h exp_sum) with 16 lanes at a time: the same max, the
 * same exps (v_expf16), each block of 16 (the tail's missing lanes zero) reduced as ew_reduce16
 * and added to a float in order: the same bits. */
static float exp_sum(float *x, int n, float scale, float *m)
{
    const __m512 vs = _mm512_set1_ps(scale);
    __m512 vmax = _mm512_set1_ps(-INFINITY);
    int i = 0;
    for (; i + 16 <= n; i += 16)
        vmax = _mm512_max_ps(vmax, _mm512_mul_ps(_mm512_loadu_ps(x + i), vs));
    const __mmask16 tail = (__mmask16)((1u << (n - i)) - 1);
    if (tail)
        vmax = _mm512_mask_max_ps(vmax, tail, vmax, _mm512_mul_ps(_mm512_maskz_loadu_ps(tail, x + i), vs));
    const float bmax = _mm512_reduce_max_ps(vmax);
    const float max = *m > bmax ? *m : bmax;
    *m = max;
    const __m512 vm = _mm512_set1_ps(max);
    float sum = 0.0f;
    for (i = 0; i + 16 <= n; i += 16) {
        const __m512 e = v_expf16(_mm512_sub_ps(_mm512_mul_ps(_mm512_loadu_ps(x + i), vs), vm));
        _mm512_storeu_ps(x + i, e);
        sum += _mm512_reduce_add_ps(e);
    }
    if (tail) {
        const __m512 t = _mm512_mul_ps(_mm512_maskz_loadu_ps(tail, x + i), vs);
        const __m512 e = _mm512_maskz_mov_ps(tail, v_expf16(_mm512_sub_ps(t, vm)));
        _mm512_mask_storeu_ps(x + i, tail, e);
        sum += _mm512_reduce_add_ps(e);
    }
    return sum;
}

/*
 * mad_f16_rows / mad_f32_rows (kernels.h): 64 elements of M <= 4 heads' accumulators stay in
 * 16 registers while the rows stream by; each row's 64 elements are widened once and multiplied
 * into every head's accumulator (one fused multiply-add per element and row, in row order: the
 * bits of scalar.c).  Element blocks past n are masked.  The row 32 ahead is prefetched (the
 * rows of one KV head are a cache row apart, 8 per page at 4 KV heads of 64, which the hardware
 * prefetcher follows late).
 */
#define MAD_ROWS_PF 32
INLINE void mad_rows_block(float *const *y, const float *const *p, const void *x, size_t x_stride,
                           const bool f16, int nr, int i0, int n, const int M)
{
    __mmask16 mk[4];
#pragma GCC unroll 4
    for (int v = 0; v < 4; v++) {
        const int left = n - i0 - 16 * v;
        mk[v] = left >= 16 ? (__mmask16)0xFFFF : left <= 0 ? 0 : (__mmask16)((1u << left) - 1);
    }
    __m512 acc[4][4];
#pragma GCC unroll 4
    for (int j = 0; j < M; j++)
#pragma GCC unroll 4
        for (int v = 0; v < 4; v++)
            acc[j][v] = _mm512_maskz_loadu_ps(mk[v], y[j] + i0 + 16 * v);
    const size_t elt = f16 ? sizeof(lc_fp16) : sizeof(float);
    const char *xr = (const char *)x + (size_t)i0 * elt;
    const size_t stride = x_stride * elt;
    const size_t w_bytes = (size_t)(n - i0 < 64 ? n - i0 : 64) * elt;
    for (int r = 0; r < nr; r++, xr += stride) {
        for (size_t o = 0; o < w_bytes; o += 64)
            _mm_prefetch(xr + MAD_ROWS_PF * stride + o, _MM_HINT_T0);
        __m512 xv[4];
#pragma GCC unroll 4
        for (int v = 0; v < 4; v++)
            xv[v] = f16 ? _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(mk[v], (const lc_fp16 *)(const void *)xr + 16 * v))
                        : _mm512_maskz_loadu_ps(mk[v], (const float *)(const void *)xr + 16 * v);
#pragma GCC unroll 4
        for (int j = 0; j < M; j++) {
            const __m512 pj = _mm512_set1_ps(p[j][r]);
#pragma GCC unroll 4
            for (int v = 0; v < 4; v++)
                acc[j][v] = _mm512_fmadd_ps(xv[v], pj, acc[j][v]);
        }
    }
#pragma GCC unroll 4
    for (int j = 0; j < M; j++)
#pragma GCC unroll 4
        for (int v = 0; v < 4; v++)
            _mm512_mask_storeu_ps(y[j] + i0 + 16 * v, mk[v], acc[j][v]);
}

INLINE void mad_rows(float *const *y, int ny, const float *const *p, const void *x,
                     size_t x_stride, const bool f16, int nr, int n)
{
    for (int j0 = 0; j0 < ny; j0 += 4)
        for (int i0 = 0; i0 < n; i0 += 64)
            switch (ny - j0 < 4 ? ny - j0 : 4) {
            case 4: mad_rows_block(y + j0, p + j0, x, x_stride, f16, nr, i0, n, 4); break;
            case 3: mad_rows_block(y + j0, p + j0, x, x_stride, f16, nr, i0, n, 3); break;
            case 2: mad_rows_block(y + j0, p + j0, x, x_stride, f16, nr, i0, n, 2); break;
            default: mad_rows_block(y + j0, p + j0, x, x_stride, f16, nr, i0, n, 1); break;
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

/* ew_softmax (ggml-order-ew.h) with 16 lanes at a time: the same max, the same blocks of 16
 * summed by the same reduction into a double, libm expf for the tail: the same bits. */
static void softmax(float *x, int n)
{
    __m512 vmax = _mm512_set1_ps(-INFINITY);
    int i = 0;
    for (; i + 16 <= n; i += 16)
        vmax = _mm512_max_ps(vmax, _mm512_loadu_ps(x + i));
    float max = _mm512_reduce_max_ps(vmax);
    for (; i < n; i++)
        max = max > x[i] ? max : x[i];
    if (max == -INFINITY) {
        memset(x, 0, (size_t)n * sizeof(float));
        return;
    }
    const __m512 vm = _mm512_set1_ps(max);
    double sum = 0.0;
    for (i = 0; i + 16 <= n; i += 16) {
        const __m512 e = v_expf16(_mm512_sub_ps(_mm512_loadu_ps(x + i), vm));
        _mm512_storeu_ps(x + i, e);
        sum += (double)_mm512_reduce_add_ps(e);
    }
    for (; i < n; i++) {
        const float v = expf(x[i] - max);
        sum += (double)v;
        x[i] = v;
    }
    const __m512 vs = _mm512_set1_ps((float)(1.0 / sum));
    for (i = 0; i + 16 <= n; i += 16)
        _mm512_storeu_ps(x + i, _mm512_mul_ps(_mm512_loadu_ps(x + i), vs));
    const float scale = (float)(1.0 / sum);
    for (; i < n; i++)
        x[i] *= scale;
}

/* ew_swiglu (ggml-order-ew.h): (g / (1 + v_expf(0 - g))) * u, 16 lanes at a time; libm expf for
 * the tail.  The same bits. */
static void swiglu(float *y, const float *g, const float *u, int n)
{
    const __m512 one = _mm512_set1_ps(1.0f), zero = _mm512_setzero_ps();
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512 gv = _mm512_loadu_ps(g + i);
        const __m512 e = v_expf16(_mm512_sub_ps(zero, gv));
        _mm512_storeu_ps(y + i, _mm512_mul_ps(_mm512_div_ps(gv, _mm512_add_ps(one, e)),
                                              _mm512_loadu_ps(u + i)));
    }
    for (; i < n; i++)
        y[i] = (g[i] / (1.0f + expf(-g[i]))) * u[i];
}


/*
 * Q8_K activation rows (the K-quants' vec_dot_type), 16 floats a vector, with the bits of
 * lc_quantize_row_q8_K_ref (ggml's quantize_row_q8_K_ref, which ggml-cpu uses on x86): per
 * super-block of 256, amax = max |x| (exact in any order), max = the first x with |x| == amax
 * (the one the scalar loop keeps), iscale = -127 / max, q = min(127, nearest_int(iscale * x))
 * with ggml's nearest_int (add 1.5 * 2^23, take the low mantissa bits), stored as int8 by
 * truncation as the scalar cast, bsums the sums of those int8 per 16, d = 1 / iscale; an
 * all-zero block is zeroed.  The same
 * float operations per element: the same bytes (test-kernels compares them).  pp512 of the 1.1B
 * Q4_K_M model spent 4 % of its time in the scalar one.
 */
static void quantize_row_q8_K(const float *x, void *vy, int64_t n)
{
    lc_block_q8_K *y = vy;
    const __m512 sign = _mm512_set1_ps(-0.0f);
    const __m512i mant = _mm512_set1_epi32(0x007fffff), half = _mm512_set1_epi32(0x00400000);
    const __m512i m127 = _mm512_set1_epi32(127);
    for (int64_t i = 0; i < n / LC_QK_K; i++, x += LC_QK_K) {
        __m512 am = _mm512_setzero_ps();
        for (int j = 0; j < LC_QK_K / 16; j++)
            am = _mm512_max_ps(_mm512_andnot_ps(sign, _mm512_loadu_ps(x + 16 * j)), am);
        const float amax = _mm512_reduce_max_ps(am);
        if (amax == 0.0f) {
            memset(&y[i], 0, sizeof y[i]);
            continue;
        }
        float max = 0.0f;
        for (int j = 0; j < LC_QK_K / 16; j++) {
            const __mmask16 eq = _mm512_cmp_ps_mask(_mm512_andnot_ps(sign, _mm512_loadu_ps(x + 16 * j)),
                                                    _mm512_set1_ps(amax), _CMP_EQ_OQ);
            if (eq) {
                max = x[16 * j + __builtin_ctz(eq)];
                break;
            }
        }
        const float iscale = -127.f / max;
        const __m512 vs = _mm512_set1_ps(iscale), magic = _mm512_set1_ps(12582912.f);
        for (int j = 0; j < LC_QK_K / 16; j++) {
            const __m512 v = _mm512_add_ps(_mm512_mul_ps(vs, _mm512_loadu_ps(x + 16 * j)), magic);
            const __m512i q = _mm512_min_epi32(
                _mm512_sub_epi32(_mm512_and_si512(_mm512_castps_si512(v), mant), half), m127);
            const __m128i q8 = _mm512_cvtepi32_epi8(q); /* truncation, as (int8_t) */
            _mm_storeu_si128((__m128i *)(y[i].qs + 16 * j), q8);
            y[i].bsums[j] = (int16_t)_mm512_reduce_add_epi32(_mm512_cvtepi8_epi32(q8));
        }
        y[i].d = 1 / iscale;
    }
}

/* ---------------------------------------------------------------- quantizer search (Q4_1/Q5_1) */

/* qsearch-lanes.h with 16 blocks a vector; F16C rounds to F16 as lc_fp32_to_fp16 does (to
 * nearest even, subnormals, overflow to inf), so the lanes give scalar.c's bits. */
#define VL 16
typedef float qs_vf __attribute__((vector_size(4 * VL)));
typedef int32_t qs_vi __attribute__((vector_size(4 * VL)));

static inline qs_vf qs_sqrt(qs_vf v)
{
    return (qs_vf)_mm512_sqrt_ps((__m512)v);
}

static inline qs_vf qs_gather32(const float *p)
{
    return (qs_vf)_mm512_i32gather_ps(_mm512_setr_epi32(0, 32, 64, 96, 128, 160, 192, 224, 256, 288, 320, 352, 384, 416, 448, 480), p, 4);
}

static inline qs_vf qs_round_f16(qs_vf v, qs_vi *bits)
{
    const __m256i h = _mm512_cvtps_ph((__m512)v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    *bits = (qs_vi)_mm512_cvtepu16_epi32(h);
    return (qs_vf)_mm512_cvtph_ps(h);
}

#include "qsearch-lanes.h"
#undef VL

const struct lc_kernels lc_kernels_avx512 = {
    .isa = "avx512",
    .quantize_row = {[LC_TYPE_Q8_K] = quantize_row_q8_K},
    .vec_dot = {
        [LC_TYPE_F32] = vec_dot_f32,
        [LC_TYPE_F16] = vec_dot_f16,
        [LC_TYPE_Q4_0] = vec_dot_q4_0_q8_0,
        [LC_TYPE_Q4_1] = vec_dot_q4_1_q8_1,
        [LC_TYPE_Q8_0] = vec_dot_q8_0_q8_0,
        [LC_TYPE_Q5_0] = vec_dot_q5_0_q8_0,
        [LC_TYPE_Q5_1] = vec_dot_q5_1_q8_1,
        [LC_TYPE_IQ4_NL] = vec_dot_iq4_nl_q8_0,
        [LC_TYPE_Q2_K] = vec_dot_q2_K_q8_K_512,
        [LC_TYPE_Q3_K] = vec_dot_q3_K_q8_K_512,
        [LC_TYPE_Q4_K] = vec_dot_q4_K_q8_K,
        [LC_TYPE_Q5_K] = vec_dot_q5_K_q8_K,
        [LC_TYPE_IQ4_XS] = vec_dot_iq4_xs_q8_K_512,
    },
    .gemm = {
        [LC_TYPE_F32] = gemm_f32,
        [LC_TYPE_F16] = gemm_f16_rows16,
        [LC_TYPE_Q4_0] = pk_gemm_q4_0,
        [LC_TYPE_Q4_1] = pk_gemm_q4_1,
        [LC_TYPE_Q8_0] = pk_gemm_q8_0,
        [LC_TYPE_IQ4_NL] = gemm_iq4_nl,
        [LC_TYPE_Q5_0] = gemm_q5_0,
        [LC_TYPE_IQ4_XS] = gemm_iq4_xs_x16,
        [LC_TYPE_Q2_K] = gemm_q2_K_x16,
    },
    .gemv = {
        [LC_TYPE_Q4_0] = gemv_q4_0,
        [LC_TYPE_Q4_1] = gemv_q4_1,
        [LC_TYPE_Q5_0] = gemv_q5_0_512,
        [LC_TYPE_IQ4_NL] = gemv_iq4_nl_512,
    },
    .vec_dot_q4_0x8 = vec_dot_q4_0x8_q8_0,
    .gemm_q4_0x8 = pk_gemm_q4_0x8,
    .gemv_q4_0x8 = gemv_q4_0x8,
    .gemv_x16 = {[LC_TYPE_Q4_0] = gemv_x16_q4_0, [LC_TYPE_Q4_1] = gemv_x16_q4_1,
                 [LC_TYPE_Q6_K] = gemv_x16_q6_K, [LC_TYPE_Q4_K] = gemv_x16_q4_K,
                 [LC_TYPE_Q5_K] = gemv_x16_q5_K, [LC_TYPE_Q5_1] = gemv_x16_q5_1,
                 [LC_TYPE_Q8_0] = gemv_x16_q8_0},
    .gemm_x16_fast = {[LC_TYPE_Q4_1] = gemm_x16_q4_1_fast, [LC_TYPE_Q8_0] = gemm_x16_q8_0_fast,
                      [LC_TYPE_Q4_K] = gemm_x16_q4_K_fast, [LC_TYPE_Q5_K] = gemm_x16_q5_K_fast},
    .gemm_x16 = {[LC_TYPE_Q4_0] = gemm_x16_q4_0, [LC_TYPE_Q4_1] = gemm_x16_q4_1,
                 [LC_TYPE_Q6_K] = gemm_x16_q6_K, [LC_TYPE_Q4_K] = gemm_x16_q4_K,
                 [LC_TYPE_Q5_K] = gemm_x16_q5_K, [LC_TYPE_Q5_1] = gemm_x16_q5_1,
                 [LC_TYPE_Q8_0] = gemm_x16_q8_0},
    .recode = {[LC_TYPE_Q5_0] = to_q8_0_q5_0, [LC_TYPE_IQ4_NL] = to_q8_0_iq4_nl,
               [LC_TYPE_Q3_K] = q3_K_to_q6_K},
    .x16_native = (1u << LC_TYPE_Q4_0) | (1u << LC_TYPE_Q4_1) | (1u << LC_TYPE_Q6_K) |
                  (1u << LC_TYPE_Q4_K) | (1u << LC_TYPE_Q5_K) | (1u << LC_TYPE_Q5_1) |
                  (1u << LC_TYPE_Q8_0),
    .dot_f32 = dot_f32,
    .dot_f16 = dot_f16,
    .mad_f16 = mad_f16,
    .exp_sum = exp_sum,
    .qk_f16_rows = qk_f16_rows,
    .mad_f16_rows = mad_f16_rows,
    .mad_f32_rows = mad_f32_rows,
    .dot_f16_rows = dot_f16_rows,
    .dot_f16_rows_multi = dot_f16_rows_multi,
    .scale_f16 = scale_f16,
    .mad_f32 = mad_f32,
    .softmax = softmax,
    .swiglu = swiglu,
    .qsearch_asym = qsearch_asym,
};
