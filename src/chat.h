/*
 * chat.h - a conversation: an ordered list of messages with roles, and its transcripts.
 *
 * A transcript is saved as Markdown (for people; not read back) or JSON (read back by /load and
 * --resume).  The JSON layout, version 1:
 *   { "format": "llamachat-transcript", "version": 1,
 *     "model": "stories260K", "model_path": "/models/stories260K.gguf",   (optional)
 *     "title": "Pirate tales", "saved": "2026-11-29T21:00:00Z",
 *     "parameters": { "temp": 0.8, "top_k": 40, "top_p": 0.95, "min_p": 0.05,
 *                     "repeat_penalty": 1, "repeat_last_n": 64, "max_tokens": -1,
 *                     "seed": 1234 | "random", "seed_used": 5678 },
 *     "messages": [ { "role": "system" | "user" | "assistant", "content": "...",
 *                     "content_base64": "5Q==",   (only when the content is not valid UTF-8)
 *                     "time": "2026-11-29T20:59:01Z",
 *                     "end": "stopped" | "length" | "error" | "partial",   (optional)
 *                     "alternatives": [ { "content": "...", "content_base64": "...",
 *                                         "time": "...", "end": "..." }, ... ],   (only with /regen)
 *                     "chosen": 2 }, ... ] }
 *
 * "seed" is the seed set (--seed, /set seed), or "random"; loading restores it, so a random
 * seed stays random (and /regen differs) after reopening.  "seed_used" (only with "random",
 * when known) records the seed the sampler drew for the replies (lc_chat.seed_used), for
 * reproducing them with --seed; it is never applied.  A greedy reply (temp 0) draws none, so it
 * never sets "seed_used".  Files of earlier versions saved the
 * drawn seed as "seed"; they load, with that seed fixed.
 *
 * A reply regenerated with /regen keeps its earlier versions: "content" is the version shown (the
 * one the model reads), "alternatives" the others in the order they were written, and "chosen"
 * (1-based) the place of "content" among all of them (the `< 2/3 >` on screen).  Both fields
 * are optional: a file without them (older versions) is one version per message, and a reader
 * that ignores them still gets the conversation as shown.  Alternatives are encoded like
 * "content" (content_base64 for bytes that are not UTF-8).
 *
 * "end" (on a message and on each alternative: each version has its own) says how a reply ended
 * when the model did not end it itself: "stopped" (the user stopped it: Esc, or quit while it
 * was being written), "length" (cut at
 * the token limit, max-tokens), "context" (the context was full: the turn alone filled it, so
 * no older turn could be dropped; max-tokens none or not reached), "error" (an error cut it:
 * the remote server went away, out of memory), "partial" (it was still being written when the file was saved: the autosave while a
 * reply streams; a file left so was cut by llamachat ending, kill -9 or a power loss).  Absent:
 * complete, as in files of earlier versions.  A reader that ignores it still gets the text the
 * model read.  Lenient reading: an "end" that is not one of these (a later version's) loads as
 * LC_END_INCOMPLETE and is saved back as "incomplete"; an "end" that is not a string is an error.
 *
 * The file is always valid UTF-8 JSON (RFC 8259), whatever the model wrote.  A message whose
 * bytes are valid UTF-8 is saved as it is.  A reply can hold bytes that are not (a byte token
 * such as <0xE5> that was never completed, a stray continuation byte): then "content" holds the
 * text with each invalid byte replaced by U+FFFD, for people and plain JSON readers, and
 * "content_base64" holds the exact bytes in standard base64 (RFC 4648, padded).  Loading takes
 * the bytes from "content_base64" when present, after checking that "content" is their U+FFFD
 * form; so every reply round-trips byte for byte.  The model name, not needed exactly, is saved
 * with U+FFFD for invalid bytes.  The writer escapes DEL and the C1 controls (\u007f,
 * \u0080..\u009f) as json-c already does C0, so the file holds no raw control bytes.
 *
 * A Markdown transcript shows every message and the model name in their visible form
 * (textsafe.h: control pictures such as U+241B for ESC, U+FFFD for C1 controls and invalid
 * bytes; newlines and tabs kept), so `cat chat.md` cannot drive a terminal.  It is lossy and
 * never read back.
 * Files are written to a temporary file in the same directory and renamed over the target, so
 * a failed save never leaves a half-written transcript.
 */
#ifndef LC_CHAT_H
#define LC_CHAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "llm/chat_template.h"
#include "llm/sampler.h"

/* Roles are chat_template.h's enum lc_chat_role: LC_ROLE_SYSTEM, LC_ROLE_USER, LC_ROLE_ASSISTANT. */

