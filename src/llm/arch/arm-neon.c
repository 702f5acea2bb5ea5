/*
 * arm-neon.c - AArch64 Advanced SIMD kernels, with the dot-product extension where present.
 *
 * The file is compiled for the base ARMv8-A; the functions that use sdot (vdotq_s32) carry a
 * target attribute and are called only when getauxval(AT_HWCAP) reports ASIMDDP, so one binary
 * runs on Cortex-A53/A57 (widening multiplies, vmull_s8 + vpadalq_s16) and uses sdot on newer
 * cores.
 *
 * Quantized dots: the 32 products of a block are summed exactly in integers (either path), then
 * each block is added in float exactly as scalar.c does it (sumf += dx*dy * sumi [+ mx*sy]), so
 * these kernels, with or without sdot, give scalar.c's results bit for bit, and so do the GEMM
 * tiles, which repeat the same per-(row, column) sequence.  Activation quantizers round like
 * scalar.c (ggml's x86 SIMD: id = 127/amax, half-to-even via vcvtnq_s32_f32).
 */
#include <arm_neon.h>
#include <math.h>
#include <string.h>

#include "kernels.h"

#ifdef __linux__
#include <sys/auxv.h>
#ifndef HWCAP_ASIMDDP
#define HWCAP_ASIMDDP (1 << 20)
#endif
#endif

#define INLINE static inline __attribute__((always_inline))
#define DOTPROD __attribute__((target("arch=armv8.2-a+dotprod")))

#ifdef LC_NEON_NO_DOTPROD /* the compiler cannot emit sdot: widening multiplies only */
static int dotprod(void)
{
    return 0;
}
#else
static int have_dotprod = -1;

static int dotprod(void)
{
    int v = __atomic_load_n(&have_dotprod, __ATOMIC_RELAXED);
    if (v < 0) {
#ifdef __linux__
        v = (getauxval(AT_HWCAP) & HWCAP_ASIMDDP) != 0;
#else
        v = 0;
#endif
        __atomic_store_n(&have_dotprod, v, __ATOMIC_RELAXED);
    }
    return v;
}
#endif

INLINE float h2f(lc_fp16 h)
{
    return vgetq_lane_f32(vcvt_f32_f16(vreinterpret_f16_u16(vdup_n_u16(h))), 0);
}

/* ---------------------------------------------------------------- activation quantizers */

/* One block of 32 floats -> int8 as scalar.c; returns d, *sum = sum(q). */
INLINE float quantize_block_q8(const float *x, int8_t *qs, int *sum)
{
    float32x4_t v[8];
    float32x4_t m = vdupq_n_f32(0.0f);
    for (int j = 0; j < 8; j++) {
        v[j] = vld1q_f32(x + 4 * j);
        m = vmaxq_f32(m, vabsq_f32(v[j]));
    }
    const float amax = vmaxvq_f32(m);
    const float d = amax / 127.f;
    const float id = amax != 0.0f ? 127.f / amax : 0.0f;
    int32x4_t acc = vdupq_n_s32(0);
    for (int j = 0; j < 8; j += 2) {
        const int32x4_t i0 = vcvtnq_s32_f32(vmulq_n_f32(v[j], id));
        const int32x4_t i1 = vcvtnq_s32_f32(vmulq_n_f32(v[j + 1], id));
        acc = vaddq_s32(acc, vaddq_s32(i0, i1));
        const int16x8_t h = vcombine_s16(vmovn_s32(i0), vmovn_s32(i1));
        vst1_s8(qs + 4 * j, vmovn_s16(h));
    }
    *sum = vaddvq_s32(acc);
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

static void quantize_row_f16(const float *x, void *vy, int64_t n)
{
    lc_fp16 *y = vy;
    int64_t i = 0;
    for (; i + 4 <= n; i += 4)
        vst1_u16(y + i, vreinterpret_u16_f16(vcvt_f16_f32(vld1q_f32(x + i))));
    for (; i < n; i++)
        y[i] = lc_fp32_to_fp16(x[i]);
}

/* ---------------------------------------------------------------- block operands */

/* A weight block as two signed 16-byte halves: weights 0..15 and 16..31. */
struct wblk {
    int8x16_t lo, hi;
};

INLINE struct wblk q4_1_x(const lc_block_q4_1 *x)
{
    const uint8x16_t q = vld1q_u8(x->qs);
    return (struct wblk){vreinterpretq_s8_u8(vandq_u8(q, vdupq_n_u8(0x0F))),
                         vreinterpretq_s8_u8(vshrq_n_u8(q, 4))};
}

INLINE struct wblk q4_0_x(const lc_block_q4_0 *x)
{
    const uint8x16_t q = vld1q_u8(x->qs);
    const int8x16_t eight = vdupq_n_s8(8);
    return (struct wblk){vsubq_s8(vreinterpretq_s8_u8(vandq_u8(q, vdupq_n_u8(0x0F))), eight),
                         vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(q, 4)), eight)};
}

