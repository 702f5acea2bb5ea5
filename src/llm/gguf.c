/*
 * gguf.c - GGUF v2/v3 reader (mmap) and writer.
 *
 * Source of the format: ggml's docs/gguf.md and ggml/src/gguf.cpp (the reader/writer llama.cpp
 * uses).  Layout, all little-endian:
 *
 *   "GGUF" u32 version u64 n_tensors u64 n_kv
 *   n_kv x  { string key; u32 type; value }
 *   n_tensors x { string name; u32 n_dims; u64 ne[n_dims]; u32 type; u64 offset }
 *   zero padding to the alignment (general.alignment, u32, default 32)
 *   tensor data; tensor i at data_offset + offset_i, each offset a multiple of the alignment,
 *   and (as gguf.cpp requires) offset_i = sum over j < i of nbytes_j padded to the alignment:
 *   the tensors' data follow each other in file order, never overlapping
 *
 * where a string is { u64 len; char bytes[len] } (no terminator) and an array value is
 * { u32 elem_type; u64 n; elements }.  Version 1 used u32 for counts and lengths and is not
 * read; version 3 only added big-endian files, which carry the same version number byte-swapped
 * and are rejected (this reader is little-endian only).
 *
 * The reader treats the file as hostile.  It walks it once with a bounds-checked cursor, checks
 * every count against the bytes left before allocating, copies keys and strings into owned,
 * NUL-terminated memory, copies numeric arrays into aligned memory (the mapping gives no
 * alignment guarantee for metadata), and leaves tensor data in the read-only mapping.  The first
 * problem found is reported as "PATH: WHERE: WHAT (file offset N)".
 */
#include "gguf.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "gguf.c reads and writes little-endian GGUF files on a little-endian host only"
#endif

#define LC_STR_(x) #x
#define LC_STR(x) LC_STR_(x)

#define GGUF_MAGIC "GGUF"
#define GGUF_HEADER_SIZE 24 /* magic, version, n_tensors, n_kv */

/* Smallest possible encodings, used to bound counts by the file size before allocating:
 * a KV is a key length (8), a key of >= 1 byte, a type (4) and a value of >= 1 byte; a tensor
 * info is a name length (8), a name of >= 1 byte, n_dims (4), one dim (8), type (4), offset (8). */
#define GGUF_MIN_KV_SIZE 14
#define GGUF_MIN_TENSOR_INFO_SIZE 33

/* ---------------------------------------------------------------- small helpers */

#if defined(__GNUC__)
#define LC_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define LC_PRINTF(a, b)
#endif

static char *vformat(const char *fmt, va_list ap) LC_PRINTF(1, 0);
static char *vformat(const char *fmt, va_list ap)
{
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap2);
    va_end(ap2);
    if (n < 0)
        return NULL;
    char *s = malloc((size_t)n + 1);
    if (s)
        vsnprintf(s, (size_t)n + 1, fmt, ap);
    return s;
}

static void set_err(char **err, const char *fmt, ...) LC_PRINTF(2, 3);
static void set_err(char **err, const char *fmt, ...)
{
    if (!err)
        return;
    va_list ap;
    va_start(ap, fmt);
    *err = vformat(fmt, ap);
    va_end(ap);
}

static const char *const gguf_type_names[LC_GGUF_TYPE_COUNT] = {
    "u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64", "i64", "f64",
};

/* Size in bytes of a scalar value of type t; 0 for strings, arrays and invalid types. */
static size_t gguf_type_size(uint32_t t)
{
    switch (t) {
    case LC_GGUF_UINT8:
    case LC_GGUF_INT8:
    case LC_GGUF_BOOL:
        return 1;
    case LC_GGUF_UINT16:
    case LC_GGUF_INT16:
        return 2;
    case LC_GGUF_UINT32:
    case LC_GGUF_INT32:
    case LC_GGUF_FLOAT32:
        return 4;
    case LC_GGUF_UINT64:
    case LC_GGUF_INT64:
    case LC_GGUF_FLOAT64:
        return 8;
    default:
        return 0;
    }
}

static const char *gguf_type_name(uint32_t t)
{
    return t < LC_GGUF_TYPE_COUNT ? gguf_type_names[t] : "invalid";
}

/* A printable, bounded copy of untrusted text for error messages: at most 64 bytes, bytes
 * outside printable ASCII shown as '?'. */
static void printable(char *dst, size_t dst_len, const char *src)
{
    size_t i = 0;
    for (; src && src[i] && i + 4 < dst_len && i < 64; i++) {
        unsigned char c = (unsigned char)src[i];
        dst[i] = (c >= 0x20 && c < 0x7f) ? (char)c : '?';
    }
    if (src && src[i] && i + 4 <= dst_len) {
        memcpy(dst + i, "...", 3);
        i += 3;
    }
    dst[i] = '\0';
}

/* FNV-1a, for the name -> index tables. */
static uint64_t hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 1099511628211ull;
    }
    return h;
}

/* Open-addressing table of indices into an array of names (power-of-two size, load <= 1/2,
 * grown as entries are added).  Slots hold index + 1; 0 is empty.  name_of(ctx, i) gives the
 * name of entry i. */
typedef const char *(*name_of_fn)(const void *ctx, uint64_t i);

struct name_index {
    uint64_t *slots;
    size_t mask;
    size_t count;
};

static void name_index_put(uint64_t *slots, size_t mask, const char *name, uint64_t i)
{
    size_t s = hash_str(name) & mask;
    while (slots[s] != 0)
        s = (s + 1) & mask;
    slots[s] = i + 1;
}

/* Index of name, or -1. */
static int64_t name_index_find(const struct name_index *ix, const char *name, name_of_fn name_of,
                               const void *ctx)
{
    if (!ix->slots)
        return -1;
    for (size_t s = hash_str(name) & ix->mask;; s = (s + 1) & ix->mask) {
        uint64_t v = ix->slots[s];
        if (v == 0)
            return -1;
        if (strcmp(name_of(ctx, v - 1), name) == 0)
            return (int64_t)(v - 1);
    }
}

/* Insert entry i (whose name is not yet present).  Returns -1 when out of memory. */
static int name_index_add(struct name_index *ix, const char *name, uint64_t i, name_of_fn name_of,
                          const void *ctx)
{
    const size_t cap = ix->slots ? ix->mask + 1 : 0;
    if (2 * (ix->count + 1) > cap) {
        const size_t ncap = cap ? 2 * cap : 64;
        uint64_t *slots = calloc(ncap, sizeof(*slots));
        if (!slots)
            return -1;
        for (size_t s = 0; s < cap; s++)
            if (ix->slots[s])
                name_index_put(slots, ncap - 1, name_of(ctx, ix->slots[s] - 1), ix->slots[s] - 1);
        free(ix->slots);
        ix->slots = slots;
        ix->mask = ncap - 1;
    }
    name_index_put(ix->slots, ix->mask, name, i);
    ix->count++;
    return 0;
}

/* Make room for `need` elements in a zero-initialised growable array.  Memory follows what the
 * file actually contains, not the counts it declares. */
static bool grow_array(void **arr, size_t *cap, size_t need, size_t elsize)
{
    if (need <= *cap)
        return true;
    size_t ncap = *cap ? *cap : 16;
    while (ncap < need)
        ncap *= 2;
    if (ncap > SIZE_MAX / elsize)
        return false;
    uint8_t *p = realloc(*arr, ncap * elsize);
    if (!p)
        return false;
    memset(p + *cap * elsize, 0, (ncap - *cap) * elsize);
    *arr = p;
    *cap = ncap;
    return true;
}

/* ---------------------------------------------------------------- reader structures */

