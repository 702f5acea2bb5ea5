/*
 * test-gguf-writer.c - the GGUF writer.
 *
 * Round trip: every model in ../shared/models, opened, its KVs copied and its tensors re-added
 * and streamed, must come out byte-identical (llama.cpp's gguf writer produces exactly the
 * layout ours writes: KVs in order, infos, zero padding to the alignment, each tensor padded).
 * Then: replace-in-place and append semantics, a custom alignment, every misuse and I/O failure
 * (the destination is never left half-written, no temporary is left behind).
 */
#include "gguf.h"
#include "testutil.h"

#include <dirent.h>
#include <glob.h>
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[64];

static uint8_t *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    struct stat st;
    fstat(fileno(f), &st);
    uint8_t *p = malloc((size_t)st.st_size + 1);
    *len = fread(p, 1, (size_t)st.st_size, f);
    fclose(f);
    return p;
}

static int dir_entries(void)
{
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
            n++;
    closedir(d);
    return n;
}

/* Copy src into a writer: all KVs, all tensor infos. */
static struct lc_gguf_writer *copy_of(const struct lc_gguf *g)
{
    struct lc_gguf_writer *w = lc_gguf_writer_new();
    CHECK(w && lc_gguf_writer_copy_kvs(w, g) == 0, "copy_kvs");
    for (int64_t i = 0; i < lc_gguf_n_tensors(g); i++) {
        const struct lc_gguf_tensor *t = lc_gguf_tensor(g, i);
        CHECK(lc_gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne) == 0, "add %s",
              t->name);
    }
    return w;
}

static int write_all(struct lc_gguf_writer *w, const struct lc_gguf *g, const char *out)
{
    char *err = NULL;
    int rc = lc_gguf_writer_begin(w, out, &err);
    CHECK(rc == 0, "begin: %s", err ? err : "");
    for (int64_t i = 0; rc == 0 && i < lc_gguf_n_tensors(g); i++) {
        const struct lc_gguf_tensor *t = lc_gguf_tensor(g, i);
        rc = lc_gguf_writer_write_data(w, t->data, t->nbytes, &err);
        CHECK(rc == 0, "write_data %s: %s", t->name, err ? err : "");
    }
    if (rc == 0) {
        rc = lc_gguf_writer_end(w, &err);
        CHECK(rc == 0, "end: %s", err ? err : "");
    }
    free(err);
    return rc;
}

static void round_trip(const char *src, bool vocab_only)
{
    char out[128], *err = NULL;
    snprintf(out, sizeof(out), "%s/rt.gguf", dir);
    struct lc_gguf *g = lc_gguf_open(src, &err);
    CHECK(g != NULL, "%s", err ? err : src);
    free(err);
    if (!g)
        return;
    struct lc_gguf_writer *w = copy_of(g);
    write_all(w, g, out);
    lc_gguf_writer_free(w);

    size_t la = 0, lb = 0;
    uint8_t *a = slurp(src, &la), *b = slurp(out, &lb);
    CHECK(a && b, "read back");
    if (a && b) {
        if (!vocab_only) {
            CHECK(la == lb && memcmp(a, b, la) == 0, "%s: round trip not byte-identical "
                  "(%zu vs %zu bytes)", src, la, lb);
        } else {
            /* These vocab-only files end right after the infos, without the padding that
             * llama.cpp's C writer (and ours) puts before the (empty) data section. */
            CHECK(lb >= la && lb - la < 32 && memcmp(a, b, la) == 0, "%s: vocab round trip",
                  src);
            bool zeros = true;
            for (size_t i = la; i < lb; i++)
                zeros &= b[i] == 0;
            CHECK(zeros && lb % 32 == 0, "%s: padding", src);
        }
    }
    free(a);
    free(b);
    /* And it reads back equal. */
    struct lc_gguf *g2 = lc_gguf_open(out, &err);
    CHECK(g2 && lc_gguf_n_kv(g2) == lc_gguf_n_kv(g) &&
              lc_gguf_n_tensors(g2) == lc_gguf_n_tensors(g),
          "%s: reopen: %s", src, err ? err : "");
    free(err);
    lc_gguf_free(g2);
    lc_gguf_free(g);
    unlink(out);
}