INLINE struct wblk q8_0_x(const lc_block_q8_0 *x)
{
    return (struct wblk){vld1q_s8(x->qs), vld1q_s8(x->qs + 16)};
}

/* exact integer dot of a weight block with 32 activations */
#ifndef LC_NEON_NO_DOTPROD
DOTPROD INLINE int32_t idot_dp(struct wblk w, const int8_t *y)
{
    const int32x4_t p = vdotq_s32(vdotq_s32(vdupq_n_s32(0), w.lo, vld1q_s8(y)), w.hi,
                                  vld1q_s8(y + 16));
    return vaddvq_s32(p);
}
#endif

INLINE int32_t idot_nodp(struct wblk w, const int8_t *y)
{
    const int8x16_t y0 = vld1q_s8(y), y1 = vld1q_s8(y + 16);
    int32x4_t acc = vpaddlq_s16(vmull_s8(vget_low_s8(w.lo), vget_low_s8(y0)));
    acc = vpadalq_s16(acc, vmull_high_s8(w.lo, y0));
    acc = vpadalq_s16(acc, vmull_s8(vget_low_s8(w.hi), vget_low_s8(y1)));
    acc = vpadalq_s16(acc, vmull_high_s8(w.hi, y1));
    return vaddvq_s32(acc);
}

/* ---------------------------------------------------------------- dots and GEMM tiles */

/*
 * For each type and each integer path (dp / nodp): vec_dot and an RM x CN GEMM tile.
 * Per block, in float: sumf += (dx * dy) * (float)sumi, plus mx * sy for Q4_1 (scalar.c order).
 */
#define BLOCK_SUM_q4_1(sumf, x, y, sumi)                                                       \
    sumf += (h2f((x)->d) * h2f((y)->d)) * (float)(sumi) + h2f((x)->m) * h2f((y)->s)
#define BLOCK_SUM_q4_0(sumf, x, y, sumi) sumf += (float)(sumi) * (h2f((x)->d) * h2f((y)->d))
#define BLOCK_SUM_q8_0(sumf, x, y, sumi) sumf += (float)(sumi) * (h2f((x)->d) * h2f((y)->d))