struct gguf_kv {
    char *key;
    uint32_t type;
    uint32_t arr_type;      /* arrays */
    uint64_t arr_n;         /* arrays */
    size_t pos;             /* file offset of the value (after the type), for messages */
    union {
        uint8_t raw[8];     /* scalars, little-endian */
        uint64_t u64;
    } val;
    char *str;              /* strings */
    void *arr;              /* numeric arrays: arr_n * size, aligned copy */
    char **arr_str;         /* string arrays: arr_n pointers into arr_str_buf */
    char *arr_str_buf;
};

struct lc_gguf {
    char *path;
    const uint8_t *map;
    size_t size;
    uint32_t version;
    size_t alignment;
    size_t data_offset;
    uint64_t n_kv;          /* entries in kvs (while parsing: read so far) */
    struct gguf_kv *kvs;
    size_t cap_kvs;
    uint64_t n_tensors;     /* entries in tensors (while parsing: read so far) */
    struct lc_gguf_tensor *tensors;
    size_t cap_tensors;
    struct name_index kv_index;
    struct name_index tensor_index;
};

/* The bounds-checked cursor over the mapping.  `where` names what is being read (e.g.
 * "kv 3 'general.name'"), for error messages. */
struct cursor {
    const uint8_t *base;
    size_t size;
    size_t pos;
    const char *path;
    char **err;
    char where[200];
    bool failed;
};

static void cur_fail(struct cursor *c, size_t at, const char *fmt, ...) LC_PRINTF(3, 4);
static void cur_fail(struct cursor *c, size_t at, const char *fmt, ...)
{
    if (c->failed)
        return;
    c->failed = true;
    if (!c->err)
        return;
    va_list ap;
    va_start(ap, fmt);
    char *what = vformat(fmt, ap);
    va_end(ap);
    if (c->where[0])
        set_err(c->err, "%s: %s: %s (file offset %zu)", c->path, c->where,
                what ? what : "error", at);
    else
        set_err(c->err, "%s: %s (file offset %zu)", c->path, what ? what : "error", at);
    free(what);
}

static size_t cur_left(const struct cursor *c)
{
    return c->size - c->pos;
}

/* Read n bytes of field `field`; on truncation fail and return NULL. */
static const uint8_t *cur_take(struct cursor *c, size_t n, const char *field)
{
    if (c->failed)
        return NULL;
    if (n > cur_left(c)) {
        cur_fail(c, c->pos, "truncated: %s needs %zu bytes, %zu left in the file (size %zu)", field,
                 n, cur_left(c), c->size);
        return NULL;
    }
    const uint8_t *p = c->base + c->pos;
    c->pos += n;
    return p;
}

static bool cur_u32(struct cursor *c, uint32_t *v, const char *field)
{
    const uint8_t *p = cur_take(c, 4, field);
    if (p)
        memcpy(v, p, 4);
    return p != NULL;
}

static bool cur_u64(struct cursor *c, uint64_t *v, const char *field)
{
    const uint8_t *p = cur_take(c, 8, field);
    if (p)
        memcpy(v, p, 8);
    return p != NULL;
}

/* Read a GGUF string into *out (malloc'd, NUL-terminated).  Rejects NUL bytes inside and, if
 * nonempty, the empty string. */
static bool cur_str(struct cursor *c, char **out, const char *field, bool nonempty)
{
    size_t at = c->pos;
    uint64_t len;
    char lenfield[64];
    snprintf(lenfield, sizeof(lenfield), "%s length", field);
    if (!cur_u64(c, &len, lenfield))
        return false;
    if (len > cur_left(c)) {
        cur_fail(c, at, "%s length %" PRIu64 " exceeds the %zu bytes left in the file", field, len,
                 cur_left(c));
        return false;
    }
    if (nonempty && len == 0) {
        cur_fail(c, at, "empty %s", field);
        return false;
    }
    const uint8_t *p = cur_take(c, (size_t)len, field);
    if (!p)
        return false;
    if (memchr(p, 0, (size_t)len)) {
        cur_fail(c, at, "%s contains a NUL byte", field);
        return false;
    }
    char *s = malloc((size_t)len + 1);
    if (!s) {
        cur_fail(c, at, "out of memory for %s (%" PRIu64 " bytes)", field, len);
        return false;
    }
    memcpy(s, p, (size_t)len);
    s[len] = '\0';
    *out = s;
    return true;
}

/* ---------------------------------------------------------------- reader */

static const char *kv_name_of(const void *ctx, uint64_t i)
{
    return ((const struct lc_gguf *)ctx)->kvs[i].key;
}

static const char *tensor_name_of(const void *ctx, uint64_t i)
{
    return ((const struct lc_gguf *)ctx)->tensors[i].name;
}

static void kv_clear(struct gguf_kv *kv)
{
    free(kv->key);
    free(kv->str);
    free(kv->arr);
    free(kv->arr_str);
    free(kv->arr_str_buf);
    memset(kv, 0, sizeof(*kv));
}

/* Array of strings: validate all lengths first (one pass), then copy into one buffer. */
static bool read_str_array(struct cursor *c, struct gguf_kv *kv)
{
    const uint64_t n = kv->arr_n;
    const size_t start = c->pos;
    size_t total = 0;
    for (uint64_t j = 0; j < n; j++) {
        size_t at = c->pos;
        uint64_t len;
        if (!cur_u64(c, &len, "array string length"))
            return false;
        if (len > cur_left(c)) {
            cur_fail(c, at, "string %" PRIu64 " of %" PRIu64 ": length %" PRIu64
                     " exceeds the %zu bytes left in the file", j, n, len, cur_left(c));
            return false;
        }
        if (memchr(c->base + c->pos, 0, (size_t)len)) {
            cur_fail(c, at, "string %" PRIu64 " of %" PRIu64 " contains a NUL byte", j, n);
            return false;
        }
        c->pos += (size_t)len;
        total += (size_t)len + 1; /* <= file size + n: no overflow */
    }
    kv->arr_str = malloc((size_t)(n ? n : 1) * sizeof(char *));
    kv->arr_str_buf = malloc(total ? total : 1);
    if (!kv->arr_str || !kv->arr_str_buf) {
        cur_fail(c, start, "out of memory for %" PRIu64 " strings", n);
        return false;
    }
    size_t pos = start, o = 0;
    for (uint64_t j = 0; j < n; j++) {
        uint64_t len;
        memcpy(&len, c->base + pos, 8);
        pos += 8;
        memcpy(kv->arr_str_buf + o, c->base + pos, (size_t)len);
        kv->arr_str_buf[o + len] = '\0';
        kv->arr_str[j] = kv->arr_str_buf + o;
        pos += (size_t)len;
        o += (size_t)len + 1;
    }
    return true;
}

