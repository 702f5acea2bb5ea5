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
 *
 * Types: vec_dot and GEMM tiles for Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL (its tiles in tinyBLAS's
 * order, as scalar.c's gemm), Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS.  Not llama.cpp's ARM order
 * (ggml's NEON kernels sum in other orders): the references these must reproduce come from x86,
 * so one order everywhere keeps every ISA on the same tokens.  No x16 layout here (x16_native 0):
 * decode runs vec_dot row by row; Q8_K activations use scalar.c's quantizer.
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

/* bit j of a 32-bit qh -> 0x10 in byte j of (lo, hi): the fifth bit of the Q5 quants */
INLINE void q5_high_bits(const uint8_t qh[4], uint8x16_t *lo, uint8x16_t *hi)
{
    static const uint8_t bit[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
    const uint8x16_t m = vld1q_u8(bit), b4 = vdupq_n_u8(0x10);
    *lo = vandq_u8(vtstq_u8(vcombine_u8(vdup_n_u8(qh[0]), vdup_n_u8(qh[1])), m), b4);
    *hi = vandq_u8(vtstq_u8(vcombine_u8(vdup_n_u8(qh[2]), vdup_n_u8(qh[3])), m), b4);
}

INLINE struct wblk q5_1_x(const lc_block_q5_1 *x)
{
    const uint8x16_t q = vld1q_u8(x->qs);
    uint8x16_t hl, hh;
    q5_high_bits(x->qh, &hl, &hh);
    return (struct wblk){vreinterpretq_s8_u8(vorrq_u8(vandq_u8(q, vdupq_n_u8(0x0F)), hl)),
                         vreinterpretq_s8_u8(vorrq_u8(vshrq_n_u8(q, 4), hh))};
}

INLINE struct wblk q5_0_x(const lc_block_q5_0 *x)
{
    const uint8x16_t q = vld1q_u8(x->qs);
    uint8x16_t hl, hh;
    q5_high_bits(x->qh, &hl, &hh);
    const int8x16_t sixteen = vdupq_n_s8(16);
    return (struct wblk){
        vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(vandq_u8(q, vdupq_n_u8(0x0F)), hl)), sixteen),
        vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(vshrq_n_u8(q, 4), hh)), sixteen)};
}