#define DEFINE_KERNELS(NAME, WT, AT, PATH, ATTR)                                               \
    ATTR static void vec_dot_##NAME##_##PATH(int n, float *s, const void *vx, const void *vy)  \
    {                                                                                         \
        const WT *x = vx;                                                                     \
        const AT *y = vy;                                                                     \
        const int nb = n / 32;                                                                \
        float sumf = 0.0f;                                                                    \
        for (int i = 0; i < nb; i++) {                                                        \
            const int32_t sumi = idot_##PATH(NAME##_x(x + i), y[i].qs);                       \
            BLOCK_SUM_##NAME(sumf, x + i, y + i, sumi);                                       \
        }                                                                                     \
        *s = sumf;                                                                            \
    }                                                                                         \
    ATTR INLINE void NAME##_tile_##PATH(int nb, float *s, size_t ld_s, const uint8_t *w,        \
                                        size_t w_stride, const uint8_t *a, size_t a_stride,     \
                                        const int RM, const int CN)                             \
    {                                                                                         \
        float sumf[4][4];                                                                     \
        _Pragma("GCC unroll 4") for (int r = 0; r < RM; r++)                                  \
            _Pragma("GCC unroll 4") for (int c = 0; c < CN; c++) sumf[r][c] = 0.0f;           \
        for (int i = 0; i < nb; i++) {                                                        \
            struct wblk bx[4];                                                                \
            _Pragma("GCC unroll 4") for (int r = 0; r < RM; r++) bx[r] =                      \
                NAME##_x((const WT *)(const void *)(w + r * w_stride) + i);                   \
            _Pragma("GCC unroll 4") for (int c = 0; c < CN; c++)                              \
            {                                                                                 \
                const AT *y = (const AT *)(const void *)(a + c * a_stride) + i;               \
                _Pragma("GCC unroll 4") for (int r = 0; r < RM; r++)                          \
                {                                                                             \
                    const int32_t sumi = idot_##PATH(bx[r], y->qs);                           \
                    BLOCK_SUM_##NAME(sumf[r][c], (const WT *)(const void *)(w + r * w_stride) + i, \
                                     y, sumi);                                                \
                }                                                                             \
            }                                                                                 \
        }                                                                                     \
        _Pragma("GCC unroll 4") for (int c = 0; c < CN; c++)                                  \
            _Pragma("GCC unroll 4") for (int r = 0; r < RM; r++) s[c * ld_s + r] = sumf[r][c];  \
    }                                                                                         \
    ATTR static void gemm_##NAME##_##PATH(int n, float *s, size_t ld_s, const void *vw,         \
                                          size_t w_stride, int nr, const void *va,              \
                                          size_t a_stride, int nc)                              \
    {                                                                                         \
        const uint8_t *w = vw, *a = va;                                                       \
        const int nb = n / 32;                                                                \
        int r = 0;                                                                            \
        for (; r + 4 <= nr; r += 4) {                                                         \
            int c = 0;                                                                        \
            for (; c + 4 <= nc; c += 4)                                                       \
                NAME##_tile_##PATH(nb, s + c * ld_s + r, ld_s, w + r * w_stride, w_stride,    \
                                   a + c * a_stride, a_stride, 4, 4);                         \
            for (; c < nc; c++)                                                               \
                NAME##_tile_##PATH(nb, s + c * ld_s + r, ld_s, w + r * w_stride, w_stride,    \
                                   a + c * a_stride, a_stride, 4, 1);                         \
        }                                                                                     \
        for (; r < nr; r++) {                                                                 \
            int c = 0;                                                                        \
            for (; c + 4 <= nc; c += 4)                                                       \
                NAME##_tile_##PATH(nb, s + c * ld_s + r, ld_s, w + r * w_stride, w_stride,    \
                                   a + c * a_stride, a_stride, 1, 4);                         \
            for (; c < nc; c++)                                                               \
                NAME##_tile_##PATH(nb, s + c * ld_s + r, ld_s, w + r * w_stride, w_stride,    \
                                   a + c * a_stride, a_stride, 1, 1);                         \
        }                                                                                     \
    }