static bool read_kv_value(struct cursor *c, struct gguf_kv *kv)
{
    const size_t type_at = c->pos;
    if (!cur_u32(c, &kv->type, "value type"))
        return false;
    kv->pos = c->pos;
    if (kv->type >= LC_GGUF_TYPE_COUNT) {
        cur_fail(c, type_at, "invalid value type %" PRIu32, kv->type);
        return false;
    }
    if (kv->type == LC_GGUF_STRING)
        return cur_str(c, &kv->str, "string value", false);
    if (kv->type != LC_GGUF_ARRAY) {
        size_t sz = gguf_type_size(kv->type);
        const uint8_t *p = cur_take(c, sz, "value");
        if (p)
            memcpy(kv->val.raw, p, sz);
        return p != NULL;
    }
    /* array */
    const size_t at = c->pos;
    if (!cur_u32(c, &kv->arr_type, "array element type"))
        return false;
    if (kv->arr_type >= LC_GGUF_TYPE_COUNT || kv->arr_type == LC_GGUF_ARRAY) {
        cur_fail(c, at, "invalid array element type %" PRIu32 "%s", kv->arr_type,
                 kv->arr_type == LC_GGUF_ARRAY ? " (nested arrays are not supported)" : "");
        return false;
    }
    const size_t n_at = c->pos;
    if (!cur_u64(c, &kv->arr_n, "array count"))
        return false;
    const size_t esize = kv->arr_type == LC_GGUF_STRING ? 8 : gguf_type_size(kv->arr_type);
    /* Each element takes at least esize bytes (a string at least its length field). */
    if (kv->arr_n > cur_left(c) / esize) {
        cur_fail(c, n_at,
                 "array count %" PRIu64 " of %s needs more than the %zu bytes left in the file",
                 kv->arr_n, gguf_type_name(kv->arr_type), cur_left(c));
        return false;
    }
    if (kv->arr_type == LC_GGUF_STRING)
        return read_str_array(c, kv);
    const size_t nbytes = (size_t)kv->arr_n * esize;
    const uint8_t *p = cur_take(c, nbytes, "array data");
    if (!p)
        return false;
    kv->arr = malloc(nbytes ? nbytes : 1);
    if (!kv->arr) {
        cur_fail(c, n_at, "out of memory for an array of %zu bytes", nbytes);
        return false;
    }
    memcpy(kv->arr, p, nbytes);
    return true;
}

static bool read_kvs(struct cursor *c, struct lc_gguf *g, uint64_t n_kv)
{
    for (uint64_t i = 0; i < n_kv; i++) {
        if (!grow_array((void **)&g->kvs, &g->cap_kvs, (size_t)i + 1, sizeof(*g->kvs))) {
            cur_fail(c, c->pos, "out of memory for %" PRIu64 " keys", i + 1);
            return false;
        }
        g->n_kv = i + 1;
        struct gguf_kv *kv = &g->kvs[i];
        const size_t at = c->pos;
        snprintf(c->where, sizeof(c->where), "kv %" PRIu64, i);
        if (!cur_str(c, &kv->key, "key", true))
            return false;
        char pk[80];
        printable(pk, sizeof(pk), kv->key);
        snprintf(c->where, sizeof(c->where), "kv %" PRIu64 " '%s'", i, pk);
        if (name_index_find(&g->kv_index, kv->key, kv_name_of, g) >= 0) {
            cur_fail(c, at, "duplicate key");
            return false;
        }
        if (!read_kv_value(c, kv))
            return false;
        if (name_index_add(&g->kv_index, kv->key, i, kv_name_of, g) != 0) {
            cur_fail(c, at, "out of memory");
            return false;
        }
    }
    c->where[0] = '\0';
    return true;
}

/* general.alignment: must be a u32 power of two (gguf.md). */
static bool read_alignment(struct cursor *c, struct lc_gguf *g)
{
    g->alignment = LC_GGUF_DEFAULT_ALIGNMENT;
    int64_t i = lc_gguf_find_key(g, "general.alignment");
    if (i < 0)
        return true;
    snprintf(c->where, sizeof(c->where), "kv %" PRId64 " 'general.alignment'", i);
    const struct gguf_kv *kv = &g->kvs[i];
    if (kv->type != LC_GGUF_UINT32) {
        cur_fail(c, kv->pos - 4, "alignment must be of type u32, not %s",
                 gguf_type_name(kv->type));
        return false;
    }
    uint32_t a;
    memcpy(&a, kv->val.raw, 4);
    if (a == 0 || (a & (a - 1)) != 0) {
        cur_fail(c, kv->pos, "alignment %" PRIu32 " is not a power of two", a);
        return false;
    }
    g->alignment = a;
    c->where[0] = '\0';
    return true;
}

static bool read_tensor_info(struct cursor *c, struct lc_gguf *g, uint64_t i, size_t *offset_pos)
{
    if (!grow_array((void **)&g->tensors, &g->cap_tensors, (size_t)i + 1, sizeof(*g->tensors))) {
        cur_fail(c, c->pos, "out of memory for %" PRIu64 " tensors", i + 1);
        return false;
    }
    g->n_tensors = i + 1;
    struct lc_gguf_tensor *t = &g->tensors[i];
    const size_t at = c->pos;
    snprintf(c->where, sizeof(c->where), "tensor %" PRIu64, i);
    char *name = NULL;
    if (!cur_str(c, &name, "name", true))
        return false;
    t->name = name;
    char pn[80];
    printable(pn, sizeof(pn), name);
    snprintf(c->where, sizeof(c->where), "tensor %" PRIu64 " '%s'", i, pn);
    if (name_index_find(&g->tensor_index, name, tensor_name_of, g) >= 0) {
        cur_fail(c, at, "duplicate tensor name");
        return false;
    }

    size_t f_at = c->pos;
    if (!cur_u32(c, &t->n_dims, "n_dims"))
        return false;
    if (t->n_dims < 1 || t->n_dims > LC_GGUF_MAX_DIMS) {
        cur_fail(c, f_at, "n_dims %" PRIu32 " %s", t->n_dims,
                 t->n_dims < 1 ? "< 1" : "> " LC_STR(LC_GGUF_MAX_DIMS));
        return false;
    }
    /* Element count: each dim in 1..INT64_MAX, product <= INT64_MAX. */
    uint64_t nel = 1;
    const size_t ne0_at = c->pos;
    for (uint32_t d = 0; d < LC_GGUF_MAX_DIMS; d++) {
        t->ne[d] = 1;
        if (d >= t->n_dims)
            continue;
        f_at = c->pos;
        uint64_t ne;
        char field[16];
        snprintf(field, sizeof(field), "ne[%" PRIu32 "]", d);
        if (!cur_u64(c, &ne, field))
            return false;
        if (ne == 0 || ne > (uint64_t)INT64_MAX) {
            cur_fail(c, f_at, "dimension ne[%" PRIu32 "] = %" PRId64 " (must be >= 1)", d,
                     (int64_t)ne);
            return false;
        }
        if (nel > (uint64_t)INT64_MAX / ne) {
            cur_fail(c, f_at, "dimension ne[%" PRIu32 "] = %" PRIu64
                     ": element count overflows int64", d, ne);
            return false;
        }
        nel *= ne;
        t->ne[d] = (int64_t)ne;
    }

    f_at = c->pos;
    uint32_t type;
    if (!cur_u32(c, &type, "type"))
        return false;
    const struct lc_type_traits *tt = type <= INT_MAX ? lc_type_traits((int)type) : NULL;
    if (!tt) {
        const char *tn = type <= INT_MAX ? lc_type_name((int)type) : "unknown";
        if (strcmp(tn, "unknown") != 0)
            cur_fail(c, f_at, "unsupported tensor type id %" PRIu32 " (%s, which ggml removed: "
                     "llama.cpp repacks at load now; convert the model again)", type, tn);
        else
            cur_fail(c, f_at, "unknown tensor type id %" PRIu32, type);
        return false;
    }
    t->type = (enum lc_type)type;
    if (t->ne[0] % tt->blck_size != 0) {
        cur_fail(c, ne0_at, "ne[0] = %" PRId64 " is not a multiple of the block size %d of type %s",
                 t->ne[0], tt->blck_size, tt->name);
        return false;
    }
    /* nbytes = nel / blck * type_size; nel <= INT64_MAX so the division is exact and the
     * multiplication is the only overflow risk. */
    const uint64_t nblocks = nel / (uint64_t)tt->blck_size;
    if (nblocks > SIZE_MAX / tt->type_size) {
        cur_fail(c, f_at, "tensor size overflows (%" PRIu64 " blocks of type %s)", nblocks,
                 tt->name);
        return false;
    }
    t->nbytes = (size_t)nblocks * tt->type_size;

    f_at = c->pos;
    *offset_pos = f_at;
    if (!cur_u64(c, &t->offset, "offset"))
        return false;
    if (t->offset % g->alignment != 0) {
        cur_fail(c, f_at, "data offset %" PRIu64 " is not a multiple of the alignment %zu",
                 t->offset, g->alignment);
        return false;
    }
    if (name_index_add(&g->tensor_index, name, i, tensor_name_of, g) != 0) {
        cur_fail(c, at, "out of memory");
        return false;
    }
    return true;
}

