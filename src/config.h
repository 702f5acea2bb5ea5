/*
 * config.h - ~/.llamachatrc: defaults < the file < the command line.
 *
 * The file is INI (read with iniparser).  Sections and keys (share/llamachatrc.example and
 * llamachatrc(5) document each):
 *   [model]    path, threads, context_size, batch, isa
 *   [sampling] temp, top_k, top_p, min_p, repeat_penalty, repeat_last_n, max_tokens, seed
 *   [ui]       theme, history, show_params, transcripts, read_limit
 *   [chat]     system_prompt, template
 * An unknown section or key, or a value that does not parse or is out of range, is reported
 * as "FILE:LINE: ..." and the setting keeps its previous (default) value; the rest of the file
 * still applies.
 */
#ifndef LC_CONFIG_H
#define LC_CONFIG_H

#include <stddef.h>

#include "options.h"

/*
 * One definition per setting, shared by the command line (src/main.c), the file and the chat's
 * /set: the same values, ranges and messages everywhere.  Values are parsed by lc_config_set.
 */
enum lc_opt_type { LC_OPT_INT, LC_OPT_FLOAT, LC_OPT_BOOL, LC_OPT_STR, LC_OPT_SEED, LC_OPT_THEME,
                   LC_OPT_TEMPLATE };
struct lc_option_def {
    const char *section;   /* [section] in the file */
    const char *key;       /* key in the file, /set NAME ('-' and '_' alike) */
    const char *cli;       /* --NAME on the command line, or NULL */
    int short_name;        /* -X on the command line, or 0 */
    enum lc_opt_type type;
    double lo, hi;         /* range of INT and FLOAT values, inclusive */
    size_t off;            /* offset of the field in struct lc_options */
    const char *expect;    /* "a number from 0 to 100": what messages say is expected */
};

/* The definition of the command-line option --long_name (without the dashes) or -short_name
 * (0: none), or NULL when the option is not a setting (-p, --tokenize, ...). */
const struct lc_option_def *lc_config_option(const char *long_name, int short_name);

/* The i-th setting of the table (0-based, in the table's order), or NULL when i is past its
 * end: for listing them (Tab completion of /set names). */
const struct lc_option_def *lc_config_option_at(size_t i);

/* The bit of def (a pointer into the table, from lc_config_option) in lc_options.cli_set. */
uint64_t lc_config_option_bit(const struct lc_option_def *def);

/*
 * The settings of section ("sampling", or NULL: every section) that were given on the command
 * line (o->cli_set) get back the values they have in given (a copy of o taken before a
 * transcript's saved values were put in o): numbers, booleans and seeds only (strings are
 * left as o has them).  So "--resume FILE --temp 0" reads at temperature 0 whatever FILE saved.
 */
void lc_config_keep_cli(struct lc_options *o, const struct lc_options *given, const char *section);

/* Fill o with the built-in defaults (llama.cpp's sampling defaults, history and the parameter
 * pane on).  Strings are NULL. */
void lc_config_defaults(struct lc_options *o);

/*
 * The config file path: $LLAMACHATRC when set and non-empty, else $HOME/.llamachatrc.
 * Returns a malloc'd string, or NULL when neither is available.
 */
char *lc_config_path(void);

/*
 * Read the config file at path (NULL = lc_config_path()) into o, over what o holds.
 * A missing file is not an error when path is NULL and $LLAMACHATRC is unset (the default
 * location is optional); otherwise it is reported.  *warnings (if warnings != NULL) receives
 * NULL or a malloc'd text of one "FILE:LINE: message" per line.
 * Returns the number of problems reported (0 = clean).  Strings in o that are replaced are freed.
 */
int lc_config_load(struct lc_options *o, const char *path, char **warnings);

/* The warnings of the last lc_config_load call (owned by config.c, NULL if none), so that the
 * chat can show them after the terminal was taken over. */
const char *lc_config_last_warnings(void);

/* Free the malloc'd strings in o and set them to NULL. */
void lc_config_free(struct lc_options *o);

/*
 * Set one setting by section and key (as in the file; key "-" and "_" are the same), from its
 * text value.  section NULL looks the key up in every section (for /set NAME VALUE).
 * Returns 0, or -1 with a malloc'd *err ("unknown key 'x'" or "bad value 'v' for temp:
 * expected a number from 0 to 100") and o unchanged.  The command line and /set print *err as
 * it is; the file adds "FILE:LINE: " before it.  Numbers: strtod's, whole text; an underflow
 * (1e-40, 1e-400) is a number (0 or subnormal), not an error.  Seeds: -1 or "random" = random.
 * template: one of lc_chat_template_name's names; the message lists them.
 */
int lc_config_set(struct lc_options *o, const char *section, const char *key, const char *value,
                  char **err);

/* Parse helpers shared with /set: return 0 and store on success, -1 if s is not a valid value.
 * Booleans accept yes/no, on/off, true/false, 1/0 (any case). */
int lc_config_parse_bool(const char *s, bool *out);
int lc_config_parse_int(const char *s, long lo, long hi, int32_t *out);
int lc_config_parse_float(const char *s, double lo, double hi, float *out);
/* An integer seed, or "random" / -1 for LC_SEED_RANDOM. */
int lc_config_parse_seed(const char *s, uint64_t *out);

#endif
