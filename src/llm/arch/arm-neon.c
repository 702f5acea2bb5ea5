/*
 * arm-neon.c - AArch64 Advanced SIMD kernels, with the dot-product extension where present.
 *
 * The file is compiled for the base ARMv8-A; the functions that use sdot (vdotq_s32) carry a
 * target attribute and are called only when getauxval(AT_HWCAP) reports ASIMDDP, so one binary
 * runs on Cortex-A53/A57 (widening multiplies, vmull_s8 + vpadalq_s16) and uses sdot on newer
 * cores.
 *
 * Quantized dots: the products of a block are summed exactly in integers in ggml's x86 lanes
 * (4 consecutive products per lane: what sdot does; the fallback gets there with vmull_s8 and
 * two pairwise adds), and the lanes are accumulated in float with fused multiply-adds and added up
 * exactly as scalar.c does it, so these kernels, with or without sdot, the GEMM tiles included,
 * give scalar.c's (and llama.cpp-on-x86's) results bit for bit.  Activation quantizers round like
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

/*
 * The integer products of a weight block with 32 activations, summed in ggml's x86 lanes:
 * lane j = elements 4j .. 4j+3 (lanes 0-3 from the first 16 elements, 4-7 from the last 16).
 */
struct lanes {
    int32x4_t lo, hi;
};

#ifndef LC_NEON_NO_DOTPROD
DOTPROD INLINE struct lanes idot_dp(struct wblk w, const int8_t *y)
{
    /* sdot sums exactly four consecutive byte products per lane */
    return (struct lanes){vdotq_s32(vdupq_n_s32(0), w.lo, vld1q_s8(y)),
                          vdotq_s32(vdupq_n_s32(0), w.hi, vld1q_s8(y + 16))};
}
#endif

/* 16 byte products -> 4 lanes of 4 consecutive: pairs (vpaddl), then pairs of pairs (vpadd) */
INLINE int32x4_t quad_sums(int8x16_t a, int8x16_t b)
{
    const int32x4_t p0 = vpaddlq_s16(vmull_s8(vget_low_s8(a), vget_low_s8(b)));
    const int32x4_t p1 = vpaddlq_s16(vmull_high_s8(a, b));
    return vpaddq_s32(p0, p1);
}

INLINE struct lanes idot_nodp(struct wblk w, const int8_t *y)
{
    return (struct lanes){quad_sums(w.lo, vld1q_s8(y)), quad_sums(w.hi, vld1q_s8(y + 16))};
}

/* acc += d * lanes, fused, lane by lane (ggml: _mm256_fmadd_ps(d, lanes, acc)) */
INLINE void acc_lanes(float32x4_t acc[2], struct lanes l, float d)
{
    acc[0] = vfmaq_n_f32(acc[0], vcvtq_f32_s32(l.lo), d);
    acc[1] = vfmaq_n_f32(acc[1], vcvtq_f32_s32(l.hi), d);
}

/* ggml's hsum_float_8: ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)) */
INLINE float hsum8(const float32x4_t acc[2])
{
    const float32x4_t r = vaddq_f32(acc[0], acc[1]);
    const float a = vgetq_lane_f32(r, 0) + vgetq_lane_f32(r, 2);
    const float b = vgetq_lane_f32(r, 1) + vgetq_lane_f32(r, 3);
    return a + b;
}

/* ---------------------------------------------------------------- dots and GEMM tiles */

/*
 * For each type and each integer path (dp / nodp): vec_dot and an RM x CN GEMM tile, in
 * scalar.c's order of float operations; the Q4_1 m_x * s_y terms are summed apart in block order.
 */
#define HAS_M_q4_1 1
#define HAS_M_q4_0 0
#define HAS_M_q8_0 0