/* Every tensor's data [offset, offset + nbytes) lies in the data section, and the tensors' data
 * follow each other in file order: tensor i starts at the sum over j < i of nbytes_j padded to
 * the alignment (what ggml's gguf.cpp requires, "tensor has offset X, expected Y", and what every
 * writer produces).  That rules out overlapping or aliased tensors, which would otherwise load
 * and compute garbage.  offset_pos[i] is the file offset of tensor i's offset field, for the
 * message. */
static bool check_tensor_data(struct cursor *c, struct lc_gguf *g, const size_t *offset_pos)
{
    const size_t data_size = g->data_offset <= g->size ? g->size - g->data_offset : 0;
    size_t expected = 0;   /* running offset: <= data_size + alignment, cannot overflow */
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        struct lc_gguf_tensor *t = &g->tensors[i];
        if (t->offset > data_size || t->nbytes > data_size - t->offset) {
            char pn[80];
            printable(pn, sizeof(pn), t->name);
            snprintf(c->where, sizeof(c->where), "tensor %" PRIu64 " '%s'", i, pn);
            /* offset + nbytes may wrap: print the parts, not the sum */
            cur_fail(c, offset_pos[i],
                     "data offset %" PRIu64 " + %zu bytes lies outside the file (data section at "
                     "%zu, file size %zu)",
                     t->offset, t->nbytes, g->data_offset, g->size);
            return false;
        }
        if (t->offset != expected) {
            char pn[80];
            printable(pn, sizeof(pn), t->name);
            snprintf(c->where, sizeof(c->where), "tensor %" PRIu64 " '%s'", i, pn);
            if (i == 0) {
                cur_fail(c, offset_pos[i], "data offset %" PRIu64 ", expected 0 (the first "
                         "tensor's data starts the data section)", t->offset);
            } else {
                const struct lc_gguf_tensor *p = &g->tensors[i - 1];
                char pp[80];
                printable(pp, sizeof(pp), p->name);
                cur_fail(c, offset_pos[i],
                         "data offset %" PRIu64 ", expected %zu (after tensor %" PRIu64
                         " '%s': offset %" PRIu64 " + %zu bytes padded to the alignment %zu;"
                         " tensors' data must follow each other in file order)",
                         t->offset, expected, i - 1, pp, p->offset, p->nbytes, g->alignment);
            }
            return false;
        }
        /* offset + nbytes <= data_size (checked above), so this stays below SIZE_MAX / 2 */
        expected = (t->offset + t->nbytes + g->alignment - 1) / g->alignment * g->alignment;
        t->data = g->map + g->data_offset + t->offset;
    }
    c->where[0] = '\0';
    return true;
}

static bool finish_data_section(struct cursor *c, struct lc_gguf *g, const size_t *offset_pos);

/* Walk the whole header: magic, version, counts, KVs, alignment, tensor infos, data. */
static bool parse(struct cursor *c, struct lc_gguf *g)
{
    const uint8_t *magic = cur_take(c, 4, "magic");
    if (!magic)
        return false;
    if (memcmp(magic, GGUF_MAGIC, 4) != 0) {
        char m[5];
        for (int k = 0; k < 4; k++)
            m[k] = (magic[k] >= 0x20 && magic[k] < 0x7f) ? (char)magic[k] : '?';
        m[4] = '\0';
        cur_fail(c, 0, "bad magic \"%s\" (%02x %02x %02x %02x), not a GGUF file", m, magic[0],
                 magic[1], magic[2], magic[3]);
        return false;
    }
    if (!cur_u32(c, &g->version, "version"))
        return false;
    if (g->version == 1) {
        cur_fail(c, 4, "GGUF version 1 is not supported (obsolete format with 32-bit counts; "
                 "convert the file with a current llama.cpp)");
        return false;
    }
    if (g->version != 2 && g->version != 3) {
        const uint32_t sw = __builtin_bswap32(g->version);
        cur_fail(c, 4, "unsupported GGUF version %" PRIu32 "%s", g->version,
                 (sw == 2 || sw == 3) ? " (a big-endian file?)" : " (only 2 and 3 are read)");
        return false;
    }
    uint64_t n_tensors, n_kv;
    if (!cur_u64(c, &n_tensors, "n_tensors") || !cur_u64(c, &n_kv, "n_kv"))
        return false;
    /* Plausibility: every entry has a minimal encoded size. */
    const size_t body = c->size - GGUF_HEADER_SIZE;
    if (n_tensors > body / GGUF_MIN_TENSOR_INFO_SIZE) {
        cur_fail(c, 8, "n_tensors %" PRIu64 " is impossible in a file of %zu bytes", n_tensors,
                 c->size);
        return false;
    }
    if (n_kv > body / GGUF_MIN_KV_SIZE ||
        n_kv * GGUF_MIN_KV_SIZE + n_tensors * GGUF_MIN_TENSOR_INFO_SIZE > body) {
        cur_fail(c, 16, "n_kv %" PRIu64 " with n_tensors %" PRIu64
                 " is impossible in a file of %zu bytes", n_kv, n_tensors, c->size);
        return false;
    }
    if (!read_kvs(c, g, n_kv) || !read_alignment(c, g))
        return false;
    /* offset_pos[i]: file offset of tensor i's offset field, for messages (grown alongside). */
    size_t *offset_pos = NULL, cap_pos = 0;
    bool ok = true;
    for (uint64_t i = 0; ok && i < n_tensors; i++) {
        ok = grow_array((void **)&offset_pos, &cap_pos, (size_t)i + 1, sizeof(size_t));
        if (!ok)
            cur_fail(c, c->pos, "out of memory");
        else
            ok = read_tensor_info(c, g, i, &offset_pos[i]);
    }
    if (ok)
        ok = finish_data_section(c, g, offset_pos);
    free(offset_pos);
    return ok;
}

/* The data section follows the infos, padded to the alignment; then check every tensor. */
static bool finish_data_section(struct cursor *c, struct lc_gguf *g, const size_t *offset_pos)
{
    c->where[0] = '\0';
    /* Data section: after the infos, padded to the alignment.  pos <= size < SIZE_MAX / 2 and
     * alignment <= 2^31, so this cannot overflow. */
    g->data_offset = (c->pos + g->alignment - 1) / g->alignment * g->alignment;
    if (g->data_offset > g->size) {
        /* A vocab-only file (no tensors) may end without the padding. */
        if (g->n_tensors > 0) {
            cur_fail(c, c->pos, "data section offset %zu (alignment %zu) is past the end of the "
                     "file", g->data_offset, g->alignment);
            return false;
        }
        g->data_offset = g->size;
    }
    return check_tensor_data(c, g, offset_pos);
}

struct lc_gguf *lc_gguf_open(const char *path, char **err)
{
    if (err)
        *err = NULL;
    if (!path) {
        set_err(err, "(null): no path given");
        return NULL;
    }
    /* O_NONBLOCK: a FIFO is refused below instead of waiting forever for a writer */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        set_err(err, "%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        set_err(err, "%s: cannot stat: %s", path, strerror(errno));
        close(fd);
        return NULL;
    }
    if (!S_ISREG(st.st_mode)) {
        set_err(err, "%s: not a regular file", path);
        close(fd);
        return NULL;
    }
    if ((uintmax_t)st.st_size < GGUF_HEADER_SIZE || (uintmax_t)st.st_size > SIZE_MAX / 2) {
        set_err(err, "%s: file size %jd cannot hold a GGUF header (truncated, magic, version, "
                "n_tensors and n_kv need %d bytes)",
                path, (intmax_t)st.st_size, GGUF_HEADER_SIZE);
        close(fd);
        return NULL;
    }
    const size_t size = (size_t)st.st_size;
    void *map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    int map_errno = errno;
    close(fd);
    if (map == MAP_FAILED) {
        set_err(err, "%s: cannot mmap %zu bytes: %s", path, size, strerror(map_errno));
        return NULL;
    }

