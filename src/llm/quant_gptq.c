/*
 * quant_gptq.c - GPTQ (quant_gptq.h) for Q4_0, Q4_1, Q5_0, Q5_1, Q8_0.
 *
 * One row at a time (rows are independent: each row's error only moves along that row):
 *   for each block of 32 columns, at its first column:
 *       choose the block's stored (d) or (d, m) by lc_quantize_row_search on the row's CURRENT
 *       values of the block (already corrected by earlier columns' errors);
 *   for each column i of the block:
 *       q_i   = nearest level of cur_i for that (d, m), clamped to the type's range;
 *       e     = (cur_i - deq(q_i)) / U_ii;
 *       cur_k -= e * U_ik for every k > i            (GPTQ's update, Algorithm 1).
 * Since U is upper triangular, the update only touches columns still to be quantized, and
 * with H = I (uncorrelated inputs) it touches none: the result is then the block search's
 * (d, m) with every weight on its nearest level.
 */
#include "quant_gptq.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "quant_search.h"

#define QB 32

/* Lower Cholesky factor of the SPD matrix a (n, n), in place (upper part left as is);
 * false when a pivot is not positive. */
static bool cholesky(double *a, int64_t n)
{
    for (int64_t j = 0; j < n; j++) {
        double *aj = a + j * n;
        double s = aj[j];
        for (int64_t k = 0; k < j; k++)
            s -= aj[k] * aj[k];
        if (!(s > 0.0) || !isfinite(s))
            return false;
        const double ljj = sqrt(s);
        aj[j] = ljj;
        for (int64_t i = j + 1; i < n; i++) {
            double *ai = a + i * n;
            double t = ai[j];
            for (int64_t k = 0; k < j; k++)
                t -= ai[k] * aj[k];
            ai[j] = t / ljj;
        }
    }
    return true;
}

struct lc_gptq *lc_gptq_prepare(const double *cov_sum, double rows, int64_t n, float damp)
{
    if (n < 1 || !(rows > 0.0) || n > (int64_t)1 << 15)
        return NULL;
    const size_t nn = (size_t)n * (size_t)n;
    double *h = malloc(nn * sizeof(double));
    double *a = malloc(nn * sizeof(double));
    float *u = calloc(nn, sizeof(float));
    float *hf = malloc(nn * sizeof(float));
    float *dg = malloc((size_t)n * sizeof(float));
    struct lc_gptq *g = malloc(sizeof(*g));
    if (!h || !a || !u || !hf || !dg || !g)
        goto fail;
    double mean_diag = 0.0;
    for (size_t j = 0; j < nn; j++) {
        h[j] = cov_sum[j] / rows;
        hf[j] = (float)h[j];
    }
    for (int64_t j = 0; j < n; j++) {
        dg[j] = (float)h[j * n + j];
        mean_diag += h[j * n + j];
    }
    mean_diag /= (double)n;
    if (!(mean_diag > 0.0))
        mean_diag = 1.0;
    for (int64_t j = 0; j < n; j++)
        if (!(h[j * n + j] > 0.0)) { /* a dead input: its weights do not matter */
            for (int64_t k = 0; k < n; k++)
                h[j * n + k] = h[k * n + j] = 0.0;
            h[j * n + j] = 1.0;
        }
    /* GPTQ's factor is the upper Cholesky factor of H^-1 (torch.linalg.cholesky(Hinv,
     * upper=True)): H^-1 = U^T U.  Computed without forming H^-1: with J the reversal
     * permutation and J H J = L' L'^T (Cholesky), H = V V^T for the upper triangular
     * V = J L' J, so H^-1 = V^-T V^-1 and U = V^-1 = J L'^-1 J.  About n^3 / 2 multiply-adds. */
    bool ok = false;
    double lambda = (double)damp * mean_diag;
    for (int attempt = 0; attempt < 5 && !ok; attempt++, lambda *= 10.0) {
        for (int64_t i = 0; i < n; i++)
            for (int64_t j = 0; j < n; j++)
                a[i * n + j] = h[(n - 1 - i) * n + (n - 1 - j)] + (i == j ? lambda : 0.0);
        ok = cholesky(a, n); /* J H J = L' L'^T, L' in the lower triangle of a */
    }
    if (!ok)
        goto fail;
    /* L'^-1 (lower) into h, row by row: Li[i][c] = -(sum_{k=c}^{i-1} L'[i][k] Li[k][c]) / L'[i][i] */
    memset(h, 0, nn * sizeof(double));
    for (int64_t i = 0; i < n; i++) {
        double *hi = h + i * n;
        const double *ai = a + i * n;
        for (int64_t k = 0; k < i; k++) { /* hi[c] -= L'[i][k] * Li[k][c], c <= k */
            const double lik = ai[k];
            const double *hk = h + k * n;
            for (int64_t c = 0; c <= k; c++)
                hi[c] -= lik * hk[c];
        }
        const double inv = 1.0 / ai[i];
        for (int64_t c = 0; c < i; c++)
            hi[c] *= inv;
        hi[i] = inv;
    }
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = i; j < n; j++)
            u[i * n + j] = (float)h[(n - 1 - i) * n + (n - 1 - j)];
    free(h);
    free(a);
    *g = (struct lc_gptq){n, u, hf, dg};
    return g;
