/*
 * test-gguf-malformed.c - the GGUF reader on hostile input.
 *
 * A real file (stories260K-ff192-q4_1.gguf) is loaded into memory; mutated copies are written
 * to a temporary directory and opened.  Every targeted mutation must fail with a message that
 * names the file and the offending field; truncations and random byte changes in the header
 * region must either open cleanly or fail cleanly.  Run under ASan/UBSan (CI) this also checks
 * that nothing crashes, reads out of bounds or leaks.
 */
#include "gguf.h"
#include "model.h"
#include "quant.h"
#include "testutil.h"

#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static uint8_t *orig;
static size_t orig_size;
static char dir[64];
static char path[128];

/* ---------------------------------------------------------------- field offsets of the file */

/* Offsets of fields in the original file, found by a small trusting walker (the file is known
 * to be valid: test-gguf checks it against llama.cpp's numbers). */
struct kv_off {
    size_t key_len, key, type, value; /* value: first byte after the type */
    char key_str[64];
};
struct tensor_off {
    size_t name_len, name, n_dims, ne[4], type, offset;
    char name_str[64];
};
static struct kv_off kvo[64];
static struct tensor_off to[64];
static size_t n_kvo, n_to, infos_end;

static uint64_t rd64(size_t o)
{
    uint64_t v;
    memcpy(&v, orig + o, 8);
    return v;
}

static uint32_t rd32(size_t o)
{
    uint32_t v;
    memcpy(&v, orig + o, 4);
    return v;
}

static size_t scalar_size(uint32_t t)
{
    static const size_t sz[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    return sz[t];
}

static void walk(void)
{
    size_t p = 16;
    n_kvo = rd64(p);
    p += 8;
    for (size_t i = 0; i < n_kvo; i++) {
        struct kv_off *k = &kvo[i];
        k->key_len = p;
        uint64_t len = rd64(p);
        k->key = p + 8;
        memcpy(k->key_str, orig + k->key, len);
        k->key_str[len] = 0;
        p += 8 + len;
        k->type = p;
        uint32_t t = rd32(p);
        p += 4;
        k->value = p;
        if (t == LC_GGUF_STRING) {
            p += 8 + rd64(p);
        } else if (t == LC_GGUF_ARRAY) {
            uint32_t et = rd32(p);
            uint64_t n = rd64(p + 4);
            p += 12;
            for (uint64_t j = 0; j < n; j++)
                p += et == LC_GGUF_STRING ? 8 + rd64(p) : scalar_size(et);
        } else {
            p += scalar_size(t);
        }
    }
    n_to = rd64(8);
    for (size_t i = 0; i < n_to; i++) {
        struct tensor_off *t = &to[i];
        t->name_len = p;
        uint64_t len = rd64(p);
        t->name = p + 8;
        memcpy(t->name_str, orig + t->name, len);
        t->name_str[len] = 0;
        p += 8 + len;
        t->n_dims = p;
        uint32_t nd = rd32(p);
        p += 4;
        for (uint32_t d = 0; d < nd; d++, p += 8)
            t->ne[d] = p;
        t->type = p;
        t->offset = p + 4;
        p += 12;
    }
    infos_end = p;
}

static const struct kv_off *kv_named(const char *key)
{
    for (size_t i = 0; i < n_kvo; i++)
        if (strcmp(kvo[i].key_str, key) == 0)
            return &kvo[i];
    fprintf(stderr, "test bug: no key %s\n", key);
    exit(1);
}

static const struct tensor_off *tensor_named(const char *name)
{
    for (size_t i = 0; i < n_to; i++)
        if (strcmp(to[i].name_str, name) == 0)
            return &to[i];
    fprintf(stderr, "test bug: no tensor %s\n", name);
    exit(1);
}

/* ---------------------------------------------------------------- mutation helpers */

static uint8_t *buf; /* the working copy */

static void reset(void)
{
    memcpy(buf, orig, orig_size);
}

static void put32(size_t o, uint32_t v)
{
    memcpy(buf + o, &v, 4);
}

static void put64(size_t o, uint64_t v)
{
    memcpy(buf + o, &v, 8);
}

static void write_file(const uint8_t *data, size_t len)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0 || write(fd, data, len) != (ssize_t)len) {
        perror(path);
        exit(1);
    }
    close(fd);
}