    struct lc_gguf *g = calloc(1, sizeof(*g));
    char *pathcopy = strdup(path);
    if (!g || !pathcopy) {
        set_err(err, "%s: out of memory", path);
        free(g);
        free(pathcopy);
        munmap(map, size);
        return NULL;
    }
    g->path = pathcopy;
    g->map = map;
    g->size = size;
    struct cursor c = {.base = map, .size = size, .path = path, .err = err};
    if (!parse(&c, g)) {
        if (err && !*err)
            set_err(err, "%s: invalid GGUF file", path);
        lc_gguf_free(g);
        return NULL;
    }
    return g;
}

void lc_gguf_free(struct lc_gguf *g)
{
    if (!g)
        return;
    if (g->kvs)
        for (uint64_t i = 0; i < g->n_kv; i++)
            kv_clear(&g->kvs[i]);
    if (g->tensors)
        for (uint64_t i = 0; i < g->n_tensors; i++)
            free((char *)g->tensors[i].name);
    free(g->kvs);
    free(g->tensors);
    free(g->kv_index.slots);
    free(g->tensor_index.slots);
    if (g->map)
        munmap((void *)g->map, g->size);
    free(g->path);
    free(g);
}

uint32_t lc_gguf_version(const struct lc_gguf *g)
{
    return g->version;
}

const char *lc_gguf_path(const struct lc_gguf *g)
{
    return g->path;
}

size_t lc_gguf_alignment(const struct lc_gguf *g)
{
    return g->alignment;
}

size_t lc_gguf_file_size(const struct lc_gguf *g)
{
    return g->size;
}

size_t lc_gguf_data_offset(const struct lc_gguf *g)
{
    return g->data_offset;
}

const void *lc_gguf_map(const struct lc_gguf *g)
{
    return g->map;
}

/* ---------------------------------------------------------------- metadata accessors */

int64_t lc_gguf_n_kv(const struct lc_gguf *g)
{
    return (int64_t)g->n_kv;
}

int64_t lc_gguf_find_key(const struct lc_gguf *g, const char *key)
{
    if (!g || !key)
        return -1;
    return name_index_find(&g->kv_index, key, kv_name_of, g);
}

static const struct gguf_kv *kv_at(const struct lc_gguf *g, int64_t i)
{
    if (!g || i < 0 || (uint64_t)i >= g->n_kv)
        return NULL;
    return &g->kvs[i];
}

const char *lc_gguf_key(const struct lc_gguf *g, int64_t i)
{
    const struct gguf_kv *kv = kv_at(g, i);
    return kv ? kv->key : NULL;
}

enum lc_gguf_type lc_gguf_kv_type(const struct lc_gguf *g, int64_t i)
{
    const struct gguf_kv *kv = kv_at(g, i);
    return kv ? (enum lc_gguf_type)kv->type : LC_GGUF_TYPE_COUNT;
}

enum lc_gguf_type lc_gguf_arr_type(const struct lc_gguf *g, int64_t i)
{
    const struct gguf_kv *kv = kv_at(g, i);
    return kv && kv->type == LC_GGUF_ARRAY ? (enum lc_gguf_type)kv->arr_type : LC_GGUF_TYPE_COUNT;
}

uint64_t lc_gguf_arr_n(const struct lc_gguf *g, int64_t i)
{
    const struct gguf_kv *kv = kv_at(g, i);
    return kv && kv->type == LC_GGUF_ARRAY ? kv->arr_n : 0;
}

const void *lc_gguf_arr_data(const struct lc_gguf *g, int64_t i)
{
    const struct gguf_kv *kv = kv_at(g, i);
    return kv && kv->type == LC_GGUF_ARRAY && kv->arr_type != LC_GGUF_STRING ? kv->arr : NULL;
}

const char *lc_gguf_arr_str(const struct lc_gguf *g, int64_t i, uint64_t j)
{
    const struct gguf_kv *kv = kv_at(g, i);
    if (!kv || kv->type != LC_GGUF_ARRAY || kv->arr_type != LC_GGUF_STRING || j >= kv->arr_n)
        return NULL;
    return kv->arr_str[j];
}

const void *lc_gguf_val_data(const struct lc_gguf *g, int64_t i)
{
    const struct gguf_kv *kv = kv_at(g, i);
    return kv && kv->type != LC_GGUF_STRING && kv->type != LC_GGUF_ARRAY ? kv->val.raw : NULL;
}

/* An integer value as a sign flag and magnitude-free pair: *neg is set for negative values
 * (then *v holds the value as int64), else *v is the unsigned value.  False if not an integer. */
static bool kv_int(const struct gguf_kv *kv, bool *neg, uint64_t *u, int64_t *s)
{
    const uint8_t *r = kv->val.raw;
    int64_t sv = 0;
    uint64_t uv = 0;
    bool is_signed = false;
    switch (kv->type) {
    case LC_GGUF_UINT8: uv = r[0]; break;
    case LC_GGUF_UINT16: { uint16_t x; memcpy(&x, r, 2); uv = x; break; }
    case LC_GGUF_UINT32: { uint32_t x; memcpy(&x, r, 4); uv = x; break; }
    case LC_GGUF_UINT64: memcpy(&uv, r, 8); break;
    case LC_GGUF_INT8: { int8_t x; memcpy(&x, r, 1); sv = x; is_signed = true; break; }
    case LC_GGUF_INT16: { int16_t x; memcpy(&x, r, 2); sv = x; is_signed = true; break; }
    case LC_GGUF_INT32: { int32_t x; memcpy(&x, r, 4); sv = x; is_signed = true; break; }
    case LC_GGUF_INT64: memcpy(&sv, r, 8); is_signed = true; break;
    default: return false;
    }
    if (is_signed && sv < 0) {
        *neg = true;
        *s = sv;
    } else {
        *neg = false;
        *u = is_signed ? (uint64_t)sv : uv;
    }
    return true;
}

bool lc_gguf_get_u32(const struct lc_gguf *g, const char *key, uint32_t *out)
{
    const struct gguf_kv *kv = kv_at(g, lc_gguf_find_key(g, key));
    bool neg;
    uint64_t u = 0;
    int64_t s = 0;
    if (!kv || !kv_int(kv, &neg, &u, &s) || neg || u > UINT32_MAX)
        return false;
    *out = (uint32_t)u;
    return true;
}

bool lc_gguf_get_i64(const struct lc_gguf *g, const char *key, int64_t *out)
{
    const struct gguf_kv *kv = kv_at(g, lc_gguf_find_key(g, key));
    bool neg;
    uint64_t u = 0;
    int64_t s = 0;
    if (!kv || !kv_int(kv, &neg, &u, &s))
        return false;
    if (neg) {
        *out = s;
        return true;
    }
    if (u > (uint64_t)INT64_MAX)
        return false;
    *out = (int64_t)u;
    return true;
}

bool lc_gguf_get_f32(const struct lc_gguf *g, const char *key, float *out)
{
    const struct gguf_kv *kv = kv_at(g, lc_gguf_find_key(g, key));
    if (!kv)
        return false;
    if (kv->type == LC_GGUF_FLOAT32) {
        memcpy(out, kv->val.raw, 4);
        return true;
    }
    if (kv->type == LC_GGUF_FLOAT64) {
        double d;
        memcpy(&d, kv->val.raw, 8);
        *out = (float)d;
        return true;
    }
    return false;
}