static void test_round_trips(void)
{
    char pat[4096];
    glob_t gl;
    int n = 0;
    if (glob(tu_shared("models/*.gguf", pat, sizeof(pat)), 0, NULL, &gl) == 0) {
        for (size_t i = 0; i < gl.gl_pathc; i++, n++)
            round_trip(gl.gl_pathv[i], false);
        globfree(&gl);
    }
    CHECK(n >= 15, "models found: %d", n);
    round_trip(tu_shared("reference/tokenizer/ggml-vocab-llama-spm.gguf", pat, sizeof(pat)), true);
    round_trip(tu_shared("reference/tokenizer/ggml-vocab-gpt-2.gguf", pat, sizeof(pat)), true);
    CHECK(dir_entries() == 0, "temporaries left behind");
}

/* set_* on an existing key replaces it in place, a new key is appended, remove keeps order. */
static void test_kv_semantics(void)
{
    char src[4096], out[128], *err = NULL;
    snprintf(out, sizeof(out), "%s/kv.gguf", dir);
    struct lc_gguf *g = lc_gguf_open(tu_shared("models/stories260K-ff192-q4_1.gguf", src,
                                               sizeof(src)), NULL);
    if (!g)
        return;
    struct lc_gguf_writer *w = lc_gguf_writer_new();
    CHECK(lc_gguf_writer_copy_kvs(w, g) == 0, "copy");
    const int64_t bc = lc_gguf_find_key(g, "llama.block_count");
    const int64_t nm = lc_gguf_find_key(g, "general.name");
    CHECK(lc_gguf_writer_set_u32(w, "llama.block_count", 7) == 0, "replace u32");
    CHECK(lc_gguf_writer_set_f32(w, "general.name", 2.5f) == 0, "replace with another type");
    CHECK(lc_gguf_writer_set_u16(w, "split.no", 0) == 0, "append u16");
    CHECK(lc_gguf_writer_set_i32(w, "split.tensors.count", -3) == 0, "append i32");
    CHECK(lc_gguf_writer_set_bool(w, "x.flag", true) == 0, "append bool");
    CHECK(lc_gguf_writer_set_str(w, "x.s", "h\xc3\xa9llo") == 0, "append str");
    const char *strs[] = {"a", "", "ccc"};
    CHECK(lc_gguf_writer_set_arr_str(w, "x.strs", strs, 3) == 0, "append str array");
    const int16_t i16[] = {-1, 2, 30000};
    CHECK(lc_gguf_writer_set_arr(w, "x.i16", LC_GGUF_INT16, i16, 3) == 0, "append i16 array");
    CHECK(lc_gguf_writer_set_arr(w, "x.empty", LC_GGUF_FLOAT32, NULL, 0) == 0, "empty array");
    CHECK(lc_gguf_writer_set_arr(w, "x.bad", LC_GGUF_STRING, i16, 3) == -1, "string via set_arr");
    CHECK(lc_gguf_writer_set_arr(w, "x.bad", LC_GGUF_ARRAY, i16, 3) == -1, "nested via set_arr");
    CHECK(lc_gguf_writer_set_str(w, "", "v") == -1 && lc_gguf_writer_set_str(w, NULL, "v") == -1,
          "empty key");
    CHECK(lc_gguf_writer_remove_key(w, "tokenizer.ggml.scores") == 0, "remove");
    CHECK(lc_gguf_writer_remove_key(w, "tokenizer.ggml.scores") == -1, "remove twice");
    CHECK(lc_gguf_writer_begin(w, out, &err) == 0 && lc_gguf_writer_end(w, &err) == 0, "write: %s",
          err ? err : "");
    free(err);
    err = NULL;
    CHECK(lc_gguf_writer_set_u32(w, "late", 1) == -1, "set after begin");
    lc_gguf_writer_free(w);

    struct lc_gguf *h = lc_gguf_open(out, &err);
    CHECK(h != NULL, "reopen: %s", err ? err : "");
    free(err);
    if (h) {
        const int64_t n = lc_gguf_n_kv(g);
        CHECK(lc_gguf_n_kv(h) == n - 1 + 7, "n_kv %lld", (long long)lc_gguf_n_kv(h));
        /* scores (index 1) removed: everything after it moves up by one */
        CHECK(lc_gguf_find_key(h, "llama.block_count") == bc - 1, "block_count kept its place");
        CHECK(lc_gguf_find_key(h, "general.name") == nm - 1, "general.name kept its place");
        for (int64_t i = 0, j = 0; i < n; i++) {
            if (i == 1)
                continue;
            CHECK(strcmp(lc_gguf_key(g, i), lc_gguf_key(h, j)) == 0, "order at %lld",
                  (long long)j);
            j++;
        }
        uint32_t u = 0;
        CHECK(lc_gguf_get_u32(h, "llama.block_count", &u) && u == 7, "block_count 7");
        float f = 0;
        CHECK(lc_gguf_get_f32(h, "general.name", &f) && f == 2.5f, "general.name f32");
        CHECK(lc_gguf_kv_type(h, lc_gguf_find_key(h, "split.no")) == LC_GGUF_UINT16, "u16 type");
        int64_t v = 0;
        CHECK(lc_gguf_get_i64(h, "split.tensors.count", &v) && v == -3, "i32 -3");
        CHECK(!lc_gguf_get_u32(h, "split.tensors.count", &u), "negative is not a u32");
        bool b = false;
        CHECK(lc_gguf_get_bool(h, "x.flag", &b) && b, "bool");
        const char *s = lc_gguf_get_str(h, "x.s");
        CHECK(s && strcmp(s, "h\xc3\xa9llo") == 0, "str");
        int64_t k = lc_gguf_find_key(h, "x.strs");
        CHECK(k == n - 1 + 4 && lc_gguf_arr_n(h, k) == 3 &&
                  strcmp(lc_gguf_arr_str(h, k, 0), "a") == 0 &&
                  strcmp(lc_gguf_arr_str(h, k, 1), "") == 0 &&
                  strcmp(lc_gguf_arr_str(h, k, 2), "ccc") == 0,
              "str array");
        k = lc_gguf_find_key(h, "x.i16");
        CHECK(lc_gguf_arr_type(h, k) == LC_GGUF_INT16 && lc_gguf_arr_n(h, k) == 3 &&
                  memcmp(lc_gguf_arr_data(h, k), i16, 6) == 0,
              "i16 array");
        k = lc_gguf_find_key(h, "x.empty");
        CHECK(lc_gguf_arr_type(h, k) == LC_GGUF_FLOAT32 && lc_gguf_arr_n(h, k) == 0, "empty");
        /* the tokens array survived exactly */
        int64_t ka = lc_gguf_find_key(g, "tokenizer.ggml.tokens");
        int64_t kb = lc_gguf_find_key(h, "tokenizer.ggml.tokens");
        bool same = lc_gguf_arr_n(g, ka) == lc_gguf_arr_n(h, kb);
        for (uint64_t j = 0; same && j < lc_gguf_arr_n(g, ka); j++)
            same = strcmp(lc_gguf_arr_str(g, ka, j), lc_gguf_arr_str(h, kb, j)) == 0;
        CHECK(same, "tokens preserved");
        CHECK(lc_gguf_n_tensors(h) == 0, "no tensors");
        lc_gguf_free(h);
    }
    lc_gguf_free(g);
    unlink(out);
}

