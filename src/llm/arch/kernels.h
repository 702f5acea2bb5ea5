/*
 * kernels.h - the dispatch table of compute kernels.
 *
 * Every kernel has a readable scalar reference in scalar.c (always built); x86-avx2.c,
 * x86-avx512.c and arm-neon.c provide faster versions of some entries, each file compiled with
 * its own -m flags only.  dispatch.c picks, once at start-up, the best implementation per entry
 * from cpuid + XCR0 (x86) or hwcaps (ARM); LLAMACHAT_ISA=scalar|avx2|avx512|neon forces a path.
 * Entries an ISA does not provide fall back to the next-best one, down to scalar.
 *
 * Conventions: n is a number of elements (a multiple of the block size for quantized types);
 * rows are contiguous; nothing here allocates except the AVX-512 quantized and F16 gemm entries
 * and AVX2's F16 and x16 gemm entries but Q4_1's (see lc_gemm_fn); every entry may be called
 * from several threads at once.
 */
#ifndef LC_KERNELS_H
#define LC_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "quant.h"

/* *s = dot(x, y): x a row of n weights of type T, y n activations of type vec_dot_type(T). */
typedef void (*lc_vec_dot_fn)(int n, float *s, const void *x, const void *y);
/* Convert/quantize n floats into an activation row of the kernel's type (Q8_0, Q8_1, Q8_K, F16). */
typedef void (*lc_quantize_row_fn)(const float *x, void *y, int64_t n);
/*
 * Tiled matrix product for prompt processing (optional, may be NULL):
 *   s[c * ld_s + r] = dot(w row r, a row c)   for r in [0, nr), c in [0, nc)
 * w: nr rows of n weights of type T, w_stride bytes apart; a: nc activation rows of
 * vec_dot_type(T), a_stride bytes apart.  Each weight block loaded is used for several columns.
 * Numerics (to agree with llama.cpp bit for bit, see scalar.c): for quantized T every output has
 * the same bits as vec_dot; for F32/F16 it follows tinyBLAS's order (llama.cpp's path for
 * batches of two or more tokens) where vec_dot follows ggml_vec_dot's (one token).
 * The AVX-512 quantized entries take a scratch buffer from malloc per call (160 KiB of
 * unpacked rows + 2.5 KiB per block of column scales: 0.3 MB for n = 2048, 1 MB for
 * n = 11008); when that fails they fall back to register tiles that need none, same results.
 * (AVX-512's gemm_x16 of Q4_0 keeps a per-thread buffer, lc_kernel_scratch, instead, and falls back
 * to its GEMV.  So does its gemm_x16 of Q8_0, per block 576 + 36 * nc bytes; without memory, or
 * for fewer than 4 columns, pk_gemm's tiles or its GEMV, same results.)
 * The AVX-512 x16 K-quant entries (Q4_K, Q5_K, Q6_K) expand a group of 16 rows into 4 KiB per
 * 256 weights in the same per-thread buffer as Q4_0's (without memory: the GEMV per column,
 * same results).
 * AVX-512's and AVX2's F16 entries, for two columns or more, widen 16 (AVX2: 6) rows at a time
 * into that per-thread buffer too (AVX-512 40 KB: 16 rows x 128 elements and the partial sums of
 * 32 columns; AVX2 18 KB) and skip a column's trailing zeros when the rows are finite
 * (fma(x, 0, acc) == acc: the same bits); without memory, one column at a time, same results.
 * AVX2's gemm_x16 of Q4_0, Q5_1, Q8_0, Q4_K, Q5_K and Q6_K keep such a per-thread buffer too
 * (lc_kernel_scratch, per block: Q4_0 576 + 8 * nc bytes, Q5_1 640 + 8 * nc, Q8_0
 * 1088 + 68 * nc; per super-block: the K-quants 6 KB + 20 * nc, Q6_K 6 KB + 256 * nc); without
 * memory, or for fewer than 4 columns, their earlier path, same results.
 */
typedef void (*lc_gemm_fn)(int n, float *s, size_t ld_s, const void *w, size_t w_stride, int nr,
                           const void *a, size_t a_stride, int nc);