/* Open the file as it is on disk: returns 1 if it opened, 0 if it failed cleanly (message
 * names the file), after checking the message in *msg_out (freed by caller) if wanted. */
static int try_open(char **msg_out)
{
    char *err = NULL;
    struct lc_gguf *g = lc_gguf_open(path, &err);
    if (g) {
        /* Opened: everything it reports must be usable. */
        CHECK(err == NULL, "err set on success");
        for (int64_t i = 0; i < lc_gguf_n_kv(g); i++) {
            const char *k = lc_gguf_key(g, i);
            CHECK(k && lc_gguf_find_key(g, k) == i, "kv %lld lookup", (long long)i);
            if (lc_gguf_kv_type(g, i) == LC_GGUF_ARRAY && lc_gguf_arr_type(g, i) == LC_GGUF_STRING)
                for (uint64_t j = 0; j < lc_gguf_arr_n(g, i); j++)
                    CHECK(lc_gguf_arr_str(g, i, j) != NULL, "arr str");
        }
        volatile uint8_t sink = 0;
        for (int64_t i = 0; i < lc_gguf_n_tensors(g); i++) {
            const struct lc_gguf_tensor *t = lc_gguf_tensor(g, i);
            if (t->nbytes) {
                sink ^= ((const uint8_t *)t->data)[0];
                sink ^= ((const uint8_t *)t->data)[t->nbytes - 1];
            }
        }
        (void)sink;
        lc_gguf_free(g);
        free(err);
        return 1;
    }
    CHECK(err != NULL && strstr(err, path) != NULL, "failure without a message naming the file: %s",
          err ? err : "(null)");
    if (msg_out)
        *msg_out = err;
    else
        free(err);
    return 0;
}

static int verbose;

/* The working copy (first len bytes) must fail with a message containing each word. */
static void expect_fail_len(const char *label, size_t len, const char *w1, const char *w2)
{
    write_file(buf, len);
    char *err = NULL;
    int ok = try_open(&err);
    CHECK(!ok, "%s: opened but must fail", label);
    if (!ok && err) {
        CHECK(!w1 || strstr(err, w1), "%s: message lacks '%s': %s", label, w1, err);
        CHECK(!w2 || strstr(err, w2), "%s: message lacks '%s': %s", label, w2, err);
        CHECK(strstr(err, "file offset") || strstr(err, "file size"),
              "%s: message lacks the offset: %s", label, err);
        if (verbose)
            fprintf(stderr, "  %-36s %s\n", label, err);
    }
    free(err);
}

static void expect_fail(const char *label, const char *w1, const char *w2)
{
    expect_fail_len(label, orig_size, w1, w2);
}

static void expect_ok(const char *label)
{
    write_file(buf, orig_size);
    char *err = NULL;
    CHECK(try_open(&err) == 1, "%s: must open: %s", label, err ? err : "");
    free(err);
}

/* ---------------------------------------------------------------- targeted mutations */

/*
 * A weight in a type ggml knows and llamachat does not compute: the file opens (the type has a
 * layout, the smaller tensor still fits), the model refuses it naming the type, never
 * "unknown".  The file's last tensor (its data may shrink), blk.4.ffn_up.weight, is 64 wide:
 * whole blocks of MXFP4 (32), NVFP4 and Q2_0 (64).
 */
static void test_model_types(void)
{
    static const struct { uint32_t id; const char *name; } types[] = {
        {LC_TYPE_MXFP4, "mxfp4"}, {LC_TYPE_NVFP4, "nvfp4"}, {LC_TYPE_Q2_0, "q2_0"}};
    const struct tensor_off *up = tensor_named("blk.4.ffn_up.weight");
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        reset();
        put32(up->type, types[i].id);
        write_file(buf, orig_size);
        char *err = NULL;
        struct lc_model *m = lc_model_load(path, false, &err);
        char want[128];
        snprintf(want, sizeof want, "tensor 'blk.4.ffn_up.weight' has type %s, which is not supported",
                 types[i].name);
        CHECK(!m && err && strstr(err, want), "type %u: %s", types[i].id, err ? err : "loaded");
        if (m)
            lc_model_free(m);
        free(err);
    }
}