bool lc_gguf_get_bool(const struct lc_gguf *g, const char *key, bool *out)
{
    const struct gguf_kv *kv = kv_at(g, lc_gguf_find_key(g, key));
    if (!kv || kv->type != LC_GGUF_BOOL)
        return false;
    *out = kv->val.raw[0] != 0;
    return true;
}

const char *lc_gguf_get_str(const struct lc_gguf *g, const char *key)
{
    const struct gguf_kv *kv = kv_at(g, lc_gguf_find_key(g, key));
    return kv && kv->type == LC_GGUF_STRING ? kv->str : NULL;
}

/* ---------------------------------------------------------------- tensors */

int64_t lc_gguf_n_tensors(const struct lc_gguf *g)
{
    return (int64_t)g->n_tensors;
}

const struct lc_gguf_tensor *lc_gguf_tensor(const struct lc_gguf *g, int64_t i)
{
    if (!g || i < 0 || (uint64_t)i >= g->n_tensors)
        return NULL;
    return &g->tensors[i];
}

const struct lc_gguf_tensor *lc_gguf_find_tensor(const struct lc_gguf *g, const char *name)
{
    if (!g || !name)
        return NULL;
    return lc_gguf_tensor(g, name_index_find(&g->tensor_index, name, tensor_name_of, g));
}

/* ---------------------------------------------------------------- writer */

/*
 * The writer keeps metadata and tensor infos in memory and writes the file in one pass:
 * header, KVs in insertion order, tensor infos, zero padding to the alignment, then each
 * tensor's data followed by zero padding to the alignment (also after the last one), exactly
 * as ggml's gguf_write_to_file lays a file out, so a file copied through it comes out
 * byte-identical.  Offsets: tensor i starts at sum over j < i of align(nbytes_j).
 *
 * The bytes go to a temporary file next to PATH ("PATH.tmp.XXXXXX"), which end() fsyncs and
 * renames over PATH, so PATH is never left half-written; any failure removes the temporary.
 */

/* ggml's GGML_MAX_NAME: llama.cpp rejects tensor names of this many bytes or more. */
#define GGUF_MAX_TENSOR_NAME 64

struct wkv {
    char *key;
    uint32_t type;
    uint32_t arr_type;
    uint64_t arr_n;
    uint8_t val[8];
    char *str;
    void *arr;      /* numeric array, arr_n * size bytes */
    char **arr_str; /* arr_n owned strings */
};

struct wtensor {
    char *name;
    enum lc_type type;
    uint32_t n_dims;
    int64_t ne[LC_GGUF_MAX_DIMS];
    size_t nbytes;
    uint64_t offset;
};

struct lc_gguf_writer {
    struct wkv *kvs;
    size_t n_kv, cap_kv;
    struct wtensor *tensors;
    size_t n_tensors, cap_tensors;
    /* streaming state, between begin and end */
    bool begun, failed;
    int fd;
    char *path, *tmp_path;
    size_t alignment;
    size_t next;     /* index of the next tensor whose data is expected */
    uint64_t pos;    /* bytes written so far */
};

static void wkv_clear(struct wkv *kv)
{
    free(kv->key);
    free(kv->str);
    free(kv->arr);
    if (kv->arr_str)
        for (uint64_t j = 0; j < kv->arr_n; j++)
            free(kv->arr_str[j]);
    free(kv->arr_str);
    memset(kv, 0, sizeof(*kv));
}

struct lc_gguf_writer *lc_gguf_writer_new(void)
{
    struct lc_gguf_writer *w = calloc(1, sizeof(*w));
    if (w)
        w->fd = -1;
    return w;
}

/* Abandon a begun file: close and remove the temporary. */
static void writer_abort(struct lc_gguf_writer *w)
{
    if (w->fd >= 0)
        close(w->fd);
    w->fd = -1;
    if (w->tmp_path)
        unlink(w->tmp_path);
    free(w->tmp_path);
    free(w->path);
    w->tmp_path = w->path = NULL;
    w->failed = true;
}

void lc_gguf_writer_free(struct lc_gguf_writer *w)
{
    if (!w)
        return;
    if (w->fd >= 0)
        writer_abort(w);
    for (size_t i = 0; i < w->n_kv; i++)
        wkv_clear(&w->kvs[i]);
    for (size_t i = 0; i < w->n_tensors; i++)
        free(w->tensors[i].name);
    free(w->kvs);
    free(w->tensors);
    free(w->path);
    free(w->tmp_path);
    free(w);
}

static int64_t writer_find(const struct lc_gguf_writer *w, const char *key)
{
    for (size_t i = 0; i < w->n_kv; i++)
        if (strcmp(w->kvs[i].key, key) == 0)
            return (int64_t)i;
    return -1;
}

/* Install a filled-in value (its key unset) under key: replace in place or append.  Takes
 * ownership of v's buffers in every case (freed on failure). */
static int writer_put(struct lc_gguf_writer *w, const char *key, struct wkv *v)
{
    if (!w || !key || !key[0] || w->begun) {
        wkv_clear(v);
        return -1;
    }
    int64_t i = writer_find(w, key);
    if (i >= 0) {
        char *k = w->kvs[i].key;
        w->kvs[i].key = NULL;
        wkv_clear(&w->kvs[i]);
        v->key = k;
        w->kvs[i] = *v;
        return 0;
    }
    if (w->n_kv == w->cap_kv) {
        size_t cap = w->cap_kv ? 2 * w->cap_kv : 32;
        struct wkv *k = realloc(w->kvs, cap * sizeof(*k));
        if (!k) {
            wkv_clear(v);
            return -1;
        }
        w->kvs = k;
        w->cap_kv = cap;
    }
    v->key = strdup(key);
    if (!v->key) {
        wkv_clear(v);
        return -1;
    }
    w->kvs[w->n_kv++] = *v;
    return 0;
}

static int writer_put_scalar(struct lc_gguf_writer *w, const char *key, uint32_t type,
                             const void *val)
{
    struct wkv v = {.type = type};
    memcpy(v.val, val, gguf_type_size(type));
    return writer_put(w, key, &v);
}

int lc_gguf_writer_set_u32(struct lc_gguf_writer *w, const char *key, uint32_t v)
{
    return writer_put_scalar(w, key, LC_GGUF_UINT32, &v);
}

int lc_gguf_writer_set_i32(struct lc_gguf_writer *w, const char *key, int32_t v)
{
    return writer_put_scalar(w, key, LC_GGUF_INT32, &v);
}

int lc_gguf_writer_set_u16(struct lc_gguf_writer *w, const char *key, uint16_t v)
{
    return writer_put_scalar(w, key, LC_GGUF_UINT16, &v);
}

int lc_gguf_writer_set_f32(struct lc_gguf_writer *w, const char *key, float v)
{
    return writer_put_scalar(w, key, LC_GGUF_FLOAT32, &v);
}

int lc_gguf_writer_set_bool(struct lc_gguf_writer *w, const char *key, bool v)
{
    uint8_t b = v ? 1 : 0;
    return writer_put_scalar(w, key, LC_GGUF_BOOL, &b);
}

int lc_gguf_writer_set_str(struct lc_gguf_writer *w, const char *key, const char *v)
{
    if (!v)
        return -1;
    struct wkv kv = {.type = LC_GGUF_STRING, .str = strdup(v)};
    if (!kv.str)
        return -1;
    return writer_put(w, key, &kv);
}

