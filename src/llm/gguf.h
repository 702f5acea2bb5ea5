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
 * as the lc_gguf object.  (As with any mmap, a file truncated by someone else while it is open
 * raises SIGBUS when the lost pages are touched; the checks cannot cover that.)  An opened
 * lc_gguf is never modified, so any number of threads may read it.
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
/* The file's bytes, lc_gguf_file_size of them (read-only mapping owned by g; NULL for a
 * writer). */
const void *lc_gguf_map(const struct lc_gguf *g);

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
 * Usage: w = lc_gguf_writer_new(); set kvs; add tensor infos (name, type, dims);
 * lc_gguf_writer_begin(w, path, &err) writes header + KVs + infos + padding;
 * lc_gguf_writer_write_data(w, data, nbytes, &err) once per tensor, in the order added, nbytes
 * exactly the tensor's size (each is followed by zero padding to the alignment);
 * lc_gguf_writer_end(w, &err) fsyncs and closes.  Each returns 0 or -1 with *err set
 * (malloc'd, names PATH and the cause, e.g. "x.gguf: write failed at offset 4096: No space left
 * on device"); after a failure the writer can only be freed.
 *
 * Layout is ggml's gguf_write_to_file: KVs in insertion order, tensor offsets consecutive
 * (offset_i = sum of nbytes_j rounded up to the alignment), padding also after the last tensor,
 * so copying a llama.cpp file (copy_kvs + add_tensor + write_data for each tensor) reproduces it
 * byte for byte.  The alignment is general.alignment when set (a u32 power of two; begin fails
 * otherwise), else 32.
 *
 * The bytes go to a temporary "PATH.tmp.XXXXXX" in PATH's directory that end() renames over
 * PATH: PATH is never left half-written, and on any failure (or lc_gguf_writer_free before end)
 * the temporary is removed.  Setters and add_tensor return 0, or -1 on a bad argument, out of
 * memory, or after begin.
 */
struct lc_gguf_writer;
struct lc_gguf_writer *lc_gguf_writer_new(void);
void lc_gguf_writer_free(struct lc_gguf_writer *w);
/* Copy every key/value of src (in order, values exact, arrays of strings included).  Setting a
 * key that exists replaces its value (and type) in place, keeping the key order; a new key is
 * appended. */
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
/* Remove key (the others keep their order); -1 if absent. */
int lc_gguf_writer_remove_key(struct lc_gguf_writer *w, const char *key);
/* Declare the next tensor; ne has n_dims (1..4) entries, each >= 1, ne[0] a multiple of the
 * type's block size; the name must be unique, nonempty and shorter than 64 bytes (llama.cpp's
 * GGML_MAX_NAME).  Data is written later in the same order. */
int lc_gguf_writer_add_tensor(struct lc_gguf_writer *w, const char *name, enum lc_type type,
                              uint32_t n_dims, const int64_t *ne);
int lc_gguf_writer_begin(struct lc_gguf_writer *w, const char *path, char **err);
int lc_gguf_writer_write_data(struct lc_gguf_writer *w, const void *data, size_t nbytes,
                              char **err);
int lc_gguf_writer_end(struct lc_gguf_writer *w, char **err);

/* ---- split models (llama.cpp's gguf-split) ---- */
/*
 * A model split by llama.cpp's gguf-split is a series of GGUF files PREFIX-00001-of-00003.gguf,
 * PREFIX-00002-of-00003.gguf, ...  Each part carries split.no (u16, 0-based: the part
 * PREFIX-00001-of-... has split.no 0), split.count (u16, the number of parts) and, in every
 * part, split.tensors.count (i32, the number of tensors over all parts); each part holds a
 * disjoint subset of the tensors, and the first part all the other metadata.
 */
#define LC_GGUF_KEY_SPLIT_NO "split.no"
#define LC_GGUF_KEY_SPLIT_COUNT "split.count"
#define LC_GGUF_KEY_SPLIT_TENSORS_COUNT "split.tensors.count"

/*
 * Path of part `no` (1-based, 1..count) of a split model: "PREFIX-%05d-of-%05d.gguf" into buf
 * (len bytes, NUL-terminated), as llama.cpp's llama_split_path (whose split number is 0-based).
 * Returns 0, or -1 when no/count are out of range (1 <= no <= count <= 99999) or buf is too
 * small (buf then holds no partial path).
 */
int lc_gguf_split_path(char *buf, size_t len, const char *prefix, int no, int count);
/*
 * The inverse: if path ends with "-%05d-of-%05d.gguf" for this no and count, store what comes
 * before it (the PREFIX, nonempty) in buf and return 0; else, or if buf is too small, -1.
 * As llama.cpp's llama_split_prefix.
 */
int lc_gguf_split_prefix(char *buf, size_t len, const char *path, int no, int count);
/*
 * Open a model given its first file (gguf_split.c).  For a split model every part is opened and
 * checked: each part present, with the right split.no and the same split.count and
 * split.tensors.count, and the parts' tensors adding up to split.tensors.count.  A file
 * without split keys is a 1-part model.  Returns a malloc'd array of *n_parts open files (part
 * 0 holds the metadata), freed with lc_gguf_free_split; NULL with *err naming the missing or
 * mismatched part ("split model m-00001-of-00003.gguf: part 2 of 3: ...: No such file").
 */
struct lc_gguf **lc_gguf_open_split(const char *first, int *n_parts, char **err);
void lc_gguf_free_split(struct lc_gguf **parts, int n_parts);

#endif