fail:
    free(h);
    free(a);
    free(u);
    free(hf);
    free(dg);
    free(g);
    return NULL;
}

void lc_gptq_free(struct lc_gptq *g)
{
    if (!g)
        return;
    free(g->U);
    free(g->H);
    free(g->diag);
    free(g);
}

/* The level range of t: symmetric types store q + off, asymmetric ones q in [0, qmax]. */
struct levels {
    bool asym;
    int qlo, qhi;   /* level range (symmetric: signed) */
    int bias;       /* stored code = level + bias */
};

static bool type_levels(enum lc_type t, struct levels *lv)
{
    switch (t) {
    case LC_TYPE_Q4_0: *lv = (struct levels){false, -8, 7, 8}; return true;
    case LC_TYPE_Q5_0: *lv = (struct levels){false, -16, 15, 16}; return true;
    case LC_TYPE_Q8_0: *lv = (struct levels){false, -127, 127, 0}; return true;
    case LC_TYPE_Q4_1: *lv = (struct levels){true, 0, 15, 0}; return true;
    case LC_TYPE_Q5_1: *lv = (struct levels){true, 0, 31, 0}; return true;
    default: return false;
    }
}

/* (d, m) as stored in block blk of type t (m = 0 for the symmetric types). */
static void block_dm(enum lc_type t, const void *blk, float *d, float *m)
{
    lc_fp16 hd = 0, hm = 0;
    memcpy(&hd, blk, sizeof(hd)); /* d leads every one of the five layouts */
    if (t == LC_TYPE_Q4_1 || t == LC_TYPE_Q5_1)
        memcpy(&hm, (const uint8_t *)blk + sizeof(lc_fp16), sizeof(hm));
    *d = lc_fp16_to_fp32(hd);
    *m = (t == LC_TYPE_Q4_1 || t == LC_TYPE_Q5_1) ? lc_fp16_to_fp32(hm) : 0.0f;
}

/* The nearest level of v for (d, m), in the type's range (the search's own rounding). */
static int nearest_level(const struct levels *lv, float d, float m, float v)
{
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    float s = (v - m) * id;
    s = s < (float)lv->qlo ? (float)lv->qlo : s > (float)lv->qhi ? (float)lv->qhi : s;
    return (int)(s + 256.5f) - 256;
}

/* Write the 32 codes (level + bias) into blk's quants, keeping its (d, m). */
static void set_codes(enum lc_type t, void *blk, const int *code)
{
    switch (t) {
    case LC_TYPE_Q4_0: {
        lc_block_q4_0 *y = blk;
        for (int j = 0; j < QB / 2; j++)
            y->qs[j] = (uint8_t)(code[j] | (code[j + QB / 2] << 4));
        break;
    }
    case LC_TYPE_Q4_1: {
        lc_block_q4_1 *y = blk;
        for (int j = 0; j < QB / 2; j++)
            y->qs[j] = (uint8_t)(code[j] | (code[j + QB / 2] << 4));
        break;
    }
    case LC_TYPE_Q8_0: {
        lc_block_q8_0 *y = blk;
        for (int j = 0; j < QB; j++)
            y->qs[j] = (int8_t)code[j];
        break;
    }
    case LC_TYPE_Q5_0:
    case LC_TYPE_Q5_1: {
        uint8_t *qh_p, *qs;
        if (t == LC_TYPE_Q5_0) {
            qh_p = ((lc_block_q5_0 *)blk)->qh;
            qs = ((lc_block_q5_0 *)blk)->qs;
        } else {
            qh_p = ((lc_block_q5_1 *)blk)->qh;
            qs = ((lc_block_q5_1 *)blk)->qs;
        }
        uint32_t qh = 0;
        for (int j = 0; j < QB / 2; j++) {
            const unsigned u0 = (unsigned)code[j], u1 = (unsigned)code[j + QB / 2];
            qs[j] = (uint8_t)((u0 & 0x0f) | ((u1 & 0x0f) << 4));
            qh |= ((u0 >> 4) & 1u) << j;
            qh |= ((u1 >> 4) & 1u) << (j + QB / 2);
        }
        memcpy(qh_p, &qh, sizeof(qh));
        break;
    }
    default: break;
    }
}

