/* util.c - see util.h. */
#include "util.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

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
