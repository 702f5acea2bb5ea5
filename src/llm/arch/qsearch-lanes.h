/*
 * qsearch-lanes.h - the Q4_1 / Q5_1 block search of quant_search.c, VL blocks at a time.
 *
 * Included by scalar.c (VL 4), x86-avx2.c (VL 8) and x86-avx512.c (VL 16) after they define
 *   VL                                        blocks per vector (lanes)
 *   qs_vf, qs_vi                              GCC vectors of VL floats / VL int32
 *   qs_vf qs_sqrt(qs_vf)                      IEEE square root of each lane
 *   qs_vf qs_gather32(const float *p)         p[32 k] in lane k
 *   qs_vf qs_round_f16(qs_vf v, qs_vi *bits)  v rounded to F16 (to nearest even, subnormals,
 *                                             overflow to inf: lc_fp32_to_fp16), bits in *bits
 * and give qsearch_asym, the lc_kernels entry (kernels.h has its contract).
 *
 * Why lanes hold blocks.  Each lane of a vector is one block, and the loops run over the 32
 * weights of the blocks in order; every sum is therefore the sequential sum over j = 0..31 of
 * one block, with the same IEEE operations (libllm is compiled with -ffp-contract=off) whatever
 * VL is: the result is the same bits on every ISA and any thread split -- the quantized file
 * does not depend on the machine.  No horizontal reduction is needed, and the decisions (which
 * candidate is best) are per-lane masks.
 *
 * The search, per block (quant_search.c has the reasons):
 *   weights: w given (an importance matrix row), or sqrt(sigma2 + x^2); a block whose weights
 *   do not sum to a positive finite value is fitted with w = 1;
 *   1. the reference pair (d, m) = ((max - min) / nmax, min), rounded to F16;
 *   2. NSTEP + 1 candidate steps: levels L = nearest(iscale (x - min)), iscale = (nmax - 1 +
 *      2 k / NSTEP) / (max - min), a weighted least-squares (d, m) for L, rounded to F16;
 *   3. two polish rounds: the least-squares (d, m) of the best pair's levels, rounded;
 *   4. the F16 neighbours of the best d, then of the best m;
 *   each pair is measured with its nearest levels, E = sum w (d l + m - x)^2, and kept when E
 *   is smaller than the best so far (d >= 0, both finite);
 *   5. the reference block itself (ggml's levels from the unrounded pair) replaces the result
 *      unless the result's E is strictly smaller.
 */
#ifndef LC_QSEARCH_LANES_H
#define LC_QSEARCH_LANES_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#define QS_NSTEP 4 /* 5 candidate steps: 3 cost stories260K 12 % of KLD (bench/QUANTIZE.md) */
#define QS_ZERO ((qs_vf){0})

/* true when any lane of the mask m is set */
static inline bool qs_any(qs_vi m)
{
    int r = 0;
    for (int k = 0; k < VL; k++)
        r |= m[k];
    return r != 0;
}

/* the F16 values of bits (0..0xffff) as floats (the table: rare, 4 calls a group) */
static inline qs_vf qs_f16_to_f32(qs_vi bits)
{
    qs_vf v;
    for (int k = 0; k < VL; k++)
        v[k] = LC_FP16_TO_FP32((lc_fp16)bits[k]);
    return v;
}

/* lanes of a where m is set, else b */
static inline qs_vf qs_sel(qs_vi m, qs_vf a, qs_vf b)
{
    return (qs_vf)((m & (qs_vi)a) | (~m & (qs_vi)b));
}

static inline qs_vi qs_seli(qs_vi m, qs_vi a, qs_vi b)
{
    return (m & a) | (~m & b);
}

/* true in each lane where v is finite */
static inline qs_vi qs_finite(qs_vf v)
{
    return (v - v) == 0.0f;
}

/* nearest level of (x - m) * id in [0, top]: floor(v + 0.5) of the clamped v (v >= 0) */
static inline qs_vf qs_level(qs_vf x, qs_vf m, qs_vf id, qs_vf top)
{
    qs_vf v = (x - m) * id;
    v = qs_sel(v > 0.0f, v, QS_ZERO);
    v = qs_sel(v < top, v, top);
    return __builtin_convertvector(__builtin_convertvector(v + 0.5f, qs_vi), qs_vf);
}

/* 1 / d, 0 where d is 0 */
static inline qs_vf qs_inv(qs_vf d)
{
    const qs_vi nz = d != 0.0f;
    const qs_vf one = QS_ZERO + 1.0f;
    return qs_sel(nz, one / qs_sel(nz, d, one), QS_ZERO);
}

struct qs_group {
    qs_vf x[32], w[32];
    qs_vf top;                   /* nmax */
    qs_vf best_e, best_d, best_m; /* the best pair's error and values */
    qs_vi best_hd, best_hm;      /* its F16 bits */
};