/* IQ4_NL: the nibbles index the 16 non-linear levels (a table lookup) */
INLINE struct wblk iq4nl_x(const lc_block_iq4_nl *x)
{
    const int8x16_t kv = vld1q_s8(lc_kvalues_iq4nl);
    const uint8x16_t q = vld1q_u8(x->qs);
    return (struct wblk){vqtbl1q_s8(kv, vandq_u8(q, vdupq_n_u8(0x0F))),
                         vqtbl1q_s8(kv, vshrq_n_u8(q, 4))};
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
#define HAS_M_q5_1 1
#define HAS_M_q4_0 0
#define HAS_M_q8_0 0
#define HAS_M_q5_0 0
#define HAS_M_iq4nl 0
/* the m_x * s_y term of a block (types with a min; 0 for the others, never used) */
#define MS_q4_1(x, y) (h2f((x)->m) * h2f((y)->s))
#define MS_q5_1(x, y) (h2f((x)->m) * h2f((y)->s))
#define MS_q4_0(x, y) ((void)(x), (void)(y), 0.0f)
#define MS_q8_0(x, y) ((void)(x), (void)(y), 0.0f)
#define MS_q5_0(x, y) ((void)(x), (void)(y), 0.0f)
#define MS_iq4nl(x, y) ((void)(x), (void)(y), 0.0f)

#define DEFINE_KERNELS(NAME, WT, AT, PATH, ATTR)                                                  \
    ATTR __attribute__((unused)) static void vec_dot_##NAME##_##PATH(int n, float *s,             \
                                                                     const void *vx,              \
                                                                     const void *vy)              \
    {                                                                                             \
        const WT *x = vx;                                                                         \
        const AT *y = vy;                                                                         \
        const int nb = n / 32;                                                                    \
        float32x4_t acc[2] = {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)};                              \
        float summs = 0.0f;                                                                       \
        for (int i = 0; i < nb; i++) {                                                            \
            if (HAS_M_##NAME)                                                                     \
                summs += MS_##NAME(x + i, y + i);                                                 \
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
                    const WT *x = (const WT *)(const void *)(w + r * w_stride) + i;               \
                    _Pragma("GCC unroll 4") for (int c = 0; c < CN; c++) ms[r][c] +=              \
                        MS_##NAME(x, (const AT *)(const void *)(a + c * a_stride) + i);           \
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
#define DEFINE_ALL_KERNELS(PATH, ATTR)                                                            \
    DEFINE_KERNELS(q4_1, lc_block_q4_1, lc_block_q8_1, PATH, ATTR)                                \
    DEFINE_KERNELS(q4_0, lc_block_q4_0, lc_block_q8_0, PATH, ATTR)                                \
    DEFINE_KERNELS(q8_0, lc_block_q8_0, lc_block_q8_0, PATH, ATTR)                                \
    DEFINE_KERNELS(q5_0, lc_block_q5_0, lc_block_q8_0, PATH, ATTR)                                \
    DEFINE_KERNELS(q5_1, lc_block_q5_1, lc_block_q8_1, PATH, ATTR)                                \
    /* IQ4_NL: the tiles are tinyBLAS's order (one accumulator); vec_dot is below */              \
    DEFINE_KERNELS(iq4nl, lc_block_iq4_nl, lc_block_q8_0, PATH, ATTR)
DEFINE_ALL_KERNELS(nodp, NO_ATTR)
#ifndef LC_NEON_NO_DOTPROD
DEFINE_ALL_KERNELS(dp, DOTPROD)
#else /* never called: dotprod() is 0 */
#define vec_dot_q4_1_dp vec_dot_q4_1_nodp
#define vec_dot_q4_0_dp vec_dot_q4_0_nodp
#define vec_dot_q8_0_dp vec_dot_q8_0_nodp
#define vec_dot_q5_0_dp vec_dot_q5_0_nodp
#define vec_dot_q5_1_dp vec_dot_q5_1_nodp
#define gemm_q4_1_dp gemm_q4_1_nodp
#define gemm_q4_0_dp gemm_q4_0_nodp
#define gemm_q8_0_dp gemm_q8_0_nodp
#define gemm_q5_0_dp gemm_q5_0_nodp
#define gemm_q5_1_dp gemm_q5_1_nodp
#define gemm_iq4nl_dp gemm_iq4nl_nodp
#endif

/*
 * IQ4_NL . Q8_0 for one token, as ggml's AVX2 ggml_vec_dot_iq4_nl_q8_0 (scalar.c): blocks in
 * pairs, even ones into acc1, odd ones into acc2, hsum8(acc1 + acc2), then a last odd block as
 * sumf = fma(dy * dx, float(integer sum), sumf).
 */
#define DEFINE_IQ4_NL_DOT(PATH, ATTR)                                                             \
    ATTR static void vec_dot_iq4_nl_##PATH(int n, float *s, const void *vx, const void *vy)       \
    {                                                                                             \
        const lc_block_iq4_nl *x = vx;                                                            \
        const lc_block_q8_0 *y = vy;                                                              \
        const int nb = n / LC_QK4_NL;                                                             \
        float32x4_t acc1[2] = {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)};                             \
        float32x4_t acc2[2] = {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)};                             \
        int ib = 0;                                                                               \
        for (; ib + 1 < nb; ib += 2) {                                                            \
            acc_lanes(acc1, idot_##PATH(iq4nl_x(x + ib), y[ib].qs),                               \
                      h2f(y[ib].d) * h2f(x[ib].d));                                               \
            acc_lanes(acc2, idot_##PATH(iq4nl_x(x + ib + 1), y[ib + 1].qs),                       \
                      h2f(y[ib + 1].d) * h2f(x[ib + 1].d));                                       \
        }                                                                                         \
        acc1[0] = vaddq_f32(acc1[0], acc2[0]);                                                    \
        acc1[1] = vaddq_f32(acc1[1], acc2[1]);                                                    \
        float sumf = hsum8(acc1);                                                                 \
        for (; ib < nb; ib++) {                                                                   \
            const struct lanes l = idot_##PATH(iq4nl_x(x + ib), y[ib].qs);                        \
            const int isum = vaddvq_s32(vaddq_s32(l.lo, l.hi));                                   \
            sumf = fmaf(h2f(y[ib].d) * h2f(x[ib].d), (float)isum, sumf);                          \
        }                                                                                         \
        *s = sumf;                                                                                \
    }
