/*
 * tui.h - the full-screen chat (ncursesw + GNU readline).  Curses lives only under src/tui/.
 */
#ifndef LC_TUI_H
#define LC_TUI_H

#include "options.h"

/*
 * Run the chat until the user quits (Ctrl-D on an empty line, /quit) or SIGTERM/SIGHUP.
 * o is the merged configuration (defaults < ~/.llamachatrc < command line); model_path NULL
 * means the default model.  The terminal is restored on every exit path, fatal signals included.
 * Returns the process exit status (0, or 1 when the terminal cannot be used).
 */
int lc_tui_run(struct lc_options *o);

#endif