/* E of the pair (d, m) with nearest levels */
static inline qs_vf qs_error(const struct qs_group *g, qs_vf d, qs_vf m)
{
    const qs_vf id = qs_inv(d);
    qs_vf e = QS_ZERO;
    for (int j = 0; j < 32; j++) {
        const qs_vf l = qs_level(g->x[j], m, id, g->top);
        const qs_vf r = d * l + m - g->x[j];
        e += g->w[j] * r * r;
    }
    return e;
}

/* Try the stored pair (hd, hm) (values d, m) in the lanes of ok: keep it where it is valid
 * (finite, d >= 0) and better. */
static inline void qs_try(struct qs_group *g, qs_vi ok, qs_vf d, qs_vf m, qs_vi hd, qs_vi hm)
{
    ok &= ((hd & 0x7c00) != 0x7c00) & ((hd & 0x8000) == 0) & ((hm & 0x7c00) != 0x7c00);
    if (!qs_any(ok))
        return;
    const qs_vf e = qs_error(g, d, m);
    const qs_vi up = ok & (e < g->best_e);
    g->best_e = qs_sel(up, e, g->best_e);
    g->best_d = qs_sel(up, d, g->best_d);
    g->best_m = qs_sel(up, m, g->best_m);
    g->best_hd = qs_seli(up, hd, g->best_hd);
    g->best_hm = qs_seli(up, hm, g->best_hm);
}

/* Round the pair (d, m) to F16 and try it where ok. */
static inline void qs_try_f32(struct qs_group *g, qs_vi ok, qs_vf d, qs_vf m)
{
    qs_vi hd, hm;
    const qs_vf dr = qs_round_f16(d, &hd), mr = qs_round_f16(m, &hm);
    qs_try(g, ok, dr, mr, hd, hm);
}

/*
 * Weighted least-squares (d, m) of the levels of the best pair (from_best) or of the step
 * iscale from min: sums in the order of quant_search.c's former asym_fit; *ok false where the
 * levels are constant or the fit is not finite with d >= 0.
 */
static inline void qs_fit(const struct qs_group *g, bool from_best, qs_vf iscale, qs_vf min, qs_vf *d,
                          qs_vf *m, qs_vi *ok)
{
    const qs_vf id = qs_inv(g->best_d);
    const qs_vf zero = QS_ZERO;
    qs_vf sw = zero, sl = zero, sll = zero, sx = zero, slx = zero;
    for (int j = 0; j < 32; j++) {
        qs_vf l;
        if (from_best) {
            l = qs_level(g->x[j], g->best_m, id, g->top);
        } else {
            qs_vf v = iscale * (g->x[j] - min);
            v = qs_sel(v < g->top, v, g->top);
            l = __builtin_convertvector(__builtin_convertvector(v + 0.5f, qs_vi), qs_vf);
        }
        const qs_vf wl = g->w[j] * l;
        sw += g->w[j];
        sl += wl;
        sll += wl * l;
        sx += g->w[j] * g->x[j];
        slx += wl * g->x[j];
    }
    const qs_vf det = sw * sll - sl * sl;
    const qs_vi pos = det > 0.0f;
    const qs_vf dd = qs_sel(pos, det, zero + 1.0f);
    *d = (sw * slx - sl * sx) / dd;
    *m = (sll * sx - sl * slx) / dd;
    *ok = pos & (*d >= 0.0f) & qs_finite(*d) & qs_finite(*m);
}