int lc_gguf_writer_set_arr(struct lc_gguf_writer *w, const char *key, enum lc_gguf_type t,
                           const void *data, uint64_t n)
{
    const size_t esize = gguf_type_size((uint32_t)t);
    if (esize == 0 || (n > 0 && !data) || n > SIZE_MAX / esize)
        return -1;
    struct wkv kv = {.type = LC_GGUF_ARRAY, .arr_type = (uint32_t)t, .arr_n = n};
    kv.arr = malloc(n ? (size_t)n * esize : 1);
    if (!kv.arr)
        return -1;
    if (n)
        memcpy(kv.arr, data, (size_t)n * esize);
    return writer_put(w, key, &kv);
}

int lc_gguf_writer_set_arr_str(struct lc_gguf_writer *w, const char *key, const char *const *v,
                               uint64_t n)
{
    if ((n > 0 && !v) || n > SIZE_MAX / sizeof(char *))
        return -1;
    struct wkv kv = {.type = LC_GGUF_ARRAY, .arr_type = LC_GGUF_STRING, .arr_n = 0};
    kv.arr_str = calloc(n ? (size_t)n : 1, sizeof(char *));
    if (!kv.arr_str)
        return -1;
    for (uint64_t j = 0; j < n; j++) {
        kv.arr_str[j] = v[j] ? strdup(v[j]) : NULL;
        kv.arr_n = j + 1; /* so that wkv_clear frees what was copied */
        if (!kv.arr_str[j]) {
            wkv_clear(&kv);
            return -1;
        }
    }
    return writer_put(w, key, &kv);
}

int lc_gguf_writer_remove_key(struct lc_gguf_writer *w, const char *key)
{
    if (!w || !key || w->begun)
        return -1;
    int64_t i = writer_find(w, key);
    if (i < 0)
        return -1;
    wkv_clear(&w->kvs[i]);
    memmove(&w->kvs[i], &w->kvs[i + 1], (w->n_kv - (size_t)i - 1) * sizeof(*w->kvs));
    w->n_kv--;
    return 0;
}

int lc_gguf_writer_copy_kvs(struct lc_gguf_writer *w, const struct lc_gguf *src)
{
    if (!w || !src)
        return -1;
    for (uint64_t i = 0; i < src->n_kv; i++) {
        const struct gguf_kv *kv = &src->kvs[i];
        int rc;
        if (kv->type == LC_GGUF_STRING)
            rc = lc_gguf_writer_set_str(w, kv->key, kv->str);
        else if (kv->type == LC_GGUF_ARRAY && kv->arr_type == LC_GGUF_STRING)
            rc = lc_gguf_writer_set_arr_str(w, kv->key, (const char *const *)kv->arr_str,
                                            kv->arr_n);
        else if (kv->type == LC_GGUF_ARRAY)
            rc = lc_gguf_writer_set_arr(w, kv->key, (enum lc_gguf_type)kv->arr_type, kv->arr,
                                        kv->arr_n);
        else
            rc = writer_put_scalar(w, kv->key, kv->type, kv->val.raw);
        if (rc != 0)
            return -1;
    }
    return 0;
}

int lc_gguf_writer_add_tensor(struct lc_gguf_writer *w, const char *name, enum lc_type type,
                              uint32_t n_dims, const int64_t *ne)
{
    if (!w || w->begun || !name || !name[0] || strlen(name) >= GGUF_MAX_TENSOR_NAME || !ne ||
        n_dims < 1 || n_dims > LC_GGUF_MAX_DIMS)
        return -1;
    const struct lc_type_traits *tt = lc_type_traits((int)type);
    if (!tt)
        return -1;
    struct wtensor t = {.type = type, .n_dims = n_dims};
    uint64_t nel = 1;
    for (uint32_t d = 0; d < LC_GGUF_MAX_DIMS; d++) {
        t.ne[d] = d < n_dims ? ne[d] : 1;
        if (t.ne[d] < 1 || nel > (uint64_t)INT64_MAX / (uint64_t)t.ne[d])
            return -1;
        nel *= (uint64_t)t.ne[d];
    }
    if (t.ne[0] % tt->blck_size != 0 || nel / (uint64_t)tt->blck_size > SIZE_MAX / tt->type_size)
        return -1;
    t.nbytes = (size_t)(nel / (uint64_t)tt->blck_size) * tt->type_size;
    for (size_t i = 0; i < w->n_tensors; i++)
        if (strcmp(w->tensors[i].name, name) == 0)
            return -1;
    if (w->n_tensors == w->cap_tensors) {
        size_t cap = w->cap_tensors ? 2 * w->cap_tensors : 64;
        struct wtensor *p = realloc(w->tensors, cap * sizeof(*p));
        if (!p)
            return -1;
        w->tensors = p;
        w->cap_tensors = cap;
    }
    t.name = strdup(name);
    if (!t.name)
        return -1;
    w->tensors[w->n_tensors++] = t;
    return 0;
}

/* ---- serialization */

struct wbuf {
    uint8_t *p;
    size_t n, cap;
    bool oom;
};

static void wb_put(struct wbuf *b, const void *data, size_t n)
{
    if (b->oom)
        return;
    if (n > b->cap - b->n) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap - b->n < n) {
            if (cap > SIZE_MAX / 2) {
                b->oom = true;
                return;
            }
            cap *= 2;
        }
        uint8_t *p = realloc(b->p, cap);
        if (!p) {
            b->oom = true;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, data, n);
    b->n += n;
}

static void wb_u32(struct wbuf *b, uint32_t v)
{
    wb_put(b, &v, 4);
}

static void wb_u64(struct wbuf *b, uint64_t v)
{
    wb_put(b, &v, 8);
}

static void wb_str(struct wbuf *b, const char *s)
{
    size_t n = strlen(s);
    wb_u64(b, n);
    wb_put(b, s, n);
}

/* Write all of data to w->fd; on error abort the file and set *err. */
static int writer_write(struct lc_gguf_writer *w, const void *data, size_t n, char **err)
{
    const uint8_t *p = data;
    while (n > 0) {
        ssize_t r = write(w->fd, p, n > ((size_t)1 << 30) ? ((size_t)1 << 30) : n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            set_err(err, "%s: write failed at offset %" PRIu64 ": %s", w->path, w->pos,
                    r < 0 ? strerror(errno) : "no progress");
            writer_abort(w);
            return -1;
        }
        p += r;
        n -= (size_t)r;
        w->pos += (uint64_t)r;
    }
    return 0;
}

/* Zero bytes up to the next multiple of the alignment. */
static int writer_pad(struct lc_gguf_writer *w, char **err)
{
    static const uint8_t zeros[4096];
    uint64_t pad = (w->alignment - w->pos % w->alignment) % w->alignment;
    while (pad > 0) {
        size_t n = pad > sizeof(zeros) ? sizeof(zeros) : (size_t)pad;
        if (writer_write(w, zeros, n, err) != 0)
            return -1;
        pad -= n;
    }
    return 0;
}