/* general.alignment 64: offsets and the data section follow it; data survives. */
static void test_alignment(void)
{
    char out[128], *err = NULL;
    snprintf(out, sizeof(out), "%s/al.gguf", dir);
    float a[3] = {1.0f, -2.0f, 3.5f};
    uint16_t b[2 * 5];
    for (int i = 0; i < 10; i++)
        b[i] = (uint16_t)(0x3c00 + i);
    struct lc_gguf_writer *w = lc_gguf_writer_new();
    CHECK(lc_gguf_writer_set_u32(w, "general.alignment", 64) == 0, "set alignment");
    CHECK(lc_gguf_writer_add_tensor(w, "a", LC_TYPE_F32, 1, (int64_t[]){3}) == 0, "add a");
    CHECK(lc_gguf_writer_add_tensor(w, "b", LC_TYPE_F16, 2, (int64_t[]){2, 5}) == 0, "add b");
    CHECK(lc_gguf_writer_begin(w, out, &err) == 0 &&
              lc_gguf_writer_write_data(w, a, sizeof(a), &err) == 0 &&
              lc_gguf_writer_write_data(w, b, sizeof(b), &err) == 0 &&
              lc_gguf_writer_end(w, &err) == 0,
          "write: %s", err ? err : "");
    free(err);
    err = NULL;
    lc_gguf_writer_free(w);
    struct lc_gguf *g = lc_gguf_open(out, &err);
    CHECK(g != NULL, "reopen: %s", err ? err : "");
    free(err);
    if (g) {
        CHECK(lc_gguf_alignment(g) == 64 && lc_gguf_data_offset(g) % 64 == 0, "alignment");
        const struct lc_gguf_tensor *ta = lc_gguf_find_tensor(g, "a");
        const struct lc_gguf_tensor *tb = lc_gguf_find_tensor(g, "b");
        CHECK(ta && tb && ta->offset == 0 && tb->offset == 64 && ta->nbytes == 12 &&
                  tb->nbytes == 20 && tb->ne[1] == 5 && tb->n_dims == 2,
              "offsets");
        CHECK(ta && memcmp(ta->data, a, 12) == 0 && tb && memcmp(tb->data, b, 20) == 0, "data");
        CHECK(lc_gguf_file_size(g) == lc_gguf_data_offset(g) + 128, "trailing padding: %zu",
              lc_gguf_file_size(g));
        lc_gguf_free(g);
    }
    unlink(out);
    /* An invalid alignment is refused at begin. */
    w = lc_gguf_writer_new();
    lc_gguf_writer_set_u32(w, "general.alignment", 48);
    CHECK(lc_gguf_writer_begin(w, out, &err) == -1 && err && strstr(err, "general.alignment"),
          "alignment 48: %s", err ? err : "");
    free(err);
    lc_gguf_writer_free(w);
    CHECK(access(out, F_OK) != 0, "no file for a refused begin");
}