/*
 * Matrix-vector product for text generation (optional, may be NULL):
 *   s[r] = dot(w row r, a)   for r in [0, nr); nothing else of s is written
 * w: nr rows of n weights of type T (n a multiple of its block size), w_stride bytes apart, no
 * alignment needed; a: one activation row of vec_dot_type(T).  Several rows at once
 * (independent accumulators, shared activation loads); every output has the same bits as
 * vec_dot.  Does not allocate.  May prefetch (never load) up to 8 rows past the last one.
 */
typedef void (*lc_gemv_fn)(int n, float *s, const void *w, size_t w_stride, int nr,
                           const void *a);

/* the most queries one dot_f16_rows_multi call takes */
#define LC_ROWS_MULTI_MAX 32

struct lc_kernels {
    const char *isa;                               /* "scalar", "avx2", "avx512", "neon" */
    lc_vec_dot_fn vec_dot[LC_TYPE_COUNT];          /* by weight type */
    lc_quantize_row_fn quantize_row[LC_TYPE_COUNT];/* by activation type (Q8_0, Q8_1, Q8_K, F16, F32) */
    lc_gemm_fn gemm[LC_TYPE_COUNT];                /* by weight type; NULL = use vec_dot */
    lc_gemv_fn gemv[LC_TYPE_COUNT];                /* by weight type; NULL = use vec_dot */
    /*
     * Q4_0 . Q8_0 in the order of llama.cpp's repacked Q4_0x8 kernels (ggml_gemv/gemm_
     * q4_0_8x8_q8_0, x86), used for Q4_0 weights with a multiple of 8 rows (lc_weight.q4_0x8):
     * per block the 32 integer products summed exactly, then acc = fma(float(sum), dx * dy,
     * acc) from acc = 0, no horizontal float sum.  Same contracts as the entries above;
     * gemm and gemv may be NULL (vec_dot_q4_0x8 is then looped).
     */
    lc_vec_dot_fn vec_dot_q4_0x8;
    lc_gemm_fn gemm_q4_0x8;
    lc_gemv_fn gemv_q4_0x8;
    /*
     * The same products for weights in the x16 layout (repack.h), by weight type (Q4_1, Q6_K,
     * Q4_K, Q5_K, Q5_1, Q8_0;
     * Q4_0, which is repacked only when it follows the Q4_0x8 order, and then keeps that order):
     * w is the first row of a group of 16 (rows are not addressable one by one), w_stride the
     * row size of the ggml layout (so row r0 % 16 == 0 starts at w + r0 * w_stride), nr a
     * multiple of 16.  Same contracts and same bits as gemv / gemm otherwise.  The scalar
     * table has readable versions for every type, so these are never NULL after dispatch.
     */
    lc_gemv_fn gemv_x16[LC_TYPE_COUNT];
    lc_gemm_fn gemm_x16[LC_TYPE_COUNT];
    /*
     * Opt-in (lc_context_params.fast_math): the same products as gemm_x16 in a faster float
     * order that is NOT vec_dot's (the ISA file documents it), within float rounding of it;
     * NULL where the ISA has none (callers take gemm_x16).  Not merged from other ISAs.
     */
    lc_gemm_fn gemm_x16_fast[LC_TYPE_COUNT];
    /* bit t set: this ISA file has its own (fast) x16 kernels for type t, so repacking pays */
    unsigned x16_native;
    /*
     * Blocks rewritten as the blocks of another type that hold the same weights and give the
     * same products in the same float order, so that prompt batches can take that type's x16
     * GEMM (context.c, matmul_recoded), by weight type (NULL for the others):
     *   Q5_0, IQ4_NL -> Q8_0: d kept, each weight a signed byte (q - 16, kvalues_iq4nl[q]);
     *     Q5_0's vec_dot and IQ4_NL's tinyBLAS order are Q8_0's (one accumulator,
     *     fma(dx * dy, 8 integer lanes) per block, hsum_float_8);
     *   Q3_K -> Q6_K: d and the 16 scales kept, q - 4 stored as q6 = q - 4 + 32; both
     *     vec_dots are scalar.c's q6_K_block (the same lanes of the same integers, d = dy * dx).
     * x: nb blocks of the type, y: nb blocks of lc_recoded_type (not overlapping).
     */
    void (*recode[LC_TYPE_COUNT])(const void *x, void *y, int nb);

