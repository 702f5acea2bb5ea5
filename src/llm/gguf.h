/*
 * gguf.h - GGUF v2/v3 reader (mmap) and writer.
 *
 * Format: ggml's docs/gguf.md.  A file is: magic "GGUF", u32 version, u64 n_tensors, u64 n_kv,
 * n_kv key/value pairs, n_tensors tensor infos (name, u32 n_dims, u64 ne[n_dims], u32 type,
 * u64 offset), padding to `general.alignment` (default 32), then the tensor data; each offset is
 * relative to the start of the data section and a multiple of the alignment.
 *
 * The file is untrusted input: the reader checks every count, length, dimension, type and
 * offset against the file before use, and reports the first problem with the field name and
 * its file offset.  Nothing here prints or exits.
 *
 * Strings read from the file are copied and NUL-terminated (a key or value containing a NUL
 * byte is rejected).  Tensor data stays in the read-only mapping; pointers into it live as long
 * as the lc_gguf object.
 */
#ifndef LC_GGUF_H
#define LC_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "quant.h"

#define LC_GGUF_MAX_DIMS 4
#define LC_GGUF_DEFAULT_ALIGNMENT 32

/* Metadata value types (gguf.md). */
enum lc_gguf_type {
    LC_GGUF_UINT8 = 0,
    LC_GGUF_INT8 = 1,
    LC_GGUF_UINT16 = 2,
    LC_GGUF_INT16 = 3,
    LC_GGUF_UINT32 = 4,
    LC_GGUF_INT32 = 5,
    LC_GGUF_FLOAT32 = 6,
    LC_GGUF_BOOL = 7,
    LC_GGUF_STRING = 8,
    LC_GGUF_ARRAY = 9,
    LC_GGUF_UINT64 = 10,
    LC_GGUF_INT64 = 11,
    LC_GGUF_FLOAT64 = 12,
    LC_GGUF_TYPE_COUNT
};

/* One tensor of the file.  ne[0] is the row length (contiguous), ne[1] the number of rows... */
struct lc_gguf_tensor {
    const char *name;
    uint32_t n_dims;
    int64_t ne[LC_GGUF_MAX_DIMS]; /* unused dims are 1 */
    enum lc_type type;
    uint64_t offset;              /* relative to the data section */
    size_t nbytes;                /* checked: ne product * type_size / blck_size */
    const void *data;             /* inside the mapping (NULL for a writer's tensor) */
};

struct lc_gguf;

/*
 * Open and validate a GGUF file.  Returns NULL on failure and, if err is not NULL, sets *err
 * to a malloc'd message such as "model.gguf: tensor 3 'blk.0.attn_q.weight': data [1024, 5120)
 * lies outside the file (size 4096)"; the caller frees it.
 */
struct lc_gguf *lc_gguf_open(const char *path, char **err);
/* Unmap and free; NULL is allowed. */
void lc_gguf_free(struct lc_gguf *g);

uint32_t lc_gguf_version(const struct lc_gguf *g);
const char *lc_gguf_path(const struct lc_gguf *g);
size_t lc_gguf_alignment(const struct lc_gguf *g);
size_t lc_gguf_file_size(const struct lc_gguf *g);
/* File offset of the data section (clamped to the file size for a vocab-only file, which may
 * end without the padding). */
size_t lc_gguf_data_offset(const struct lc_gguf *g);

/* ---- metadata ---- */
int64_t lc_gguf_n_kv(const struct lc_gguf *g);
/* Index of key, or -1. */
int64_t lc_gguf_find_key(const struct lc_gguf *g, const char *key);
const char *lc_gguf_key(const struct lc_gguf *g, int64_t i);
enum lc_gguf_type lc_gguf_kv_type(const struct lc_gguf *g, int64_t i);
/* For arrays: element type and count. */
enum lc_gguf_type lc_gguf_arr_type(const struct lc_gguf *g, int64_t i);
uint64_t lc_gguf_arr_n(const struct lc_gguf *g, int64_t i);
/* Raw elements of a numeric array (little-endian, packed), or NULL if not a numeric array.
 * The copy is malloc-aligned, so it may be read as e.g. const float * for an F32 array. */
