/*
 * repack.c - the x16 layout (see repack.h): repacking and its readable inverse.
 */
#include "repack.h"

#include <string.h>

bool lc_x16_type(enum lc_type type)
{
    return type == LC_TYPE_Q4_0 || type == LC_TYPE_Q4_1;
}

void lc_x16_repack(enum lc_type type, void *dst, const void *src, int64_t n, int64_t nrows)
{
    const int nb = (int)(n / 32);
    const size_t row_bytes = lc_row_size(type, n);
    const size_t blk = type == LC_TYPE_Q4_1 ? sizeof(lc_block_q4_1) : sizeof(lc_block_q4_0);
    const size_t qoff = type == LC_TYPE_Q4_1 ? offsetof(lc_block_q4_1, qs)
                                             : offsetof(lc_block_q4_0, qs);
    for (int64_t g = 0; g < nrows / LC_X16_ROWS; g++) {
        uint8_t *G = (uint8_t *)dst + (size_t)g * LC_X16_ROWS * row_bytes;
        const uint8_t *S = (const uint8_t *)src + (size_t)g * LC_X16_ROWS * row_bytes;
        for (int r = 0; r < LC_X16_ROWS; r++) {
            const uint8_t *row = S + (size_t)r * row_bytes;
            for (int i = 0; i < nb; i++) {
                const uint8_t *b = row + (size_t)i * blk;
                uint8_t *q = G + lc_x16_qs_off(type, nb, i) + 4 * r;
                uint8_t *sc = G + lc_x16_sc_off(type, nb, i) + 2 * r;
                for (int k = 0; k < 4; k++)
                    memcpy(q + 64 * k, b + qoff + 4 * k, 4);
                memcpy(sc, b, 2); /* d */
                if (type == LC_TYPE_Q4_1)
                    memcpy(sc + 32, b + 2, 2); /* m */
            }
        }
    }
}

void lc_x16_get_block(enum lc_type type, const void *group, int nb, int r, int i, void *blk)
{
    const uint8_t *G = group;
    uint8_t *b = blk;
    const size_t qoff = type == LC_TYPE_Q4_1 ? offsetof(lc_block_q4_1, qs)
                                             : offsetof(lc_block_q4_0, qs);
    const uint8_t *q = G + lc_x16_qs_off(type, nb, i) + 4 * r;
    const uint8_t *sc = G + lc_x16_sc_off(type, nb, i) + 2 * r;
    for (int k = 0; k < 4; k++)
        memcpy(b + qoff + 4 * k, q + 64 * k, 4);
    memcpy(b, sc, 2);
    if (type == LC_TYPE_Q4_1)
        memcpy(b + 2, sc + 32, 2);
}
