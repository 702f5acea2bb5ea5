/*
 * x86-pk.h - the quantized GEMM for prompt batches shared by x86-avx2.c and x86-avx512.c: the
 * buffers, their filling, and the driver.  Included after x86-qdot.h (h2f, unpack_nibbles,
 * dot_us8_acc); each ISA file then defines pk_tile (its register tile) and the table entries
 * with DEFINE_PK_GEMM.  The rows come from ggml's layout or, for the x16 entries, from
 * repack.h's (pk_fill_rows_x16): only the filling of the row buffer differs.
 */
#ifndef LC_X86_PK_H
#define LC_X86_PK_H

#include <stdlib.h>

#include "repack.h"

/*
 * The quantized GEMM for prompt batches.  Same bits as vec_dot (and as x86-qdot.h's tiles), with
 * fewer instructions per (row, column, block):
 *
 *   - A group of 4 weight rows is unpacked once per chunk of columns into a buffer (160 bytes
 *     per block: 10 KB for n = 2048, in L1; 55 KB for n = 11008, in L2): per block, the 32
 *     unsigned bytes of the integer dot (vpdpbusd / vpmaddubsw: Q4: the nibbles 0..15; Q8_0:
 *     x + 128) and the fp16 scales (and Q4_1 mins) as floats.
 *   - Per chunk of up to PK_COLS activation columns, the scales d (and Q8_1 sums s) are converted
 *     once, and for Q4_0 / Q8_0 the offset of the unsigned operand is folded into the lanes:
 *     lane j of sum((x + o) * y) - o * sum(y), with o * sum(y) computed once per column block, is
 *     exactly lane j of sum(x * y), the integer vec_dot sums (no overflow: |lane| <= 4 * 255 *
 *     127; the AVX2 tile, whose 16-bit pairs would overflow for x + 128, leaves Q8_0 alone).
 *   - The tile's scale products dx * dy are one vector multiply per block, stored a few blocks
 *     ahead and read back as broadcast memory operands of the FMAs (reading them at once stalls
 *     on store forwarding).
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
    uint8_t q[PK_NB_MAX][4][32]; /* block i, row r: the unsigned operand of the integer dot */
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

/*
 * Rows sub .. sub+3 of the x16 group G (repack.h, Q4_1, Q4_0 or Q8_0 kinds) into R, as pk_fill_rows
 * does from ggml's layout: each row's qs gathered from the 4 chunks of its block.
 */
/* 4 x 4 dword transpose: chunks c0..c3 (dword r: 4 bytes of row r) to rows[r] */
INLINE void pk_transpose4(__m128i c0, __m128i c1, __m128i c2, __m128i c3, __m128i rows[4])
{
    const __m128i t0 = _mm_unpacklo_epi32(c0, c1), t1 = _mm_unpackhi_epi32(c0, c1);
    const __m128i t2 = _mm_unpacklo_epi32(c2, c3), t3 = _mm_unpackhi_epi32(c2, c3);
    rows[0] = _mm_unpacklo_epi64(t0, t2);
    rows[1] = _mm_unpackhi_epi64(t0, t2);
    rows[2] = _mm_unpacklo_epi64(t1, t3);
    rows[3] = _mm_unpackhi_epi64(t1, t3);
}