/* theta^T G theta - 2 theta^T r: the H-norm error of the parameters theta (k values), up to the
 * constant x H x^T. */
static double quad_error(const double *G, const double *r, const double *theta, int k)
{
    double s = 0.0;
    for (int p = 0; p < k; p++) {
        double gp = 0.0;
        for (int q = 0; q < k; q++)
            gp += G[p * k + q] * theta[q];
        s += theta[p] * (gp - 2.0 * r[p]);
    }
    return s;
}

/* Solve the SPD system G th = r (k unknowns, G row-major, both overwritten); false when G is
 * singular. */
static bool spd_solve(double *G, double *r, int k)
{
    double tr = 0.0;
    for (int i = 0; i < k; i++)
        tr += G[i * k + i];
    for (int i = 0; i < k; i++)
        G[i * k + i] += 1e-9 * (tr / k) + 1e-30;
    if (!cholesky(G, k))
        return false;
    for (int i = 0; i < k; i++) { /* L z = r */
        double t = r[i];
        for (int j = 0; j < i; j++)
            t -= G[i * k + j] * r[j];
        r[i] = t / G[i * k + i];
    }
    for (int i = k - 1; i >= 0; i--) { /* L^T th = z */
        double t = r[i];
        for (int j = i + 1; j < k; j++)
            t -= G[j * k + i] * r[j];
        r[i] = t / G[i * k + i];
    }
    return true;
}

/*
 * Re-fit the stored (d_b[, m_b]) of every block for the fixed levels lev: the row's dequantized
 * values are sum_b d_b lev_b (+ m_b 1_b), linear in the unknowns, so the H-norm error is a
 * quadratic whose minimum solves G th = A H x with A the basis rows and G = A H A^T.  The
 * result, rounded to F16, replaces hd/hm when it lowers the error.  Work: about 2 n^2.
 */
static void refit(const struct levels *lv, const float *x, const int *lev, const float *H,
                  int64_t n, lc_fp16 *hd, lc_fp16 *hm)
{
    const int64_t nb = n / QB;
    const int per = lv->asym ? 2 : 1;
    const int k = (int)(nb * per);
    float *hv = malloc((size_t)k * (size_t)n * sizeof(float)); /* H v_p for each basis row */
    double *G = malloc((size_t)k * (size_t)k * 2 * sizeof(double));
    double *r = malloc((size_t)k * 4 * sizeof(double));
    lc_fp16 *nd = malloc((size_t)nb * 2 * sizeof(lc_fp16));
    if (!hv || !G || !r || !nd)
        goto done;
    lc_fp16 *nm = nd + nb;
    double *G0 = G + (size_t)k * (size_t)k, *r0 = r + k, *th0 = r + 2 * k, *th1 = r + 3 * k;
    /* basis p = b * per + c: c = 0 the levels of block b, c = 1 ones on block b */
    for (int p = 0; p < k; p++) {
        const int64_t b = p / per, c = p % per, j0 = b * QB;
        float *o = hv + (size_t)p * (size_t)n;
        for (int64_t i = 0; i < n; i++) {
            const float *hi = H + i * n + j0;
            float acc = 0.0f;
            for (int jj = 0; jj < QB; jj++)
                acc += hi[jj] * (c == 0 ? (float)lev[j0 + jj] : 1.0f);
            o[i] = acc;
        }
    }
    for (int p = 0; p < k; p++) {
        const float *o = hv + (size_t)p * (size_t)n;
        double rx = 0.0;
        for (int64_t i = 0; i < n; i++)
            rx += (double)o[i] * (double)x[i];
        r[p] = rx;
        for (int q = 0; q < k; q++) {
            const int64_t bq = q / per, cq = q % per, j0 = bq * QB;
            double sq = 0.0;
            for (int jj = 0; jj < QB; jj++)
                sq += (double)o[j0 + jj] * (cq == 0 ? (double)lev[j0 + jj] : 1.0);
            G[p * k + q] = sq;
        }
    }
    memcpy(G0, G, (size_t)k * (size_t)k * sizeof(double));
    memcpy(r0, r, (size_t)k * sizeof(double));
    if (!spd_solve(G, r, k))
        goto done;
    for (int64_t b = 0; b < nb; b++) {
        const double d = r[b * per], m = lv->asym ? r[b * per + 1] : 0.0;
        if (!isfinite(d) || !isfinite(m) || (lv->asym && d < 0.0) || fabs(d) > 65000.0 ||
            fabs(m) > 65000.0)
            goto done;
        nd[b] = lc_fp32_to_fp16((float)d);
        nm[b] = lc_fp32_to_fp16((float)m);
    }
    for (int64_t b = 0; b < nb; b++) {
        th0[b * per] = lc_fp16_to_fp32(hd[b]);
        th1[b * per] = lc_fp16_to_fp32(nd[b]);
        if (lv->asym) {
            th0[b * per + 1] = lc_fp16_to_fp32(hm[b]);
            th1[b * per + 1] = lc_fp16_to_fp32(nm[b]);
        }
    }
    const double before = quad_error(G0, r0, th0, k), after = quad_error(G0, r0, th1, k);
    if (after < before) {
        memcpy(hd, nd, (size_t)nb * sizeof(lc_fp16));
        if (lv->asym)
            memcpy(hm, nm, (size_t)nb * sizeof(lc_fp16));
    }
done:
    free(hv);
    free(G);
    free(r);
    free(nd);
}

