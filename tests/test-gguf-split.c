/*
 * test-gguf-split.c - lc_gguf_open_split on hand-made split models: a good 3-part model, then
 * a missing part, a part with the wrong split.no, a wrong split.count, a wrong tensor total,
 * and a non-first part given; each error must name the problem.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "llm/gguf.h"
#include "testutil.h"

static void put(FILE *f, const void *p, size_t n)
{
    if (fwrite(p, 1, n, f) != n)
        abort();
}
static void put_u32(FILE *f, uint32_t v) { put(f, &v, 4); }
static void put_u64(FILE *f, uint64_t v) { put(f, &v, 8); }
static void put_str(FILE *f, const char *s)
{
    put_u64(f, strlen(s));
    put(f, s, strlen(s));
}

/* A GGUF v3 file: split keys (when no >= 0), one F32 tensor of 4 values named t<tensor_id>. */
static void write_part(const char *path, int no, int count, int tensors_count, int tensor_id,
                       bool with_arch)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        abort();
    put(f, "GGUF", 4);
    put_u32(f, 3);
    put_u64(f, 1);                               /* tensors */
    put_u64(f, (no >= 0 ? 3 : 0) + (with_arch ? 1 : 0)); /* kvs */
    if (with_arch) {
        put_str(f, "general.architecture");
        put_u32(f, 8); /* string */
        put_str(f, "llama");
    }
    if (no >= 0) {
        uint16_t v16 = (uint16_t)no;
        put_str(f, "split.no");
        put_u32(f, 2); /* u16 */
        put(f, &v16, 2);
        v16 = (uint16_t)count;
        put_str(f, "split.count");
        put_u32(f, 2);
        put(f, &v16, 2);
        int32_t v32 = tensors_count;
        put_str(f, "split.tensors.count");
        put_u32(f, 5); /* i32 */
        put(f, &v32, 4);
    }
    char name[16];
    snprintf(name, sizeof(name), "t%d", tensor_id);
    put_str(f, name);
    put_u32(f, 1);
    put_u64(f, 4);
    put_u32(f, 0); /* F32 */
    put_u64(f, 0);
    long pos = ftell(f);
    static const char zeros[32];
    put(f, zeros, (size_t)((32 - pos % 32) % 32));
    const float data[4] = {1, 2, 3, (float)tensor_id};
    put(f, data, sizeof(data));
    fclose(f);
}

static char dir[256];

static char *path_of(const char *name)
{
    static char buf[4][512];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof(buf[k]), "%s/%s", dir, name);
    return buf[k];
}

/* Open, expect failure with a message containing `want`. */
static void expect_fail(const char *first, const char *want)
{
    int n = -1;
    char *err = NULL;
    struct lc_gguf **p = lc_gguf_open_split(first, &n, &err);
    CHECK(p == NULL, "%s: opened, expected an error with '%s'", first, want);
    CHECK(err && strstr(err, want), "%s: error '%s' lacks '%s'", first, err ? err : "(none)",
          want);
    lc_gguf_free_split(p, n);
    free(err);
}

int main(void)
{
    snprintf(dir, sizeof(dir), "/tmp/lc-test-split-XXXXXX");
    if (!mkdtemp(dir))
        return 99;

    /* a good 3-part model */
    write_part(path_of("m-00001-of-00003.gguf"), 0, 3, 3, 0, true);
    write_part(path_of("m-00002-of-00003.gguf"), 1, 3, 3, 1, false);
    write_part(path_of("m-00003-of-00003.gguf"), 2, 3, 3, 2, false);
    int n = 0;
    char *err = NULL;
    struct lc_gguf **p = lc_gguf_open_split(path_of("m-00001-of-00003.gguf"), &n, &err);
    CHECK(p != NULL && n == 3, "3-part model: %s", err ? err : "?");
    if (p) {
        for (int i = 0; i < 3; i++) {
            char name[8];
            snprintf(name, sizeof(name), "t%d", i);
            const struct lc_gguf_tensor *t = lc_gguf_find_tensor(p[i], name);
            CHECK(t && ((const float *)t->data)[3] == (float)i, "part %d tensor", i);
        }
        CHECK(lc_gguf_get_str(p[0], "general.architecture") != NULL, "metadata in part 1");
    }
    lc_gguf_free_split(p, n);
    free(err);

    /* a plain file is a 1-part model */
    write_part(path_of("plain.gguf"), -1, 0, 0, 7, true);
    err = NULL;
    p = lc_gguf_open_split(path_of("plain.gguf"), &n, &err);
    CHECK(p != NULL && n == 1, "plain file: %s", err ? err : "?");
    lc_gguf_free_split(p, n);
    free(err);

    /* errors */
    expect_fail(path_of("m-00002-of-00003.gguf"), "part 2 of 3");
    unlink(path_of("m-00003-of-00003.gguf"));
    expect_fail(path_of("m-00001-of-00003.gguf"), "part 3 of 3");
    write_part(path_of("m-00003-of-00003.gguf"), 1, 3, 3, 2, false); /* wrong split.no */
    expect_fail(path_of("m-00001-of-00003.gguf"), "split.no 1 (expected 2)");
    write_part(path_of("m-00003-of-00003.gguf"), 2, 4, 3, 2, false); /* wrong split.count */
    expect_fail(path_of("m-00001-of-00003.gguf"), "split.count 4 (expected 3)");
    write_part(path_of("m-00003-of-00003.gguf"), 2, 3, 3, 2, false);
    write_part(path_of("m-00001-of-00003.gguf"), 0, 3, 4, 0, true); /* tensors.count 4 */
    write_part(path_of("m-00002-of-00003.gguf"), 1, 3, 4, 1, false);
    write_part(path_of("m-00003-of-00003.gguf"), 2, 3, 4, 2, false);
    expect_fail(path_of("m-00001-of-00003.gguf"), "hold 3 tensors, split.tensors.count says 4");
    write_part(path_of("renamed.gguf"), 0, 3, 3, 0, true);
    expect_fail(path_of("renamed.gguf"), "does not end in '-00001-of-00003.gguf'");

    const char *names[] = {"m-00001-of-00003.gguf", "m-00002-of-00003.gguf",
                           "m-00003-of-00003.gguf", "plain.gguf", "renamed.gguf"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        unlink(path_of(names[i]));
    rmdir(dir);
    return tu_finish("test-gguf-split");
}
