/*
 * repack.c - the x16 layout (see repack.h): repacking and its readable inverse.
 */
#include "repack.h"

#include <stddef.h>
#include <string.h>

bool lc_x16_type(enum lc_type type)
{
    return type == LC_TYPE_Q4_0 || type == LC_TYPE_Q4_1 || type == LC_TYPE_Q6_K ||
           type == LC_TYPE_Q4_K || type == LC_TYPE_Q5_K || type == LC_TYPE_Q5_1 ||
           type == LC_TYPE_Q8_0;
}

/* A field of a Q4_K / Q5_K / Q5_1 / Q8_0 block: its bytes in ggml's block, its x16 part, its unit. */
struct part {
    size_t off, len;
    enum lc_x16_part p;
    size_t unit;
};

/* the parts of type's block (repack.h), n of them in *n */
static const struct part *parts_of(enum lc_type type, int *n)
{
    static const struct part q4k[] = {
        {offsetof(lc_block_q4_K, d), 2, LC_X16_P_D, 2},
        {offsetof(lc_block_q4_K, dmin), 2, LC_X16_P_DMIN, 2},
        {offsetof(lc_block_q4_K, scales), LC_K_SCALE_SIZE, LC_X16_P_SC, 4},
        {offsetof(lc_block_q4_K, qs), LC_QK_K / 2, LC_X16_P_QS, 4},
    };
    static const struct part q5k[] = {
        {offsetof(lc_block_q5_K, d), 2, LC_X16_P_D, 2},
        {offsetof(lc_block_q5_K, dmin), 2, LC_X16_P_DMIN, 2},
        {offsetof(lc_block_q5_K, scales), LC_K_SCALE_SIZE, LC_X16_P_SC, 4},
        {offsetof(lc_block_q5_K, qh), LC_QK_K / 8, LC_X16_P_QH, 4},
        {offsetof(lc_block_q5_K, qs), LC_QK_K / 2, LC_X16_P_QS, 4},
    };
    static const struct part q51[] = {
        {offsetof(lc_block_q5_1, d), 2, LC_X16_P_D, 2},
        {offsetof(lc_block_q5_1, m), 2, LC_X16_P_DMIN, 2},
        {offsetof(lc_block_q5_1, qh), 4, LC_X16_P_QH, 4},
        {offsetof(lc_block_q5_1, qs), LC_QK5_1 / 2, LC_X16_P_QS, 4},
    };
    static const struct part q80[] = {
        {offsetof(lc_block_q8_0, d), 2, LC_X16_P_D, 2},
        {offsetof(lc_block_q8_0, qs), LC_QK8_0, LC_X16_P_QS, 4},
    };
    *n = type == LC_TYPE_Q5_K ? 5 : type == LC_TYPE_Q8_0 ? 2 : 4;
    return type == LC_TYPE_Q4_K ? q4k : type == LC_TYPE_Q5_K ? q5k : type == LC_TYPE_Q5_1 ? q51 : q80;
}

/* Q4_K / Q5_K / Q5_1 / Q8_0: copy block i (ggml, at b) of row r to (to_x16) or from the group G */
static void parts_move(enum lc_type type, uint8_t *G, int i, int r, uint8_t *b, bool to_x16)
{
    int np;
    const struct part *pt = parts_of(type, &np);
    for (int k = 0; k < np; k++) {
        uint8_t *x = G + lc_x16_part_off(type, i, pt[k].p) + pt[k].unit * (size_t)r;
        const bool kq = type == LC_TYPE_Q4_K || type == LC_TYPE_Q5_K;
        for (size_t t = 0; t < pt[k].len / pt[k].unit; t++) {
            uint8_t *xu = x + LC_X16_ROWS * pt[k].unit * t, *bu = b + pt[k].off + pt[k].unit * t;
            if (kq && pt[k].p == LC_X16_P_QS) /* lane-major order (repack.h) */
                xu = G + lc_x16_k_qs_off(type, i, (int)t / 8, (int)t % 8) + 4 * (size_t)r;
            else if (kq && pt[k].p == LC_X16_P_QH)
                xu = G + lc_x16_k_qh_off(i, (int)t) + 4 * (size_t)r;
            if (to_x16)
                memcpy(xu, bu, pt[k].unit);
            else
                memcpy(bu, xu, pt[k].unit);
        }
    }
}