INLINE void pk_fill_rows_x16(struct pk_rows *R, enum pk_kind kind, int nb, const uint8_t *G,
                             int sub)
{
    const enum lc_type type = kind == PK_Q4_1 ? LC_TYPE_Q4_1 : LC_TYPE_Q4_0;
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    if (kind == PK_Q8_0) { /* 8 chunks: qs[0..15] and qs[16..31] of each row, x + 128 */
        for (int i = 0; i < nb; i++) {
            const uint8_t *q = G + lc_x16_part_off(LC_TYPE_Q8_0, i, LC_X16_P_QS) + (size_t)sub * 4;
            __m128i lo[4], hi[4];
            pk_transpose4(_mm_loadu_si128((const __m128i *)q), _mm_loadu_si128((const __m128i *)(q + 64)),
                          _mm_loadu_si128((const __m128i *)(q + 128)),
                          _mm_loadu_si128((const __m128i *)(q + 192)), lo);
            pk_transpose4(_mm_loadu_si128((const __m128i *)(q + 256)),
                          _mm_loadu_si128((const __m128i *)(q + 320)),
                          _mm_loadu_si128((const __m128i *)(q + 384)),
                          _mm_loadu_si128((const __m128i *)(q + 448)), hi);
            _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++)
                _mm256_store_si256((__m256i *)R->q[i][r],
                                   _mm256_xor_si256(_mm256_set_m128i(hi[r], lo[r]),
                                                    _mm256_set1_epi8((char)0x80)));
            const uint8_t *sc = G + lc_x16_part_off(LC_TYPE_Q8_0, i, LC_X16_P_D) + (size_t)sub * 2;
            _mm_store_ps(R->d[i], _mm_cvtph_ps(_mm_loadl_epi64((const __m128i *)sc)));
        }
        return;
    }
    for (int i = 0; i < nb; i++) {
        /* chunk k holds qs[4k..4k+3] of rows sub..sub+3 in 16 bytes: a 4 x 4 dword transpose
         * gives each row's qs[0..15] */
        const uint8_t *q = G + lc_x16_qs_off(type, nb, i) + (size_t)sub * 4;
        const __m128i c0 = _mm_loadu_si128((const __m128i *)q);
        const __m128i c1 = _mm_loadu_si128((const __m128i *)(q + 64));
        const __m128i c2 = _mm_loadu_si128((const __m128i *)(q + 128));
        const __m128i c3 = _mm_loadu_si128((const __m128i *)(q + 192));
        const __m128i t0 = _mm_unpacklo_epi32(c0, c1), t1 = _mm_unpackhi_epi32(c0, c1);
        const __m128i t2 = _mm_unpacklo_epi32(c2, c3), t3 = _mm_unpackhi_epi32(c2, c3);
        const __m128i rows[4] = {_mm_unpacklo_epi64(t0, t2), _mm_unpackhi_epi64(t0, t2),
                                 _mm_unpacklo_epi64(t1, t3), _mm_unpackhi_epi64(t1, t3)};
        _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++)
            _mm256_store_si256((__m256i *)R->q[i][r],
                               _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(rows[r], 4), rows[r]), m4));
        /* d (and m) of the 4 rows: 4 contiguous fp16 */
        const uint8_t *sc = G + lc_x16_sc_off(type, nb, i) + (size_t)sub * 2;
        _mm_store_ps(R->d[i], _mm_cvtph_ps(_mm_loadl_epi64((const __m128i *)sc)));
        if (kind == PK_Q4_1)
            _mm_store_ps(R->m[i], _mm_cvtph_ps(_mm_loadl_epi64((const __m128i *)(sc + 32))));
    }
}

/* Column scales and offsets for columns a[0..ncols) (ncols <= 4) of one group, all blocks. */
static void pk_fill_cols(struct pk_cols *C, enum pk_kind kind, int nb, const uint8_t *a,
                         size_t a_stride, int ncols)
{
    const int off = kind == PK_Q8_0 ? 7 : 3; /* offset 128 or 8: a shift */
    const __m256i ones8 = _mm256_set1_epi8(1);
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
                    const __m256i sum4 = dot_us8_acc(_mm256_setzero_si256(), ones8,
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
 * The 4 x 4 tile in the Q4_0x8 order, for both ISAs: per (row, column) the block's integer sum
 * (dot_us8_acc from the column's offset lanes, summed by hsum4_epi32), acc = fma(float(isum),
 * dx * dy, acc); column c's 4 accumulators are the lanes of acc[c].  out[r + 4c] as pk_tile.
 */
INLINE void pk_tile_q4_0x8(int nb, const struct pk_rows *R, const struct pk_cols *C,
                           const uint8_t *const a[4], size_t blk, size_t qoff, float out[16])
{
    __m128 acc[4];
    _Pragma("GCC unroll 4") for (int c = 0; c < 4; c++) acc[c] = _mm_setzero_ps();
    for (int i = 0; i < nb; i++) {
        const __m128 dx = _mm_load_ps(R->d[i]);
        __m256i x[4];
        _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++) x[r] =
            _mm256_load_si256((const __m256i *)R->q[i][r]);
        _Pragma("GCC unroll 4") for (int c = 0; c < 4; c++)
        {
            const __m256i y = _mm256_loadu_si256((const __m256i *)(a[c] + i * blk + qoff));
            const __m256i z = _mm256_load_si256((const __m256i *)C[i].bias[c]);
            const __m128i isum = hsum4_epi32(dot_us8_acc(z, x[0], y), dot_us8_acc(z, x[1], y),
                                             dot_us8_acc(z, x[2], y), dot_us8_acc(z, x[3], y));
            acc[c] = _mm_fmadd_ps(_mm_cvtepi32_ps(isum), _mm_mul_ps(dx, _mm_set1_ps(C[i].ds[c])),
                                  acc[c]);
        }
    }
    _Pragma("GCC unroll 4") for (int c = 0; c < 4; c++) _mm_storeu_ps(out + 4 * c, acc[c]);
}

/*
 * The ISA's register tile (defined by the including file): out[r + 4c] = dot(row r, column c)
 * for the 4 rows in R and the 4 columns a[0..3] (blk bytes per block, quants at byte qoff),
 * C their scales, in the order of kind (see above).
 */
INLINE void pk_tile(enum pk_kind kind, int nb, const struct pk_rows *R, const struct pk_cols *C,
                    const uint8_t *const a[4], size_t blk, size_t qoff, float out[16]);

/*
 * kernels.h's gemm contract; with x16, w is in repack.h's layout (kind PK_Q4_1, PK_Q4_0X8 or PK_Q8_0,
 * w the first row of a group, nr % 16 == 0) as for the gemm_x16 entries.  Returns 0, or -1 without writing s when n is too long (more than
 * PK_NB_MAX blocks) or too short (no block), or when the scratch (160 KiB for the rows,
 * 2.5 KiB per block for the column chunk) cannot be allocated: the caller then uses a fallback
 * with the same results (x86-qdot.h's tiles; for Q4_0x8, its GEMV per column).  Scratch is per
 * call, so threads share nothing.
 */
static int pk_gemm(enum pk_kind kind, int x16, int n, float *s, size_t ld_s, const uint8_t *w,
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
            if (x16) /* nr % 16 == 0: whole groups, nrows == 4 */
                pk_fill_rows_x16(R, kind, nb, w + (size_t)(r0 & ~15) * w_stride, r0 & 15);
            else
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

#define DEFINE_PK_GEMM(NAME, KIND, FALLBACK)                                                      \
    static void pk_gemm_##NAME(int n, float *s, size_t ld_s, const void *w, size_t w_stride,      \
                               int nr, const void *a, size_t a_stride, int nc)                    \
    {                                                                                             \
        if (pk_gemm(KIND, 0, n, s, ld_s, w, w_stride, nr, a, a_stride, nc) != 0)                 \
            FALLBACK(n, s, ld_s, w, w_stride, nr, a, a_stride, nc);                               \
    }

/* the Q4_0x8 fallback (rows too long, no memory): the GEMV per column */
static void gemm_q4_0x8_by_columns(int n, float *s, size_t ld_s, const void *w, size_t w_stride,
                                   int nr, const void *a, size_t a_stride, int nc)
{
    for (int c = 0; c < nc; c++)
        gemv_q4_0x8(n, s + (size_t)c * ld_s, w, w_stride, nr,
                    (const uint8_t *)a + (size_t)c * a_stride);
}

/* ---------------------------------------------------------------- x16 layout (repack.h) */

/*
 * The x16 entries' GEMMs, for ISA files that define gemv_x16_q4_1, gemv_x16_q4_0 and
 * gemv_x16_q6_K: Q4_1 / Q4_0 through pk_gemm with pk_fill_rows_x16; Q6_K (no pk kind) group by
 * group, every column against a group while it is in L2.  pk_gemm's fallback (rows too long,
 * no memory) is the GEMV per column.
 */
#define DEFINE_X16_GEMM(NAME, KIND)                                                               \
    static void gemm_x16_##NAME(int n, float *s, size_t ld_s, const void *w, size_t w_stride,     \
                                int nr, const void *a, size_t a_stride, int nc)                   \
    {                                                                                             \
        if (pk_gemm(KIND, 1, n, s, ld_s, w, w_stride, nr, a, a_stride, nc) == 0)                  \
            return;                                                                               \
        for (int c = 0; c < nc; c++)                                                              \
            gemv_x16_##NAME(n, s + (size_t)c * ld_s, w, w_stride, nr,                             \
                            (const uint8_t *)a + (size_t)c * a_stride);                           \
    }
