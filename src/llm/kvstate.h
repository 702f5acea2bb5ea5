/*
 * kvstate.h - a conversation's KV cache in a file beside its transcript, so that reopening the
 * chat does not read the whole conversation again (issue 15, "instant resume").
 *
 * The file holds the token ids whose cells the cache held, the cells themselves (K after RoPE
 * and V, every layer, in the cache's type), the token ids the model wrote its replies as (so
 * that a reopened reply is read as the same ids, not tokenized again), and enough of the
 * model's identity to refuse a file made with another model.  Nothing in it is trusted: every
 * count and size is checked against the file and the context before use, and two CRC-32s (one
 * over the header and the token ids, one over the cells) catch damage.
 *
 * Format, version 2; integers little-endian:
 *   offset size
 *    0      8   magic "LCKVSTAT"
 *    8      4   format version (2)
 *   12      4   cache type, ggml's numbering: 0 F32, 1 F16, 8 Q8_0 (--cache-type)
 *   16      8   size of the whole file in bytes
 *   24      8   model bytes: the sizes of the model's GGUF files added up (all split parts)
 *   32      8   model hash (lc_kvstate_model_hash)
 *   40      4   n_layer
 *   44      4   n_embd_kv: elements in a cell row, n_head_kv * head_dim
 *   48      4   n_vocab
 *   52      4   n_tokens: cells of positions 0 .. n_tokens-1
 *   56      4   n_kept: reply token lists
 *   60      4   name_len (<= 255)
 *   64      4   how the cells were computed (lc_context_compute_flags): bit 0 --fast-math (where a
 *               kernel has a faster order for the model's weights), bit 1
 *               flash attention (-fa, or a q8_0 cache); both change the cells' last bits, so a
 *               file made otherwise is refused and the conversation read again in this run's
 *               order (version 1 had no such field: it is refused as another version)
 *   68      4   CRC-32 of bytes 0 .. 67
 *   72          the model's name (name_len bytes, not NUL-terminated; for the message)
 *               the token ids, n_tokens int32
 *               n_kept reply lists: u64 FNV-1a hash and u64 length of the reply's text that the
 *               ids spell, u32 n (1 .. n_tokens), n int32 ids
 *          4    CRC-32 of the bytes from offset 72 to here
 *               the cells, for each layer: n_tokens K rows, then n_tokens V rows, each
 *               lc_context_kv_row_bytes (ggml's row size of the type: F16 2 bytes an element,
 *               Q8_0 34 bytes a block of 32)
 *          4    CRC-32 of the cells
 * CRC-32 is the IEEE 802.3 / zlib polynomial (reflected 0xEDB88320, initial and final xor
 * 0xFFFFFFFF; "123456789" gives 0xCBF43926), computed eight bytes at a time ("slicing-by-8").
 *
 * Everything returns its failure as a malloc'd message without the path (the caller names the
 * file); nothing prints.
 */
#ifndef LC_KVSTATE_H
#define LC_KVSTATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "context.h"
#include "model.h"

#define LC_KVSTATE_FORMAT_VERSION 2

/* CRC-32 (IEEE) of n bytes continuing crc (0 to start; the result of a call to continue). */
uint32_t lc_crc32(uint32_t crc, const void *p, size_t n);

#define LC_FNV64_INIT 0xcbf29ce484222325ULL
/* FNV-1a 64 of n bytes continuing h (LC_FNV64_INIT to start). */
uint64_t lc_fnv64(uint64_t h, const void *p, size_t n);

/*
 * The model's identity in a state file: FNV-1a 64 over, for each GGUF part, its size, its
 * header (metadata and tensor table: the bytes before the data section) and 64 samples of 64
 * bytes spread evenly over its tensor data (a re-quantized or fine-tuned file with the same
 * header differs there).  Reads a few pages of the weights; milliseconds for a 32k vocabulary.
 */
uint64_t lc_kvstate_model_hash(const struct lc_model *m);

/* The ids a reply was generated as: ids[0 .. n) spell the first `bytes` bytes of its text, whose
 * lc_fnv64 hash is `hash`. */