static void test_add_tensor_errors(void)
{
    struct lc_gguf_writer *w = lc_gguf_writer_new();
    const int64_t ne[4] = {64, 2, 1, 1};
    CHECK(lc_gguf_writer_add_tensor(w, "t", LC_TYPE_Q4_1, 2, ne) == 0, "ok");
    CHECK(lc_gguf_writer_add_tensor(w, "t", LC_TYPE_Q4_1, 2, ne) == -1, "duplicate name");
    CHECK(lc_gguf_writer_add_tensor(w, "", LC_TYPE_Q4_1, 2, ne) == -1, "empty name");
    CHECK(lc_gguf_writer_add_tensor(w, "u", (enum lc_type)4, 2, ne) == -1, "unknown type");
    CHECK(lc_gguf_writer_add_tensor(w, "u", LC_TYPE_Q4_1, 0, ne) == -1, "n_dims 0");
    CHECK(lc_gguf_writer_add_tensor(w, "u", LC_TYPE_Q4_1, 5, ne) == -1, "n_dims 5");
    CHECK(lc_gguf_writer_add_tensor(w, "u", LC_TYPE_Q6_K, 2, ne) == -1, "64 not whole Q6_K blocks");
    CHECK(lc_gguf_writer_add_tensor(w, "u", LC_TYPE_F32, 2, (int64_t[]){0, 1}) == -1, "dim 0");
    CHECK(lc_gguf_writer_add_tensor(w, "u", LC_TYPE_F32, 2, (int64_t[]){-4, 1}) == -1, "dim < 0");
    CHECK(lc_gguf_writer_add_tensor(w, "u", LC_TYPE_F32, 2,
                                    (int64_t[]){INT64_MAX / 2, 3}) == -1, "overflow");
    char longname[80];
    memset(longname, 'x', 64);
    longname[64] = 0;
    CHECK(lc_gguf_writer_add_tensor(w, longname, LC_TYPE_F32, 1, ne) == -1, "64-byte name");
    longname[63] = 0;
    CHECK(lc_gguf_writer_add_tensor(w, longname, LC_TYPE_F32, 1, ne) == 0, "63-byte name");
    lc_gguf_writer_free(w);
}