static void test_header(void)
{
    reset();
    expect_ok("unmodified copy");
    reset();
    memcpy(buf, "GGML", 4);
    expect_fail("magic GGML", "bad magic \"GGML\"", "(file offset 0)");
    reset();
    buf[0] = 0;
    expect_fail("magic NUL", "magic", NULL);
    reset();
    put32(4, 1);
    expect_fail("version 1", "version 1 is not supported", "(file offset 4)");
    reset();
    put32(4, 0);
    expect_fail("version 0", "version 0", NULL);
    reset();
    put32(4, 4);
    expect_fail("version 4", "version 4", NULL);
    reset();
    put32(4, 0xffffffffu);
    expect_fail("version 0xffffffff", "version 4294967295", NULL);
    reset();
    put32(4, 0x03000000u);
    expect_fail("version big-endian", "version", "big-endian");
    reset();
    put32(4, 2);
    expect_ok("version 2"); /* v2 and v3 share the little-endian layout */

    const uint64_t huge[] = {UINT64_MAX, (uint64_t)1 << 63, (uint64_t)1 << 40, orig_size};
    for (size_t i = 0; i < 4; i++) {
        reset();
        put64(8, huge[i]);
        expect_fail("n_tensors huge", "n_tensors", NULL);
        reset();
        put64(16, huge[i]);
        expect_fail("n_kv huge", "n_kv", NULL);
    }
    /* One too many: plausible by size, but the extra entry is read from the wrong bytes. */
    reset();
    put64(8, n_to + 1);
    expect_fail("n_tensors + 1", NULL, NULL);
    reset();
    put64(16, n_kvo + 1);
    expect_fail("n_kv + 1", NULL, NULL);
    /* Fewer: the rest is misread as tensor infos. */
    reset();
    put64(16, n_kvo - 1);
    expect_fail("n_kv - 1", NULL, NULL);
}

static void test_kv(void)
{
    const struct kv_off *tokens = kv_named("tokenizer.ggml.tokens");
    const struct kv_off *scores = kv_named("tokenizer.ggml.scores");
    const struct kv_off *arch = kv_named("general.architecture");
    const struct kv_off *eos = kv_named("tokenizer.ggml.eos_token_id");

        /* Huge lengths, and lengths one more than the bytes left after the length field. */
    const uint64_t lens[] = {UINT64_MAX, (uint64_t)1 << 63, orig_size, 0};
    for (size_t i = 0; i < 4; i++) {
        reset();
        put64(arch->key_len, i < 3 ? lens[i] : orig_size - (arch->key_len + 8) + 1);
        expect_fail("key length huge", "kv 4: key length", "exceeds");
        reset();
        put64(arch->value, i < 3 ? lens[i] : orig_size - (arch->value + 8) + 1);
        expect_fail("string length huge", "string value length", "'general.architecture'");
        reset();
        const size_t tok0 = tokens->value + 12; /* length of token 0 */
        put64(tok0, i < 3 ? lens[i] : orig_size - (tok0 + 8) + 1);
        expect_fail("array string length huge", "string 0 of 512", "length");
    }
    reset();
    put64(arch->key_len, 0);
    expect_fail("empty key", "empty key", NULL);
    reset();
    buf[arch->key + 3] = 0;
    expect_fail("NUL in key", "key contains a NUL", NULL);
    reset();
    buf[arch->value + 8 + 2] = 0;
    expect_fail("NUL in string", "string value contains a NUL", "'general.architecture'");
    reset();
    buf[tokens->value + 12 + 8 + 1] = 0; /* "<unk>" -> "<\0nk>" */
    expect_fail("NUL in array string", "string 0 of 512 contains a NUL", "'tokenizer.ggml.tokens'");
    reset();
    buf[eos->key + strlen("tokenizer.ggml.")] = 'b'; /* eos_token_id -> bos_token_id */
    expect_fail("duplicate key", "duplicate key", "'tokenizer.ggml.bos_token_id'");

    const uint32_t bad_types[] = {13, 100, 0x80000000u, 0xffffffffu};
    for (size_t i = 0; i < 4; i++) {
        reset();
        put32(arch->type, bad_types[i]);
        expect_fail("bad value type", "invalid value type", NULL);
        reset();
        put32(tokens->value, bad_types[i]);
        expect_fail("bad array element type", "invalid array element type", NULL);
    }
    reset();
    put32(tokens->value, LC_GGUF_ARRAY);
    expect_fail("nested array", "element type 9", "nested");

    /* Array counts whose byte size overflows 64 bits, or just exceeds the file. */
    const uint64_t counts[] = {UINT64_MAX, (uint64_t)1 << 62, ((uint64_t)1 << 61) + 1, orig_size};
    for (size_t i = 0; i < 4; i++) {
        reset();
        put64(tokens->value + 4, counts[i]);
        expect_fail("string array count", "array count", "string");
        reset();
        put64(scores->value + 4, counts[i]);
        expect_fail("f32 array count", "array count", "f32");
    }
    /* A count that fits the file but runs the array into the tensor infos. */
    reset();
    put64(scores->value + 4, 513);
    expect_fail("f32 array count + 1", NULL, NULL);
    /* Changing a scalar's type changes how many bytes it takes: misparse, clean failure. */
    reset();
    put32(eos->type, LC_GGUF_UINT64);
    expect_fail("u32 read as u64", NULL, NULL);
}