DEFINE_IQ4_NL_DOT(nodp, NO_ATTR)
#ifndef LC_NEON_NO_DOTPROD
DEFINE_IQ4_NL_DOT(dp, DOTPROD)
#else
#define vec_dot_iq4_nl_dp vec_dot_iq4_nl_nodp
#endif

/* Entry points: pick the integer path from the hwcaps (one predictable branch per call). */
#define DEFINE_DOT_ENTRY(NAME)                                                                    \
    static void vec_dot_##NAME(int n, float *s, const void *x, const void *y)                     \
    {                                                                                             \
        if (dotprod())                                                                            \
            vec_dot_##NAME##_dp(n, s, x, y);                                                      \
        else                                                                                      \
            vec_dot_##NAME##_nodp(n, s, x, y);                                                    \
    }
#define DEFINE_GEMM_ENTRY(NAME)                                                                   \
    static void gemm_##NAME(int n, float *s, size_t ld_s, const void *w, size_t w_stride,         \
                            int nr, const void *a, size_t a_stride, int nc)                       \
    {                                                                                             \
        if (dotprod())                                                                            \
            gemm_##NAME##_dp(n, s, ld_s, w, w_stride, nr, a, a_stride, nc);                       \
        else                                                                                      \
            gemm_##NAME##_nodp(n, s, ld_s, w, w_stride, nr, a, a_stride, nc);                     \
    }
#define DEFINE_ENTRIES(NAME) DEFINE_DOT_ENTRY(NAME) DEFINE_GEMM_ENTRY(NAME)
DEFINE_ENTRIES(q4_1)
DEFINE_ENTRIES(q4_0)
DEFINE_ENTRIES(q8_0)
DEFINE_ENTRIES(q5_0)
DEFINE_ENTRIES(q5_1)
DEFINE_DOT_ENTRY(iq4_nl)
DEFINE_GEMM_ENTRY(iq4nl)

/* ---------------------------------------------------------------- K-quants and IQ4_XS */

/*
 * Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS . Q8_K in scalar.c's order (ggml's AVX2 kernels): the
 * integer products of a super-block, times their sub-block scale, summed exactly in 8 int32
 * lanes (lane k: weights 32g + 4k .. 32g + 4k + 3 of every group g of 32 activations), then
 * acc[k] = fma(d, lane, acc[k]) with d = dy * dx, hsum8 at the end; the mins as scalar.c
 * takes them (Q2_K into acc first, Q4_K in a 4-lane accumulator, Q5_K as one float sum).
 *
 * A super-block is first unpacked into 16 vectors of 16 signed quants in activation order
 * (vector v: activations 16v .. 16v+15, lanes 0-3 for even v, 4-7 for odd v) with one integer
 * scale each, so one loop does the integer part of every type, and a GEMM tile unpacks a weight
 * block once for several activation columns.
 */
struct kunp {
    int8x16_t q[16];
    int32_t sc[16];
    int16_t mn[16]; /* Q2_K: 16 mins (per 16 weights); Q4_K / Q5_K: 8 (per 32) */
    float d, dmin;
};

enum { KQ2, KQ3, KQ4, KQ5, KQ6, KIQ4XS };

INLINE int8x16_t u2s(uint8x16_t v)
{
    return vreinterpretq_s8_u8(v);
}