#define NO_ATTR
DEFINE_KERNELS(q4_1, lc_block_q4_1, lc_block_q8_1, nodp, NO_ATTR)
DEFINE_KERNELS(q4_0, lc_block_q4_0, lc_block_q8_0, nodp, NO_ATTR)
DEFINE_KERNELS(q8_0, lc_block_q8_0, lc_block_q8_0, nodp, NO_ATTR)
#ifndef LC_NEON_NO_DOTPROD
DEFINE_KERNELS(q4_1, lc_block_q4_1, lc_block_q8_1, dp, DOTPROD)
DEFINE_KERNELS(q4_0, lc_block_q4_0, lc_block_q8_0, dp, DOTPROD)
DEFINE_KERNELS(q8_0, lc_block_q8_0, lc_block_q8_0, dp, DOTPROD)
#else /* never called: dotprod() is 0 */
#define vec_dot_q4_1_dp vec_dot_q4_1_nodp
#define vec_dot_q4_0_dp vec_dot_q4_0_nodp
#define vec_dot_q8_0_dp vec_dot_q8_0_nodp
#define gemm_q4_1_dp gemm_q4_1_nodp
#define gemm_q4_0_dp gemm_q4_0_nodp
#define gemm_q8_0_dp gemm_q8_0_nodp
#endif

/* Entry points: pick the integer path from the hwcaps (one predictable branch per call). */
#define DEFINE_ENTRIES(NAME)                                                                   \
    static void vec_dot_##NAME(int n, float *s, const void *x, const void *y)                  \
    {                                                                                         \
        if (dotprod())                                                                        \
            vec_dot_##NAME##_dp(n, s, x, y);                                                  \
        else                                                                                  \
            vec_dot_##NAME##_nodp(n, s, x, y);                                                \
    }                                                                                         \
    static void gemm_##NAME(int n, float *s, size_t ld_s, const void *w, size_t w_stride,       \
                            int nr, const void *a, size_t a_stride, int nc)                     \
    {                                                                                         \
        if (dotprod())                                                                        \
            gemm_##NAME##_dp(n, s, ld_s, w, w_stride, nr, a, a_stride, nc);                   \
        else                                                                                  \
            gemm_##NAME##_nodp(n, s, ld_s, w, w_stride, nr, a, a_stride, nc);                 \
    }
DEFINE_ENTRIES(q4_1)
DEFINE_ENTRIES(q4_0)
DEFINE_ENTRIES(q8_0)

/* ---------------------------------------------------------------- float kernels */

static float dot_f32(const float *x, const float *y, int n)
{
    float32x4_t a0 = vdupq_n_f32(0), a1 = vdupq_n_f32(0), a2 = vdupq_n_f32(0),
                a3 = vdupq_n_f32(0);
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        a0 = vfmaq_f32(a0, vld1q_f32(x + i), vld1q_f32(y + i));
        a1 = vfmaq_f32(a1, vld1q_f32(x + i + 4), vld1q_f32(y + i + 4));
        a2 = vfmaq_f32(a2, vld1q_f32(x + i + 8), vld1q_f32(y + i + 8));
        a3 = vfmaq_f32(a3, vld1q_f32(x + i + 12), vld1q_f32(y + i + 12));
    }
    for (; i + 4 <= n; i += 4)
        a0 = vfmaq_f32(a0, vld1q_f32(x + i), vld1q_f32(y + i));
    float sum = vaddvq_f32(vaddq_f32(vaddq_f32(a0, a1), vaddq_f32(a2, a3)));
    for (; i < n; i++)
        sum += x[i] * y[i];
    return sum;
}

INLINE float32x4_t load_h4(const lc_fp16 *p)
{
    return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p)));
}

static float dot_f16(const lc_fp16 *x, const lc_fp16 *y, int n)
{
    float32x4_t a0 = vdupq_n_f32(0), a1 = vdupq_n_f32(0), a2 = vdupq_n_f32(0),
                a3 = vdupq_n_f32(0);
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        a0 = vfmaq_f32(a0, load_h4(x + i), load_h4(y + i));
        a1 = vfmaq_f32(a1, load_h4(x + i + 4), load_h4(y + i + 4));
        a2 = vfmaq_f32(a2, load_h4(x + i + 8), load_h4(y + i + 8));
        a3 = vfmaq_f32(a3, load_h4(x + i + 12), load_h4(y + i + 12));
    }
    for (; i + 4 <= n; i += 4)
        a0 = vfmaq_f32(a0, load_h4(x + i), load_h4(y + i));
    float sum = vaddvq_f32(vaddq_f32(vaddq_f32(a0, a1), vaddq_f32(a2, a3)));
    for (; i < n; i++)
        sum += h2f(x[i]) * h2f(y[i]);
    return sum;
}

