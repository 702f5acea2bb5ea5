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
    return tu_finish("test-quant");
}
