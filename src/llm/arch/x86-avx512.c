/*
 * x86-avx512.c - AVX-512 (F/BW/VL/DQ) + VNNI kernels, compiled with those -m flags only.
 *
 * The quantized dots and GEMM tiles are x86-qdot.h's, with the integer part done by 256-bit
 * vpdpbusd (u8 x s8, four products summed per 32-bit lane), exactly as llama.cpp does it on these
 * machines: the golden data came from that order of float operations (see scalar.c), so the
 * blocks are not processed two per 512-bit register, which would reorder the sums.  The GEMM
 * tiles are 4 x 4 (the 32 vector registers hold the 16 accumulators).  The float dots use
 * 512-bit FMAs with masked tails.  Quantizers and element-wise kernels come from the AVX2 table.
 */
#include <immintrin.h>
#include <string.h>

#include "kernels.h"

#define INLINE static inline __attribute__((always_inline))

/* ggml's mul_sum_us8_pairs_float with AVX512-VNNI/VL: u8 x s8, 4 bytes summed per lane */
INLINE __m256 dot_us8(__m256i ux, __m256i sy)
{
    return _mm256_cvtepi32_ps(_mm256_dpbusd_epi32(_mm256_setzero_si256(), ux, sy));
}

#define QDOT_TILE_COLS 4 /* 4 x 4 tiles: 16 ymm accumulators of the 32 registers */
#include "x86-qdot.h"

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
        [LC_TYPE_Q4_0] = vec_dot_q4_0_q8_0,
        [LC_TYPE_Q4_1] = vec_dot_q4_1_q8_1,
        [LC_TYPE_Q8_0] = vec_dot_q8_0_q8_0,
    },
    .gemm = {
        [LC_TYPE_Q4_0] = gemm_q4_0,
        [LC_TYPE_Q4_1] = gemm_q4_1,
        [LC_TYPE_Q8_0] = gemm_q8_0,
    },
    .dot_f32 = dot_f32,
    .dot_f16 = dot_f16,
};
