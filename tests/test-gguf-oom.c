/*
 * test-gguf-oom.c - allocation failure injection (SQLite's habit) for the GGUF reader/writer.
 *
 * Linked with -Wl,--wrap=malloc,... so that every allocation made by gguf.c goes through the
 * wrappers below; the Nth one (N = 0, 1, 2, ...) fails.  Each run must fail cleanly (NULL /
 * -1, no crash, and -- under ASan -- no leak, no temporary file left) until N is past the last
 * allocation, when the operation must succeed.
 */
#include "gguf.h"
#include "testutil.h"

#include <dirent.h>
#include <string.h>
#include <unistd.h>

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t m);
void *__real_realloc(void *p, size_t n);
char *__real_strdup(const char *s);
char *__real_strndup(const char *s, size_t n);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t m);
void *__wrap_realloc(void *p, size_t n);
char *__wrap_strdup(const char *s);
char *__wrap_strndup(const char *s, size_t n);

static long countdown = -1; /* allocations left before the failure; -1: never fail */
static long n_failed;

static bool fail_now(void)
{
    if (countdown < 0)
        return false;
    if (countdown-- == 0) {
        n_failed++;
        return true;
    }
    return false;
}

void *__wrap_malloc(size_t n)
{
    return fail_now() ? NULL : __real_malloc(n);
}

void *__wrap_calloc(size_t n, size_t m)
{
    return fail_now() ? NULL : __real_calloc(n, m);
}

void *__wrap_realloc(void *p, size_t n)
{
    return fail_now() ? NULL : __real_realloc(p, n);
}

char *__wrap_strdup(const char *s)
{
    return fail_now() ? NULL : __real_strdup(s);
}

char *__wrap_strndup(const char *s, size_t n)
{
    return fail_now() ? NULL : __real_strndup(s, n);
}

static void arm(long n)
{
    countdown = n;
    n_failed = 0;
}

static void disarm(void)
{
    countdown = -1;
}

static char dir[64];

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

static void test_open(const char *path, int64_t want_kv)
{
    long n;
    for (n = 0; n < 100000; n++) {
        char *err = NULL;
        arm(n);
        struct lc_gguf *g = lc_gguf_open(path, &err);
        const long failed = n_failed;
        disarm();
        if (failed == 0) {
            CHECK(g && lc_gguf_n_kv(g) == want_kv, "open after %ld allocations: %s", n,
                  err ? err : "");
            lc_gguf_free(g);
            free(err);
            break;
        }
        CHECK(g == NULL, "allocation %ld failed but open succeeded", n);
        /* The message itself may be what could not be allocated. */
        CHECK(err == NULL || strstr(err, path), "allocation %ld: %s", n, err);
        lc_gguf_free(g);
        free(err);
    }
    fprintf(stderr, "  open %s: %ld allocation points\n", path, n);
    CHECK(n > 20 && n < 100000, "allocation points %ld", n);
}

/* The whole copy: writer_new, copy_kvs, add_tensor, begin, write_data, end. */
static int copy_file(const struct lc_gguf *g, const char *out)
{
    struct lc_gguf_writer *w = lc_gguf_writer_new();
    char *err = NULL;
    int rc = w ? lc_gguf_writer_copy_kvs(w, g) : -1;
    for (int64_t i = 0; rc == 0 && i < lc_gguf_n_tensors(g); i++) {
        const struct lc_gguf_tensor *t = lc_gguf_tensor(g, i);
        rc = lc_gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne);
    }
    if (rc == 0)
        rc = lc_gguf_writer_begin(w, out, &err);
    for (int64_t i = 0; rc == 0 && i < lc_gguf_n_tensors(g); i++)
        rc = lc_gguf_writer_write_data(w, lc_gguf_tensor(g, i)->data, lc_gguf_tensor(g, i)->nbytes,
                                       &err);
    if (rc == 0)
        rc = lc_gguf_writer_end(w, &err);
    free(err);
    lc_gguf_writer_free(w);
    return rc;
}

static void test_writer(const char *src)
{
    char out[128];
    snprintf(out, sizeof(out), "%s/oom.gguf", dir);
    struct lc_gguf *g = lc_gguf_open(src, NULL);
    CHECK(g != NULL, "open %s", src);
    if (!g)
        return;
    long n;
    for (n = 0; n < 100000; n++) {
        arm(n);
        int rc = copy_file(g, out);
        const long failed = n_failed;
        disarm();
        if (failed == 0) {
            CHECK(rc == 0, "copy after %ld allocations", n);
            break;
        }
        CHECK(rc == -1, "allocation %ld failed but the copy succeeded", n);
        CHECK(dir_entries() == 0, "allocation %ld: files left behind", n);
    }
    fprintf(stderr, "  writer: %ld allocation points\n", n);
    CHECK(n > 100 && n < 100000, "allocation points %ld", n);
    struct lc_gguf *h = lc_gguf_open(out, NULL);
    CHECK(h && lc_gguf_n_kv(h) == lc_gguf_n_kv(g) && lc_gguf_n_tensors(h) == lc_gguf_n_tensors(g),
          "copy reads back");
    lc_gguf_free(h);
    unlink(out);
    lc_gguf_free(g);
}

int main(void)
{
    char p1[4096], p2[4096];
    tu_shared("models/stories260K-ff192-q4_1.gguf", p1, sizeof(p1));
    tu_shared("reference/tokenizer/ggml-vocab-llama-spm.gguf", p2, sizeof(p2));
    if (access(p1, R_OK) != 0 || access(p2, R_OK) != 0) {
        fprintf(stderr, "test-gguf-oom: shared files missing, skipping\n");
        return 77;
    }
    snprintf(dir, sizeof(dir), "/tmp/lc-gguf-oom.XXXXXX");
    if (!mkdtemp(dir))
        return 1;
    test_open(p1, 21);
    test_open(p2, 22);
    test_writer(p1);
    rmdir(dir);
    return tu_finish("test-gguf-oom");
}
