/* cli.h - the one-shot mode: -p PROMPT, --tokenize, --print-token-ids. */
#ifndef LC_CLI_H
#define LC_CLI_H
#include "options.h"
/* Run the one-shot mode; returns the process exit status. */
int lc_cli_run(const struct lc_options *o);
/* The default model: the installed copy if present, else the one beside the source tree. */
const char *lc_default_model_path(void);
#endif