static void vec_dot_f32(int n, float *s, const void *x, const void *y)
{
    *s = dot_f32(x, y, n);
}

static void vec_dot_f16(int n, float *s, const void *x, const void *y)
{
    *s = dot_f16(x, y, n);
}

/* RMS norm as scalar.c: float squares summed in double, then (x * scale) * w. */
static void rms_norm(float *y, const float *x, const float *w, int n, float eps)
{
    float64x2_t s0 = vdupq_n_f64(0), s1 = vdupq_n_f64(0);
    int i = 0;
    for (; i + 4 <= n; i += 4) {
        const float32x4_t v = vld1q_f32(x + i);
        const float32x4_t sq = vmulq_f32(v, v);
        s0 = vaddq_f64(s0, vcvt_f64_f32(vget_low_f32(sq)));
        s1 = vaddq_f64(s1, vcvt_high_f64_f32(sq));
    }
    double sum = vaddvq_f64(vaddq_f64(s0, s1));
    for (int j = i; j < n; j++)
        sum += (double)(x[j] * x[j]);
    const float mean = (float)(sum / n);
    const float scale = 1.0f / sqrtf(mean + eps);
    for (i = 0; i + 4 <= n; i += 4)
        vst1q_f32(y + i, vmulq_f32(vmulq_n_f32(vld1q_f32(x + i), scale), vld1q_f32(w + i)));
    for (; i < n; i++)
        y[i] = (x[i] * scale) * w[i];
}

/* y += a * x: separate multiply and add, rounding as scalar.c does */
static void axpy_f32(float *y, float a, const float *x, int n)
{
    int i = 0;
    for (; i + 4 <= n; i += 4)
        vst1q_f32(y + i, vaddq_f32(vld1q_f32(y + i), vmulq_n_f32(vld1q_f32(x + i), a)));
    for (; i < n; i++)
        y[i] += a * x[i];
}

static void axpy_f16(float *y, float a, const lc_fp16 *x, int n)
{
    int i = 0;
    for (; i + 4 <= n; i += 4)
        vst1q_f32(y + i, vaddq_f32(vld1q_f32(y + i), vmulq_n_f32(load_h4(x + i), a)));
    for (; i < n; i++)
        y[i] += a * h2f(x[i]);
}

const struct lc_kernels lc_kernels_neon = {
    .isa = "neon",
    .vec_dot = {
        [LC_TYPE_F32] = vec_dot_f32,
        [LC_TYPE_F16] = vec_dot_f16,
        [LC_TYPE_Q4_0] = vec_dot_q4_0,
        [LC_TYPE_Q4_1] = vec_dot_q4_1,
        [LC_TYPE_Q8_0] = vec_dot_q8_0,
    },
    .quantize_row = {
        [LC_TYPE_F16] = quantize_row_f16,
        [LC_TYPE_Q8_0] = quantize_row_q8_0,
        [LC_TYPE_Q8_1] = quantize_row_q8_1,
    },
    .gemm = {
        [LC_TYPE_Q4_0] = gemm_q4_0,
        [LC_TYPE_Q4_1] = gemm_q4_1,
        [LC_TYPE_Q8_0] = gemm_q8_0,
    },
    .rms_norm = rms_norm,
    .dot_f32 = dot_f32,
    .dot_f16 = dot_f16,
    .axpy_f16 = axpy_f16,
    .axpy_f32 = axpy_f32,
};