INLINE void unpack_q2_K(const lc_block_q2_K *x, struct kunp *u)
{
    const uint8x16_t m3 = vdupq_n_u8(3);
    for (int h = 0; h < 2; h++) {
        const uint8x16_t b0 = vld1q_u8(x->qs + 32 * h), b1 = vld1q_u8(x->qs + 32 * h + 16);
        for (int v = 0; v < 4; v++) {
            const int8x16_t sh = vdupq_n_s8((int8_t)(-2 * v));
            u->q[8 * h + 2 * v] = u2s(vandq_u8(vshlq_u8(b0, sh), m3));
            u->q[8 * h + 2 * v + 1] = u2s(vandq_u8(vshlq_u8(b1, sh), m3));
        }
    }
    for (int j = 0; j < 16; j++) {
        u->sc[j] = x->scales[j] & 0x0F;
        u->mn[j] = (int16_t)(x->scales[j] >> 4);
    }
    u->d = h2f(x->d);
    u->dmin = h2f(x->dmin);
}

INLINE void unpack_q3_K(const lc_block_q3_K *x, struct kunp *u)
{
    const uint8x16_t m3 = vdupq_n_u8(3), four = vdupq_n_u8(4);
    const uint8x16_t hm0 = vld1q_u8(x->hmask), hm1 = vld1q_u8(x->hmask + 16);
    for (int h = 0; h < 2; h++) {
        const uint8x16_t b0 = vld1q_u8(x->qs + 32 * h), b1 = vld1q_u8(x->qs + 32 * h + 16);
        for (int v = 0; v < 4; v++) {
            const int8x16_t sh = vdupq_n_s8((int8_t)(-2 * v));
            const uint8x16_t bit = vdupq_n_u8((uint8_t)(1u << (4 * h + v)));
            /* minus 4 where the high bit is clear */
            u->q[8 * h + 2 * v] = vsubq_s8(u2s(vandq_u8(vshlq_u8(b0, sh), m3)),
                                           u2s(vbicq_u8(four, vtstq_u8(hm0, bit))));
            u->q[8 * h + 2 * v + 1] = vsubq_s8(u2s(vandq_u8(vshlq_u8(b1, sh), m3)),
                                               u2s(vbicq_u8(four, vtstq_u8(hm1, bit))));
        }
    }
    int8_t sc[16];
    lc_q3_K_scales(x->scales, sc);
    for (int j = 0; j < 16; j++)
        u->sc[j] = sc[j];
    u->d = h2f(x->d);
}

/* Q4_K / Q5_K: the 8 scales and 8 mins of the 12 packed bytes (ggml's kmask unpacking) */
INLINE void k4_scales_mins(const uint8_t packed[12], struct kunp *u)
{
    uint32_t t[4];
    memcpy(t, packed, 12);
    const uint32_t kmask1 = 0x3f3f3f3f, kmask2 = 0x0f0f0f0f, kmask3 = 0x03030303;
    t[3] = ((t[2] >> 4) & kmask2) | (((t[1] >> 6) & kmask3) << 4);
    const uint32_t m = t[1] & kmask1;
    t[1] = (t[2] & kmask2) | (((t[0] >> 6) & kmask3) << 4);
    t[2] = m;
    t[0] &= kmask1;
    uint8_t b[16];
    memcpy(b, t, 16); /* b[0..7] scales, b[8..15] mins */
    for (int g = 0; g < 8; g++) {
        u->sc[2 * g] = u->sc[2 * g + 1] = b[g];
        u->mn[g] = b[8 + g];
    }
}

