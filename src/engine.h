/*
 * engine.h - the inference thread and its command/event protocol.
 *
 * One engine thread owns the model, the context (KV cache) and the sampler.  The UI thread
 * talks to it in two directions:
 *   - commands (submit a user message, regenerate, undo, choose a reply, clear, set
 *     parameters, set the system prompt, replace the conversation, quit) go into a small mutex-protected queue; they are
 *     rare, so a lock is fine there.  Stopping a reply does not queue: lc_engine_stop sets an
 *     atomic flag that the engine checks between tokens and between prompt batches.
 *   - events (reply text, prompt progress, speed figures, done, notes, errors) come back
 *     through a lock-free SPSC ring (ring.h); after pushing, the engine writes to an eventfd
 *     (or a pipe) so the UI's poll() wakes up.  The UI drains them with lc_engine_poll.
 *
 * The engine keeps its own copy of the conversation and the tokens that are in the KV cache.
 * For every reply it renders the whole conversation (chat template, or plain text for base
 * models), tokenizes it and evaluates only what differs from the cached tokens: a new turn costs
 * only its own tokens.  When the conversation no longer fits the context the model stops reading
 * the oldest turns after the system prompt (they stay in the engine's copy, hidden, so that it
 * matches the UI's conversation message for message: /undo and /regen take the same turns),
 * reports a note, and shifts the KV cache.  Parameter changes apply from the next token.
 */
#ifndef LC_ENGINE_H
#define LC_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "chat.h"
#include "llm/sampler.h"

struct lc_engine_config {
    const char *model_path;
    int32_t n_ctx, n_threads, n_batch;
    bool kv_f32;
    int32_t spec_draft;            /* speculative decoding (llm/spec.h): most drafted tokens per
                                      step; 0 = off */
    const char *draft_path;        /* with spec_draft > 0: the draft model (same vocabulary) that
                                      guesses; NULL = prompt lookup */
    bool kv_q8_0, flash_attn;      /* --cache-type q8_0, -fa (struct lc_context_params) */
    bool fast_math;                /* --fast-math (struct lc_context_params) */
    struct lc_sampler_params sampling;
    int32_t n_predict;             /* max reply tokens, -1 = until end of turn / no limit */
    const char *system_prompt;     /* may be NULL */
    const char *chat_template;     /* built-in template name, or NULL = from the model */
    const char *chat_template_text; /* a Jinja template (--chat-template-file), or NULL */
    const char *log_path;          /* token log of every decode (see engine.c), NULL = the
                                      LLAMACHAT_LOG environment variable, or none */
    bool verbose_prompt;           /* a NOTE with the text of every prompt evaluation */
    /* Remote mode (remote/remote.h): with remote_url set, no model is loaded; replies come
     * from the OpenAI-compatible server there, with the same events.  The API key is read
     * from the environment variable named remote_api_key_env (never given by value). */
    const char *remote_url;        /* "http://host:port", or NULL = local model */
    const char *remote_model;      /* model name to ask for, NULL = the server's first */
    const char *remote_api_key_env;/* environment variable holding the API key, or NULL */
};

enum lc_event_type {
    LC_EV_LOADED = 1,  /* text: model description; a: n_ctx; b: n_threads; text2 in NOTE after */
    LC_EV_TEXT,        /* text: bytes of the reply (UTF-8 may be split between events) */
    LC_EV_PROGRESS,    /* a: prompt tokens done, b: total (reading the prompt) */
    LC_EV_STATS,       /* a: n_past, b: n_ctx, x: prompt t/s, y: generation t/s */
    LC_EV_DONE,        /* a: enum lc_done_reason, b: tokens generated, x: prompt tokens evaluated,
                          y: seconds spent generating them (decode calls of this reply) */
    LC_EV_NOTE,        /* text: a note for the transcript (context trimmed, ...) */
    LC_EV_ERROR,       /* text: an error message; the engine stays up if it can */
    LC_EV_INFO,        /* text: "key=value" facts for the status bar (isa, template) */
    LC_EV_QUIT,        /* the engine thread is finishing */
};

/* LC_DONE_TOO_LONG: the user's message does not fit the context; the engine dropped it from
 * its conversation (the UI gives it back to the user). */
/* LC_DONE_STATE: a lc_engine_load_state ended (b: the tokens restored, 0 when none). */
/* LC_DONE_LIMIT: max-tokens (-n) reached, or a remote server's "length" (which may be its
 * context).  LC_DONE_CONTEXT: the local context is full with this turn alone (no older turn
 * left to drop), so the reply ends there whatever max-tokens says. */
enum lc_done_reason { LC_DONE_EOG = 0, LC_DONE_LIMIT, LC_DONE_STOPPED, LC_DONE_ERROR,
                      LC_DONE_TOO_LONG, LC_DONE_STATE, LC_DONE_CONTEXT };

#define LC_EVENT_TEXT 94
/* One ring record.  Text longer than LC_EVENT_TEXT goes in several records of the same type,
 * all but the last with more = 1. */
struct lc_event {
    uint8_t type;
    uint8_t more;
    uint8_t len;
    char text[LC_EVENT_TEXT];
    int32_t a, b;
    double x, y;
};

struct lc_engine;

/*
 * Start the engine thread; it loads the model itself (LC_EV_LOADED or LC_EV_ERROR follows).
 * The config's strings are copied.  Returns NULL with a malloc'd *err when the thread, the ring
 * or the wake-up descriptor cannot be created.
 */
struct lc_engine *lc_engine_start(const struct lc_engine_config *cfg, char **err);
/* Ask the engine to quit, join it and free everything.  NULL is fine. */
void lc_engine_free(struct lc_engine *e);
/* The descriptor to poll() for input; readable when events are waiting. */
int lc_engine_fd(const struct lc_engine *e);
/* Pop one event (clears the wake-up first when the ring is empty).  false if none. */
bool lc_engine_poll(struct lc_engine *e, struct lc_event *ev);

