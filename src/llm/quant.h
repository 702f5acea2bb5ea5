/*
 * quant.h - tensor element types and quantized block formats.
 *
 * The type ids and every block layout are ggml's (ggml/include/ggml.h, ggml-common.h) so that
 * GGUF files are read and written bit-compatibly with llama.cpp.  A block of a quantized type
 * holds LC_QK* consecutive weights of one row; a row of n elements is n / block_size blocks.
 *
 *   Q4_0  { fp16 d;           uint8 qs[16]; }  x = d * (q - 8),  q in 0..15
 *   Q4_1  { fp16 d; fp16 m;   uint8 qs[16]; }  x = d * q + m,    q in 0..15
 *   Q8_0  { fp16 d;           int8  qs[32]; }  x = d * q
 *   Q8_1  { fp16 d; fp16 s;   int8  qs[32]; }  x = d * q,  s = d * sum(q)   (activations)
 *   Q6_K  { uint8 ql[128]; uint8 qh[64]; int8 scales[16]; fp16 d; }  256 weights
 *   Q8_K  { float d; int8 qs[256]; int16 bsums[16]; }                      (activations)
 *   Q5_0  { fp16 d; uint8 qh[4]; uint8 qs[16]; }       x = d * (q - 16), q in 0..31
 *   Q5_1  { fp16 d; fp16 m; uint8 qh[4]; uint8 qs[16]; } x = d * q + m,   q in 0..31
 *   IQ4_NL { fp16 d; uint8 qs[16]; }                     x = d * kvalues_iq4nl[q], q in 0..15
 *   Q2_K  { uint8 scales[16]; uint8 qs[64]; fp16 d; fp16 dmin; }           256 weights
 *   Q3_K  { uint8 hmask[32]; uint8 qs[64]; uint8 scales[12]; fp16 d; }     256 weights
 *   Q4_K  { fp16 d; fp16 dmin; uint8 scales[12]; uint8 qs[128]; }          256 weights
 *   Q5_K  { fp16 d; fp16 dmin; uint8 scales[12]; uint8 qh[32]; uint8 qs[128]; }
 *   IQ4_XS { fp16 d; uint16 scales_h; uint8 scales_l[4]; uint8 qs[128]; }  256 weights
 *
 * In Q5_0/Q5_1/IQ4_NL, too, the low nibble of qs[j] is weight j and the high nibble weight
 * j + 16; bit j of the little-endian 32-bit qh is the fifth bit of weight j.  The K-quant
 * layouts are explained next to their dequantizers in quant_k.c.
 *
 * In Q4_0/Q4_1 the low nibble of qs[j] is weight j and the high nibble is weight j + 16.
 */
#ifndef LC_QUANT_H
#define LC_QUANT_H

#include <assert.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ggml type ids, as stored in GGUF tensor infos. */
enum lc_type {
    LC_TYPE_F32 = 0,
    LC_TYPE_F16 = 1,
    LC_TYPE_Q4_0 = 2,
    LC_TYPE_Q4_1 = 3,
    LC_TYPE_Q5_0 = 6,
    LC_TYPE_Q5_1 = 7,
    LC_TYPE_Q8_0 = 8,
    LC_TYPE_Q8_1 = 9,
    LC_TYPE_Q2_K = 10,
    LC_TYPE_Q3_K = 11,
    LC_TYPE_Q4_K = 12,
    LC_TYPE_Q5_K = 13,
    LC_TYPE_Q6_K = 14,
    LC_TYPE_Q8_K = 15,
    LC_TYPE_IQ2_XXS = 16,
    LC_TYPE_IQ2_XS = 17,
    LC_TYPE_IQ3_XXS = 18,
    LC_TYPE_IQ1_S = 19,
    LC_TYPE_IQ4_NL = 20,
    LC_TYPE_IQ3_S = 21,
    LC_TYPE_IQ2_S = 22,
    LC_TYPE_IQ4_XS = 23,
    LC_TYPE_I8 = 24,
    LC_TYPE_I16 = 25,
    LC_TYPE_I32 = 26,
    LC_TYPE_I64 = 27,
    LC_TYPE_F64 = 28,
    LC_TYPE_IQ1_M = 29,
    LC_TYPE_BF16 = 30,
    /* 31-33 (Q4_0_4_4, Q4_0_4_8, Q4_0_8_8) and 36-38 (IQ4_NL_4_4 ...) were removed from ggml */
    LC_TYPE_TQ1_0 = 34,
    LC_TYPE_TQ2_0 = 35,
    LC_TYPE_MXFP4 = 39,
    LC_TYPE_NVFP4 = 40,
    LC_TYPE_Q1_0 = 41,
    LC_TYPE_Q2_0 = 42,
    LC_TYPE_COUNT = 43 /* one past ggml's last id (ggml 0.27.0, llama.cpp 0.7.0); ids without
                          traits are unsupported */
};

