/* test-fileutil.c - replacing files safely (src/fileutil.c): through symlinks (even dangling
 * ones), never over a FIFO or a device, keeping the mode, leaving no temporary behind. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../src/fileutil.h"
#include "testutil.h"

static char dir[] = "/tmp/lc-fileutil-XXXXXX";

static char *at(const char *name)
{
    static char buf[4][512];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof(buf[k]), "%s/%s", dir, name);
    return buf[k];
}

static char *slurp(const char *path)
{
    static char buf[256];
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

/* Files in dir whose name contains ".tmp." */
static int temporaries(void)
{
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        n += strstr(e->d_name, ".tmp.") != NULL;
    if (d)
        closedir(d);
    return n;
}

int main(void)
{
    if (!mkdtemp(dir))
        return 99;
    char *err = NULL;
    struct stat st;

    /* a new file: 0666 & ~umask */
    umask(022);
    CHECK(lc_file_replace(at("new.md"), "one", 3, &err) == 0, "new: %s", err ? err : "");
    CHECK(stat(at("new.md"), &st) == 0 && (st.st_mode & 0777) == 0644, "new mode %o", st.st_mode & 0777);
    CHECK(strcmp(slurp(at("new.md")), "one") == 0, "new text");

    /* over a 0600 file: stays 0600 */
    chmod(at("new.md"), 0600);
    CHECK(lc_file_replace(at("new.md"), "two", 3, &err) == 0, "0600: %s", err ? err : "");
    CHECK(stat(at("new.md"), &st) == 0 && (st.st_mode & 0777) == 0600, "kept mode %o", st.st_mode & 0777);
    CHECK(strcmp(slurp(at("new.md")), "two") == 0, "0600 text");

    /* onto a symlink (relative, two hops): the target is written, the links stay */
    CHECK(symlink("new.md", at("link1")) == 0 && symlink("link1", at("link2")) == 0, "symlink");
    CHECK(lc_file_replace(at("link2"), "three", 5, &err) == 0, "link: %s", err ? err : "");
    CHECK(lstat(at("link2"), &st) == 0 && S_ISLNK(st.st_mode), "link2 still a link");
    CHECK(lstat(at("link1"), &st) == 0 && S_ISLNK(st.st_mode), "link1 still a link");
    CHECK(strcmp(slurp(at("new.md")), "three") == 0, "target written");
    CHECK(stat(at("new.md"), &st) == 0 && (st.st_mode & 0777) == 0600, "target mode %o", st.st_mode & 0777);

    /* a dangling link: its target is created */
    CHECK(symlink("made.md", at("dangling")) == 0, "symlink");
    CHECK(lc_file_replace(at("dangling"), "four", 4, &err) == 0, "dangling: %s", err ? err : "");
    CHECK(lstat(at("dangling"), &st) == 0 && S_ISLNK(st.st_mode), "dangling still a link");
    CHECK(slurp(at("made.md")) && strcmp(slurp(at("made.md")), "four") == 0, "dangling target written");

    /* a FIFO: refused, still a FIFO (and nothing blocks: no open) */
    CHECK(mkfifo(at("fifo"), 0644) == 0, "mkfifo");
    err = NULL;
    CHECK(lc_file_replace(at("fifo"), "x", 1, &err) == -1, "fifo accepted");
    char want[600];
    snprintf(want, sizeof(want), "%s: a FIFO, not a regular file; not replaced", at("fifo"));
    CHECK(err && strcmp(err, want) == 0, "fifo message '%s'", err ? err : "");
    free(err);
    CHECK(lstat(at("fifo"), &st) == 0 && S_ISFIFO(st.st_mode), "fifo replaced");
    /* a device, directly and through a link: refused, untouched */
    err = NULL;
    CHECK(lc_file_replace("/dev/full", "x", 1, &err) == -1 && err &&
          strcmp(err, "/dev/full: a character device, not a regular file; not replaced") == 0,
          "/dev/full: '%s'", err ? err : "");
    free(err);
    CHECK(stat("/dev/full", &st) == 0 && S_ISCHR(st.st_mode), "/dev/full replaced!");
    CHECK(symlink("/dev/null", at("null")) == 0, "symlink");
    err = NULL;
    CHECK(lc_file_replace(at("null"), "x", 1, &err) == -1, "link to /dev/null accepted");
    free(err);
    CHECK(stat("/dev/null", &st) == 0 && S_ISCHR(st.st_mode), "/dev/null replaced!");
    /* a directory */
    CHECK(mkdir(at("d"), 0755) == 0, "mkdir");
    err = NULL;
    CHECK(lc_file_replace(at("d"), "x", 1, &err) == -1 && err && strstr(err, "Is a directory"), "dir: %s", err ? err : "");
    free(err);
    /* a missing directory: an error, no temporary */
    err = NULL;
    CHECK(lc_file_replace(at("nodir/x.md"), "x", 1, &err) == -1 && err &&
          strstr(err, "nodir/x.md: the directory ") && strstr(err, "/nodir does not exist") &&
          !strstr(err, "temporary"), "nodir: %s", err ? err : "");
    free(err);
    /* a file where a directory is expected: named */
    err = NULL;
    CHECK(lc_file_replace(at("null/sub/x.md"), "x", 1, &err) == -1 && err &&
          strstr(err, "/null is not a directory") && !strstr(err, "temporary"),
          "notdir: %s", err ? err : "");
    free(err);
    CHECK(temporaries() == 0, "%d temporary files left", temporaries());

    /* lc_file_target + lc_file_finish (what llamachat-quantize does around the GGUF writer) */
    struct lc_file_target t;
    CHECK(lc_file_target(at("link2"), &t, &err) == 0 && t.exists && t.mode == 0600 &&
          strcmp(t.path, at("link1")) != 0 && strstr(t.path, "new.md"), "target %s", t.path);
    lc_file_target_free(&t);

    char cmd[600];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    return tu_finish("test-fileutil");
}
