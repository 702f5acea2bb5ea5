/*
 * repack.h - the row-interleaved "x16" layout of Q4_1, Q4_0, Q6_K, Q4_K, Q5_K, Q5_1 and Q8_0
 * weight matrices.
 *
 * A kernel-friendly copy made at load (model.c) when the kernel table in use has its own x16
 * kernels (kernels.h: x16_native): decoding then reads the weights as one sequential stream,
 * and the decode GEMV computes 16 rows per vector instruction with no horizontal operation
 * (AVX-512: one 32-bit lane per row).  Same bytes, same size, same results bit for bit: only
 * the order of the bytes changes.  llama.cpp does the same for Q4_0 (its Q4_0x8 repack,
 * ggml-cpu-aarch64.cpp); this layout is ours and never leaves memory (files keep ggml's).
 *
 * A matrix of nrows rows (nrows % 16 == 0) of nb blocks is nrows / 16 groups of 16 rows; a
 * group takes exactly the bytes of its 16 rows (16 * row_bytes), block after block, so that
 * decoding reads one sequential stream.  Block i of a group has
 *
 *   scales: Q4_1: d of rows 0..15, then m of rows 0..15 (fp16; 64 bytes);  Q4_0: d (32 bytes)
 *   qs[4][16][4]: chunk k, row r: bytes qs[4k .. 4k+3] of row r's block i (256 bytes; their
 *                 low nibbles are weights 4k..4k+3, the high ones 16+4k..16+4k+3: ggml's
 *                 integer lanes k and 4+k)
 *
 * at the offsets lc_x16_sc_off / lc_x16_qs_off: Q4_1 blocks are [scales | qs], 320 bytes, five
 * cache lines; Q4_0 blocks go in pairs [d(2i) d(2i+1) | qs(2i) | qs(2i+1)], 576 bytes, nine
 * lines (an odd last block is [d | qs], 288 bytes).  Every 64-byte chunk of qs is then one
 * cache line when the group starts on one (always with an even nb).
 *
 * Q6_K (super-blocks of 256, the output matrix of most quantized models): super-block i has
 *
 *   ql[2][2][8][16][4]: half h, nibble byte vv, k, row r: ql[64h + 32vv + 4k .. +3] of row r
 *                       (low nibbles: quarter v = vv, high: v = vv + 2; 2048 bytes)
 *   qh[2][8][16][4]:    half h, k, row r: qh[32h + 4k .. +3] (bits 2v, 2v+1: quarter v; 1024)
 *   scales[16][16]:     scale j of rows 0..15 (int8; 256 bytes)
 *   d[16]:              fp16 (32 bytes)
 *
 * (ggml's integer lane k of every quarter of rows 0..15 from one 64-byte chunk of ql and one of
 * qh), in pairs of super-blocks [ql ql | qh qh | scales scales | d d], 6720 bytes, an odd last
 * one [ql | qh | scales | d] (3360 bytes): every chunk on a cache line of its own when nb is
 * even (an odd nb shifts every other group by half a line: slower, same results).
 */
#ifndef LC_REPACK_H
#define LC_REPACK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "quant.h"

#define LC_X16_ROWS 16

/* Byte offsets, in a group of nb blocks per row, of block i's scales and of its qs. */
static inline size_t lc_x16_sc_off(enum lc_type type, int nb, int i)
{
    if (type == LC_TYPE_Q4_1)
        return (size_t)i * 320;
    return (size_t)(i / 2) * 576 + (i == nb - 1 && nb % 2 ? 0 : (size_t)(i % 2) * 32);
}

static inline size_t lc_x16_qs_off(enum lc_type type, int nb, int i)
{
    if (type == LC_TYPE_Q4_1)
        return (size_t)i * 320 + 64;
    return (size_t)(i / 2) * 576 + (i == nb - 1 && nb % 2 ? 32 : 64 + (size_t)(i % 2) * 256);
}

/* Q6_K: offsets of super-block i's ql, qh, scales and d in a group of nb super-blocks. */
enum lc_x16_q6_part { LC_X16_QL, LC_X16_QH, LC_X16_SC, LC_X16_D };

static inline size_t lc_x16_q6_K_off(int nb, int i, enum lc_x16_q6_part part)
{
    static const size_t lone[] = {0, 2048, 3072, 3328}, pair[] = {0, 4096, 6144, 6656};
    static const size_t size[] = {2048, 1024, 256, 32};
    const size_t base = (size_t)(i / 2) * 6720;
    if (i == nb - 1 && nb % 2)
        return base + lone[part];
    return base + pair[part] + (size_t)(i % 2) * size[part];
}