typedef uint16_t lc_fp16;   /* IEEE half, raw bits */
typedef uint16_t lc_bf16;   /* bfloat16, raw bits  */

#define LC_QK4_0 32
#define LC_QK4_1 32
#define LC_QK8_0 32
#define LC_QK8_1 32
#define LC_QK5_0 32
#define LC_QK5_1 32
#define LC_QK4_NL 32
#define LC_QK_K 256
/* K-quants: 12 bytes of packed 6-bit scales and mins (Q4_K, Q5_K) or 6-bit scales (Q3_K) */
#define LC_K_SCALE_SIZE 12

typedef struct { lc_fp16 d; uint8_t qs[LC_QK4_0 / 2]; } lc_block_q4_0;
typedef struct { lc_fp16 d; lc_fp16 m; uint8_t qs[LC_QK4_1 / 2]; } lc_block_q4_1;
typedef struct { lc_fp16 d; int8_t qs[LC_QK8_0]; } lc_block_q8_0;
typedef struct { lc_fp16 d; lc_fp16 s; int8_t qs[LC_QK8_1]; } lc_block_q8_1;
typedef struct {
    uint8_t ql[LC_QK_K / 2];     /* low 4 bits of the 6-bit quants */
    uint8_t qh[LC_QK_K / 4];     /* high 2 bits */
    int8_t scales[LC_QK_K / 16]; /* 8-bit scale per 16 weights */
    lc_fp16 d;                   /* super-block scale */
} lc_block_q6_K;
typedef struct {
    float d;
    int8_t qs[LC_QK_K];
    int16_t bsums[LC_QK_K / 16]; /* sum of qs per 16 */
} lc_block_q8_K;

typedef struct { lc_fp16 d; uint8_t qh[4]; uint8_t qs[LC_QK5_0 / 2]; } lc_block_q5_0;
typedef struct { lc_fp16 d; lc_fp16 m; uint8_t qh[4]; uint8_t qs[LC_QK5_1 / 2]; } lc_block_q5_1;
typedef struct { lc_fp16 d; uint8_t qs[LC_QK4_NL / 2]; } lc_block_iq4_nl;
typedef struct {
    uint8_t scales[LC_QK_K / 16]; /* low nibble: scale, high nibble: min, per 16 weights */
    uint8_t qs[LC_QK_K / 4];      /* 2-bit quants */
    lc_fp16 d;                    /* super-block scale of the scales */
    lc_fp16 dmin;                 /* super-block scale of the mins */
} lc_block_q2_K;
typedef struct {
    uint8_t hmask[LC_QK_K / 8];          /* high bit of the 3-bit quants */
    uint8_t qs[LC_QK_K / 4];             /* low 2 bits */
    uint8_t scales[LC_K_SCALE_SIZE];     /* 16 6-bit scales */
    lc_fp16 d;
} lc_block_q3_K;
typedef struct {
    lc_fp16 d;                       /* super-block scale of the scales */
    lc_fp16 dmin;                    /* super-block scale of the mins */
    uint8_t scales[LC_K_SCALE_SIZE]; /* 8 6-bit scales and 8 6-bit mins, per 32 weights */
    uint8_t qs[LC_QK_K / 2];         /* 4-bit quants */
} lc_block_q4_K;
typedef struct {
    lc_fp16 d;
    lc_fp16 dmin;
    uint8_t scales[LC_K_SCALE_SIZE];
    uint8_t qh[LC_QK_K / 8];         /* fifth bits */
    uint8_t qs[LC_QK_K / 2];         /* low 4 bits */
} lc_block_q5_K;
typedef struct {
    lc_fp16 d;
    uint16_t scales_h;               /* high 2 bits of the 8 6-bit scales */
    uint8_t scales_l[LC_QK_K / 64];  /* low 4 bits */
    uint8_t qs[LC_QK_K / 2];         /* 4-bit indices into kvalues_iq4nl */
} lc_block_iq4_xs;