/* The search for the VL blocks of g (x, w, top set); out: the F16 pair, levels in lv. */
static void qs_search_group(struct qs_group *g, qs_vi *out_hd, qs_vi *out_hm, qs_vf lv[32])
{
    qs_vf min = g->x[0], max = g->x[0];
    for (int j = 1; j < 32; j++) {
        min = qs_sel(g->x[j] < min, g->x[j], min);
        max = qs_sel(g->x[j] > max, g->x[j], max);
    }
    const qs_vf zero = QS_ZERO;
    const qs_vi all = zero == zero, varied = max != min;
    g->best_e = zero + (float)INFINITY;
    g->best_d = zero;
    g->best_m = zero;
    g->best_hd = (qs_vi){0};
    g->best_hm = g->best_hd;
    /* 1. the reference pair */
    const qs_vf d_ref = (max - min) / g->top;
    qs_vi hd_ref, hm_ref;
    const qs_vf dr_ref = qs_round_f16(d_ref, &hd_ref), mr_ref = qs_round_f16(min, &hm_ref);
    qs_try(g, all, dr_ref, mr_ref, hd_ref, hm_ref);
    /* 2. candidate steps */
    if (qs_any(varied)) {
        for (int k = 0; k <= QS_NSTEP; k++) {
            const qs_vf iscale = (g->top - 1.0f + 2.0f * (float)k / QS_NSTEP) /
                              qs_sel(varied, max - min, zero + 1.0f);
            qs_vf d, m;
            qs_vi ok;
            qs_fit(g, false, iscale, min, &d, &m, &ok);
            qs_try_f32(g, ok & varied, d, m);
        }
        /* 3. polish: stops when no lane's best pair changed (a repeat would change none) */
        for (int it = 0; it < 2; it++) {
            const qs_vi hd0 = g->best_hd, hm0 = g->best_hm;
            qs_vf d, m;
            qs_vi ok;
            qs_fit(g, true, zero, min, &d, &m, &ok);
            qs_try_f32(g, ok & varied, d, m);
            if (!qs_any((g->best_hd != hd0) | (g->best_hm != hm0)))
                break;
        }
    }
    /* 4. the F16 neighbours of d, then of m */
    {
        const qs_vi hd0 = g->best_hd, hm0 = g->best_hm;
        const qs_vf m0 = g->best_m;
        const qs_vi up = hd0 + 1, dn = (hd0 - 1) & 0xffff;
        qs_try(g, all, qs_f16_to_f32(up), m0, up, hm0);
        qs_try(g, hd0 != 0, qs_f16_to_f32(dn), m0, dn, hm0);
    }
    {
        const qs_vi hd0 = g->best_hd, hm0 = g->best_hm;
        const qs_vf d0 = g->best_d;
        const qs_vi up = (hm0 + 1) & 0xffff, dn = (hm0 - 1) & 0xffff;
        qs_try(g, all, d0, qs_f16_to_f32(up), hd0, up);
        qs_try(g, all, d0, qs_f16_to_f32(dn), hd0, dn);
    }
    /* 5. the reference block (ggml's levels: the unrounded step, the unrounded min) */
    const qs_vf id_ref = qs_inv(d_ref), id_best = qs_inv(g->best_d);
    qs_vf e_ref = zero;
    for (int j = 0; j < 32; j++) {
        qs_vf v = (g->x[j] - min) * id_ref + 0.5f;
        qs_vf l = __builtin_convertvector(__builtin_convertvector(v, qs_vi), qs_vf);
        l = qs_sel(l < g->top, l, g->top);
        const qs_vf r = dr_ref * l + mr_ref - g->x[j];
        e_ref += g->w[j] * r * r;
        lv[j] = l;
    }
    const qs_vi keep = g->best_e < e_ref; /* the search's block, strictly better */
    for (int j = 0; j < 32; j++)
        lv[j] = qs_sel(keep, qs_level(g->x[j], g->best_m, id_best, g->top), lv[j]);
    *out_hd = qs_seli(keep, g->best_hd, hd_ref);
    *out_hm = qs_seli(keep, g->best_hm, hm_ref);
}

/*
 * The kernels.h entry: nb blocks of 32 floats at x; weights w (same layout) or, when w is NULL,
 * sqrt(sigma2 + x^2) (sigma2 >= 0) or 1 (sigma2 < 0); out d[nb], m[nb] (F16 bits) and L[32 nb] levels in [0, nmax].
 */
static void qsearch_asym(const float *x, const float *w, float sigma2, int64_t nb, int nmax,
                         lc_fp16 *d, lc_fp16 *m, uint8_t *L)
{
    struct qs_group g;
    for (int64_t b0 = 0; b0 < nb; b0 += VL) {
        const int nl = nb - b0 < VL ? (int)(nb - b0) : VL;
        if (nl == VL) { /* lane k = block b0 + k: loads 32 floats apart */
            for (int j = 0; j < 32; j++)
                g.x[j] = qs_gather32(x + b0 * 32 + j);
            for (int j = 0; j < 32; j++)
                g.w[j] = w ? qs_gather32(w + b0 * 32 + j) : QS_ZERO + 1.0f;
        } else {
            for (int j = 0; j < 32; j++)
                for (int k = 0; k < VL; k++) {
                    g.x[j][k] = k < nl ? x[(b0 + k) * 32 + j] : 0.0f;
                    g.w[j][k] = k < nl && w ? w[(b0 + k) * 32 + j] : 1.0f;
                }
        }
        if (!w && sigma2 >= 0.0f)
            for (int j = 0; j < 32; j++)
                g.w[j] = qs_sqrt(g.x[j] * g.x[j] + sigma2);
        /* w = 1 where the weights do not sum to a positive finite value */
        qs_vf sw = QS_ZERO;
        for (int j = 0; j < 32; j++)
            sw += g.w[j];
        const qs_vi flat = ~((sw > 0.0f) & qs_finite(sw));
        for (int j = 0; j < 32; j++)
            g.w[j] = qs_sel(flat, QS_ZERO + 1.0f, g.w[j]);
        g.top = QS_ZERO + (float)nmax;
        qs_vi hd, hm;
        qs_vf lv[32];
        qs_search_group(&g, &hd, &hm, lv);
        qs_vi li[32];
        for (int j = 0; j < 32; j++)
            li[j] = __builtin_convertvector(lv[j], qs_vi);
        for (int k = 0; k < nl; k++) {
            d[b0 + k] = (lc_fp16)hd[k];
            m[b0 + k] = (lc_fp16)hm[k];
            for (int j = 0; j < 32; j++)
                L[(b0 + k) * 32 + j] = (uint8_t)li[j][k];
        }
    }
}

#endif
