/* testutil.h - tiny assertion helpers shared by the C tests.  Exit 77 = skipped (automake). */
#ifndef LC_TESTUTIL_H
#define LC_TESTUTIL_H
#include <stdio.h>
#include <stdlib.h>

static int tu_failures;
static int tu_checks;

#define CHECK(cond, ...)                                                                    \
    do {                                                                                    \
        tu_checks++;                                                                        \
        if (!(cond)) {                                                                      \
            tu_failures++;                                                                  \
            fprintf(stderr, "%s:%d: CHECK(%s) failed: ", __FILE__, __LINE__, #cond);        \
            fprintf(stderr, __VA_ARGS__);                                                   \
            fputc('\n', stderr);                                                            \
        }                                                                                   \
    } while (0)

/* Path under ../shared (LC_SHARED from the test environment). */
static inline const char *tu_shared(const char *rel, char *buf, size_t len)
{
    const char *root = getenv("LC_SHARED");
    snprintf(buf, len, "%s/%s", root ? root : "../shared", rel);
    return buf;
}

static inline int tu_finish(const char *name)
{
    fprintf(stderr, "%s: %d checks, %d failed\n", name, tu_checks, tu_failures);
    return tu_failures ? 1 : 0;
}
#endif
