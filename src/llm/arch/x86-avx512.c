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

/*
 * The quantized GEMM for prompt batches.  Same bits as vec_dot (and as x86-qdot.h's tiles), with
 * fewer instructions per (row, column, block):
 *
 *   - A group of 4 weight rows is unpacked once per chunk of columns into a buffer (160 bytes
 *     per block: 10 KB for n = 2048, in L1; 55 KB for n = 11008, in L2): per block, the 32
 *     unsigned bytes vpdpbusd takes (Q4: the nibbles 0..15; Q8_0: x + 128) and the fp16 scales
 *     (and Q4_1 mins) as floats.
 *   - Per chunk of up to PK_COLS activation columns, the scales d (and Q8_1 sums s) are converted
 *     once, and for Q4_0 / Q8_0 the offset of the unsigned operand is folded into vpdpbusd's
 *     initial value: lane j of sum((x + o) * y) - o * sum(y), with o * sum(y) computed once per
 *     column block, is exactly lane j of sum(x * y), the integer vec_dot sums (no overflow:
 *     |lane| <= 4 * 255 * 127).
 *   - The 16 scale products dx * dy of a 4 x 4 tile are one 512-bit multiply per block; each is
 *     then a broadcast memory operand of the FMA.
 *
 * Per (row, column) the float operations are vec_dot's: per block acc = fma(float(lanes),
 * dx * dy, acc), hsum_float_8 at the end, Q4_1's m * s sum (multiply, then add, in block order)
 * added last.  PK_Q4_0X8 (Q4_0 weights llama.cpp repacks) follows vec_dot_q4_0x8 instead: the
 * lanes summed as integers per block, acc = fma(float(isum), dx * dy, acc), no horizontal sum.
 */
#define PK_NB_MAX 1024 /* longer rows (n > 32768) take the fallbacks */
#define PK_COLS 64     /* activation columns per chunk (a multiple of 4) */

enum pk_kind { PK_Q4_1, PK_Q4_0, PK_Q8_0, PK_Q4_0X8 };

struct pk_rows {
    uint8_t q[PK_NB_MAX][4][32]; /* block i, row r: the unsigned vpdpbusd operand */
    float d[PK_NB_MAX][4];       /* block i: dx of rows 0..3 */
    float m[PK_NB_MAX][4];       /* block i: Q4_1 m of rows 0..3 */
};

/* per column group (4 columns) and block: dy[4], sy[4]; and (Q4_0/Q8_0) the lane offsets */
struct pk_cols {
    float ds[8];
    int32_t bias[4][8];
};
/* aligned loads of ds and bias in an array of them from aligned_alloc(64) */
_Static_assert(sizeof(struct pk_cols) % 32 == 0, "pk_cols must keep 32-byte alignment");

/* Unpack weight rows w[0..nrows) (nrows <= 4) into R; missing rows become zeros. */
static void pk_fill_rows(struct pk_rows *R, enum pk_kind kind, int nb, const uint8_t *w,
                         size_t w_stride, int nrows)
{
    for (int r = 0; r < 4; r++) {
        if (r >= nrows) {
            for (int i = 0; i < nb; i++) {
                _mm256_store_si256((__m256i *)R->q[i][r], _mm256_setzero_si256());
                R->d[i][r] = 0.0f;
                R->m[i][r] = 0.0f;
            }
            continue;
        }
        const uint8_t *row = w + (size_t)r * w_stride;
        for (int i = 0; i < nb; i++) {
            __m256i q;
            if (kind == PK_Q4_1) {
                const lc_block_q4_1 *x = (const lc_block_q4_1 *)(const void *)row + i;
                q = unpack_nibbles(x->qs);
                R->d[i][r] = h2f(x->d);
                R->m[i][r] = h2f(x->m);
            } else if (kind == PK_Q4_0 || kind == PK_Q4_0X8) {
                const lc_block_q4_0 *x = (const lc_block_q4_0 *)(const void *)row + i;
                q = unpack_nibbles(x->qs);
                R->d[i][r] = h2f(x->d);
            } else {
                const lc_block_q8_0 *x = (const lc_block_q8_0 *)(const void *)row + i;
                q = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)x->qs),
                                     _mm256_set1_epi8((char)0x80));
                R->d[i][r] = h2f(x->d);
            }
            _mm256_store_si256((__m256i *)R->q[i][r], q);
        }
    }
}

