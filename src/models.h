/*
 * models.h - the GGUF files the chat offers (/models): found under a list of directories, each
 * described from its header (metadata and tensor infos: lc_gguf_open maps the file and reads
 * only those pages, never the tensor data).
 */
#ifndef LC_MODELS_H
#define LC_MODELS_H

#include <stdatomic.h>

#include "state.h"

/*
 * The directories /models looks in, ':'-separated, each "~" expanded later: `configured`
 * ([model] dirs) when not NULL or empty, else "~/.local/share/llamachat/models"; then
 * $LLAMACHAT_MODELS (also ':'-separated) when set.  Returns a malloc'd string, NULL on
 * allocation failure.
 */
char *lc_models_dirs(const char *configured);

/*
 * The GGUF files ("*.gguf", any case; of a split model only its first part) under each
 * directory of dirs (':'-separated, ~ expanded; subdirectories followed 4 levels deep), sorted
 * by path, numbered from 1: "N. NAME  SIZE  ARCH TYPE  GENERAL.NAME" where NAME is the path
 * under its directory, SIZE the file's ("1.1 MiB"), ARCH general.architecture, TYPE the most
 * common type of the blk.* matrices (by elements, as lc_model_desc), or "N. NAME  not usable:
 * WHY" for a file that does not parse.  A directory that does not exist is named in the
 * heading (" (not found: /x)").  stop (may be NULL) is checked between files: when it becomes true
 * the listing ends there.  current (may be NULL): the path of the loaded model; the entry that
 * is the same file (device and inode, so also through a link) ends in " (in use)".  Opens every
 * file: call it off the UI thread.  Returns the listing (state.h), or NULL on allocation failure.
 */
struct lc_listing *lc_models_list(const char *dirs, const char *current, const atomic_int *stop);

#endif