const void *lc_gguf_arr_data(const struct lc_gguf *g, int64_t i);
/* j-th string of an array of strings (NUL-terminated), or NULL. */
const char *lc_gguf_arr_str(const struct lc_gguf *g, int64_t i, uint64_t j);
/* Raw scalar value bytes (for copying metadata), NULL for strings/arrays. */
const void *lc_gguf_val_data(const struct lc_gguf *g, int64_t i);

/*
 * Typed lookups by key.  Integers of any width and sign convert when the value fits; a float
 * accepts F32 or F64.  Return true and set *out when the key exists with a convertible value;
 * false (and *out untouched) otherwise.
 */
bool lc_gguf_get_u32(const struct lc_gguf *g, const char *key, uint32_t *out);
bool lc_gguf_get_i64(const struct lc_gguf *g, const char *key, int64_t *out);
bool lc_gguf_get_f32(const struct lc_gguf *g, const char *key, float *out);
bool lc_gguf_get_bool(const struct lc_gguf *g, const char *key, bool *out);
/* String value (NUL-terminated, owned by g), or NULL when absent or not a string. */
const char *lc_gguf_get_str(const struct lc_gguf *g, const char *key);

/* ---- tensors ---- */
int64_t lc_gguf_n_tensors(const struct lc_gguf *g);
const struct lc_gguf_tensor *lc_gguf_tensor(const struct lc_gguf *g, int64_t i);
/* Tensor by name, or NULL. */
const struct lc_gguf_tensor *lc_gguf_find_tensor(const struct lc_gguf *g, const char *name);

/* ---- writer ---- */
/*
 * Build a GGUF v3 file in memory (metadata, tensor infos) and stream tensor data to disk.
 * Usage: w = lc_gguf_writer_new(); set kvs; add tensor infos (name, type, dims, nbytes);
 * lc_gguf_writer_begin(w, path, &err) writes header + infos + padding;
 * lc_gguf_writer_write_data(w, data, nbytes) for each tensor in order (padded to alignment);
 * lc_gguf_writer_end(w, &err) flushes, fsyncs and closes.  Each returns 0 or -1 with *err set.
 */
struct lc_gguf_writer;
struct lc_gguf_writer *lc_gguf_writer_new(void);
void lc_gguf_writer_free(struct lc_gguf_writer *w);
/* Copy every key/value of src (in order); later sets of the same key replace the value. */
int lc_gguf_writer_copy_kvs(struct lc_gguf_writer *w, const struct lc_gguf *src);
int lc_gguf_writer_set_u32(struct lc_gguf_writer *w, const char *key, uint32_t v);
int lc_gguf_writer_set_i32(struct lc_gguf_writer *w, const char *key, int32_t v);
int lc_gguf_writer_set_u16(struct lc_gguf_writer *w, const char *key, uint16_t v);
int lc_gguf_writer_set_f32(struct lc_gguf_writer *w, const char *key, float v);
int lc_gguf_writer_set_bool(struct lc_gguf_writer *w, const char *key, bool v);
int lc_gguf_writer_set_str(struct lc_gguf_writer *w, const char *key, const char *v);
/* Array of n elements of numeric type t (raw little-endian data), or of strings. */
int lc_gguf_writer_set_arr(struct lc_gguf_writer *w, const char *key, enum lc_gguf_type t,
                           const void *data, uint64_t n);
int lc_gguf_writer_set_arr_str(struct lc_gguf_writer *w, const char *key, const char *const *v,
                               uint64_t n);
int lc_gguf_writer_remove_key(struct lc_gguf_writer *w, const char *key);
/* Declare the next tensor; ne has n_dims entries.  Data is written later in the same order. */
int lc_gguf_writer_add_tensor(struct lc_gguf_writer *w, const char *name, enum lc_type type,
                              uint32_t n_dims, const int64_t *ne);
int lc_gguf_writer_begin(struct lc_gguf_writer *w, const char *path, char **err);
int lc_gguf_writer_write_data(struct lc_gguf_writer *w, const void *data, size_t nbytes,
                              char **err);
int lc_gguf_writer_end(struct lc_gguf_writer *w, char **err);

#endif