/* group g of a Q4_K / Q5_K block: nibble g & 1 of qs[32 (g >> 1) .. + 31] (+ bit g of qh) */
INLINE void unpack_q45_K(const uint8_t *qs, const uint8_t *qh, struct kunp *u)
{
    const uint8x16_t m4 = vdupq_n_u8(0x0F), b4 = vdupq_n_u8(0x10);
    const uint8x16_t h0 = qh ? vld1q_u8(qh) : vdupq_n_u8(0), h1 = qh ? vld1q_u8(qh + 16) : h0;
    for (int j = 0; j < 4; j++) {
        const uint8x16_t b0 = vld1q_u8(qs + 32 * j), b1 = vld1q_u8(qs + 32 * j + 16);
        uint8x16_t l0 = vandq_u8(b0, m4), l1 = vandq_u8(b1, m4);
        uint8x16_t u0 = vshrq_n_u8(b0, 4), u1 = vshrq_n_u8(b1, 4);
        if (qh) {
            const uint8x16_t bl = vdupq_n_u8((uint8_t)(1u << (2 * j)));
            const uint8x16_t bh = vdupq_n_u8((uint8_t)(2u << (2 * j)));
            l0 = vorrq_u8(l0, vandq_u8(vtstq_u8(h0, bl), b4));
            l1 = vorrq_u8(l1, vandq_u8(vtstq_u8(h1, bl), b4));
            u0 = vorrq_u8(u0, vandq_u8(vtstq_u8(h0, bh), b4));
            u1 = vorrq_u8(u1, vandq_u8(vtstq_u8(h1, bh), b4));
        }
        u->q[4 * j] = u2s(l0);
        u->q[4 * j + 1] = u2s(l1);
        u->q[4 * j + 2] = u2s(u0);
        u->q[4 * j + 3] = u2s(u1);
    }
}

INLINE void unpack_q4_K(const lc_block_q4_K *x, struct kunp *u)
{
    unpack_q45_K(x->qs, NULL, u);
    k4_scales_mins(x->scales, u);
    u->d = h2f(x->d);
    u->dmin = h2f(x->dmin);
}

INLINE void unpack_q5_K(const lc_block_q5_K *x, struct kunp *u)
{
    unpack_q45_K(x->qs, x->qh, u);
    k4_scales_mins(x->scales, u);
    u->d = h2f(x->d);
    u->dmin = h2f(x->dmin);
}

/* Q6_K: group 4h + v takes the low (v < 2) or high nibbles of ql[64h + 32 (v & 1) + l] and
 * bits 2v, 2v+1 of qh[32h + l] above them, minus 32; a scale per 16 weights */
INLINE void unpack_q6_K(const lc_block_q6_K *x, struct kunp *u)
{
    const uint8x16_t m4 = vdupq_n_u8(0x0F), m3 = vdupq_n_u8(3);
    const int8x16_t m32 = vdupq_n_s8(32);
    for (int h = 0; h < 2; h++)
        for (int half = 0; half < 2; half++) {
            const uint8x16_t qh = vld1q_u8(x->qh + 32 * h + 16 * half);
            const uint8x16_t l0 = vld1q_u8(x->ql + 64 * h + 16 * half);
            const uint8x16_t l1 = vld1q_u8(x->ql + 64 * h + 32 + 16 * half);
            const uint8x16_t nib[4] = {vandq_u8(l0, m4), vandq_u8(l1, m4), vshrq_n_u8(l0, 4),
                                       vshrq_n_u8(l1, 4)};
            for (int v = 0; v < 4; v++) {
                const uint8x16_t hb = vandq_u8(vshlq_u8(qh, vdupq_n_s8((int8_t)(-2 * v))), m3);
                u->q[8 * h + 2 * v + half] = vsubq_s8(u2s(vorrq_u8(nib[v], vshlq_n_u8(hb, 4))), m32);
            }
        }
    for (int j = 0; j < 16; j++)
        u->sc[j] = x->scales[j];
    u->d = h2f(x->d);
}

/* IQ4_XS: group g = the low then the high nibbles of qs[16g .. 16g+15] as IQ4_NL levels;
 * its 6-bit scale minus 32 */
INLINE void unpack_iq4_xs(const lc_block_iq4_xs *x, struct kunp *u)
{
    const int8x16_t kv = vld1q_s8(lc_kvalues_iq4nl);
    for (int g = 0; g < 8; g++) {
        const uint8x16_t b = vld1q_u8(x->qs + 16 * g);
        u->q[2 * g] = vqtbl1q_s8(kv, vandq_u8(b, vdupq_n_u8(0x0F)));
        u->q[2 * g + 1] = vqtbl1q_s8(kv, vshrq_n_u8(b, 4));
        u->sc[2 * g] = u->sc[2 * g + 1] =
            (((x->scales_l[g / 2] >> 4 * (g % 2)) & 0xf) | (((x->scales_h >> 2 * g) & 3) << 4)) - 32;
    }
    u->d = h2f(x->d);
}