/*
 * Q4_K, Q5_K, Q5_1 and Q8_0: one block after another (16 * type_size bytes each: Q4_K 2304,
 * Q5_K 2816, Q5_1 384, all whole cache lines; Q8_0 544), each made of parts; a part is a field of the ggml
 * block cut into units (fp16 d / dmin / m: one unit of 2 bytes; scales, qh, qs: 4-byte units),
 * unit t of row r at part offset 16 * size * t + size * r, so that a 64-byte chunk holds the
 * same 4 bytes of the 16 rows (a 32-byte one the same fp16 of the 16 rows):
 *
 *   Q4_K: d[16] | dmin[16] | scales[3][16][4] | qs[8][4][16][4]          (offsets 0 32 64 256)
 *   Q5_K: d[16] | dmin[16] | scales[3][16][4] | 8 x (qh[16][4] | qs[4][16][4])   (0 32 64 256)
 *   Q5_1: d[16] | m[16] | qh[16][4] | qs[4][16][4]                        (0 32 64 128)
 *   Q8_0: d[16] | qs[8][16][4]                                            (0 32; 544 bytes:
 *         every other block starts half-way through a cache line)
 *
 * Unit t of a K-quant's qs is bytes 4t .. 4t+3 of every row's qs: with t = 8j + k, the low
 * nibbles are weights 64j + 4k .. +3 (sub-block 2j) and the high ones 64j + 32 + 4k .. +3
 * (sub-block 2j + 1): ggml's integer lane k.  Q5_K's qh unit k holds the fifth bits of both.
 * These units are stored lane by lane (k major: qs[k][j]; Q5_K: qh unit k, then qs[k][0..3]),
 * the order in which the kernels, one integer lane at a time, read them: one ascending stream
 * (lc_x16_k_qs_off, lc_x16_k_qh_off).
 */
enum lc_x16_part { LC_X16_P_D, LC_X16_P_DMIN, LC_X16_P_SC, LC_X16_P_QH, LC_X16_P_QS };

/* offset, in block i of a group, of part p of Q4_K / Q5_K / Q5_1 / Q8_0 (Q5_1: DMIN is m) */
static inline size_t lc_x16_part_off(enum lc_type type, int i, enum lc_x16_part p)
{
    static const size_t q4k[] = {0, 32, 64, 256, 256}, q5k[] = {0, 32, 64, 256, 256},
                        q51[] = {0, 32, 64, 64, 128}, q80[] = {0, 32, 32, 32, 32};
    const size_t *o = type == LC_TYPE_Q4_K   ? q4k
                      : type == LC_TYPE_Q5_K ? q5k
                      : type == LC_TYPE_Q5_1 ? q51
                                             : q80;
    const size_t blk = type == LC_TYPE_Q4_K   ? 2304
                       : type == LC_TYPE_Q5_K ? 2816
                       : type == LC_TYPE_Q5_1 ? 384
                                              : 544;
    return (size_t)i * blk + o[p];
}

/* Q4_K / Q5_K: offset in block i of a group of the qs unit t = 8j + k (16 rows x 4 bytes) */
static inline size_t lc_x16_k_qs_off(enum lc_type type, int i, int j, int k)
{
    return lc_x16_part_off(type, i, LC_X16_P_QS) +
           64 * (size_t)(type == LC_TYPE_Q4_K ? 4 * k + j : 5 * k + 1 + j);
}

/* Q5_K: offset in block i of a group of the qh unit k */
static inline size_t lc_x16_k_qh_off(int i, int k)
{
    return lc_x16_part_off(LC_TYPE_Q5_K, i, LC_X16_P_QH) + 64 * (size_t)(5 * k);
}

/* true for the types with an x16 layout (Q4_0, Q4_1, Q6_K, Q4_K, Q5_K, Q5_1, Q8_0) */
bool lc_x16_type(enum lc_type type);

/*
 * Repack nrows rows (nrows % 16 == 0) of n weights (n a multiple of the block size) of type
 * (one of lc_x16_type's) from
 * ggml's layout at src (rows row_bytes apart, row_bytes = lc_row_size(type, n)) into dst
 * (nrows * row_bytes bytes, not overlapping src).  Never fails.
 */
void lc_x16_repack(enum lc_type type, void *dst, const void *src, int64_t n, int64_t nrows);

/*
 * Block i of row r (0 <= r < 16) of the x16 group at group (nb blocks per row), rebuilt in
 * ggml's layout into *blk (an lc_block_q4_0, _q4_1, _q6_K, _q4_K, _q5_K, _q5_1 or _q8_0 by type).  The readable
 * definition of the layout, used by the scalar kernels and the tests.
 */
void lc_x16_get_block(enum lc_type type, const void *group, int nb, int r, int i, void *blk);

#endif
