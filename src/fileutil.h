/*
 * fileutil.h - replacing a file safely: the bytes go to a temporary file beside the real
 * target, are fsynced, and rename() puts them in place; then the directory is fsynced.
 *
 * "The real target": a symlink is followed (to its last link, even if that one dangles), so
 * saving onto a link writes the file it points to and the link stays.  Only regular files are
 * replaced: a FIFO, a device (/dev/full, /dev/stdout: no write-through either) or a socket is
 * refused with a message, never turned into a regular file; over a directory the rename fails
 * (EISDIR) and nothing changes.  A replaced file keeps its permission bits (and
 * its owner and group when we run as root); a new file gets 0666 & ~umask.
 */
#ifndef LC_FILEUTIL_H
#define LC_FILEUTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* What lc_file_target found at the real target. */
struct lc_file_target {
    char *path;       /* the real target (malloc'd): symlinks followed */
    bool exists;
    mode_t mode;      /* permission bits of the existing file (07777), else 0666 & ~umask */
    uid_t uid;
    gid_t gid;
};

/*
 * Find where a replacement of path must be written.  Returns 0 and fills *t (free t->path with
 * lc_file_target_free), or -1 with a malloc'd *err naming path and the cause
 * ("x.json: not a regular file (a FIFO); not replaced", "x: too many levels of symbolic
 * links").
 */
int lc_file_target(const char *path, struct lc_file_target *t, char **err);
void lc_file_target_free(struct lc_file_target *t);

/*
 * After the file at t->path was replaced (by rename): give it the old file's mode (and owner
 * when root), and fsync its directory so that the rename survives a crash.  Returns 0, or -1
 * with a malloc'd *err.
 */
int lc_file_finish(const struct lc_file_target *t, char **err);

/*
 * For a replacement written piece by piece (a stream): lc_file_temp creates the temporary file
 * "REAL-TARGET.tmp.XXXXXX" beside t->path with t's mode (and owner when root) and returns its
 * descriptor, its name in *tmp (malloc'd), or -1 with a malloc'd *err naming path.  The caller
 * writes, fsyncs and closes it (checking each), then lc_file_commit renames it over t->path and
 * does what lc_file_finish does; a failed write (or commit) leaves the target as it was:
 * lc_file_commit removes the temporary file when it fails, and on a failure before, the caller
 * unlinks it.  path is the name the user gave, for the messages.
 */
int lc_file_temp(const struct lc_file_target *t, const char *path, char **tmp, char **err);
int lc_file_commit(const struct lc_file_target *t, const char *path, const char *tmp, char **err);

/*
 * Replace path with len bytes of data as described above.  Returns 0, or -1 with a malloc'd
 * *err naming path ("x.md: write failed: No space left on device"); on failure path is as it
 * was and no temporary file is left.
 */
int lc_file_replace(const char *path, const void *data, size_t len, char **err);

/*
 * Read a small file without ever blocking (O_NONBLOCK: a FIFO does not hang the caller): a
 * regular file of at most max bytes, or /dev/null (empty).  Returns the malloc'd,
 * NUL-terminated text with its length in *len, or NULL with a malloc'd *why ("not a regular
 * file; not read", "larger than N KiB; not read", "cannot open: ...") without the path.
 */
char *lc_file_read_small(const char *path, size_t max, size_t *len, char **why);

#endif
