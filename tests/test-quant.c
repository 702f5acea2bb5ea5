/* test-quant.c - fp16 conversion and the reference block quantizers against known bytes. */
#include <math.h>
#include <string.h>

#include "llm/quant.h"
#include "testutil.h"

int main(void)
{
    lc_quant_init();
    /* fp16 known values */
    CHECK(lc_fp32_to_fp16(1.0f) == 0x3c00, "1.0 -> %04x", lc_fp32_to_fp16(1.0f));
    CHECK(lc_fp32_to_fp16(-2.0f) == 0xc000, "-2.0");
    CHECK(lc_fp32_to_fp16(65504.0f) == 0x7bff, "max half");
    CHECK(lc_fp32_to_fp16(1e6f) == 0x7c00, "overflow to inf");
    CHECK(lc_fp32_to_fp16(5.960464477539063e-08f) == 0x0001, "smallest subnormal");
    CHECK(lc_fp32_to_fp16(1.0009765625f + 0.00048828125f) == 0x3c02, "tie rounds to even");
    CHECK(lc_fp16_to_fp32(0x3555) == 0x1.554p-2f, "0x3555");
    for (uint32_t h = 0; h < 0x10000; h++) {
        if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff))
            continue; /* NaN payloads */
        CHECK(lc_fp32_to_fp16(lc_fp16_to_fp32((lc_fp16)h)) == h, "round trip %04x", h);
    }
    /* Q4_1: x = 0..31 -> min 0, max 31, d = 31/15 */
    float x[32];
    for (int i = 0; i < 32; i++)
        x[i] = (float)i;
    lc_block_q4_1 b;
    lc_quantize_row_q4_1_ref(x, &b, 32);
    CHECK(b.m == 0, "m = %04x", b.m);
    CHECK(b.d == lc_fp32_to_fp16(31.0f / 15), "d");
    /* weight 0 -> q 0, weight 16 -> round(16 * 15/31) = 8: byte 0 = 0x80 */
    CHECK(b.qs[0] == 0x80, "qs[0] = %02x", b.qs[0]);
    CHECK(b.qs[15] == ((15u << 4) | 7u), "qs[15] = %02x", b.qs[15]); /* 15*15/31=7.26, 31 -> 15 */
    float y[32];
    lc_dequantize_row_q4_1(&b, y, 32);
    for (int i = 0; i < 32; i++)
        CHECK(fabsf(y[i] - x[i]) <= 31.0f / 30 + 1e-3f, "dequant %d: %g", i, (double)y[i]);
    CHECK(lc_row_size(LC_TYPE_Q4_1, 64) == 40, "row size");
    CHECK(lc_row_size(LC_TYPE_Q4_1, 33) == 0, "row size not multiple");
    CHECK(lc_type_from_name("Q4_1") == LC_TYPE_Q4_1, "name");
    /* issue 13: every id ggml has (or had) is named, with ggml's block bytes where it has a layout */
    for (int t = 0; t < LC_TYPE_COUNT; t++)
        CHECK(strcmp(lc_type_name(t), "unknown") != 0, "type id %d has no name", t);
    CHECK(strcmp(lc_type_name(LC_TYPE_COUNT), "unknown") == 0, "id past the last");
    CHECK(strcmp(lc_type_name(16), "iq2_xxs") == 0 && strcmp(lc_type_name(20), "iq4_nl") == 0 &&
              strcmp(lc_type_name(31), "q4_0_4_4") == 0 && strcmp(lc_type_name(39), "mxfp4") == 0 &&
              strcmp(lc_type_name(40), "nvfp4") == 0 && strcmp(lc_type_name(41), "q1_0") == 0 &&
              strcmp(lc_type_name(42), "q2_0") == 0 && strcmp(lc_type_name(43), "unknown") == 0,
          "names of 16, 20, 31, 39, 40, 41, 42, 43");
    CHECK(LC_TYPE_COUNT == 43, "LC_TYPE_COUNT %d: ggml 0.27.0 has 43 ids", LC_TYPE_COUNT);
    static const struct { int t, blck; size_t bytes; } sizes[] = {
        {LC_TYPE_Q5_0, 32, 22},     {LC_TYPE_Q5_1, 32, 24},     {LC_TYPE_IQ4_NL, 32, 18},
        {LC_TYPE_Q2_K, 256, 84},    {LC_TYPE_Q3_K, 256, 110},   {LC_TYPE_Q4_K, 256, 144},
        {LC_TYPE_Q5_K, 256, 176},   {LC_TYPE_IQ4_XS, 256, 136}, {LC_TYPE_IQ2_XXS, 256, 66},
        {LC_TYPE_IQ2_XS, 256, 74},  {LC_TYPE_IQ3_XXS, 256, 98}, {LC_TYPE_IQ1_S, 256, 50},
        {LC_TYPE_IQ3_S, 256, 110},  {LC_TYPE_IQ2_S, 256, 82},   {LC_TYPE_IQ1_M, 256, 56},
        {LC_TYPE_TQ1_0, 256, 54},   {LC_TYPE_TQ2_0, 256, 66},   {LC_TYPE_MXFP4, 32, 17},
        {LC_TYPE_NVFP4, 64, 36},    {LC_TYPE_Q1_0, 128, 18},    {LC_TYPE_Q2_0, 64, 18},
    };
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        const struct lc_type_traits *tt = lc_type_traits(sizes[i].t);
        CHECK(tt && tt->blck_size == sizes[i].blck && tt->type_size == sizes[i].bytes,
              "%s: block %d bytes %zu", lc_type_name(sizes[i].t), tt ? tt->blck_size : 0,
              tt ? tt->type_size : 0);
    }
    CHECK(lc_type_computable(LC_TYPE_Q4_K) && lc_type_computable(LC_TYPE_IQ4_NL) &&
              !lc_type_computable(LC_TYPE_IQ2_XXS) && !lc_type_computable(31),
          "computable types");
    /* Q5_0 round trip: x = -16..15 -> d = max / -16 = 1, q = x + 16 exactly */
    {
        float x5[32], y5[32];
        for (int i = 0; i < 32; i++)
            x5[i] = (float)(i - 16) * -1.0f;
        lc_block_q5_0 b5;
        lc_quantize_row_q5_0_ref(x5, &b5, 32);
        lc_dequantize_row_q5_0(&b5, y5, 32);
        for (int i = 0; i < 32; i++)
            CHECK(y5[i] == x5[i], "q5_0 %d: %g vs %g", i, (double)y5[i], (double)x5[i]);
        lc_block_q5_1 b51;
        lc_quantize_row_q5_1_ref(x5, &b51, 32);
        lc_dequantize_row_q5_1(&b51, y5, 32);
        for (int i = 0; i < 32; i++)
            CHECK(fabsf(y5[i] - x5[i]) <= 0.02f, "q5_1 %d: %g vs %g", i, (double)y5[i], (double)x5[i]);
    }
    return tu_finish("test-quant");
}