/* Misuse and failures: the destination keeps its old content, no temporary remains. */
static void test_failures(void)
{
    char out[128], *err = NULL;
    snprintf(out, sizeof(out), "%s/fail.gguf", dir);
    FILE *f = fopen(out, "w");
    fputs("old", f);
    fclose(f);
    const float x[32] = {0};

    /* wrong data size */
    struct lc_gguf_writer *w = lc_gguf_writer_new();
    lc_gguf_writer_add_tensor(w, "x", LC_TYPE_F32, 1, (int64_t[]){32});
    lc_gguf_writer_add_tensor(w, "y", LC_TYPE_F32, 1, (int64_t[]){32});
    CHECK(lc_gguf_writer_begin(w, out, &err) == 0, "begin");
    CHECK(lc_gguf_writer_write_data(w, x, 64, &err) == -1 && err && strstr(err, "'x'") &&
              strstr(err, "expected 128"),
          "wrong size: %s", err ? err : "");
    free(err);
    err = NULL;
    CHECK(lc_gguf_writer_end(w, &err) == -1 && err, "end after failure");
    free(err);
    err = NULL;
    lc_gguf_writer_free(w);
    CHECK(dir_entries() == 1, "temporary removed after a failed write_data");

    /* too few tensors written */
    w = lc_gguf_writer_new();
    lc_gguf_writer_add_tensor(w, "x", LC_TYPE_F32, 1, (int64_t[]){32});
    lc_gguf_writer_add_tensor(w, "y", LC_TYPE_F32, 1, (int64_t[]){32});
    CHECK(lc_gguf_writer_begin(w, out, &err) == 0 &&
              lc_gguf_writer_write_data(w, x, 128, &err) == 0,
          "begin");
    CHECK(lc_gguf_writer_end(w, &err) == -1 && err && strstr(err, "1 of 2") && strstr(err, "'y'"),
          "short: %s", err ? err : "");
    free(err);
    err = NULL;
    lc_gguf_writer_free(w);

    /* too many */
    w = lc_gguf_writer_new();
    lc_gguf_writer_add_tensor(w, "x", LC_TYPE_F32, 1, (int64_t[]){32});
    CHECK(lc_gguf_writer_begin(w, out, &err) == 0 &&
              lc_gguf_writer_write_data(w, x, 128, &err) == 0,
          "begin");
    CHECK(lc_gguf_writer_write_data(w, x, 128, &err) == -1 && err && strstr(err, "more tensors"),
          "extra: %s", err ? err : "");
    free(err);
    err = NULL;
    lc_gguf_writer_free(w);

    /* abandoned: freed without end */
    w = lc_gguf_writer_new();
    CHECK(lc_gguf_writer_begin(w, out, &err) == 0, "begin");
    lc_gguf_writer_free(w);
    CHECK(dir_entries() == 1, "temporary removed after free without end");

    /* write_data / end without begin */
    w = lc_gguf_writer_new();
    CHECK(lc_gguf_writer_write_data(w, x, 0, &err) == -1 && err, "no begin");
    free(err);
    err = NULL;
    CHECK(lc_gguf_writer_end(w, &err) == -1 && err, "no begin");
    free(err);
    err = NULL;
    lc_gguf_writer_free(w);

    /* missing directory */
    w = lc_gguf_writer_new();
    CHECK(lc_gguf_writer_begin(w, "/nonexistent-dir/x.gguf", &err) == -1 && err &&
              strstr(err, "/nonexistent-dir/x.gguf") && strstr(err, "No such file"),
          "bad dir: %s", err ? err : "");
    free(err);
    err = NULL;
    lc_gguf_writer_free(w);

    /* The disk fills up (RLIMIT_FSIZE makes write() fail with EFBIG, as ENOSPC would). */
    struct rlimit old, lim;
    getrlimit(RLIMIT_FSIZE, &old);
    lim = old;
    lim.rlim_cur = 100000;
    signal(SIGXFSZ, SIG_IGN);
    static float big[65536];
    w = lc_gguf_writer_new();
    lc_gguf_writer_add_tensor(w, "big", LC_TYPE_F32, 1, (int64_t[]){65536});
    CHECK(lc_gguf_writer_begin(w, out, &err) == 0, "begin: %s", err ? err : "");
    if (setrlimit(RLIMIT_FSIZE, &lim) == 0) {
        CHECK(lc_gguf_writer_write_data(w, big, sizeof(big), &err) == -1 && err &&
                  strstr(err, out) && strstr(err, "write failed") &&
                  strstr(err, "File too large"),
              "EFBIG: %s", err ? err : "");
        setrlimit(RLIMIT_FSIZE, &old);
    }
    free(err);
    err = NULL;
    lc_gguf_writer_free(w);
    CHECK(dir_entries() == 1, "temporary removed after EFBIG");

    size_t len = 0;
    uint8_t *p = slurp(out, &len);
    CHECK(p && len == 3 && memcmp(p, "old", 3) == 0, "destination untouched by failed writes");
    free(p);
    unlink(out);
}