/* How a version of a reply ended (the transcript's "end", layout above).  LC_END_COMPLETE (0):
 * the model ended it (and every message of the user or the system). */
enum lc_end {
    LC_END_COMPLETE = 0,
    LC_END_STOPPED,      /* "stopped": the user stopped it */
    LC_END_LENGTH,       /* "length": cut at the token limit */
    LC_END_ERROR,        /* "error": an error cut it */
    LC_END_PARTIAL,      /* "partial": still being written when saved */
    LC_END_INCOMPLETE,   /* "incomplete": an "end" this version does not know */
    LC_END_CONTEXT,      /* "context": the context was full (the turn alone filled it) */
};

/* The transcript's name of e ("stopped", ...); NULL for LC_END_COMPLETE (no "end" written). */
const char *lc_end_name(enum lc_end e);
/* e from a transcript's "end": LC_END_INCOMPLETE for a name not known (never fails). */
enum lc_end lc_end_from_name(const char *s);
/* The short note shown after such a reply (the TUI, dim; the Markdown export, in italics), a
 * static string such as "(stopped by you)"; NULL for LC_END_COMPLETE. */
const char *lc_end_note(enum lc_end e);

/* One version of a message that is not the one shown (an earlier reply before /regen). */
struct lc_alt {
    char *text;       /* malloc'd, NUL-terminated */
    size_t len;
    time_t time;
    enum lc_end end;  /* how this version ended */
};

struct lc_message {
    enum lc_chat_role role;
    char *text;       /* malloc'd UTF-8, NUL-terminated: the version shown and read */
    size_t len;       /* strlen(text) */
    time_t time;      /* when it was written (seconds since the epoch) */
    enum lc_end end;  /* how the version shown ended: LC_END_PARTIAL while a reply streams */
    struct lc_alt *alts; /* the other versions in the order written (malloc'd), or NULL */
    size_t n_alts;
    size_t chosen;    /* place of text among all n_alts + 1 versions (0-based) */
};

struct lc_chat {
    struct lc_message *msgs;
    size_t n, cap;
    char *model;                       /* model name for the transcript, or NULL */
    char *model_path;                  /* the model's file (absolute), or NULL: --continue
                                          and --resume open it when no model is configured */
    char *title;                       /* the user's name for it (/rename), or NULL; saved as
                                          "title" only when set */
    struct lc_sampler_params params;   /* parameters in force (saved with the transcript) */
    int32_t max_tokens;
    uint64_t seed_used;                /* when params.seed is LC_SEED_RANDOM: the seed the
                                          sampler picked (lc_sampler_seed), saved as "seed_used";
                                          LC_SEED_RANDOM (the default) if not known */
    bool has_params;                   /* loaded from a file that had "parameters" */
    uint64_t cuts;                     /* changes that may make the transcript smaller, other
                                          than the few bytes of a field's value: messages or
                                          versions taken out (lc_chat_truncate, _pop,
                                          _set_system), another version shown (_choose), a
                                          new title, model or model path.  While it stays the
                                          same and the messages only grow, a transcript found
                                          too large is still about as large (autosave) */
};

enum lc_chat_format { LC_CHAT_AUTO = 0, LC_CHAT_MARKDOWN, LC_CHAT_JSON };

/* "system", "user", "assistant"; role from name (-1 if unknown). */
const char *lc_role_name(enum lc_chat_role r);
int lc_role_from_name(const char *s);

/* Empty conversation with llama.cpp's default parameters.  NULL on allocation failure. */
struct lc_chat *lc_chat_new(void);
void lc_chat_free(struct lc_chat *c);
/* Append a message (text copied, len bytes); returns its index, or -1 on allocation failure. */
int lc_chat_add(struct lc_chat *c, enum lc_chat_role role, const char *text, size_t len);
/* Append bytes to message i (streaming a reply).  0, or -1 on allocation failure. */
int lc_chat_append(struct lc_chat *c, size_t i, const char *text, size_t len);
/* Remove messages from index i to the end. */
void lc_chat_truncate(struct lc_chat *c, size_t i);
/* Free a message's text and versions (a message taken out with lc_chat_pop). */
void lc_message_free(struct lc_message *m);
/* Take the last message out of c into *out (ownership passes to the caller).  -1 if c is empty. */
int lc_chat_pop(struct lc_chat *c, struct lc_message *out);
/* Append a message taken out with lc_chat_pop (ownership passes to c; *m is zeroed).  Returns
 * its index, or -1 on allocation failure (m untouched). */