#define DEFINE_KERNELS(NAME, WT, AT, PATH, ATTR)                                                  \
    ATTR static void vec_dot_##NAME##_##PATH(int n, float *s, const void *vx, const void *vy)     \
    {                                                                                             \
        const WT *x = vx;                                                                         \
        const AT *y = vy;                                                                         \
        const int nb = n / 32;                                                                    \
        float32x4_t acc[2] = {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)};                              \
        float summs = 0.0f;                                                                       \
        for (int i = 0; i < nb; i++) {                                                            \
            if (HAS_M_##NAME)                                                                     \
                summs += h2f(((const lc_block_q4_1 *)vx)[i].m) *                                  \
                         h2f(((const lc_block_q8_1 *)vy)[i].s);                                   \
            acc_lanes(acc, idot_##PATH(NAME##_x(x + i), y[i].qs), h2f(x[i].d) * h2f(y[i].d));     \
        }                                                                                         \
        *s = HAS_M_##NAME ? hsum8(acc) + summs : hsum8(acc);                                      \
    }                                                                                             \
    ATTR INLINE void NAME##_tile_##PATH(int nb, float *s, size_t ld_s, const uint8_t *w,          \
                                        size_t w_stride, const uint8_t *a, size_t a_stride,       \
                                        const int RM, const int CN)                               \
    {                                                                                             \
        float32x4_t acc[4][4][2];                                                                 \
        _Pragma("GCC unroll 4") for (int r = 0; r < RM; r++)                                      \
            _Pragma("GCC unroll 4") for (int c = 0; c < CN; c++) acc[r][c][0] =                   \
                acc[r][c][1] = vdupq_n_f32(0.0f);                                                 \
        for (int i = 0; i < nb; i++) {                                                            \
            struct wblk bx[4];                                                                    \
            float dw[4];                                                                          \
            _Pragma("GCC unroll 4") for (int r = 0; r < RM; r++)                                  \
            {                                                                                     \
                const WT *x = (const WT *)(const void *)(w + r * w_stride) + i;                   \
                bx[r] = NAME##_x(x);                                                              \
                dw[r] = h2f(x->d);                                                                \
            }                                                                                     \
            _Pragma("GCC unroll 4") for (int c = 0; c < CN; c++)                                  \
            {                                                                                     \
                const AT *y = (const AT *)(const void *)(a + c * a_stride) + i;                   \
                const float da = h2f(y->d);                                                       \
                _Pragma("GCC unroll 4") for (int r = 0; r < RM; r++)                              \
                    acc_lanes(acc[r][c], idot_##PATH(bx[r], y->qs), dw[r] * da);                  \
            }                                                                                     \
        }                                                                                         \
        float ms[4][4] = {{0}};                                                                   \
        if (HAS_M_##NAME)                                                                         \
            for (int i = 0; i < nb; i++)                                                          \
                _Pragma("GCC unroll 4") for (int r = 0; r < RM; r++)                              \
                {                                                                                 \
                    const float m =                                                               \
                        h2f(((const lc_block_q4_1 *)(const void *)(w + r * w_stride))[i].m);      \
                    _Pragma("GCC unroll 4") for (int c = 0; c < CN; c++) ms[r][c] +=              \
                        m * h2f(((const lc_block_q8_1 *)(const void *)(a + c * a_stride))[i].s);  \
                }                                                                                 \
        _Pragma("GCC unroll 4") for (int c = 0; c < CN; c++)                                      \
            _Pragma("GCC unroll 4") for (int r = 0; r < RM; r++) s[c * ld_s + r] =                \
                HAS_M_##NAME ? hsum8(acc[r][c]) + ms[r][c] : hsum8(acc[r][c]);                    \
    }                                                                                             \
    ATTR static void gemm_##NAME##_##PATH(int n, float *s, size_t ld_s, const void *vw,           \
                                          size_t w_stride, int nr, const void *va,                \
                                          size_t a_stride, int nc)                                \
    {                                                                                             \
        const uint8_t *w = vw, *a = va;                                                           \
        const int nb = n / 32;                                                                    \
        int r = 0;                                                                                \
        for (; r + 4 <= nr; r += 4) {                                                             \
            int c = 0;                                                                            \
            for (; c + 2 <= nc; c += 2)                                                           \
                NAME##_tile_##PATH(nb, s + c * ld_s + r, ld_s, w + r * w_stride, w_stride,        \
                                   a + c * a_stride, a_stride, 4, 2);                             \
            for (; c < nc; c++)                                                                   \
                NAME##_tile_##PATH(nb, s + c * ld_s + r, ld_s, w + r * w_stride, w_stride,        \
                                   a + c * a_stride, a_stride, 4, 1);                             \
        }                                                                                         \
        for (; r < nr; r++) {                                                                     \
            int c = 0;                                                                            \
            for (; c + 4 <= nc; c += 4)                                                           \
                NAME##_tile_##PATH(nb, s + c * ld_s + r, ld_s, w + r * w_stride, w_stride,        \
                                   a + c * a_stride, a_stride, 1, 4);                             \
            for (; c < nc; c++)                                                                   \
                NAME##_tile_##PATH(nb, s + c * ld_s + r, ld_s, w + r * w_stride, w_stride,        \
                                   a + c * a_stride, a_stride, 1, 1);                             \
        }                                                                                         \
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
#define DEFINE_ENTRIES(NAME)                                                                      \
    static void vec_dot_##NAME(int n, float *s, const void *x, const void *y)                     \
    {                                                                                             \
        if (dotprod())                                                                            \
            vec_dot_##NAME##_dp(n, s, x, y);                                                      \
        else                                                                                      \
            vec_dot_##NAME##_nodp(n, s, x, y);                                                    \
    }                                                                                             \
    static void gemm_##NAME(int n, float *s, size_t ld_s, const void *w, size_t w_stride,         \
                            int nr, const void *a, size_t a_stride, int nc)                       \
    {                                                                                             \
        if (dotprod())                                                                            \
            gemm_##NAME##_dp(n, s, ld_s, w, w_stride, nr, a, a_stride, nc);                       \
        else                                                                                      \
            gemm_##NAME##_nodp(n, s, ld_s, w, w_stride, nr, a, a_stride, nc);                     \
    }
DEFINE_ENTRIES(q4_1)
DEFINE_ENTRIES(q4_0)
DEFINE_ENTRIES(q8_0)

/*
 * Q4_0 in the order of llama.cpp's repacked Q4_0x8 kernels (see scalar.c): the block's integer
 * sum (the lanes added, exact), then acc = fma(float(isum), dx * dy, acc).
 */