static void test_split_names(void)
{
    char buf[256];
    CHECK(lc_gguf_split_path(buf, sizeof(buf), "/m/model", 1, 3) == 0 &&
              strcmp(buf, "/m/model-00001-of-00003.gguf") == 0,
          "split path: %s", buf);
    CHECK(lc_gguf_split_path(buf, sizeof(buf), "x", 99999, 99999) == 0 &&
              strcmp(buf, "x-99999-of-99999.gguf") == 0,
          "split path max: %s", buf);
    CHECK(lc_gguf_split_path(buf, sizeof(buf), "x", 0, 3) == -1 && buf[0] == 0, "no 0");
    CHECK(lc_gguf_split_path(buf, sizeof(buf), "x", 4, 3) == -1, "no > count");
    CHECK(lc_gguf_split_path(buf, sizeof(buf), "x", 1, 100000) == -1, "count too big");
    CHECK(lc_gguf_split_path(buf, sizeof(buf), "x", 1, 0) == -1, "count 0");
    /* "x-00001-of-00003.gguf" is 21 bytes: 22 fit, 21 do not */
    CHECK(lc_gguf_split_path(buf, 22, "x", 1, 3) == 0, "exact fit");
    CHECK(lc_gguf_split_path(buf, 21, "x", 1, 3) == -1 && buf[0] == 0, "too small");

    CHECK(lc_gguf_split_prefix(buf, sizeof(buf), "/m/model-00002-of-00003.gguf", 2, 3) == 0 &&
              strcmp(buf, "/m/model") == 0,
          "prefix: %s", buf);
    CHECK(lc_gguf_split_prefix(buf, sizeof(buf), "/m/model-00002-of-00003.gguf", 1, 3) == -1,
          "prefix: wrong no");
    CHECK(lc_gguf_split_prefix(buf, sizeof(buf), "/m/model-00002-of-00003.gguf", 2, 4) == -1,
          "prefix: wrong count");
    CHECK(lc_gguf_split_prefix(buf, sizeof(buf), "-00001-of-00001.gguf", 1, 1) == -1,
          "prefix: empty");
    CHECK(lc_gguf_split_prefix(buf, sizeof(buf), "/m/model.gguf", 1, 1) == -1, "not split");
    CHECK(lc_gguf_split_prefix(buf, 3, "abc-00001-of-00001.gguf", 1, 1) == -1, "prefix too long");
    CHECK(lc_gguf_split_prefix(buf, 4, "abc-00001-of-00001.gguf", 1, 1) == 0 &&
              strcmp(buf, "abc") == 0,
          "prefix exact fit");
    /* round trip */
    char p2[256];
    for (int no = 1; no <= 3; no++)
        CHECK(lc_gguf_split_path(p2, sizeof(p2), "dir/a-b", no, 3) == 0 &&
                  lc_gguf_split_prefix(buf, sizeof(buf), p2, no, 3) == 0 &&
                  strcmp(buf, "dir/a-b") == 0,
              "inverse %d", no);
}