/* The 16 IQ4_NL / IQ4_XS levels (ggml's kvalues_iq4nl). */
extern const int8_t lc_kvalues_iq4nl[16];

static_assert(sizeof(lc_block_q4_0) == 18, "Q4_0 block must be 18 bytes (ggml)");
static_assert(sizeof(lc_block_q4_1) == 20, "Q4_1 block must be 20 bytes (ggml)");
static_assert(sizeof(lc_block_q8_0) == 34, "Q8_0 block must be 34 bytes (ggml)");
static_assert(sizeof(lc_block_q8_1) == 36, "Q8_1 block must be 36 bytes (ggml)");
static_assert(sizeof(lc_block_q6_K) == 210, "Q6_K block must be 210 bytes (ggml)");
static_assert(sizeof(lc_block_q8_K) == 292, "Q8_K block must be 292 bytes (ggml)");
static_assert(sizeof(lc_block_q5_0) == 22, "Q5_0 block must be 22 bytes (ggml)");
static_assert(sizeof(lc_block_q5_1) == 24, "Q5_1 block must be 24 bytes (ggml)");
static_assert(sizeof(lc_block_iq4_nl) == 18, "IQ4_NL block must be 18 bytes (ggml)");
static_assert(sizeof(lc_block_q2_K) == 84, "Q2_K block must be 84 bytes (ggml)");
static_assert(sizeof(lc_block_q3_K) == 110, "Q3_K block must be 110 bytes (ggml)");
static_assert(sizeof(lc_block_q4_K) == 144, "Q4_K block must be 144 bytes (ggml)");
static_assert(sizeof(lc_block_q5_K) == 176, "Q5_K block must be 176 bytes (ggml)");
static_assert(sizeof(lc_block_iq4_xs) == 136, "IQ4_XS block must be 136 bytes (ggml)");

/* Convert n elements of a row of this type to floats.  x: n / blck_size blocks; y: n floats. */
typedef void (*lc_to_float_fn)(const void *x, float *y, int64_t n);
/* Quantize n floats (n a multiple of blck_size) into blocks; the reference (ggml `_ref`) rounding. */
typedef void (*lc_from_float_fn)(const float *x, void *y, int64_t n);

/* Per-type traits, ggml's type_traits.  Unsupported ids have name == NULL. */
struct lc_type_traits {
    const char *name;         /* "q4_1", ... as llama.cpp prints them */
    int blck_size;            /* elements per block */
    size_t type_size;         /* bytes per block */
    bool is_quantized;
    lc_to_float_fn to_float;          /* NULL if no dequantizer */
    lc_from_float_fn from_float_ref;  /* NULL if we cannot quantize into it */
    enum lc_type vec_dot_type;        /* activation type of the dot product with this weight */
};

/*
 * Traits of type t, or NULL when t is out of range or has no layout (ids ggml removed).  Every
 * id ggml defines has traits (name, block size, bytes), so that files with them open and errors
 * name the type; lc_type_computable() says whether llamachat can multiply with it.
 */
const struct lc_type_traits *lc_type_traits(int t);
/* true when t has a dequantizer and a vec_dot_type (the forward pass can use it as a weight) */
bool lc_type_computable(int t);
/* Name ("q4_1"; also for removed ids: "q4_0_4_4"), or "unknown" for ids ggml never had */
const char *lc_type_name(int t);
/* Type from a name as the quantizer accepts it (case-insensitive "q4_1", "Q4_1", "f16"...); -1 if none. */
int lc_type_from_name(const char *name);
/* Bytes of a row of n elements of type t; 0 if n is not a multiple of the block size or t unknown. */
size_t lc_row_size(enum lc_type t, int64_t n);

/* IEEE binary16 <-> binary32, round-to-nearest-even, bit-exact with ggml (and F16C). */
float lc_fp16_to_fp32(lc_fp16 h);
lc_fp16 lc_fp32_to_fp16(float f);
/* bfloat16 <-> binary32, rounding as ggml_compute_fp32_to_bf16 (nearest even, NaN kept quiet). */
float lc_bf16_to_fp32(lc_bf16 h);
lc_bf16 lc_fp32_to_bf16(float f);