/* general.file_type (u32) renamed in place to general.alignment: same length. */
static void test_alignment(void)
{
    const struct kv_off *ft = kv_named("general.file_type");
    const struct {
        uint32_t type, value;
        const char *w1, *w2;
    } cases[] = {
        {LC_GGUF_UINT32, 0, "alignment 0", "power of two"},
        {LC_GGUF_UINT32, 3, "alignment 3", "power of two"},
        {LC_GGUF_UINT32, 48, "alignment 48", "power of two"},
        {LC_GGUF_UINT32, 0xffffffffu, "alignment 4294967295", "power of two"},
        {LC_GGUF_INT32, 32, "alignment", "type u32"},
        {LC_GGUF_FLOAT32, 32, "alignment", "type u32"},
        /* valid, but 34816 (tensor 1) is not a multiple of it */
        {LC_GGUF_UINT32, 1u << 31, "offset 34816", "alignment 2147483648"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        reset();
        memcpy(buf + ft->key, "general.alignment", 17);
        put32(ft->type, cases[i].type);
        put32(ft->value, cases[i].value);
        expect_fail("general.alignment", cases[i].w1, cases[i].w2);
    }
    /* The message points at the value (or at the type when the type is wrong). */
    char want[64];
    reset();
    memcpy(buf + ft->key, "general.alignment", 17);
    put32(ft->value, 3);
    snprintf(want, sizeof(want), "(file offset %zu)", ft->value);
    expect_fail("general.alignment offset", "kv 20 'general.alignment': alignment 3", want);
    put32(ft->type, LC_GGUF_INT32);
    snprintf(want, sizeof(want), "(file offset %zu)", ft->type);
    expect_fail("general.alignment type offset", "not i32", want);
    /* The default value, stated explicitly: opens. */
    reset();
    memcpy(buf + ft->key, "general.alignment", 17);
    put32(ft->value, 32);
    expect_ok("general.alignment 32");
}

static void test_tensors(void)
{
    const struct tensor_off *embd = tensor_named("token_embd.weight");
    const struct tensor_off *norm = tensor_named("output_norm.weight");
    const struct tensor_off *last = &to[n_to - 1];
    const struct tensor_off *k0 = tensor_named("blk.0.attn_k.weight");

    const uint64_t lens[] = {UINT64_MAX, orig_size, 0};
    for (size_t i = 0; i < 3; i++) {
        reset();
        put64(embd->name_len, lens[i]);
        expect_fail("tensor name length", i == 2 ? "empty name" : "name length", "tensor 2");
    }
    reset();
    buf[embd->name + 2] = 0;
    expect_fail("NUL in tensor name", "name contains a NUL", "tensor 2");
    reset();
    buf[k0->name + strlen("blk.0.attn_")] = 'q';
    /* blk.0.attn_q.weight comes after attn_k: the later one is the duplicate */
    expect_fail("duplicate tensor name", "duplicate tensor name", "'blk.0.attn_q.weight'");

    const uint32_t bad_dims[] = {0, 5, 7, 0xffffffffu};
    for (size_t i = 0; i < 4; i++) {
        reset();
        put32(embd->n_dims, bad_dims[i]);
        expect_fail("n_dims", "n_dims", "'token_embd.weight'");
    }
    char want[64];
    reset();
    put32(embd->n_dims, 7);
    snprintf(want, sizeof(want), "(file offset %zu)", embd->n_dims);
    expect_fail("n_dims 7", "tensor 2 'token_embd.weight': n_dims 7 > 4", want);
    reset();
    put32(embd->type, 77);
    snprintf(want, sizeof(want), "(file offset %zu)", embd->type);
    expect_fail("type 77", "tensor 2 'token_embd.weight': unknown tensor type id 77", want);
    reset();
    put32(embd->type, 31); /* a type ggml removed: named */
    expect_fail("type 31", "tensor 2 'token_embd.weight': unsupported tensor type id 31 (q4_0_4_4, which ggml removed", want);
    reset();
    put64(last->offset, rd64(last->offset) + 32);
    snprintf(want, sizeof(want), "(file offset %zu)", last->offset);
    expect_fail("offset +32", "tensor 47 'blk.4.ffn_up.weight': data offset 204064", want);
    reset();
    put64(embd->ne[1], 0);
    snprintf(want, sizeof(want), "(file offset %zu)", embd->ne[1]);
    expect_fail("ne[1] 0", "dimension ne[1] = 0", want);

    const uint64_t bad_ne[] = {0, UINT64_MAX, (uint64_t)1 << 63};
    for (size_t i = 0; i < 3; i++) {
        reset();
        put64(embd->ne[1], bad_ne[i]);
        expect_fail("dim", "ne[1]", ">= 1");
        reset();
        put64(embd->ne[0], bad_ne[i]);
        expect_fail("dim", "ne[0]", ">= 1");
    }
    /* 64 * 2^58 = 2^64: the element count overflows; 64 * 2^57 = 2^63 > INT64_MAX too. */
    const uint64_t ovf[] = {(uint64_t)1 << 58, (uint64_t)1 << 57, INT64_MAX};
    for (size_t i = 0; i < 3; i++) {
        reset();
        put64(embd->ne[1], ovf[i]);
        expect_fail("dim product overflow", "ne[1]", "overflows");
    }
    /* Fits int64 but not the file. */
    reset();
    put64(embd->ne[1], (uint64_t)1 << 40);
    expect_fail("tensor too big", "outside the file", "'token_embd.weight'");

    /* 43: one past ggml 0.27.0's last id (40-42 are NVFP4, Q1_0, Q2_0 now) */
    const uint32_t bad_types[] = {4, 5, 31, 38, 43, 1000, 0x7fffffffu, 0xffffffffu};
    for (size_t i = 0; i < sizeof(bad_types) / sizeof(bad_types[0]); i++) {
        char word[64];
        snprintf(word, sizeof(word), "type id %u", bad_types[i]);
        reset();
        put32(embd->type, bad_types[i]);
        expect_fail("tensor type", word, "'token_embd.weight'");
    }
    reset();
    put32(norm->type, LC_TYPE_Q6_K); /* ne[0] = 64 < 256 */
    expect_fail("row not whole blocks", "block size 256", "'output_norm.weight'");
    reset();
    put64(embd->ne[0], 48);
    expect_fail("row not whole blocks", "ne[0] = 48", "block size 32");
    snprintf(want, sizeof(want), "(file offset %zu)", embd->ne[0]);
    expect_fail("row not whole blocks offset", "of type q4_1", want);

    const uint64_t misaligned[] = {1, 16, 35072 + 8, UINT64_MAX};
    for (size_t i = 0; i < 4; i++) {
        reset();
        put64(embd->offset, misaligned[i]);
        expect_fail("misaligned offset", "offset", "alignment 32");
    }
    const uint64_t outside[] = {(orig_size + 31) / 32 * 32, UINT64_MAX - 31,
                                rd64(last->offset) + 32, (uint64_t)1 << 62};
    for (size_t i = 0; i < 4; i++) {
        reset();
        put64(last->offset, outside[i]);
        expect_fail("offset outside", "outside the file", "offset");
    }
}

/* The open must fail with exactly "PATH: want". */
static void expect_exact(const char *label, const char *want)
{
    write_file(buf, orig_size);
    char *err = NULL;
    int ok = try_open(&err);
    CHECK(!ok, "%s: opened but must fail", label);
    char full[512];
    snprintf(full, sizeof(full), "%s: %s", path, want);
    CHECK(ok || (err && strcmp(err, full) == 0), "%s: message\n  got  %s\n  want %s", label,
          err ? err : "(null)", full);
    free(err);
}

/* Tensor data must follow each other in file order, each padded to the alignment (gguf.cpp's
 * "tensor has offset X, expected Y"): aliased, overlapping, reordered or gapped data is refused
 * with a message naming the tensor, its offset and the expected one. */
static void test_running_offsets(void)
{
    /* stories260K-ff192-q4_1: 0 output.weight (q8_0, 34816 bytes) at 0, 1 output_norm.weight
     * (f32 64: 256 bytes) at 34816, 2 token_embd.weight (q4_1, 20480 bytes) at 35072,
     * 3 blk.0.attn_k.weight (q4_1 64x32: 1280 bytes) at 55552, ..., 5 blk.0.attn_output.weight
     * and 6 blk.0.attn_q.weight (q4_1 64x64: 2560 bytes each) at 57088 and 59648. */
    CHECK(rd64(to[1].offset) == 34816 && rd64(to[2].offset) == 35072 &&
              rd64(to[5].offset) == 57088 && rd64(to[6].offset) == 59648,
          "test bug: the model's tensor offsets changed");
    char want[400];

    /* N2: output_norm.weight aliases output.weight's data (offset 0). */
    reset();
    put64(to[1].offset, 0);
    snprintf(want, sizeof(want),
             "tensor 1 'output_norm.weight': data offset 0, expected 34816 (after tensor 0 "
             "'output.weight': offset 0 + 34816 bytes padded to the alignment 32; tensors' data "
             "must follow each other in file order) (file offset %zu)", to[1].offset);
    expect_exact("aliased tensor data", want);

    /* token_embd.weight overlapping the last 32 bytes of output_norm.weight */
    reset();
    put64(to[2].offset, 35072 - 32);
    snprintf(want, sizeof(want),
             "tensor 2 'token_embd.weight': data offset 35040, expected 35072 (after tensor 1 "
             "'output_norm.weight': offset 34816 + 256 bytes padded to the alignment 32; "
             "tensors' data must follow each other in file order) (file offset %zu)",
             to[2].offset);
    expect_exact("overlapping tensor data", want);

    /* Two same-sized tensors swapped: no overlap, in bounds, aligned, but not in file order. */
    reset();
    put64(to[5].offset, 59648);
    put64(to[6].offset, 57088);
    snprintf(want, sizeof(want),
             "tensor 5 'blk.0.attn_output.weight': data offset 59648, expected 57088 (after "
             "tensor 4 'blk.0.attn_norm.weight': offset 56832 + 256 bytes padded to the "
             "alignment 32; tensors' data must follow each other in file order) "
             "(file offset %zu)", to[5].offset);
    expect_exact("swapped tensor data", want);

    /* A gap before the first tensor. */
    reset();
    put64(to[0].offset, 32);
    snprintf(want, sizeof(want),
             "tensor 0 'output.weight': data offset 32, expected 0 (the first tensor's data "
             "starts the data section) (file offset %zu)", to[0].offset);
    expect_exact("gap before the first tensor", want);
}

/* ---------------------------------------------------------------- truncation and fuzz */

static void test_truncation(void)
{
    /* Every length up to the end of the tensor infos and the padding, then ~200 spread over
     * the data and the last bytes: all must fail (the last tensor ends at the end of file). */
    reset();
    write_file(buf, orig_size);
    int fd = open(path, O_WRONLY);
    const size_t data_off = (infos_end + 31) / 32 * 32;
    size_t n = 0, failed_clean = 0;
    for (size_t len = orig_size; len-- > 0;) {
        bool dense = len <= data_off + 64 || len + 64 >= orig_size ||
                     (len - data_off) % ((orig_size - data_off) / 200) == 0;
        if (!dense)
            continue;
        if (ftruncate(fd, (off_t)len) != 0) {
            perror("ftruncate");
            exit(1);
        }
        n++;
        char *err = NULL;
        if (try_open(&err) == 0)
            failed_clean++;
        else
            CHECK(0, "truncated to %zu bytes but opened", len);
        if (len < 24)
            CHECK(err && strstr(err, "file size"), "len %zu: %s", len, err ? err : "");
        else if (len < infos_end)
            CHECK(err && (strstr(err, "truncated") || strstr(err, "exceeds") ||
                          strstr(err, "impossible") || strstr(err, "needs more")),
                  "len %zu: %s", len, err ? err : "");
        else
            CHECK(err && (strstr(err, "outside the file") || strstr(err, "past the end")),
                  "len %zu: %s", len, err ? err : "");
        free(err);
    }
    close(fd);
    if (verbose)
        fprintf(stderr, "  truncation: %zu lengths, %zu failed cleanly\n", n, failed_clean);
    CHECK(n > 14000, "truncation points %zu", n);
}

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static uint64_t rng(void)
{
    /* xorshift64*: deterministic across platforms */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 2685821657736338717ull;
}

static void test_fuzz(void)
{
    const size_t region = (infos_end + 31) / 32 * 32;
    reset();
    write_file(buf, orig_size);
    int fd = open(path, O_WRONLY);
    int opened = 0, failed = 0;
    for (int it = 0; it < 2000; it++) {
        /* 1-4 bytes: a random value, a bit flip, or 0x00 / 0xff (lengths, counts) */
        size_t offs[4];
        int k = 1 + (int)(rng() % 4);
        for (int j = 0; j < k; j++) {
            offs[j] = (size_t)(rng() % region);
            uint8_t v;
            switch (rng() % 4) {
            case 0: v = (uint8_t)rng(); break;
            case 1: v = (uint8_t)(orig[offs[j]] ^ (1u << (rng() % 8))); break;
            case 2: v = 0; break;
            default: v = 0xff; break;
            }
            if (pwrite(fd, &v, 1, (off_t)offs[j]) != 1)
                exit(1);
        }
        if (try_open(NULL))
            opened++;
        else
            failed++;
        for (int j = 0; j < k; j++)
            if (pwrite(fd, orig + offs[j], 1, (off_t)offs[j]) != 1)
                exit(1);
    }
    close(fd);
    if (verbose)
        fprintf(stderr, "  fuzz: 2000 mutations, %d opened, %d failed cleanly\n", opened, failed);
    CHECK(opened + failed == 2000, "fuzz count");
    CHECK(failed > 100 && opened > 100, "fuzz should hit both outcomes: %d opened %d failed",
          opened, failed);
}

int main(void)
{
    char src[4096];
    verbose = getenv("LC_TEST_VERBOSE") != NULL;
    FILE *f = fopen(tu_shared("models/stories260K-ff192-q4_1.gguf", src, sizeof(src)), "rb");
    if (!f) {
        fprintf(stderr, "test-gguf-malformed: %s missing, skipping\n", src);
        return 77;
    }
    struct stat st;
    fstat(fileno(f), &st);
    orig_size = (size_t)st.st_size;
    orig = malloc(orig_size);
    buf = malloc(orig_size);
    if (!orig || !buf || fread(orig, 1, orig_size, f) != orig_size)
        return 1;
    fclose(f);
    snprintf(dir, sizeof(dir), "/tmp/lc-gguf-malformed.XXXXXX");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    snprintf(path, sizeof(path), "%s/m.gguf", dir);
    walk();
    CHECK(n_kvo == 21 && n_to == 48, "walker: %zu kvs, %zu tensors", n_kvo, n_to);

    test_header();
    test_kv();
    test_alignment();
    test_tensors();
    test_running_offsets();
    test_truncation();
    test_fuzz();

    test_model_types();

    unlink(path);
    rmdir(dir);
    free(orig);
    free(buf);
    return tu_finish("test-gguf-malformed");
}