/* the float state of one dot: 8 lanes, Q4_K's 4 lanes of mins, Q5_K's sum of mins */
struct kacc {
    float32x4_t acc[2], accm;
    float summs;
};

INLINE void kacc_init(struct kacc *k)
{
    k->acc[0] = k->acc[1] = k->accm = vdupq_n_f32(0.0f);
    k->summs = 0.0f;
}

/* the mins of one super-block (before its scales, as scalar.c) */
INLINE void kmins(int kind, struct kacc *k, const struct kunp *u, const lc_block_q8_K *y)
{
    if (kind == KQ2) {
        const float dmin = -y->d * u->dmin;
        const int16x8_t m0 = vld1q_s16(u->mn), m1 = vld1q_s16(u->mn + 8);
        const int16x8_t s0 = vld1q_s16(y->bsums), s1 = vld1q_s16(y->bsums + 8);
        /* lane k: mn[2k] * bsums[2k] + mn[2k+1] * bsums[2k+1] */
        const int32x4_t lo = vpaddq_s32(vmull_s16(vget_low_s16(m0), vget_low_s16(s0)),
                                        vmull_high_s16(m0, s0));
        const int32x4_t hi = vpaddq_s32(vmull_s16(vget_low_s16(m1), vget_low_s16(s1)),
                                        vmull_high_s16(m1, s1));
        k->acc[0] = vfmaq_n_f32(k->acc[0], vcvtq_f32_s32(lo), dmin);
        k->acc[1] = vfmaq_n_f32(k->acc[1], vcvtq_f32_s32(hi), dmin);
    } else if (kind == KQ4 || kind == KQ5) {
        const float dmin = -y->d * u->dmin;
        /* S[j] = bsums[2j] + bsums[2j+1]: the 32 activations of group j */
        const int32x4_t s03 = vpaddlq_s16(vld1q_s16(y->bsums));
        const int32x4_t s47 = vpaddlq_s16(vld1q_s16(y->bsums + 8));
        const int32x4_t p0 = vmulq_s32(vmovl_s16(vld1_s16(u->mn)), s03);
        const int32x4_t p1 = vmulq_s32(vmovl_s16(vld1_s16(u->mn + 4)), s47);
        if (kind == KQ4) /* lane m: mn[2m] S[2m] + mn[2m+1] S[2m+1] */
            k->accm = vfmaq_n_f32(k->accm, vcvtq_f32_s32(vpaddq_s32(p0, p1)), dmin);
        else
            k->summs = fmaf(dmin, (float)vaddvq_s32(vaddq_s32(p0, p1)), k->summs);
    }
}

INLINE float kfinal(int kind, const struct kacc *k)
{
    const float h = hsum8(k->acc);
    if (kind == KQ4) {
        const float32x4_t m = k->accm;
        return h + ((vgetq_lane_f32(m, 0) + vgetq_lane_f32(m, 2)) +
                    (vgetq_lane_f32(m, 1) + vgetq_lane_f32(m, 3)));
    }
    return kind == KQ5 ? h + k->summs : h;
}

/* 16 signed byte products -> 4 lanes of 4 consecutive */
#ifndef LC_NEON_NO_DOTPROD
DOTPROD INLINE int32x4_t d16_dp(int8x16_t w, int8x16_t a)
{
    return vdotq_s32(vdupq_n_s32(0), w, a);
}
#endif
INLINE int32x4_t d16_nodp(int8x16_t w, int8x16_t a)
{
    return quad_sums(w, a);
}

/*
 * Per integer path: one super-block into a kacc; vec_dot; a GEMM tile of RM rows x CN columns
 * that unpacks each weight block once; the GEMM over tiles of 2 x 4.
 */
