/* util.c - see util.h. */
#include "util.h"

#include <errno.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "textsafe.h"

/* Messages quote tensor names and paths from files: shown in their visible form (textsafe.h). */
void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *msg = NULL;
    if (vasprintf(&msg, fmt, ap) < 0)
        msg = NULL;
    va_end(ap);
    lc_text_fprintf(stderr, "%s: %s\n", lc_tool_name, msg ? msg : fmt);
    free(msg);
    exit(1);
}

void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p)
        die("out of memory (%zu bytes)", n);
    return p;
}

long lc_parse_long(const char *opt, const char *s, long lo, long hi)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
        die("%s: '%s' is not a number in %ld..%ld", opt, s, lo, hi);
    return v;
}

static void close_stdout(void)
{
    errno = 0;
    bool bad = fflush(stdout) != 0 || ferror(stdout);
    int e = errno;
    if (fclose(stdout) != 0 && !bad) {
        bad = true;
        e = errno;
    }
    if (bad) {
        if (e)
            lc_text_fprintf(stderr, "%s: cannot write to standard output: %s\n", lc_tool_name,
                            strerror(e));
        else
            lc_text_fprintf(stderr, "%s: cannot write to standard output\n", lc_tool_name);
        _exit(1);
    }
}

void lc_check_stdout_at_exit(void)
{
    atexit(close_stdout);
}

char *lc_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        die("%s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode))   /* fread's error said "read error" */
        die("%s: a directory, not a file", path);
    size_t cap = 1 << 16, n = 0, r;
    char *buf = xmalloc(cap + 1);
    while ((r = fread(buf + n, 1, cap - n, f)) > 0) {
        n += r;
        if (n == cap) {
            char *b2 = realloc(buf, 2 * cap + 1);
            if (!b2)
                die("%s: out of memory", path);
            buf = b2;
            cap *= 2;
        }
    }
    if (ferror(f))
        die("%s: read error", path);
    fclose(f);
    buf[n] = '\0';
    *len = n;
    return buf;
}
