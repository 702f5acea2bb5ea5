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
#include <string.h>

#include "kernels.h"

#define INLINE static inline __attribute__((always_inline))

/* ggml's mul_sum_us8_pairs_float with AVX512-VNNI/VL: u8 x s8, 4 bytes summed per lane */
INLINE __m256 dot_us8(__m256i ux, __m256i sy)
{
    return _mm256_cvtepi32_ps(_mm256_dpbusd_epi32(_mm256_setzero_si256(), ux, sy));
}

#define QDOT_TILE_COLS 4 /* 4 x 4 tiles: 16 ymm accumulators of the 32 registers */
#define QDOT_VECTOR_SCALES 1
#include "x86-qdot.h"

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
        [LC_TYPE_Q4_0] = gemm_q4_0,
        [LC_TYPE_Q4_1] = gemm_q4_1,
        [LC_TYPE_Q8_0] = gemm_q8_0,
    },
    .dot_f32 = dot_f32,
    .dot_f16 = dot_f16,
};