int lc_gguf_writer_begin(struct lc_gguf_writer *w, const char *path, char **err)
{
    if (err)
        *err = NULL;
    if (!w || !path || !path[0]) {
        set_err(err, "gguf writer: no path given");
        return -1;
    }
    if (w->begun) {
        set_err(err, "%s: gguf writer already used", path);
        return -1;
    }
    /* Alignment: general.alignment if set (must be a u32 power of two, as the reader wants). */
    w->alignment = LC_GGUF_DEFAULT_ALIGNMENT;
    int64_t ai = writer_find(w, "general.alignment");
    if (ai >= 0) {
        uint32_t a = 0;
        if (w->kvs[ai].type == LC_GGUF_UINT32)
            memcpy(&a, w->kvs[ai].val, 4);
        if (a == 0 || (a & (a - 1)) != 0) {
            set_err(err, "%s: general.alignment must be a u32 power of two", path);
            return -1;
        }
        w->alignment = a;
    }
    /* Offsets: the running sum of the padded sizes in file order, the only layout the reader
     * (and gguf.cpp) accepts. */
    uint64_t off = 0;
    for (size_t i = 0; i < w->n_tensors; i++) {
        const size_t nb = w->tensors[i].nbytes;
        const uint64_t padded = ((uint64_t)nb + w->alignment - 1) / w->alignment * w->alignment;
        if (padded < nb || off > UINT64_MAX - padded) {
            set_err(err, "%s: tensor data too large", path);
            return -1;
        }
        w->tensors[i].offset = off;
        off += padded;
    }

    /* Header, KVs, tensor infos. */
    struct wbuf b = {0};
    wb_put(&b, GGUF_MAGIC, 4);
    wb_u32(&b, 3);
    wb_u64(&b, w->n_tensors);
    wb_u64(&b, w->n_kv);
    for (size_t i = 0; i < w->n_kv; i++) {
        const struct wkv *kv = &w->kvs[i];
        wb_str(&b, kv->key);
        wb_u32(&b, kv->type);
        if (kv->type == LC_GGUF_STRING) {
            wb_str(&b, kv->str);
        } else if (kv->type == LC_GGUF_ARRAY) {
            wb_u32(&b, kv->arr_type);
            wb_u64(&b, kv->arr_n);
            if (kv->arr_type == LC_GGUF_STRING)
                for (uint64_t j = 0; j < kv->arr_n; j++)
                    wb_str(&b, kv->arr_str[j]);
            else
                wb_put(&b, kv->arr, (size_t)kv->arr_n * gguf_type_size(kv->arr_type));
        } else {
            wb_put(&b, kv->val, gguf_type_size(kv->type));
        }
    }
    for (size_t i = 0; i < w->n_tensors; i++) {
        const struct wtensor *t = &w->tensors[i];
        wb_str(&b, t->name);
        wb_u32(&b, t->n_dims);
        for (uint32_t d = 0; d < t->n_dims; d++)
            wb_u64(&b, (uint64_t)t->ne[d]);
        wb_u32(&b, (uint32_t)t->type);
        wb_u64(&b, t->offset);
    }
    if (b.oom) {
        free(b.p);
        set_err(err, "%s: out of memory building the GGUF header", path);
        return -1;
    }

    /* The temporary file next to the destination, so that rename() is atomic.  w->tmp_path
     * is set only once the file exists: writer_abort unlinks it. */
    w->path = strdup(path);
    size_t tl = strlen(path) + sizeof(".tmp.XXXXXX");
    char *tmp = malloc(tl);
    if (!w->path || !tmp) {
        free(tmp);
        free(b.p);
        set_err(err, "%s: out of memory", path);
        writer_abort(w);
        return -1;
    }
    snprintf(tmp, tl, "%s.tmp.XXXXXX", path);
    int fd = mkostemp(tmp, O_CLOEXEC);
    if (fd < 0) {
        set_err(err, "%s: cannot create temporary file %s: %s", path, tmp, strerror(errno));
        free(tmp);
        free(b.p);
        writer_abort(w);
        return -1;
    }
    w->fd = fd;
    w->tmp_path = tmp;
    w->begun = true;
    w->failed = false;
    w->pos = 0;
    w->next = 0;
    (void)fchmod(w->fd, 0644); /* mkstemp creates 0600; a model file is not secret */
    int rc = writer_write(w, b.p, b.n, err);
    free(b.p);
    if (rc != 0)
        return -1;
    return writer_pad(w, err);
}

int lc_gguf_writer_write_data(struct lc_gguf_writer *w, const void *data, size_t nbytes,
                              char **err)
{
    if (err)
        *err = NULL;
    if (!w || !w->begun || w->failed || w->fd < 0) {
        set_err(err, "gguf writer: write_data without a successful begin");
        return -1;
    }
    if (w->next >= w->n_tensors) {
        set_err(err, "%s: data for more tensors than declared (%zu)", w->path, w->n_tensors);
        writer_abort(w);
        return -1;
    }
    const struct wtensor *t = &w->tensors[w->next];
    if (nbytes != t->nbytes || (nbytes > 0 && !data)) {
        set_err(err, "%s: tensor %zu '%s': got %zu bytes of data, expected %zu", w->path, w->next,
                t->name, nbytes, t->nbytes);
        writer_abort(w);
        return -1;
    }
    if (writer_write(w, data, nbytes, err) != 0 || writer_pad(w, err) != 0)
        return -1;
    w->next++;
    return 0;
}

int lc_gguf_writer_end(struct lc_gguf_writer *w, char **err)
{
    if (err)
        *err = NULL;
    if (!w || !w->begun || w->failed || w->fd < 0) {
        set_err(err, "gguf writer: end without a successful begin");
        return -1;
    }
    if (w->next != w->n_tensors) {
        set_err(err, "%s: data written for %zu of %zu tensors (next: '%s')", w->path, w->next,
                w->n_tensors, w->tensors[w->next].name);
        writer_abort(w);
        return -1;
    }
    if (fsync(w->fd) != 0) {
        set_err(err, "%s: fsync failed: %s", w->path, strerror(errno));
        writer_abort(w);
        return -1;
    }
    int fd = w->fd;
    w->fd = -1;
    if (close(fd) != 0) {
        set_err(err, "%s: close failed: %s", w->path, strerror(errno));
        writer_abort(w);
        return -1;
    }
    if (rename(w->tmp_path, w->path) != 0) {
        set_err(err, "%s: cannot rename %s into place: %s", w->path, w->tmp_path,
                strerror(errno));
        writer_abort(w);
        return -1;
    }
    free(w->tmp_path);
    w->tmp_path = NULL;
    /* Make the rename durable: fsync the directory (best effort, no allocation). */
    char dir[PATH_MAX];
    const char *slash = strrchr(w->path, '/');
    const size_t dl = slash ? (size_t)(slash - w->path) + (slash == w->path) : 0;
    if (dl < sizeof(dir)) {
        memcpy(dir, slash ? w->path : ".", slash ? dl : 1);
        dir[slash ? dl : 1] = '\0';
        int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd >= 0) {
            (void)fsync(dfd);
            close(dfd);
        }
    }
    free(w->path);
    w->path = NULL;
    w->failed = true; /* done: a writer writes one file */
    return 0;
}

/* ---------------------------------------------------------------- split file names */

#define SPLIT_MAX_COUNT 99999 /* five digits */

static bool split_args_ok(int no, int count)
{
    return count >= 1 && count <= SPLIT_MAX_COUNT && no >= 1 && no <= count;
}

int lc_gguf_split_path(char *buf, size_t len, const char *prefix, int no, int count)
{
    if (!buf || len == 0)
        return -1;
    buf[0] = '\0';
    if (!prefix || !split_args_ok(no, count))
        return -1;
    int n = snprintf(buf, len, "%s-%05d-of-%05d.gguf", prefix, no, count);
    if (n < 0 || (size_t)n >= len) {
        buf[0] = '\0';
        return -1;
    }
    return 0;
}

int lc_gguf_split_prefix(char *buf, size_t len, const char *path, int no, int count)
{
    if (!buf || len == 0)
        return -1;
    buf[0] = '\0';
    if (!path || !split_args_ok(no, count))
        return -1;
    char suffix[48];
    snprintf(suffix, sizeof(suffix), "-%05d-of-%05d.gguf", no, count);
    const size_t pl = strlen(path), sl = strlen(suffix);
    if (pl <= sl || strcmp(path + pl - sl, suffix) != 0)
        return -1;
    const size_t n = pl - sl;
    if (n >= len)
        return -1;
    memcpy(buf, path, n);
    buf[n] = '\0';
    return 0;
}