    /* y[i] = x[i] * scale * w[i], scale = 1/sqrt(mean(x^2) + eps) (sum in double as ggml) */
    void (*rms_norm)(float *y, const float *x, const float *w, int n, float eps);
    /* x[i] = exp(x[i] - max) / sum, in place; -INFINITY entries become 0 */
    void (*softmax)(float *x, int n);
    /* y[i] = silu(g[i]) * u[i], silu(v) = v / (1 + exp(-v)) */
    void (*swiglu)(float *y, const float *g, const float *u, int n);
    /* dot of two float vectors */
    float (*dot_f32)(const float *x, const float *y, int n);
    /* dot of an fp16 vector with an fp16 vector, accumulated in float (ggml_vec_dot_f16) */
    float (*dot_f16)(const lc_fp16 *x, const lc_fp16 *y, int n);
    /* y[i] += a * x[i] with x in fp16 */
    void (*axpy_f16)(float *y, float a, const lc_fp16 *x, int n);
    /* y[i] += a * x[i] */
    void (*axpy_f32)(float *y, float a, const float *x, int n);
    /*
     * The element-wise steps of ggml's fused attention (flash_attn_ext on the CPU, one key at a
     * time; context.c's attention_fused took them until it moved to chunks of keys, exp_sum and
     * mad_f16_rows below), y and x n elements, each element rounded as ggml rounds it:
     *   mad_f16:   y[i] = f16(fma(f32(x[i]), v, f32(y[i])))   (ggml_vec_mad_f16)
     *   scale_f16: y[i] = f16(f32(y[i]) * v)                  (ggml_vec_scale_f16)
     *   mad_f32:   y[i] = fma(x[i], v, y[i])                   (ggml_vec_mad_f32)
     */
    void (*mad_f16)(lc_fp16 *y, float v, const lc_fp16 *x, int n);
    /*
     * s[r] = dot_f16(x + r * x_stride, y, n) for r in [0, nr), with the same bits as dot_f16 of
     * this ISA: the keys of one attention head against its query (x_stride in elements).  Only
     * where it is faster than nr calls (AVX-512: 16 rows share one transposed reduction); NULL
     * elsewhere, and callers then loop over dot_f16 -- it is never merged from another ISA,
     * whose dot_f16 may sum in another order.
     */
    void (*dot_f16_rows)(float *s, const lc_fp16 *x, size_t x_stride, int nr, const lc_fp16 *y,
                         int n);
    /*
     * s[j][r] = dot_f16(x + r * x_stride, y[j], n) for r in [0, nr), j in [0, ny), with the same
     * bits as dot_f16 of this ISA, for any n: the queries of one GQA group against the keys of
     * their shared KV head (or their softmax rows against its values), each row of x widened
     * once for several queries.  ny <= LC_ROWS_MULTI_MAX; work: the caller's scratch for the
     * queries in F32, ny * n floats when n <= 256, else 4 * n.  As dot_f16_rows: only where
     * faster, NULL elsewhere, never merged from another ISA.
     */
    void (*dot_f16_rows_multi)(float *const *s, const lc_fp16 *x, size_t x_stride, int nr,
                               const lc_fp16 *const *y, int ny, int n, float *work);
    void (*scale_f16)(lc_fp16 *y, float v, int n);
    void (*mad_f32)(float *y, float v, const float *x, int n);
    /*
     * The fused attention's chunked online softmax (context.c's attention_fused; not ggml's
     * order, which takes one key at a time):
     *   exp_sum: t[i] = x[i] * scale; *m = max(*m, max t[i]); x[i] = v_expf(t[i] - *m) for
     *     i < n (ggml-order-ew.h's v_expf, ggml_v_expf's arithmetic: within 1.5 ulp of expf;
     *     -inf gives 0); returns the sum of the new x[i] in blocks of 16, the last padded with
     *     zeros, each block summed as ew_reduce16, added in order to a float from 0.
     *   mad_f16_rows: y[j][i] = fma(f32(x[r * x_stride + i]), p[j][r], y[j][i]) for r = 0, 1,
     *     .. nr - 1 in that order, i < n, j < ny: the softmax weights of the ny heads of one GQA
     *     group times the value rows (x_stride elements apart) of their shared KV head, into F32
     *     accumulators of n = head size; each row is widened once for all ny heads.  May
     *     prefetch (never load) up to 64 rows past the last one.  mad_f32_rows: F32 rows.
     * Each is defined element by element, so every ISA gives the same bits (test-kernels).
     */
    float (*exp_sum)(float *x, int n, float scale, float *m);
    /*
     * The fused attention's q.K: s[j][r] = sum_i f32(x[r * x_stride + i]) * q[j][i] for r < nr,
     * j < ny, i < n: the keys of one KV head (x_stride elements apart) against the F32 queries
     * of the heads sharing it, each row widened once for all of them.  The sum is in float, in
     * an order of the ISA's own (scalar: one fused multiply-add chain per row): within float
     * rounding of the exact sum, not the same bits everywhere (test-kernels checks a bound).
     * May prefetch (never load) up to 64 rows past the last one.
     */
    void (*qk_f16_rows)(float *const *s, int ny, const float *const *q, const lc_fp16 *x,
                        size_t x_stride, int nr, int n);
    void (*mad_f16_rows)(float *const *y, int ny, const float *const *p, const lc_fp16 *x,
                         size_t x_stride, int nr, int n);
    void (*mad_f32_rows)(float *const *y, int ny, const float *const *p, const float *x,
                         size_t x_stride, int nr, int n);
    /*
     * The Q4_1 / Q5_1 block search of lc_quantize_row_search (qsearch-lanes.h has the
     * algorithm): nb blocks of 32 floats x; weights w (32 nb, non-negative) or, when w is NULL,
     * w[j] = sqrt(sigma2 + x[j]^2) (sigma2 >= 0) or 1 (sigma2 < 0); nmax 15 (Q4_1) or 31
     * (Q5_1).  Out: d[nb], m[nb] the F16 bits of each block's pair, L[32 nb] its levels in
     * [0, nmax].  Every ISA gives the same bits (blocks in vector lanes, sums in the same order).
     */
    void (*qsearch_asym)(const float *x, const float *w, float sigma2, int64_t nb, int nmax,
                         lc_fp16 *d, lc_fp16 *m, uint8_t *L);
};