#define DEFINE_Q4_0X8(PATH, ATTR)                                                                 \
    ATTR static void vec_dot_q4_0x8_##PATH(int n, float *s, const void *vx, const void *vy)       \
    {                                                                                             \
        const lc_block_q4_0 *x = vx;                                                              \
        const lc_block_q8_0 *y = vy;                                                              \
        float acc = 0.0f;                                                                         \
        for (int i = 0; i < n / LC_QK4_0; i++) {                                                  \
            const struct lanes l = idot_##PATH(q4_0_x(x + i), y[i].qs);                           \
            const int isum = vaddvq_s32(vaddq_s32(l.lo, l.hi));                                   \
            acc = fmaf((float)isum, h2f(x[i].d) * h2f(y[i].d), acc);                              \
        }                                                                                         \
        *s = acc;                                                                                 \
    }
DEFINE_Q4_0X8(nodp, NO_ATTR)
#ifndef LC_NEON_NO_DOTPROD
DEFINE_Q4_0X8(dp, DOTPROD)
#else
#define vec_dot_q4_0x8_dp vec_dot_q4_0x8_nodp
#endif

static void vec_dot_q4_0x8(int n, float *s, const void *x, const void *y)
{
    if (dotprod())
        vec_dot_q4_0x8_dp(n, s, x, y);
    else
        vec_dot_q4_0x8_nodp(n, s, x, y);
}

/* ---------------------------------------------------------------- float kernels */

/*
 * Float dots in llama.cpp's x86 order (see scalar.c), its 16-lane vectors held as four quarters.
 */
INLINE float32x4_t load_h4(const lc_fp16 *p)
{
    return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p)));
}

/* _mm512_reduce_add_ps's order (GCC): halves, then quarters, then (0 + 2) + (1 + 3) */
INLINE float reduce16(const float32x4_t q[4])
{
    const float32x4_t t6 = vaddq_f32(vaddq_f32(q[3], q[1]), vaddq_f32(q[2], q[0]));
    const float a = vgetq_lane_f32(t6, 0) + vgetq_lane_f32(t6, 2);
    const float b = vgetq_lane_f32(t6, 1) + vgetq_lane_f32(t6, 3);
    return a + b;
}

#define DEFINE_FLOAT_DOT(NAME, T, LOADV, LEFTOVER, TINY)                                          \
    static float NAME(const T *x, const T *y, int n)                                              \
    {                                                                                             \
        if (TINY && n % 16 == 0) {                                                                \
            float32x4_t q[4];                                                                     \
            for (int k = 0; k < 4; k++)                                                           \
                q[k] = vdupq_n_f32(0.0f);                                                         \
            for (int i = 0; i < n; i += 16)                                                       \
                for (int k = 0; k < 4; k++)                                                       \
                    q[k] = vfmaq_f32(q[k], LOADV(x + i + 4 * k), LOADV(y + i + 4 * k));           \
            return reduce16(q);                                                                   \
        }                                                                                         \
        const int np = n & ~63;                                                                   \
        float32x4_t v[16];                                                                        \
        for (int k = 0; k < 16; k++)                                                              \
            v[k] = vdupq_n_f32(0.0f);                                                             \
        for (int i = 0; i < np; i += 64)                                                          \
            for (int k = 0; k < 16; k++)                                                          \
                v[k] = vfmaq_f32(v[k], LOADV(x + i + 4 * k), LOADV(y + i + 4 * k));               \
        /* 16-lane vector m is v[4m .. 4m+3]; (v0 + v2) + (v1 + v3) */                            \
        float32x4_t q[4];                                                                         \
        for (int k = 0; k < 4; k++)                                                               \
            q[k] = vaddq_f32(vaddq_f32(v[k], v[8 + k]), vaddq_f32(v[4 + k], v[12 + k]));          \
        LEFTOVER(reduce16(q), x, y, np, n);                                                       \
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
DEFINE_FLOAT_DOT(dot_f32, float, vld1q_f32, LEFTOVER_F32, 0)
DEFINE_FLOAT_DOT(dot_f16, lc_fp16, load_h4, LEFTOVER_F16, 0)
DEFINE_FLOAT_DOT(tiny_dot_f32, float, vld1q_f32, LEFTOVER_F32, 1)
DEFINE_FLOAT_DOT(tiny_dot_f16, lc_fp16, load_h4, LEFTOVER_F16, 1)

#include "float-rows.h"

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
        [LC_TYPE_F32] = gemm_f32,
        [LC_TYPE_F16] = gemm_f16,
        [LC_TYPE_Q4_0] = gemm_q4_0,
        [LC_TYPE_Q4_1] = gemm_q4_1,
        [LC_TYPE_Q8_0] = gemm_q8_0,
    },
    .vec_dot_q4_0x8 = vec_dot_q4_0x8,
    .rms_norm = rms_norm,
    .dot_f32 = dot_f32,
    .dot_f16 = dot_f16,
    .axpy_f16 = axpy_f16,
    .axpy_f32 = axpy_f32,
};
