/* cli.h - the one-shot mode: -p PROMPT, --tokenize, --print-token-ids. */
#ifndef LC_CLI_H
#define LC_CLI_H
#include "options.h"
/* Run the one-shot mode; returns the process exit status. */
int lc_cli_run(const struct lc_options *o);
/*
 * --chat: o->prompt as one user message (after o->system_prompt, if any) through the chat's
 * engine (engine.h: the model's chat template, stop strings, or --remote), and only the reply
 * on stdout (the exact bytes to a pipe, the visible form to a terminal) with one final newline;
 * figures and notes on stderr.  Returns the exit status: 0, or 1 when the model cannot be
 * loaded, the prompt does not fit the context, or the reply failed.
 */
int lc_cli_chat(const struct lc_options *o);
/* The default model: the installed copy if present, else the one beside the source tree. */
const char *lc_default_model_path(void);
#endif