/* Store (d, m) into block blk of type t. */
static void set_dm(enum lc_type t, void *blk, lc_fp16 d, lc_fp16 m)
{
    memcpy(blk, &d, sizeof(d));
    if (t == LC_TYPE_Q4_1 || t == LC_TYPE_Q5_1)
        memcpy((uint8_t *)blk + sizeof(lc_fp16), &m, sizeof(m));
}

int lc_quantize_row_gptq(enum lc_type t, const float *x, void *y, const struct lc_gptq *g)
{
    struct levels lv;
    const int64_t n = g->n;
    if (!type_levels(t, &lv) || n % QB != 0 || n < QB)
        return -1;
    const int64_t nb = n / QB;
    const size_t bs = lc_row_size(t, QB);
    float *cur = malloc((size_t)n * sizeof(float));
    int *lev = malloc((size_t)n * sizeof(int));
    lc_fp16 *hd = malloc((size_t)nb * 2 * sizeof(lc_fp16));
    uint8_t *out = malloc((size_t)nb * bs);
    if (!cur || !lev || !hd || !out)
        goto fail;
    lc_fp16 *hm = hd + nb;
    memcpy(cur, x, (size_t)n * sizeof(float));
    for (int64_t b = 0; b < nb; b++) {
        const int64_t j0 = b * QB;
        uint8_t *blk = out + (size_t)b * bs;
        if (lc_quantize_row_search(t, cur + j0, blk, QB, g->diag + j0) != 0)
            goto fail;
        float d, m;
        block_dm(t, blk, &d, &m);
        memcpy(&hd[b], blk, sizeof(lc_fp16));
        hm[b] = lc_fp32_to_fp16(m);
        for (int jj = 0; jj < QB; jj++) {
            const int64_t i = j0 + jj;
            const int l = nearest_level(&lv, d, m, cur[i]);
            lev[i] = l;
            const float deq = d * (float)l + m;
            const float *ui = g->U + i * n;
            const float e = (cur[i] - deq) / ui[i];
            for (int64_t k = i + 1; k < n; k++)
                cur[k] -= e * ui[k];
        }
    }
    refit(&lv, x, lev, g->H, n, hd, hm);
    for (int64_t b = 0; b < nb; b++) {
        int code[QB];
        for (int jj = 0; jj < QB; jj++)
            code[jj] = lev[b * QB + jj] + lv.bias;
        set_dm(t, out + (size_t)b * bs, hd[b], hm[b]);
        set_codes(t, out + (size_t)b * bs, code);
    }
    memcpy(y, out, (size_t)nb * bs);
    free(cur);
    free(lev);
    free(hd);
    free(out);
    return 0;
fail:
    free(cur);
    free(lev);
    free(hd);
    free(out);
    return -1;
}