/* Column scales and offsets for columns a[0..ncols) (ncols <= 4) of one group, all blocks. */
static void pk_fill_cols(struct pk_cols *C, enum pk_kind kind, int nb, const uint8_t *a,
                         size_t a_stride, int ncols)
{
    const int off = kind == PK_Q8_0 ? 7 : 3; /* offset 128 or 8: a shift */
    for (int i = 0; i < nb; i++) {
        for (int c = 0; c < 4; c++) {
            float d = 0.0f, sy = 0.0f;
            __m256i bias = _mm256_setzero_si256();
            if (c < ncols) {
                const uint8_t *col = a + (size_t)c * a_stride;
                const int8_t *qs;
                if (kind == PK_Q4_1) {
                    const lc_block_q8_1 *y = (const lc_block_q8_1 *)(const void *)col + i;
                    d = h2f(y->d);
                    sy = h2f(y->s);
                    qs = y->qs;
                } else {
                    const lc_block_q8_0 *y = (const lc_block_q8_0 *)(const void *)col + i;
                    d = h2f(y->d);
                    qs = y->qs;
                }
                if (kind != PK_Q4_1) {
                    const __m256i sum4 = _mm256_dpbusd_epi32(
                        _mm256_setzero_si256(), _mm256_set1_epi8(1),
                        _mm256_loadu_si256((const __m256i *)qs));
                    bias = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(sum4, off));
                }
            }
            C[i].ds[c] = d;
            C[i].ds[4 + c] = sy;
            _mm256_store_si256((__m256i *)C[i].bias[c], bias);
        }
    }
}

/*
 * One 4 x 4 tile: out[r + 4c] = dot(row r, column c) for the rows in R and the columns
 * a0..a3 (blk bytes per block, quants at byte qoff of each block), C their scales.
 */
INLINE void pk_tile(enum pk_kind kind, int nb, const struct pk_rows *R, const struct pk_cols *C,
                    const uint8_t *const a[4], size_t blk, size_t qoff, float out[16])
{
    const __m512i by_col = _mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0);
    if (kind == PK_Q4_0X8) {
        /*
         * llama.cpp's repacked Q4_0x8 order (see scalar.c): per (row, column) the block's
         * integer sum, acc = fma(float(isum), dx * dy, acc); the 16 accumulators of the tile
         * are the lanes (r + 4c) of one vector.
         */
        __m512 acc = _mm512_setzero_ps();
        for (int i = 0; i < nb; i++) {
            const __m512 p = _mm512_mul_ps(_mm512_broadcast_f32x4(_mm_load_ps(R->d[i])),
                                           _mm512_permutexvar_ps(by_col, _mm512_castps256_ps512(
                                                                             _mm256_load_ps(C[i].ds))));
            __m256i x[4];
            _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++) x[r] =
                _mm256_load_si256((const __m256i *)R->q[i][r]);
            __m128i sums[4];
            _Pragma("GCC unroll 4") for (int c = 0; c < 4; c++)
            {
                const __m256i y = _mm256_loadu_si256((const __m256i *)(a[c] + i * blk + qoff));
                const __m256i z = _mm256_load_si256((const __m256i *)C[i].bias[c]);
                sums[c] = hsum4_epi32(_mm256_dpbusd_epi32(z, x[0], y), _mm256_dpbusd_epi32(z, x[1], y),
                                      _mm256_dpbusd_epi32(z, x[2], y), _mm256_dpbusd_epi32(z, x[3], y));
            }
            __m512i isum = _mm512_castsi128_si512(sums[0]);
            isum = _mm512_inserti32x4(isum, sums[1], 1);
            isum = _mm512_inserti32x4(isum, sums[2], 2);
            isum = _mm512_inserti32x4(isum, sums[3], 3);
            acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), p, acc);
        }
        _mm512_storeu_ps(out, acc);
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

/*
 * kernels.h's gemm contract.  Returns 0, or -1 without writing s when n is too long (more than
 * PK_NB_MAX blocks) or too short (no block), or when the scratch (160 KiB for the rows,
 * 2.5 KiB per block for the column chunk) cannot be allocated: the caller then uses a fallback
 * with the same results (x86-qdot.h's tiles; for Q4_0x8, its GEMV per column).  Scratch is per
 * call, so threads share nothing.
 */
