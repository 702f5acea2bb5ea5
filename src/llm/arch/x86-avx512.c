/*
 * x86-avx512.c - AVX-512 (F/BW/VL/DQ) + VNNI kernels, compiled with those -m flags only.
 *
 * The quantized dots and GEMM tiles are x86-qdot.h's, with the integer part done by 256-bit
 * vpdpbusd (u8 x s8, four products summed per 32-bit lane), exactly as llama.cpp does it on these
 * machines: the golden data came from that order of float operations (see scalar.c), so the
 * blocks are not processed two per 512-bit register, which would reorder the sums.  The GEMM
 * tiles are 4 x 4 (the 32 vector registers hold the 16 accumulators).  The float dots follow
 * llama.cpp's orders with 512-bit FMAs (see scalar.c).  Quantizers and element-wise kernels come from the AVX2 table.
 */
#include <immintrin.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"

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

const struct lc_kernels lc_kernels_avx512 = {
    .isa = "avx512",
    .vec_dot = {
        [LC_TYPE_F32] = vec_dot_f32,
        [LC_TYPE_F16] = vec_dot_f16,
        [LC_TYPE_Q4_0] = vec_dot_q4_0_q8_0,
        [LC_TYPE_Q4_1] = vec_dot_q4_1_q8_1,
        [LC_TYPE_Q8_0] = vec_dot_q8_0_q8_0,
    },
    .gemm = {
        [LC_TYPE_F32] = gemm_f32,
        [LC_TYPE_F16] = gemm_f16,
        [LC_TYPE_Q4_0] = pk_gemm_q4_0,
        [LC_TYPE_Q4_1] = pk_gemm_q4_1,
        [LC_TYPE_Q8_0] = pk_gemm_q8_0,
    },
    .gemv = {
        [LC_TYPE_Q4_0] = gemv_q4_0,
        [LC_TYPE_Q4_1] = gemv_q4_1,
    },
    .vec_dot_q4_0x8 = vec_dot_q4_0x8_q8_0,
    .gemm_q4_0x8 = pk_gemm_q4_0x8,
    .gemv_q4_0x8 = gemv_q4_0x8,
    .dot_f32 = dot_f32,
    .dot_f16 = dot_f16,
};