/* Commands.  Each returns 0, or -1 on allocation failure.  Text is copied. */
int lc_engine_submit(struct lc_engine *e, const char *text);   /* user message, then reply */
/* Drop the last reply (kept: lc_engine_set_reply brings it back) and reply again; when the
 * prompt no longer fits the context the message stays and DONE says LC_DONE_ERROR. */
int lc_engine_regen(struct lc_engine *e);
int lc_engine_clear(struct lc_engine *e);                      /* keep only the system prompt */
int lc_engine_set_system(struct lc_engine *e, const char *text);/* NULL or "" removes it */
int lc_engine_set_params(struct lc_engine *e, const struct lc_sampler_params *p, int32_t n_predict);
/* Replace the conversation (after /load): copies c's messages; evaluated with the next reply. */
int lc_engine_set_conversation(struct lc_engine *e, const struct lc_chat *c);
/*
 * Remove the last exchange (the last user message and the reply to it) and roll the KV cache
 * back to the prefix the rest still reads (not recomputed); LC_EV_STATS gives the new n_past.
 */
int lc_engine_undo(struct lc_engine *e);
/*
 * The reply to the last user message is now text (one of the versions /regen kept; "" or NULL
 * = no reply).  The one there before is kept; a text the engine generated since the last user
 * message is read again as the same token ids (matched by its bytes), any other is tokenized.
 */
int lc_engine_set_reply(struct lc_engine *e, const char *text);
/* List the models the server offers (remote) or the loaded one, as a NOTE. */
int lc_engine_models(struct lc_engine *e);
/*
 * Switch to the model at path (copied; ~ already expanded): loaded on the engine thread beside
 * the current one, which it replaces when ready; the conversation is kept and read again with
 * the next reply.  Events: NOTEs, then LC_EV_INFO/LC_EV_LOADED on success or LC_EV_ERROR and a
 * NOTE naming the model kept, and always LC_EV_DONE (a: LC_DONE_EOG switched, LC_DONE_STOPPED
 * cancelled by lc_engine_stop, LC_DONE_ERROR).  Counts as busy until then.  Remote: path is
 * the name of one of the server's models (or its number in /v1/models' list, from 1), asked
 * for from the next request on; another name is an LC_EV_ERROR that lists them.
 */
int lc_engine_load_model(struct lc_engine *e, const char *path);
/* The model's facts (file, architecture, parameters, tensor types, context, template, special
 * tokens) as one NOTE of several lines. */
int lc_engine_show(struct lc_engine *e);
/*
 * Instant resume (llm/kvstate.h).  lc_engine_save_state writes the KV cache of the conversation
 * -- its cells, their token ids and the ids of the model's replies -- to path (copied; by
 * convention the transcript's path with ".kv" added), on the engine thread, through a temporary
 * file and rename().  Nothing is written when the cache is empty, when the cache has not changed
 * since the last save to the same path, or in remote mode.  A failure is one LC_EV_ERROR ("the
 * KV state PATH was not saved: write failed: ...; the transcript is kept"), not repeated until
 * a save succeeds.  Queued saves are still written when the engine quits.
 *
 * lc_engine_load_state, after lc_engine_set_conversation of a reopened transcript: when the
 * file at path was made with this model and cache type, the reply ids it keeps are given back
 * to the replies with the same text, and the cells of the longest prefix its tokens share with
 * the conversation's become the KV cache: the next reply evaluates only the rest.  A missing
 * file says nothing; any other refusal is a NOTE naming the file and why ("made with another
 * model (NAME)", "bad checksum (the file is damaged)", "truncated (N of M bytes)", "format
 * version N ...", "the saved tokens differ from the conversation's from token P of N"), and
 * the conversation is read with the next reply as without the file.  Counts as busy; reports
 * LC_EV_PROGRESS while the cells are read and ends with LC_EV_DONE (a: LC_DONE_STATE, b: the
 * tokens restored); lc_engine_stop or quitting stops the read (nothing restored).
 * Each returns 0, or -1 on allocation failure.
 */
int lc_engine_save_state(struct lc_engine *e, const char *path);
int lc_engine_load_state(struct lc_engine *e, const char *path);
/*
 * Remove the KV state file at path (copied) on the engine thread, after every save queued
 * before it -- so a /delete cannot be undone by a save still being written -- and forget it as
 * the last file saved.  Also done when the engine quits.  A failure other than "no such file"
 * is one LC_EV_ERROR ("could not delete PATH: ...").  Returns 0, or -1 on allocation failure.
 */
int lc_engine_delete_state(struct lc_engine *e, const char *path);
/* Stop the current reply (keeps what was written).  Lock-free; safe from a signal handler. */
void lc_engine_stop(struct lc_engine *e);
/* True while a reply, a prompt or a model switch is being processed (commands queued count as
 * busy); false again before its LC_EV_DONE is pushed, so never true after the last DONE. */
bool lc_engine_busy(const struct lc_engine *e);

/*
 * One record of the token log (lc_engine_config.log_path, LLAMACHAT_LOG, --log-file; also the
 * one-shot mode's): the n ids of a decode at position pos and their text,
 *   WHAT pos=P n=N: id id ...
 *   WHAT text: "the pieces, special tokens included, C-escaped"
 * then flushed.  log NULL: nothing is written.
 */
struct lc_vocab;
void lc_token_log(FILE *log, const struct lc_vocab *v, const char *what, const int32_t *t,
                  int32_t n, int32_t pos);

#endif