struct lc_kvstate_kept {
    uint64_t hash, bytes;
    int32_t n;
    int32_t *ids;
};

/*
 * Write the cells [0, n_tokens) of c (n_tokens <= lc_context_n_past), the ids tokens[0 ..
 * n_tokens) they hold and the kept reply ids to path: a temporary file beside it (mode 0600:
 * the cells are the conversation), then rename(), so that path holds either the old file or
 * the whole new one.  Not fsynced: after a power loss the file may be missing or damaged, which
 * a load refuses (the conversation is then read again, as without it).  Returns 0, or -1 with
 * a malloc'd *err ("write failed: No space left on device"); path is then as it was.
 */
int lc_kvstate_save(const char *path, const struct lc_context *c, const int32_t *tokens,
                    int32_t n_tokens, const struct lc_kvstate_kept *kept, size_t n_kept,
                    char **err);

/* Why a state file was not used. */
enum lc_kvstate_why {
    LC_KVSTATE_OK = 0,
    LC_KVSTATE_MISSING,   /* no such file */
    LC_KVSTATE_IO,        /* cannot be opened or read ("cannot read: ...") */
    LC_KVSTATE_FORMAT,    /* "not a llamachat KV state file" */
    LC_KVSTATE_VERSION,   /* "format version 7; this llamachat reads version 2" */
    LC_KVSTATE_TRUNCATED, /* "truncated (1000 of 4168 bytes)", or longer than it says */
    LC_KVSTATE_CHECKSUM,  /* "bad checksum (the file is damaged)" */
    LC_KVSTATE_MODEL,     /* "made with another model (NAME)" */
    LC_KVSTATE_CACHE,     /* "made with --cache-type f16; this run uses q8_0" */
    LC_KVSTATE_CONTEXT,   /* "it holds 5000 tokens; the context is 4096 (-c)" */
    LC_KVSTATE_MATH,      /* "made with --fast-math; this run computes in llama.cpp's order" */
    LC_KVSTATE_STOPPED,   /* the progress callback asked to stop */
};

/* An opened and checked state file: header, token ids and reply lists read, cells not yet. */
struct lc_kvstate;

/*
 * Open the state file at path for context c: checks the magic, the version, the header's CRC,
 * the size, that the model, the cell shape, the cache type and the compute flags
 * (lc_context_compute_flags) are c's and that the tokens fit
 * c's context, then reads the token ids and the reply lists and checks their CRC (ids in the
 * vocabulary).  Returns the state (free with lc_kvstate_close), or NULL with *why and a
 * malloc'd *err (NULL for LC_KVSTATE_MISSING).
 */
struct lc_kvstate *lc_kvstate_open(const char *path, const struct lc_context *c, int *why,
                                   char **err);
int32_t lc_kvstate_n_tokens(const struct lc_kvstate *s);
const int32_t *lc_kvstate_tokens(const struct lc_kvstate *s);
size_t lc_kvstate_n_kept(const struct lc_kvstate *s);
/* Reply list i (< lc_kvstate_n_kept), owned by s. */
const struct lc_kvstate_kept *lc_kvstate_kept(const struct lc_kvstate *s, size_t i);

/*
 * Read the cells into c: rows [0, n_use) of every layer become its cache (n_use <=
 * lc_kvstate_n_tokens; n_past = n_use on success); the rows after n_use are read for the
 * checksum only.  progress(user, done, total) is consulted between layers (total: the file's
 * tokens; done: the share of the layers read, in tokens) and stops the load when it returns true.  Returns 0,
 * or 1 when stopped (*why LC_KVSTATE_STOPPED), or -1 with *why and a malloc'd *err
 * (TRUNCATED, CHECKSUM, IO); but for 0 the cache of c is empty (n_past 0).
 */
int lc_kvstate_load(struct lc_kvstate *s, struct lc_context *c, int32_t n_use,
                    lc_progress_fn progress, void *user, int *why, char **err);
/* NULL is fine. */
void lc_kvstate_close(struct lc_kvstate *s);

#endif