/* Q6_K: copy block b (ggml) of row r to (to_x16) or from the group G */
static void q6_K_move(uint8_t *G, int nb, int i, int r, lc_block_q6_K *b, bool to_x16)
{
    uint8_t *ql = G + lc_x16_q6_K_off(nb, i, LC_X16_QL) + 4 * r;
    uint8_t *qh = G + lc_x16_q6_K_off(nb, i, LC_X16_QH) + 4 * r;
    uint8_t *sc = G + lc_x16_q6_K_off(nb, i, LC_X16_SC) + r;
    uint8_t *d = G + lc_x16_q6_K_off(nb, i, LC_X16_D) + 2 * r;
#define MOVE(x16, ggml, n) (to_x16 ? memcpy(x16, ggml, n) : memcpy(ggml, x16, n))
    for (int h = 0; h < 2; h++)
        for (int k = 0; k < 8; k++) {
            for (int vv = 0; vv < 2; vv++)
                MOVE(ql + 64 * (16 * h + 8 * vv + k), b->ql + 64 * h + 32 * vv + 4 * k, 4);
            MOVE(qh + 64 * (8 * h + k), b->qh + 32 * h + 4 * k, 4);
        }
    for (int j = 0; j < 16; j++)
        MOVE(sc + 16 * j, &b->scales[j], 1);
    MOVE(d, &b->d, 2);
#undef MOVE
}

void lc_x16_repack(enum lc_type type, void *dst, const void *src, int64_t n, int64_t nrows)
{
    const int nb = (int)(n / 32);
    const size_t row_bytes = lc_row_size(type, n);
    if (type == LC_TYPE_Q6_K) {
        const int nbk = (int)(n / LC_QK_K);
        for (int64_t g = 0; g < nrows / LC_X16_ROWS; g++)
            for (int r = 0; r < LC_X16_ROWS; r++)
                for (int i = 0; i < nbk; i++) {
                    lc_block_q6_K b;
                    memcpy(&b, (const uint8_t *)src + (size_t)(g * LC_X16_ROWS + r) * row_bytes +
                                   (size_t)i * sizeof b, sizeof b);
                    q6_K_move((uint8_t *)dst + (size_t)g * LC_X16_ROWS * row_bytes, nbk, i, r, &b,
                              true);
                }
        return;
    }
    if (type == LC_TYPE_Q8_0) {
        /* parts_move's moves with constant sizes (the prompt path of Q5_0 / IQ4_NL repacks
         * as it goes: context.c matmul_recoded) */
        for (int64_t g = 0; g < nrows / LC_X16_ROWS; g++) {
            uint8_t *G = (uint8_t *)dst + (size_t)g * LC_X16_ROWS * row_bytes;
            for (int r = 0; r < LC_X16_ROWS; r++) {
                const lc_block_q8_0 *b = (const lc_block_q8_0 *)(const void *)
                    ((const uint8_t *)src + (size_t)(g * LC_X16_ROWS + r) * row_bytes);
                for (int i = 0; i < nb; i++) {
                    uint8_t *q = G + lc_x16_part_off(type, i, LC_X16_P_QS) + 4 * (size_t)r;
                    memcpy(G + lc_x16_part_off(type, i, LC_X16_P_D) + 2 * (size_t)r, &b[i].d, 2);
                    for (int t = 0; t < 8; t++)
                        memcpy(q + 64 * t, b[i].qs + 4 * t, 4);
                }
            }
        }
        return;
    }
    if (type == LC_TYPE_Q4_K || type == LC_TYPE_Q5_K || type == LC_TYPE_Q5_1) {
        const int nbk = (int)(n / lc_type_traits(type)->blck_size);
        const size_t bsz = lc_type_traits(type)->type_size;
        for (int64_t g = 0; g < nrows / LC_X16_ROWS; g++)
            for (int r = 0; r < LC_X16_ROWS; r++)
                for (int i = 0; i < nbk; i++) {
                    const uint8_t *b = (const uint8_t *)src +
                                       (size_t)(g * LC_X16_ROWS + r) * row_bytes + (size_t)i * bsz;
                    parts_move(type, (uint8_t *)dst + (size_t)g * LC_X16_ROWS * row_bytes, i, r,
                               (uint8_t *)(uintptr_t)b, true);
                }
        return;
    }
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
    if (type == LC_TYPE_Q6_K) {
        q6_K_move((uint8_t *)(uintptr_t)group, nb, i, r, blk, false);
        return;
    }
    if (type == LC_TYPE_Q4_K || type == LC_TYPE_Q5_K || type == LC_TYPE_Q5_1 ||
        type == LC_TYPE_Q8_0) {
        parts_move(type, (uint8_t *)(uintptr_t)group, i, r, blk, false);
        return;
    }
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