/* Split stories260K into two parts the way gguf-split does, read both back. */
static void test_split_files(void)
{
    char src[4096], prefix[128], part[160], *err = NULL;
    struct lc_gguf *g = lc_gguf_open(tu_shared("models/stories260K-ff192-q4_1.gguf", src,
                                               sizeof(src)), NULL);
    if (!g)
        return;
    snprintf(prefix, sizeof(prefix), "%s/split", dir);
    const int64_t nt = lc_gguf_n_tensors(g), half = nt / 2;
    for (int no = 1; no <= 2; no++) {
        struct lc_gguf_writer *w = lc_gguf_writer_new();
        if (no == 1)
            lc_gguf_writer_copy_kvs(w, g);
        CHECK(lc_gguf_writer_set_u16(w, LC_GGUF_KEY_SPLIT_NO, (uint16_t)(no - 1)) == 0 &&
                  lc_gguf_writer_set_u16(w, LC_GGUF_KEY_SPLIT_COUNT, 2) == 0 &&
                  lc_gguf_writer_set_i32(w, LC_GGUF_KEY_SPLIT_TENSORS_COUNT, (int32_t)nt) == 0,
              "split keys");
        const int64_t lo = no == 1 ? 0 : half, hi = no == 1 ? half : nt;
        for (int64_t i = lo; i < hi; i++) {
            const struct lc_gguf_tensor *t = lc_gguf_tensor(g, i);
            lc_gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne);
        }
        lc_gguf_split_path(part, sizeof(part), prefix, no, 2);
        int rc = lc_gguf_writer_begin(w, part, &err);
        for (int64_t i = lo; rc == 0 && i < hi; i++)
            rc = lc_gguf_writer_write_data(w, lc_gguf_tensor(g, i)->data,
                                           lc_gguf_tensor(g, i)->nbytes, &err);
        if (rc == 0)
            rc = lc_gguf_writer_end(w, &err);
        CHECK(rc == 0, "write part %d: %s", no, err ? err : "");
        free(err);
        err = NULL;
        lc_gguf_writer_free(w);
    }
    int64_t seen = 0;
    for (int no = 1; no <= 2; no++) {
        lc_gguf_split_path(part, sizeof(part), prefix, no, 2);
        struct lc_gguf *p = lc_gguf_open(part, &err);
        CHECK(p != NULL, "open part %d: %s", no, err ? err : "");
        free(err);
        err = NULL;
        if (!p)
            continue;
        uint32_t sno = 99, cnt = 0;
        int64_t tc = 0;
        CHECK(lc_gguf_get_u32(p, LC_GGUF_KEY_SPLIT_NO, &sno) && sno == (uint32_t)(no - 1) &&
                  lc_gguf_get_u32(p, LC_GGUF_KEY_SPLIT_COUNT, &cnt) && cnt == 2 &&
                  lc_gguf_get_i64(p, LC_GGUF_KEY_SPLIT_TENSORS_COUNT, &tc) && tc == nt,
              "split keys part %d", no);
        CHECK(lc_gguf_kv_type(p, lc_gguf_find_key(p, LC_GGUF_KEY_SPLIT_NO)) == LC_GGUF_UINT16,
              "split.no is u16");
        CHECK((no == 1) == (lc_gguf_get_str(p, "general.architecture") != NULL),
              "metadata in part 1 only");
        for (int64_t i = 0; i < lc_gguf_n_tensors(p); i++, seen++) {
            const struct lc_gguf_tensor *t = lc_gguf_tensor(p, i);
            const struct lc_gguf_tensor *o = lc_gguf_find_tensor(g, t->name);
            CHECK(o && o->nbytes == t->nbytes && memcmp(o->data, t->data, t->nbytes) == 0,
                  "part %d tensor %s", no, t->name);
        }
        lc_gguf_free(p);
        unlink(part);
    }
    CHECK(seen == nt, "tensors over both parts: %lld", (long long)seen);
    lc_gguf_free(g);
}

int main(void)
{
    char probe[4096];
    if (access(tu_shared("models/stories260K-ff192-q4_1.gguf", probe, sizeof(probe)), R_OK) != 0) {
        fprintf(stderr, "test-gguf-writer: %s missing, skipping\n", probe);
        return 77;
    }
    snprintf(dir, sizeof(dir), "/tmp/lc-gguf-writer.XXXXXX");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    test_round_trips();
    test_kv_semantics();
    test_alignment();
    test_add_tensor_errors();
    test_failures();
    test_split_names();
    test_split_files();
    CHECK(dir_entries() == 0, "files left behind");
    rmdir(dir);
    return tu_finish("test-gguf-writer");
}
