/*
 * util.h - what the command-line tools share: fatal errors and allocation that cannot fail.
 */
#ifndef LC_TOOLS_UTIL_H
#define LC_TOOLS_UTIL_H

#include <stddef.h>

/* The tool's name for messages, e.g. "llamachat-quantize"; defined by each tool. */
extern const char *const lc_tool_name;

/* Print "NAME: message" (printf format) on stderr and exit with status 1. */
void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

/* malloc that never returns NULL: dies with "out of memory (N bytes)" instead. */
void *xmalloc(size_t n);

/* A whole number option value in [lo, hi]; dies with "OPT: 'S' is not a number in LO..HI". */
long lc_parse_long(const char *opt, const char *s, long lo, long hi);

/* The whole file at path, NUL-terminated, its length in *len (malloc'd); dies on failure. */
char *lc_read_file(const char *path, size_t *len);

/*
 * Call first in main: at exit, standard output is flushed and closed, and a write error (a full
 * disk, a closed pipe) is said on stderr ("NAME: cannot write to standard output: ...") and turns the
 * exit status into 1, since the results printed there were lost.
 */
void lc_check_stdout_at_exit(void);

#endif
