/*
 * options.h - everything the user can set: defaults < ~/.llamachatrc < command line.
 */
#ifndef LC_OPTIONS_H
#define LC_OPTIONS_H

#include <stdbool.h>
#include <stdint.h>

#include "llm/sampler.h"

enum lc_mode { LC_MODE_TUI = 0, LC_MODE_ONESHOT, LC_MODE_TOKENIZE, LC_MODE_VERSION };

struct lc_options {
    /* [model] */
    char *model_path;          /* malloc'd; NULL = default model */
    int32_t n_threads;         /* 0 = all cores */
    int32_t n_ctx;             /* 0 = model's training context, at most 4096 */
    int32_t n_batch;           /* prompt batch (512) */
    char *isa;                 /* NULL = auto, else scalar|avx2|avx512|neon */
    char *model_dirs;          /* [model] dirs: where /models looks (':'-separated), NULL =
                                  ~/.local/share/llamachat/models (models.h) */
    /* [sampling] */
    struct lc_sampler_params sampling;
    int32_t n_predict;         /* max reply tokens; -1 = until EOS / context end */
    /* [chat] */
    char *system_prompt;       /* malloc'd or NULL */
    char *chat_template;       /* name override, or NULL = from the model */
    bool autosave;             /* keep the conversation in ~/.local/state/llamachat/chats/ as it
                                  goes (state.h); off: only /save and the exit copy write it */
    bool kv_file;              /* the KV cache saved beside a JSON transcript (TRANSCRIPT.kv) and
                                  read back by --resume, --continue, /load, /chats N (engine.h);
                                  --no-kv-file, [chat] kv_file = off: neither */
    /* [remote] (issue 17): chat with an OpenAI-compatible server instead of a local model */
    char *remote_url;          /* --remote URL; NULL = local */
    char *remote_model;        /* model name on the server; NULL = its first */
    char *remote_api_key_env;  /* name of the environment variable holding the API key */
    /* [ui] */
    bool history;              /* keep ~/.local/state/llamachat/history */
    bool show_params;          /* parameter pane visible at start */
    char *theme;               /* colour scheme name, or NULL */
    bool markdown;             /* replies shown as Markdown (off: as written; /raw toggles) */
    bool show_thinking;        /* a reply's <think> part shown whole (off: folded; /think) */
    bool labels;               /* a role label before each message (mono themes, vt100) */
    char *label_user, *label_model, *label_system; /* their text; NULL = you: model: system: */
    int32_t read_limit_kib;    /* /read FILE: largest file read into the input, KiB (64) */
    /* one-shot / tools */
    enum lc_mode mode;
    char *prompt;              /* -p TEXT, or the text read for -p - (stdin) and -f FILE */
    char *prompt_file;         /* -f FILE (or "-" for -p -): read into prompt by main.c */
    bool chat_oneshot;         /* --chat: the prompt is one user turn in the chat template;
                                  only the reply is printed (cli.c lc_cli_chat) */
    bool print_token_ids;
    bool no_bos;
    bool special;          /* --special: special-token texts in -p are parsed, and printed */
    bool verbose_prompt;   /* --verbose-prompt: show the prompt's tokens (stderr / chat notes) */
    char *log_path;        /* --log-file: token log of every decode (engine.c) */
    char *chat_template_text; /* --chat-template-file: a Jinja template read from a file */
    bool verbose;
    char *resume_path;         /* --resume FILE */
    bool continue_last;        /* --continue: the most recent conversation in chats/ */
    char *save_format;         /* "md" or "json" */
    char *transcripts_dir;     /* [ui] transcripts: where /save and Ctrl-S put unnamed saves */
    bool kv_f32;               /* KV cache in f32 (default f16, as llama.cpp) */
    char *spec;                /* --spec: "lookup" = speculative decoding with prompt-lookup
                                  drafts (llm/spec.h); NULL = off */
    char *draft_path;          /* --draft FILE: speculative decoding with this draft model's
                                  guesses (same vocabulary; llm/spec.h); NULL = none */
    int32_t draft_max;         /* --draft-max: most drafted tokens per step (8) */
    bool kv_q8_0;              /* KV cache in q8_0 blocks (--cache-type q8_0, -ctk/-ctv); implies
                                  flash_attn.  Command line only: the context is built once */
    bool flash_attn;           /* fused attention, llama.cpp's -fa (context.h) */
    bool fast_math;            /* --fast-math: prompt batches in a faster float order where a
                                  kernel has one (context.h: lc_context_params.fast_math) */
    uint64_t cli_set;          /* bit i: setting i of config.h's table (lc_config_option_at) was
                                  given on the command line (main.c), so that it wins over what
                                  a resumed transcript saved (lc_config_keep_cli) */
};

#endif