#define DEFINE_KBLOCK(PATH, ATTR)                                                                 \
    ATTR INLINE void kblock_##PATH(int kind, struct kacc *k, const struct kunp *u,                \
                                   const lc_block_q8_K *y)                                        \
    {                                                                                             \
        kmins(kind, k, u, y);                                                                     \
        int32x4_t lo = vdupq_n_s32(0), hi = vdupq_n_s32(0);                                       \
        _Pragma("GCC unroll 8") for (int g = 0; g < 8; g++)                                       \
        {                                                                                         \
            lo = vmlaq_n_s32(lo, d16_##PATH(u->q[2 * g], vld1q_s8(y->qs + 32 * g)),               \
                             u->sc[2 * g]);                                                       \
            hi = vmlaq_n_s32(hi, d16_##PATH(u->q[2 * g + 1], vld1q_s8(y->qs + 32 * g + 16)),      \
                             u->sc[2 * g + 1]);                                                   \
        }                                                                                         \
        const float d = y->d * u->d;                                                              \
        k->acc[0] = vfmaq_n_f32(k->acc[0], vcvtq_f32_s32(lo), d);                                 \
        k->acc[1] = vfmaq_n_f32(k->acc[1], vcvtq_f32_s32(hi), d);                                 \
    }

#define DEFINE_KQ(NAME, WT, KIND, PATH, ATTR)                                                     \
    ATTR static void vec_dot_##NAME##_##PATH(int n, float *s, const void *vx, const void *vy)     \
    {                                                                                             \
        const WT *x = vx;                                                                         \
        const lc_block_q8_K *y = vy;                                                              \
        struct kacc k;                                                                            \
        kacc_init(&k);                                                                            \
        for (int i = 0; i < n / LC_QK_K; i++) {                                                   \
            struct kunp u;                                                                        \
            unpack_##NAME(x + i, &u);                                                             \
            kblock_##PATH(KIND, &k, &u, y + i);                                                   \
        }                                                                                         \
        *s = kfinal(KIND, &k);                                                                    \
    }                                                                                             \
    ATTR INLINE void NAME##_tile_##PATH(int nb, float *s, size_t ld_s, const uint8_t *w,          \
                                        size_t w_stride, const uint8_t *a, size_t a_stride,       \
                                        const int RM, const int CN)                               \
    {                                                                                             \
        struct kacc k[2][4];                                                                      \
        for (int r = 0; r < RM; r++)                                                              \
            for (int c = 0; c < CN; c++)                                                          \
                kacc_init(&k[r][c]);                                                              \
        for (int i = 0; i < nb; i++) {                                                            \
            struct kunp u[2];                                                                     \
            for (int r = 0; r < RM; r++)                                                          \
                unpack_##NAME((const WT *)(const void *)(w + r * w_stride) + i, &u[r]);           \
            for (int c = 0; c < CN; c++) {                                                        \
                const lc_block_q8_K *y = (const lc_block_q8_K *)(const void *)(a + c * a_stride) + i; \
                for (int r = 0; r < RM; r++)                                                      \
                    kblock_##PATH(KIND, &k[r][c], &u[r], y);                                      \
            }                                                                                     \
        }                                                                                         \
        for (int c = 0; c < CN; c++)                                                              \
            for (int r = 0; r < RM; r++)                                                          \
                s[c * ld_s + r] = kfinal(KIND, &k[r][c]);                                         \
    }                                                                                             \
    ATTR static void gemm_##NAME##_##PATH(int n, float *s, size_t ld_s, const void *vw,           \
                                          size_t w_stride, int nr, const void *va,                \
                                          size_t a_stride, int nc)                                \
    {                                                                                             \
        const uint8_t *w = vw, *a = va;                                                           \
        const int nb = n / LC_QK_K;                                                               \
        int r = 0;                                                                                \
        for (; r < nr; r += 2) {                                                                  \
            const int rm = nr - r >= 2 ? 2 : 1;                                                   \
            int c = 0;                                                                            \
            for (; c + 4 <= nc; c += 4)                                                           \
                if (rm == 2)                                                                      \
                    NAME##_tile_##PATH(nb, s + c * ld_s + r, ld_s, w + r * w_stride, w_stride,    \
                                       a + c * a_stride, a_stride, 2, 4);                         \
                else                                                                              \
                    NAME##_tile_##PATH(nb, s + c * ld_s + r, ld_s, w + r * w_stride, w_stride,    \
                                       a + c * a_stride, a_stride, 1, 4);                         \
            for (; c < nc; c++)                                                                   \
                NAME##_tile_##PATH(nb, s + c * ld_s + r, ld_s, w + r * w_stride, w_stride,        \
                                   a + c * a_stride, a_stride, rm, 1);                            \
        }                                                                                         \
    }