/* Q6_K, Q4_K, Q5_K prompt batches: group by group (27 KB for a Q6_K n = 2048, in L2), every
 * column against it */
#define DEFINE_X16_GEMM_BY_GROUP(NAME)                                                            \
    static void gemm_x16_##NAME(int n, float *s, size_t ld_s, const void *w, size_t w_stride,     \
                                int nr, const void *a, size_t a_stride, int nc)                   \
    {                                                                                             \
        for (int g = 0; g < nr / 16; g++)                                                         \
            for (int c = 0; c < nc; c++)                                                          \
                gemv_x16_##NAME(n, s + (size_t)c * ld_s + 16 * g,                                 \
                                (const uint8_t *)w + (size_t)g * 16 * w_stride, w_stride, 16,     \
                                (const uint8_t *)a + (size_t)c * a_stride);                       \
    }
/* the same for the GEMVs whose decode prefetch would only cost time once the group is in
 * cache: the first column through gemv_x16_NAME (its prefetch streams the group in), the others
 * through x16_NAME_nopf (the same operations, no prefetch: pp64 on Q4_K_M and Q5_1 was 3-7 %
 * slower with it on the Xeon of BENCHMARKS.md) */
#define DEFINE_X16_GEMM_BY_GROUP_NOPF(NAME)                                                       \
    static void gemm_x16_##NAME(int n, float *s, size_t ld_s, const void *w, size_t w_stride,     \
                                int nr, const void *a, size_t a_stride, int nc)                   \
    {                                                                                             \
        for (int g = 0; g < nr / 16; g++)                                                         \
            for (int c = 0; c < nc; c++)                                                          \
                (c == 0 ? gemv_x16_##NAME : x16_##NAME##_nopf)(                                   \
                    n, s + (size_t)c * ld_s + 16 * g,                                             \
                    (const uint8_t *)w + (size_t)g * 16 * w_stride, w_stride, 16,                 \
                    (const uint8_t *)a + (size_t)c * a_stride);                                   \
    }
#define DEFINE_X16_GEMM_Q6_K() DEFINE_X16_GEMM_BY_GROUP(q6_K)

#endif