int lc_chat_push(struct lc_chat *c, struct lc_message *m);
/*
 * /regen: `older` (a message taken out with lc_chat_pop, same role) becomes the earlier versions
 * of message i, whose text is the newest version and stays shown (chosen = the last place).
 * Ownership of older's strings passes to c (older is zeroed).  0, or -1 on allocation failure
 * (or a bad index) with older untouched.
 */
int lc_chat_add_versions(struct lc_chat *c, size_t i, struct lc_message *older);
/*
 * Show version k (0-based, < n_alts + 1) of message i: its text becomes msgs[i].text, the one
 * shown before goes back among the alternatives in its place.  0, or -1 for a bad index.
 */
int lc_chat_choose(struct lc_chat *c, size_t i, size_t k);
/* Set (text != NULL: copied) or remove the system prompt, kept as message 0; any versions the
 * old one had (a transcript's "alternatives") go with it.  0, or -1 on allocation failure. */
int lc_chat_set_system(struct lc_chat *c, const char *text);
/* Set the title (copied; NULL or "" clears). */
void lc_chat_set_title(struct lc_chat *c, const char *title);
/* Set the model name (copied; NULL clears). */
void lc_chat_set_model(struct lc_chat *c, const char *name);
/* The model's file, saved as "model_path" (NULL or "": none). */
void lc_chat_set_model_path(struct lc_chat *c, const char *path);

/*
 * Save to path.  fmt LC_CHAT_AUTO picks JSON for a name ending in ".json", else Markdown.
 * A JSON transcript that could not be read back (lc_chat_json_fits) is not written.
 * Returns 0, or -1 with a malloc'd *err naming the file and the reason; the target is left as
 * it was on failure.
 */
int lc_chat_save(const struct lc_chat *c, const char *path, enum lc_chat_format fmt, char **err);
/* The transcript as a malloc'd string (for tests and the clipboard), NULL on failure. */
char *lc_chat_to_json(const struct lc_chat *c);
char *lc_chat_to_markdown(const struct lc_chat *c);

/*
 * The most a JSON transcript may hold, one limit for the writer and the reader, so that every
 * transcript written can be opened again: lc_chat_load reads files of up to
 * lc_chat_max_file() bytes and LC_CHAT_MAX_MESSAGES messages (and as many versions of one
 * message); lc_chat_save refuses to write a JSON transcript over either (lc_chat_json_fits).
 * 64 MiB is about four times a long life of one conversation; it parses in about 0.2 s (0.3 s
 * with the sanitizers) and takes about 0.6 s to make.
 */
#define LC_CHAT_MAX_FILE ((size_t)64 << 20)
#define LC_CHAT_MAX_MESSAGES 250000
/* The file limit in force in bytes: LC_CHAT_MAX_FILE, or the value of the environment variable
 * LLAMACHAT_TEST_MAX_CHAT_FILE (bytes, for tests) when it is set and smaller. */
size_t lc_chat_max_file(void);
/*
 * Whether a JSON transcript of c that is len bytes long (lc_chat_to_json) can be read back by
 * lc_chat_load.  Returns 0, or -1 with a malloc'd *err naming path and the limit ("PATH: the
 * transcript would be 70.2 MiB, more than the 64 MiB a saved chat can hold").
 */
int lc_chat_json_fits(const struct lc_chat *c, size_t len, const char *path, char **err);
/*
 * A lower bound of strlen(lc_chat_to_json(c)) found without making it: the bytes of every
 * version of every message, their escapes, and the least each message's fields take.  A pass
 * over the text, no allocation (64 MiB: tens of milliseconds, against about 0.6 s to make the
 * JSON), so that a conversation known to be over lc_chat_max_file() is not made again and again
 * while it stays so.
 */
size_t lc_chat_json_min_len(const struct lc_chat *c);

/*
 * Load a JSON transcript.  Every field is checked (types, roles, sizes); unknown fields are
 * ignored.  Returns a new conversation, or NULL with a malloc'd *err ("FILE: messages[3].role:
 * unknown role 'bot'").
 */
struct lc_chat *lc_chat_load(const char *path, char **err);
/* Same from a string; name is used in messages. */
struct lc_chat *lc_chat_from_json(const char *text, size_t len, const char *name, char **err);

/* Standard base64 (RFC 4648 section 4, with padding) of s[0..n), NUL-terminated; malloc'd,
 * NULL on allocation failure.  (Transcripts' content_base64, the clipboard's OSC 52.) */
char *lc_base64_encode(const char *s, size_t n);

#endif