#define DEFINE_ALL_KQ(PATH, ATTR)                                                                 \
    DEFINE_KBLOCK(PATH, ATTR)                                                                     \
    DEFINE_KQ(q2_K, lc_block_q2_K, KQ2, PATH, ATTR)                                               \
    DEFINE_KQ(q3_K, lc_block_q3_K, KQ3, PATH, ATTR)                                               \
    DEFINE_KQ(q4_K, lc_block_q4_K, KQ4, PATH, ATTR)                                               \
    DEFINE_KQ(q5_K, lc_block_q5_K, KQ5, PATH, ATTR)                                               \
    DEFINE_KQ(q6_K, lc_block_q6_K, KQ6, PATH, ATTR)                                               \
    DEFINE_KQ(iq4_xs, lc_block_iq4_xs, KIQ4XS, PATH, ATTR)
DEFINE_ALL_KQ(nodp, NO_ATTR)
#ifndef LC_NEON_NO_DOTPROD
DEFINE_ALL_KQ(dp, DOTPROD)
#else
#define vec_dot_q2_K_dp vec_dot_q2_K_nodp
#define vec_dot_q3_K_dp vec_dot_q3_K_nodp
#define vec_dot_q4_K_dp vec_dot_q4_K_nodp
#define vec_dot_q5_K_dp vec_dot_q5_K_nodp
#define vec_dot_q6_K_dp vec_dot_q6_K_nodp
#define vec_dot_iq4_xs_dp vec_dot_iq4_xs_nodp
#define gemm_q2_K_dp gemm_q2_K_nodp
#define gemm_q3_K_dp gemm_q3_K_nodp
#define gemm_q4_K_dp gemm_q4_K_nodp
#define gemm_q5_K_dp gemm_q5_K_nodp
#define gemm_q6_K_dp gemm_q6_K_nodp
#define gemm_iq4_xs_dp gemm_iq4_xs_nodp
#endif
DEFINE_ENTRIES(q2_K)
DEFINE_ENTRIES(q3_K)
DEFINE_ENTRIES(q4_K)
DEFINE_ENTRIES(q5_K)
DEFINE_ENTRIES(q6_K)
DEFINE_ENTRIES(iq4_xs)

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
        [LC_TYPE_Q5_0] = vec_dot_q5_0,
        [LC_TYPE_Q5_1] = vec_dot_q5_1,
        [LC_TYPE_IQ4_NL] = vec_dot_iq4_nl,
        [LC_TYPE_Q2_K] = vec_dot_q2_K,
        [LC_TYPE_Q3_K] = vec_dot_q3_K,
        [LC_TYPE_Q4_K] = vec_dot_q4_K,
        [LC_TYPE_Q5_K] = vec_dot_q5_K,
        [LC_TYPE_Q6_K] = vec_dot_q6_K,
        [LC_TYPE_IQ4_XS] = vec_dot_iq4_xs,
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
        [LC_TYPE_Q5_0] = gemm_q5_0,
        [LC_TYPE_Q5_1] = gemm_q5_1,
        [LC_TYPE_IQ4_NL] = gemm_iq4nl,
        [LC_TYPE_Q2_K] = gemm_q2_K,
        [LC_TYPE_Q3_K] = gemm_q3_K,
        [LC_TYPE_Q4_K] = gemm_q4_K,
        [LC_TYPE_Q5_K] = gemm_q5_K,
        [LC_TYPE_Q6_K] = gemm_q6_K,
        [LC_TYPE_IQ4_XS] = gemm_iq4_xs,
    },
    .vec_dot_q4_0x8 = vec_dot_q4_0x8,
    .rms_norm = rms_norm,
    .dot_f32 = dot_f32,
    .dot_f16 = dot_f16,
    .axpy_f16 = axpy_f16,
    .axpy_f32 = axpy_f32,
};