static int pk_gemm(enum pk_kind kind, int n, float *s, size_t ld_s, const uint8_t *w,
                   size_t w_stride, int nr, const uint8_t *a, size_t a_stride, int nc)
{
    const int nb = n / 32;
    if (nb < 1 || nb > PK_NB_MAX)
        return -1;
    const size_t ngroups = PK_COLS / 4;
    struct pk_rows *R = aligned_alloc(64, sizeof *R);
    struct pk_cols *C = aligned_alloc(64, ngroups * (size_t)nb * sizeof *C);
    if (!R || !C) {
        free(R);
        free(C);
        return -1;
    }
    const size_t blk = kind == PK_Q4_1 ? sizeof(lc_block_q8_1) : sizeof(lc_block_q8_0);
    const size_t qoff = kind == PK_Q4_1 ? offsetof(lc_block_q8_1, qs) : offsetof(lc_block_q8_0, qs);
    for (int c0 = 0; c0 < nc; c0 += PK_COLS) {
        const int ncols = nc - c0 < PK_COLS ? nc - c0 : PK_COLS;
        const int ng = (ncols + 3) / 4;
        for (int g = 0; g < ng; g++) {
            const int k = ncols - 4 * g < 4 ? ncols - 4 * g : 4;
            pk_fill_cols(C + (size_t)g * (size_t)nb, kind, nb, a + (size_t)(c0 + 4 * g) * a_stride,
                         a_stride, k);
        }
        for (int r0 = 0; r0 < nr; r0 += 4) {
            const int nrows = nr - r0 < 4 ? nr - r0 : 4;
            pk_fill_rows(R, kind, nb, w + (size_t)r0 * w_stride, w_stride, nrows);
            for (int g = 0; g < ng; g++) {
                const int cg = c0 + 4 * g;
                const int k = nc - cg < 4 ? nc - cg : 4;
                const uint8_t *ac[4];
                for (int c = 0; c < 4; c++)
                    ac[c] = a + (size_t)(c < k ? cg + c : cg) * a_stride;
                float out[16];
                if (kind == PK_Q4_1)
                    pk_tile(PK_Q4_1, nb, R, C + (size_t)g * (size_t)nb, ac, blk, qoff, out);
                else if (kind == PK_Q4_0X8)
                    pk_tile(PK_Q4_0X8, nb, R, C + (size_t)g * (size_t)nb, ac, blk, qoff, out);
                else
                    pk_tile(PK_Q4_0, nb, R, C + (size_t)g * (size_t)nb, ac, blk, qoff, out);
                for (int c = 0; c < k; c++)
                    for (int r = 0; r < nrows; r++)
                        s[(size_t)(cg + c) * ld_s + (size_t)(r0 + r)] = out[r + 4 * c];
            }
        }
    }
    free(R);
    free(C);
    return 0;
}

#define DEFINE_PK_GEMM(NAME, KIND)                                                                \
    static void pk_gemm_##NAME(int n, float *s, size_t ld_s, const void *w, size_t w_stride,      \
                               int nr, const void *a, size_t a_stride, int nc)                    \
    {                                                                                             \
        if (pk_gemm(KIND, n, s, ld_s, w, w_stride, nr, a, a_stride, nc) != 0)                    \
            gemm_##NAME(n, s, ld_s, w, w_stride, nr, a, a_stride, nc);                            \
    }
DEFINE_PK_GEMM(q4_1, PK_Q4_1)
DEFINE_PK_GEMM(q4_0, PK_Q4_0)
DEFINE_PK_GEMM(q8_0, PK_Q8_0)

/* the Q4_0x8 order; its fallback (too long rows, no memory) loops the GEMV per column */
static void pk_gemm_q4_0x8(int n, float *s, size_t ld_s, const void *w, size_t w_stride, int nr,
                           const void *a, size_t a_stride, int nc)
{
    if (pk_gemm(PK_Q4_0X8, n, s, ld_s, w, w_stride, nr, a, a_stride, nc) != 0)
        for (int c = 0; c < nc; c++)
            gemv_q4_0x8(n, s + (size_t)c * ld_s, w, w_stride, nr,
                        (const uint8_t *)a + (size_t)c * a_stride);
}

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
