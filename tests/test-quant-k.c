/*
 * test-quant-k.c - Q6_K and Q8_K: the reference quantizers, the dequantizer and the scalar
 * Q6_K x Q8_K dot product, on deterministic data (layout, round-trip error, edge blocks).
 * The byte-for-byte comparison with llama.cpp's files is in test-quant-files.c.
 */
#include <math.h>
#include <stdio.h>
#include <stdint.h>
#include <string.h>

#include "llm/quant.h"
#include "testutil.h"

/* Deterministic pseudo-random floats in [-1, 1) (xorshift32). */
static uint32_t rng_state = 0x12345678u;
static float frand(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 17;
    rng_state ^= rng_state << 5;
    return (float)(rng_state >> 8) / (float)(1u << 23) - 1.0f;
}

#define N (4 * LC_QK_K)

int main(void)
{
    lc_quant_init();
    static float x[N], y[N];
    static lc_block_q6_K q6[N / LC_QK_K];
    static lc_block_q8_K q8[N / LC_QK_K];

    for (int i = 0; i < N; i++)
        x[i] = frand() * (1.0f + (float)(i / 64)); /* sub-blocks of different ranges */

    /* Q6_K round trip: each weight is within half a step of its sub-block's grid,
     * step = |d * scale| <= max|x| / 31-ish; allow one step (the scale is rounded to int8). */
    lc_quantize_row_q6_K_ref(x, q6, N);
    lc_dequantize_row_q6_K(q6, y, N);
    double err2 = 0, x2 = 0;
    for (int b = 0; b < N / 16; b++) {
        float amax = 0;
        for (int i = 0; i < 16; i++)
            amax = fmaxf(amax, fabsf(x[16 * b + i]));
        for (int i = 0; i < 16; i++) {
            const float e = fabsf(x[16 * b + i] - y[16 * b + i]);
            CHECK(e <= amax / 31.0f + 1e-6f, "q6_K weight %d: x %g y %g", 16 * b + i,
                  (double)x[16 * b + i], (double)y[16 * b + i]);
            err2 += (double)e * (double)e;
            x2 += (double)x[16 * b + i] * (double)x[16 * b + i];
        }
    }
    /* 6 bits: relative RMSE about 1/(sqrt(12) * 32) ~ 0.9 %; require < 2 %. */
    CHECK(sqrt(err2 / x2) < 0.02, "q6_K relative rmse %g", sqrt(err2 / x2));

    /* Layout: a block whose weights are exactly d * s * (q - 32) on a known grid. */
    {
        float g[LC_QK_K];
        for (int i = 0; i < LC_QK_K; i++)
            g[i] = (float)((i * 7) % 64 - 32) * 0.5f; /* q - 32 in -32..31, scale 0.5 */
        for (int i = 0; i < LC_QK_K; i += 16)
            g[i] = -16.0f; /* each sub-block's extreme at level -32: its fit is exact */
        lc_block_q6_K b;
        lc_quantize_row_q6_K_ref(g, &b, LC_QK_K);
        float h[LC_QK_K];
        lc_dequantize_row_q6_K(&b, h, LC_QK_K);
        int exact = 0;
        for (int i = 0; i < LC_QK_K; i++)
            exact += fabsf(h[i] - g[i]) < 0.02f;
        CHECK(exact == LC_QK_K, "grid values reproduced: %d of %d", exact, LC_QK_K);
        /* weight 0 is -32 * 0.5 = -16: the largest magnitude, so its sub-block scale is the max
         * one and the fit puts it at an extreme level; weight 0's low nibble is ql[0] & 15 and
         * its top 2 bits are qh[0] & 3 (header layout). */
        const int q0 = (b.ql[0] & 0xF) | ((b.qh[0] & 3) << 4);
        const int q64 = (b.ql[0] >> 4) | (((b.qh[0] >> 4) & 3) << 4);
        const float d = lc_fp16_to_fp32(b.d);
        CHECK(fabsf(d * (float)b.scales[0] * (float)(q0 - 32) - g[0]) < 0.02f,
              "weight 0 from ql[0] low / qh[0] bits 0-1 (q %d)", q0);
        CHECK(fabsf(d * (float)b.scales[4] * (float)(q64 - 32) - g[64]) < 0.02f,
              "weight 64 from ql[0] high / qh[0] bits 4-5 (q %d)", q64);
    }

    /* An all-zero block is all zero bytes (ggml: memset + d = 0). */
    {
        float z[LC_QK_K] = {0};
        lc_block_q6_K b;
        memset(&b, 0xAA, sizeof(b));
        lc_quantize_row_q6_K_ref(z, &b, LC_QK_K);
        static const lc_block_q6_K zero;
        CHECK(memcmp(&b, &zero, sizeof(b)) == 0, "zero block");
    }

    /* Q8_K: d = max/-127 sign included, q = nearest(x / d), bsums = sums of 16. */
    lc_quantize_row_q8_K_ref(x, q8, N);
    for (int b = 0; b < N / LC_QK_K; b++) {
        float amax = 0;
        for (int i = 0; i < LC_QK_K; i++)
            amax = fmaxf(amax, fabsf(x[b * LC_QK_K + i]));
        CHECK(fabsf(fabsf(q8[b].d) - amax / 127.0f) <= amax * 1e-6f, "q8_K d");
        for (int j = 0; j < 16; j++) {
            int s = 0;
            for (int i = 0; i < 16; i++)
                s += q8[b].qs[16 * j + i];
            CHECK(q8[b].bsums[j] == s, "bsums[%d] %d != %d", j, q8[b].bsums[j], s);
        }
        for (int i = 0; i < LC_QK_K; i++)
            CHECK(fabsf(q8[b].d * (float)q8[b].qs[i] - x[b * LC_QK_K + i]) <=
                      fabsf(q8[b].d) * 0.5f + 1e-6f,
                  "q8_K %d", i);
    }

    /* Dot product: equal to the float dot of the dequantized rows up to float rounding
     * (the integer part is exact). */
    float act[N], actq[N];
    for (int i = 0; i < N; i++)
        act[i] = frand();
    lc_quantize_row_q8_K_ref(act, q8, N);
    for (int b = 0; b < N / LC_QK_K; b++)
        for (int i = 0; i < LC_QK_K; i++)
            actq[b * LC_QK_K + i] = q8[b].d * (float)q8[b].qs[i];
    double ref = 0;
    for (int i = 0; i < N; i++)
        ref += (double)y[i] * (double)actq[i];
    float s = 0;
    lc_vec_dot_q6_K_q8_K_ref(N, &s, q6, q8);
    CHECK(fabs((double)s - ref) <= 1e-4 * fabs(ref) + 1e-5, "vec_dot %g vs %g", (double)s, ref);
    /* and one hand-sized case: weights all +1 level, activations all 1 -> known value */
    {
        float ones[LC_QK_K];
        for (int i = 0; i < LC_QK_K; i++)
            ones[i] = 1.0f;
        lc_block_q6_K b;
        lc_block_q8_K a;
        lc_quantize_row_q6_K_ref(ones, &b, LC_QK_K);
        lc_quantize_row_q8_K_ref(ones, &a, LC_QK_K);
        /* max is +1, so iscale = -127: the sign lives in d, q = -127 */
        CHECK(a.d == 1 / -127.f && a.qs[0] == -127 && a.bsums[0] == -127 * 16, "a.d %g q %d",
              (double)a.d, a.qs[0]);
        float dot = 0;
        lc_vec_dot_q6_K_q8_K_ref(LC_QK_K, &dot, &b, &a);
        CHECK(fabsf(dot - 256.0f) < 0.5f, "ones dot %g", (double)dot);
    }
    /*
     * The K / IQ4 reference quantizers (byte-compared with llama.cpp's files in
     * test-quantize.sh): round trip through the dequantizer within each type's error (uniform
     * data in [-1, 1): about step / sqrt(12) of the 2-, 3-, 4-, 5-bit grids), and a zero block
     * back to zeros.  A layout error gives a relative RMSE near 1.
     */
    {
        static const struct { int type; double max_rel; } rt[] = {
            {LC_TYPE_Q2_K, 0.40}, {LC_TYPE_Q3_K, 0.20}, {LC_TYPE_Q4_K, 0.09},
            {LC_TYPE_Q5_K, 0.045}, {LC_TYPE_IQ4_NL, 0.10}, {LC_TYPE_IQ4_XS, 0.10},
        };
        static uint8_t qbuf[N * 2];
        for (size_t k = 0; k < sizeof rt / sizeof rt[0]; k++) {
            const struct lc_type_traits *tt = lc_type_traits(rt[k].type);
            CHECK(tt->from_float_ref != NULL, "%s has a quantizer", tt->name);
            if (!tt->from_float_ref)
                continue;
            for (int i = 0; i < N; i++)
                x[i] = frand();
            for (int i = 0; i < LC_QK_K; i++)
                x[i] = 0.0f; /* block 0 all zero */
            tt->from_float_ref(x, qbuf, N);
            tt->to_float(qbuf, y, N);
            double e2 = 0, xx = 0;
            int zero_ok = 1;
            for (int i = 0; i < N; i++) {
                e2 += (double)(y[i] - x[i]) * (double)(y[i] - x[i]);
                xx += (double)x[i] * (double)x[i];
                if (i < LC_QK_K && y[i] != 0.0f)
                    zero_ok = 0;
            }
            const double rel = sqrt(e2 / xx);
            fprintf(stderr, "  %s round trip: relative rmse %.4f\n", tt->name, rel);
            CHECK(rel < rt[k].max_rel, "%s relative rmse %g >= %g", tt->name, rel, rt[k].max_rel);
            CHECK(zero_ok, "%s: a zero block does not come back as zeros", tt->name);
        }
    }
    return tu_finish("test-quant-k");
}