/*
 * For the ISA files' prompt GEMMs: the calling thread's scratch buffer, at least bytes bytes,
 * 64-byte aligned, kept from call to call and grown as needed (whole pages), freed when the
 * thread exits (a pthread key's destructor); NULL without memory (the GEMMs then take a path
 * that needs none, with the same bits).  One buffer per thread, shared by every ISA file: valid
 * until the thread's next call, so a GEMM must not call another that uses it while it holds
 * it.  About 1 MB per thread for TinyLlama's down projection in a 512-token batch (AVX-512
 * Q4_1, n = 5632); AVX2's Q8_0 and Q6_K expand the columns too (~6 MB at n = 5632).
 */
uint8_t *lc_kernel_scratch(size_t bytes);

/* the type kernels.h's recode[t] writes */
static inline enum lc_type lc_recoded_type(enum lc_type t)
{
    return t == LC_TYPE_Q3_K ? LC_TYPE_Q6_K : LC_TYPE_Q8_0;
}

/* The scalar reference table (always complete). */
extern const struct lc_kernels lc_kernels_scalar;
/* Tables of the ISA files, merged over the scalar one by dispatch.c (entries may be NULL). */
extern const struct lc_kernels lc_kernels_avx2;
extern const struct lc_kernels lc_kernels_avx512;
extern const struct lc_kernels lc_kernels_neon;

/*
 * The table in use: chosen on first call from the CPU and LLAMACHAT_ISA.  Never NULL.
 * Thread-safe after lc_kernels_select() or a first call from one thread.
 */
const struct lc_kernels *lc_kernels(void);
/*
 * Force an ISA ("scalar", "avx2", "avx512", "neon", or "auto").  Returns 0, or -1 with a
 * malloc'd *err when the name is unknown, not built in, or the CPU/OS lacks it.
 */
int lc_kernels_select(const char *isa, char **err);
/* 1 when this build has kernels for isa and the running CPU and OS support them. */
int lc_kernels_isa_available(const char *isa);
/* Space-separated ISAs built into this binary, e.g. "scalar avx2 avx512". */
const char *lc_kernels_built(void);

#endif