/* A 64K-entry fp16 -> fp32 table for hot loops; filled by lc_quant_init() (idempotent, thread-safe). */
extern float lc_fp16_table[1 << 16];
void lc_quant_init(void);
#define LC_FP16_TO_FP32(h) (lc_fp16_table[(uint16_t)(h)])

/* Reference quantizers and dequantizers (ggml's `_ref` functions), n a multiple of the block size. */
void lc_quantize_row_q4_0_ref(const float *x, lc_block_q4_0 *y, int64_t n);
void lc_quantize_row_q4_1_ref(const float *x, lc_block_q4_1 *y, int64_t n);
void lc_quantize_row_q8_0_ref(const float *x, lc_block_q8_0 *y, int64_t n);
void lc_quantize_row_q8_1_ref(const float *x, lc_block_q8_1 *y, int64_t n);
void lc_quantize_row_q6_K_ref(const float *x, lc_block_q6_K *y, int64_t n);
void lc_quantize_row_q8_K_ref(const float *x, lc_block_q8_K *y, int64_t n);
void lc_dequantize_row_q4_0(const lc_block_q4_0 *x, float *y, int64_t n);
void lc_dequantize_row_q4_1(const lc_block_q4_1 *x, float *y, int64_t n);
void lc_dequantize_row_q8_0(const lc_block_q8_0 *x, float *y, int64_t n);
void lc_dequantize_row_q6_K(const lc_block_q6_K *x, float *y, int64_t n);
void lc_quantize_row_q5_0_ref(const float *x, lc_block_q5_0 *y, int64_t n);
void lc_quantize_row_q5_1_ref(const float *x, lc_block_q5_1 *y, int64_t n);
void lc_dequantize_row_q5_0(const lc_block_q5_0 *x, float *y, int64_t n);
void lc_dequantize_row_q5_1(const lc_block_q5_1 *x, float *y, int64_t n);
void lc_dequantize_row_iq4_nl(const lc_block_iq4_nl *x, float *y, int64_t n);
void lc_dequantize_row_q2_K(const lc_block_q2_K *x, float *y, int64_t n);
void lc_dequantize_row_q3_K(const lc_block_q3_K *x, float *y, int64_t n);
void lc_dequantize_row_q4_K(const lc_block_q4_K *x, float *y, int64_t n);
void lc_dequantize_row_q5_K(const lc_block_q5_K *x, float *y, int64_t n);
void lc_dequantize_row_iq4_xs(const lc_block_iq4_xs *x, float *y, int64_t n);
/* ggml's reference quantizers (quantize_row_*_ref; IQ4_NL / IQ4_XS: quantize_iq4_* without
 * an importance matrix): x n floats, n a multiple of the block size; y n / blck_size blocks. */
void lc_quantize_row_q2_K_ref(const float *x, lc_block_q2_K *y, int64_t n);
void lc_quantize_row_q3_K_ref(const float *x, lc_block_q3_K *y, int64_t n);
void lc_quantize_row_q4_K_ref(const float *x, lc_block_q4_K *y, int64_t n);
void lc_quantize_row_q5_K_ref(const float *x, lc_block_q5_K *y, int64_t n);
void lc_quantize_row_iq4_nl_ref(const float *x, lc_block_iq4_nl *y, int64_t n);
void lc_quantize_row_iq4_xs_ref(const float *x, lc_block_iq4_xs *y, int64_t n);
/* Q4_K / Q5_K: scale j and min j (0..7, 6 bits each) of the packed 12 bytes q (ggml's
 * get_scale_min_k4). */
void lc_get_scale_min_k4(int j, const uint8_t *q, uint8_t *d, uint8_t *m);
/* Q3_K: the 16 6-bit scales of the packed 12 bytes, minus 32 (-32..31) */
void lc_q3_K_scales(const uint8_t *packed, int8_t out[16]);

/*
 * Scalar reference dot products (ggml's generic ggml_vec_dot_*, same summation order), the
 * scalar entries of the kernel table: *s = dot(x, y), x a row of n weights, y n activations
 * in the weight type's vec_dot_type.  n a multiple of the block size.
 */
void lc_vec_dot_q6_K_q8_K_ref(int n, float *s, const void *x, const void *y);

#endif
