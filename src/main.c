/*
 * main.c - llamachat's entry: options (defaults < ~/.llamachatrc < command line), then the
 * full-screen chat, or the one-shot mode (-p, --tokenize) for scripts.
 */
#include "lcconfig.h"

#include <errno.h>
#include <getopt.h>
#include <unistd.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "fileutil.h"
#include "textsafe.h"
#include "config.h"
#include "tui/tui.h"
#include "llm/arch/kernels.h"
#include "options.h"

enum {
    OPT_TEMP = 1000, OPT_TOP_K, OPT_TOP_P, OPT_MIN_P, OPT_REPEAT_PENALTY, OPT_REPEAT_LAST_N,
    OPT_SEED, OPT_PRINT_IDS, OPT_TOKENIZE, OPT_NO_BOS, OPT_ISA, OPT_VERSION, OPT_CHAT_TEMPLATE,
    OPT_SYSTEM, OPT_RESUME, OPT_CONTINUE, OPT_FORMAT, OPT_KV_F32, OPT_CACHE_TYPE, OPT_CACHE_TYPE_K,
    OPT_CACHE_TYPE_V, OPT_FLASH_ATTN, OPT_FAST_MATH, OPT_SPECIAL, OPT_VERBOSE_PROMPT,
    OPT_LOG_FILE, OPT_CHAT_TEMPLATE_FILE, OPT_REMOTE, OPT_REMOTE_MODEL, OPT_CHAT, OPT_SPEC,
    OPT_DRAFT_MAX, OPT_NO_KV_FILE, OPT_DRAFT,
};

static const struct option long_opts[] = {
    {"model", required_argument, NULL, 'm'},
    {"prompt", required_argument, NULL, 'p'},
    {"file", required_argument, NULL, 'f'},
    {"chat", no_argument, NULL, OPT_CHAT},
    {"n-predict", required_argument, NULL, 'n'},
    {"threads", required_argument, NULL, 't'},
    {"ctx-size", required_argument, NULL, 'c'},
    {"batch-size", required_argument, NULL, 'b'},
    {"temp", required_argument, NULL, OPT_TEMP},
    {"top-k", required_argument, NULL, OPT_TOP_K},
    {"top-p", required_argument, NULL, OPT_TOP_P},
    {"min-p", required_argument, NULL, OPT_MIN_P},
    {"repeat-penalty", required_argument, NULL, OPT_REPEAT_PENALTY},
    {"repeat-last-n", required_argument, NULL, OPT_REPEAT_LAST_N},
    {"seed", required_argument, NULL, OPT_SEED},
    {"print-token-ids", no_argument, NULL, OPT_PRINT_IDS},
    {"tokenize", no_argument, NULL, OPT_TOKENIZE},
    {"no-bos", no_argument, NULL, OPT_NO_BOS},
    {"isa", required_argument, NULL, OPT_ISA},
    {"chat-template", required_argument, NULL, OPT_CHAT_TEMPLATE},
    {"system", required_argument, NULL, OPT_SYSTEM},
    {"resume", required_argument, NULL, OPT_RESUME},
    {"continue", no_argument, NULL, OPT_CONTINUE},
    {"no-kv-file", no_argument, NULL, OPT_NO_KV_FILE},
    {"format", required_argument, NULL, OPT_FORMAT},
    {"kv-f32", no_argument, NULL, OPT_KV_F32},
    {"spec", required_argument, NULL, OPT_SPEC},
    {"draft-max", required_argument, NULL, OPT_DRAFT_MAX},
    {"draft", required_argument, NULL, OPT_DRAFT},
    {"cache-type", required_argument, NULL, OPT_CACHE_TYPE},
    {"cache-type-k", required_argument, NULL, OPT_CACHE_TYPE_K},
    {"cache-type-v", required_argument, NULL, OPT_CACHE_TYPE_V},
    {"flash-attn", no_argument, NULL, OPT_FLASH_ATTN},
    {"fast-math", no_argument, NULL, OPT_FAST_MATH},
    {"special", no_argument, NULL, OPT_SPECIAL},
    {"verbose-prompt", no_argument, NULL, OPT_VERBOSE_PROMPT},
    {"log-file", required_argument, NULL, OPT_LOG_FILE},
    {"chat-template-file", required_argument, NULL, OPT_CHAT_TEMPLATE_FILE},
    {"remote", required_argument, NULL, OPT_REMOTE},
    {"remote-model", required_argument, NULL, OPT_REMOTE_MODEL},
    {"verbose", no_argument, NULL, 'v'},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, OPT_VERSION},
    {NULL, 0, NULL, 0},
};

static void usage(FILE *f)
{
    fprintf(f,
            "Usage: llamachat [options]            full-screen chat\n"
            "       llamachat -p PROMPT [options]  one-shot: print the continuation and exit\n"
            "       llamachat --chat -p PROMPT     one-shot: print the model's reply to PROMPT\n"
            "\n"
            "Model and compute:\n"
            "  -m, --model FILE         GGUF model (default: %s)\n"
            "  -t, --threads N          threads (default and 0: all cores)\n"
            "  -c, --ctx-size N         context size in tokens (default: model's, at most 4096)\n"
            "  -b, --batch-size N       prompt batch size (default 512)\n"
            "      --isa NAME           force kernels: scalar, avx2, avx512, neon, auto\n"
            "      --kv-f32             keep the KV cache in f32 instead of f16\n"
            "      --spec lookup|off    speculative decoding: drafts from earlier text, verified\n"
            "                           in one batch; greedy: the same tokens, sampling: the same\n"
            "                           distribution (default off)\n"
            "      --draft FILE         speculative decoding with drafts from this small model\n"
            "                           (same vocabulary as -m; 'off': none)\n"
            "      --draft-max N        most drafted tokens per step (default 8)\n"
            "      --cache-type TYPE    KV cache type: f16 (default), f32 or q8_0 (half the memory\n"
            "                           of f16; implies --flash-attn)\n"
            "  -ctk, --cache-type-k TYPE\n"
            "  -ctv, --cache-type-v TYPE\n"
            "                           llama.cpp's spellings: K and V are kept in one type, so\n"
            "                           the two must name the same one\n"
            "  -fa, --flash-attn        fused attention, llama.cpp's -fa order (last bits differ)\n"
            "      --fast-math          prompts in a faster float order (AVX-512 Q4_1, Q8_0, Q5_0,\n"
            "                           IQ4_NL, Q4_K, Q5_K: 1.25-1.7x less CPU per prompt token);\n"
            "                           not llama.cpp's bits\n"
            "Sampling:\n"
            "  -n, --n-predict N        tokens to generate (-1: until end of text or context)\n"
            "      --temp T             temperature, 0 = greedy (default 0.8)\n"
            "      --top-k K            (default 40, 0 = off)\n"
            "      --top-p P            (default 0.95, 1 = off)\n"
            "      --min-p P            (default 0.05, 0 = off)\n"
            "      --repeat-penalty R   (default 1.0 = off)\n"
            "      --repeat-last-n N    tokens the penalty looks back (default 64, -1 = all)\n"
            "      --seed S             RNG seed (default: random; -1 or \"random\" = random)\n"
            "Chat:\n"
            "      --system TEXT        system prompt\n"
            "      --chat-template NAME\n"
            "                           override the model's chat template\n"
            "      --chat-template-file FILE\n"
            "                           use the Jinja chat template in FILE\n"
            "      --resume FILE        continue a transcript saved as JSON\n"
            "      --continue           continue the most recent conversation kept in\n"
            "                           ~/.local/state/llamachat/chats/ (see [chat] autosave)\n"
            "      --no-kv-file         neither read nor write the KV cache beside transcripts\n"
            "                           (FILE.json.kv: a resumed chat then reads it all again)\n"
            "      --format md|json     /save's format when the name does not say (default md)\n"
            "Remote (an OpenAI-compatible server instead of a local model):\n"
            "      --remote URL         chat with the server at URL (llamachat-server, llama-server,\n"
            "                           vLLM, Ollama); API key: [remote] api_key_env in the rc file\n"
            "      --remote-model NAME  model to ask the server for (default: its first)\n"
            "One-shot and scripting:\n"
            "  -p, --prompt TEXT        prompt; prints prompt + continuation to stdout;\n"
            "                           -p - reads the prompt from standard input\n"
            "  -f, --file FILE          read the prompt from FILE (one final newline dropped)\n"
            "      --chat               the prompt is a user message in the chat template\n"
            "                           (with --system TEXT); prints only the reply\n"
            "      --print-token-ids    print the generated token ids instead of text\n"
            "      --tokenize           print the prompt's token ids and exit\n"
            "      --no-bos             do not add the BOS token\n"
            "  -sp, --special           parse special-token texts in -p (<s>, <|im_end|>...)\n"
            "                           and print special tokens the model writes\n"
            "                           (default: plain text)\n"
            "      --verbose-prompt     show the prompt's tokens: on stderr (-p), as a note per\n"
            "                           prompt in the chat\n"
            "      --log-file FILE      write the ids of every decode to FILE (also LLAMACHAT_LOG)\n"
            "  -v, --verbose            more figures on stderr\n"
            "  -h, --help               this help\n"
            "      --version            version and kernels\n"
            "\nConfiguration: ~/.config/llamachat/llamachatrc or ~/.llamachatrc (or $LLAMACHATRC); see llamachatrc(5).\n",
            LC_DEFAULT_MODEL);
}

static void replace_str(char **dst, const char *src)
{
    free(*dst);
    *dst = strdup(src);
}

static void options_defaults(struct lc_options *o)
{
    memset(o, 0, sizeof(*o));
    o->sampling = lc_sampler_default_params();
    o->n_predict = -1;
    o->n_batch = 512;
    o->draft_max = 8;
    o->history = true;
    o->autosave = true;
    o->kv_file = true;
    o->show_params = true;
    o->markdown = true;
    o->read_limit_kib = 64;
}

static void options_free(struct lc_options *o)
{
    free(o->model_path);
    free(o->isa);
    free(o->system_prompt);
    free(o->chat_template);
    free(o->theme);
    free(o->prompt);
    free(o->prompt_file);
    free(o->resume_path);
    free(o->save_format);
    free(o->log_path);
    free(o->chat_template_text);
    free(o->remote_url);
    free(o->remote_model);
    free(o->remote_api_key_env);
    free(o->transcripts_dir);
    free(o->spec);
    free(o->draft_path);
    free(o->label_user);
    free(o->label_model);
    free(o->label_system);
    free(o->model_dirs);
}

/* Returns 0 to go on, 1 to exit successfully (help/version), -1 on a bad option. */
static int parse_args(struct lc_options *o, int argc, char **argv)
{
    int c;
    opterr = 0;
    int li = -1;
    for (int i = 1; i < argc; i++)   /* llama.cpp's spelling of --special */
        if (!strcmp(argv[i], "-sp"))
            argv[i] = (char *)"--special";
        else if (!strcmp(argv[i], "-ctk"))
            argv[i] = (char *)"--cache-type-k";
        else if (!strcmp(argv[i], "-ctv"))
            argv[i] = (char *)"--cache-type-v";
        else if (!strcmp(argv[i], "-fa"))
            argv[i] = (char *)"--flash-attn";
    const char *ctk = NULL, *ctv = NULL;   /* --cache-type[-k|-v] as given */
    while ((c = getopt_long(argc, argv, ":m:p:f:n:t:c:b:vh", long_opts, &li)) != -1) {
        /* the option's own name for messages: "--temp", or "-n" */
        char name[64];
        if (li >= 0)
            snprintf(name, sizeof(name), "--%s", long_opts[li].name);
        else if (c == '?' || c == ':')
            snprintf(name, sizeof(name), "%s", optopt ? (char[]){'-', (char)optopt, 0} : argv[optind - 1]);
        else
            snprintf(name, sizeof(name), "-%c", c);
        /* a setting: one definition and one parser with the file and /set (config.h) */
        const struct lc_option_def *def =
            c == '?' || c == ':' ? NULL
            : lc_config_option(name[1] == '-' ? name + 2 : NULL, name[1] == '-' ? 0 : c);
        li = -1;
        if (def) {
            char *err = NULL;
            if (lc_config_set(o, def->section, def->key, optarg, &err) != 0) {
                fprintf(stderr, "llamachat: %s: %s\n", name, err ? err : "bad value");
                free(err);
                return -1;
            }
            o->cli_set |= lc_config_option_bit(def);
            continue;
        }
        switch (c) {
        case 'p':
        case 'f':
            /* -p - and -f FILE: read after the options (read_prompt); the last one given wins */
            free(o->prompt);
            free(o->prompt_file);
            o->prompt = NULL;
            o->prompt_file = NULL;
            if (c == 'f' || strcmp(optarg, "-") == 0)
                replace_str(&o->prompt_file, optarg);
            else
                replace_str(&o->prompt, optarg);
            if (o->mode == LC_MODE_TUI)
                o->mode = LC_MODE_ONESHOT;
            break;
        case OPT_CHAT: o->chat_oneshot = true; break;
        case OPT_PRINT_IDS: o->print_token_ids = true; break;
        case OPT_TOKENIZE: o->mode = LC_MODE_TOKENIZE; break;
        case OPT_NO_BOS: o->no_bos = true; break;
        case OPT_RESUME: replace_str(&o->resume_path, optarg); break;
        case OPT_CONTINUE: o->continue_last = true; break;
        case OPT_NO_KV_FILE: o->kv_file = false; break;
        case OPT_FORMAT:
            if (strcmp(optarg, "md") != 0 && strcmp(optarg, "json") != 0) {
                fprintf(stderr, "llamachat: --format: '%s' is not md or json\n", optarg);
                return -1;
            }
            replace_str(&o->save_format, optarg);
            break;
        case OPT_KV_F32: ctk = ctv = "f32"; break;
        case OPT_CACHE_TYPE: ctk = ctv = optarg; break;
        case OPT_CACHE_TYPE_K: ctk = optarg; break;
        case OPT_CACHE_TYPE_V: ctv = optarg; break;
        case OPT_FLASH_ATTN: o->flash_attn = true; break;
        case OPT_FAST_MATH: o->fast_math = true; break;
        case OPT_SPECIAL: o->special = true; break;
        case OPT_VERBOSE_PROMPT: o->verbose_prompt = true; break;
        case OPT_LOG_FILE: replace_str(&o->log_path, optarg); break;
        case OPT_CHAT_TEMPLATE_FILE: {
            size_t tlen;   /* a Jinja template: a regular file of at most 1 MiB */
            char *why = NULL, *text = lc_file_read_small(optarg, (size_t)1 << 20, &tlen, &why);
            if (!text) {
                lc_text_fprintf(stderr, "llamachat: --chat-template-file %s: %s\n", optarg, why);
                free(why);
                return -1;
            }
            if (text[strspn(text, " \t\r\n")] == '\0') {   /* it would drop every message */
                lc_text_fprintf(stderr, "llamachat: --chat-template-file %s: empty; no template in "
                                "it\n", optarg);
                free(text);
                return -1;
            }
            free(o->chat_template_text);
            o->chat_template_text = text;
            break;
        }
        case 'v': o->verbose = true; break;
        case 'h': usage(stdout); return 1;
        case OPT_VERSION: o->mode = LC_MODE_VERSION; break;
        case ':':
            fprintf(stderr, "llamachat: option %s needs a value (see --help)\n", name);
            return -1;
        default:
            fprintf(stderr, "llamachat: unknown option %s (see --help)\n", name);
            return -1;
        }
    }
    if (ctk || ctv) {
        /* one type for K and V (context.h); llama.cpp's default for the one not given is f16 */
        const char *k = ctk ? ctk : "f16", *v = ctv ? ctv : "f16";
        if (strcmp(k, v) != 0) {
            lc_text_fprintf(stderr, "llamachat: KV cache types differ (K %s, V %s): llamachat keeps "
                            "K and V in one type; give --cache-type TYPE or the same -ctk and -ctv\n",
                            k, v);
            return -1;
        }
        if (strcmp(k, "f16") && strcmp(k, "f32") && strcmp(k, "q8_0")) {
            lc_text_fprintf(stderr, "llamachat: --cache-type: '%s' is not f16, f32 or q8_0\n", k);
            return -1;
        }
        o->kv_f32 = !strcmp(k, "f32");
        o->kv_q8_0 = !strcmp(k, "q8_0");
    }
    if (o->continue_last && o->resume_path) {
        fprintf(stderr, "llamachat: --continue and --resume: give one of them\n");
        return -1;
    }
    if ((o->continue_last || o->resume_path) && (o->mode == LC_MODE_ONESHOT || o->mode == LC_MODE_TOKENIZE)) {
        /* a saved chat opens in the full-screen chat; a one-shot run would silently ignore it */
        fprintf(stderr, "llamachat: %s opens a saved chat in the full-screen chat: leave out "
                "-p, -f and --tokenize\n", o->continue_last ? "--continue" : "--resume");
        return -1;
    }
    if (optind < argc) {
        fprintf(stderr, "llamachat: unexpected argument '%s' (a prompt goes after -p)\n",
                argv[optind]);
        return -1;
    }
    if (o->chat_oneshot) {
        const char *why = o->mode == LC_MODE_TUI ? "needs a prompt: -p TEXT, -p - (standard input) or -f FILE"
                          : o->mode == LC_MODE_TOKENIZE ? "and --tokenize: give one of them"
                          : o->print_token_ids ? "prints text: --log-file FILE records the token ids"
                          : o->special ? "reads the message as plain text: --special does not apply"
                          : NULL;
        if (why) {
            fprintf(stderr, "llamachat: --chat %s\n", why);
            return -1;
        }
    }
    return 0;
}

#define LC_PROMPT_MAX ((size_t)64 << 20)   /* bytes of a prompt read from a file or stdin */

/*
 * The prompt of -f FILE or -p - (path "-": standard input), read whole and blocking (a one-shot
 * run has nothing else to do; a FIFO such as -f <(cmd) works).  One final newline ("\n" or
 * "\r\n") is dropped, as llama.cpp's -f does, so that `echo text | llamachat -p -` reads
 * "text".  Returns the malloc'd text, or NULL after printing one line on stderr: a file that
 * cannot be read, one larger than LC_PROMPT_MAX, or one with a NUL byte (binary).
 */
static char *read_prompt(const char *path)
{
    const bool in = strcmp(path, "-") == 0;
    const char *shown = in ? "-p -: standard input" : path;
    FILE *f = in ? stdin : fopen(path, "rb");
    if (!f) {
        lc_text_fprintf(stderr, "llamachat: -f %s: %s\n", path, strerror(errno));
        return NULL;
    }
    size_t len = 0, cap = 4096;
    char *text = malloc(cap);
    const char *fail = text ? NULL : "out of memory";
    while (!fail) {
        if (len + 1 >= cap) {
            char *t2 = cap < LC_PROMPT_MAX ? realloc(text, cap * 2) : NULL;
            if (!t2) {
                fail = cap < LC_PROMPT_MAX ? "out of memory" : "larger than 64 MiB; not read";
                break;
            }
            text = t2;
            cap *= 2;
        }
        size_t n = fread(text + len, 1, cap - 1 - len, f);
        len += n;
        if (n == 0) {
            if (ferror(f))
                fail = strerror(errno ? errno : EIO);
            break;
        }
    }
    if (!in)
        fclose(f);
    if (!fail && memchr(text, '\0', len))
        fail = "has a NUL byte (a binary file?); not read";
    if (fail) {
        lc_text_fprintf(stderr, "llamachat: %s%s: %s\n", in ? "" : "-f ", shown, fail);
        free(text);
        return NULL;
    }
    if (len > 0 && text[len - 1] == '\n')
        len--;
    if (len > 0 && text[len - 1] == '\r')
        len--;
    text[len] = '\0';
    return text;
}

int main(int argc, char **argv)
{
    struct lc_options o;
    options_defaults(&o);
    /* ~/.llamachatrc ($LLAMACHATRC) over the defaults, under the command line; problems are
     * reported (and shown again in the chat) and the defaults kept. */
    char *warn = NULL;
    lc_config_load(&o, NULL, &warn);
    if (warn)
        fputs(warn, stderr);
    free(warn);
    int r = parse_args(&o, argc, argv);
    if (r == 0 && o.prompt_file && o.mode != LC_MODE_VERSION) {
        o.prompt = read_prompt(o.prompt_file);
        r = o.prompt ? 0 : -1;
    }
    if (r > 0 && (fflush(stdout) != 0 || ferror(stdout))) {   /* --help to a full disk */
        perror("llamachat: cannot write to standard output");
        r = -1;
    }
    if (r != 0) {
        options_free(&o);
        return r > 0 ? 0 : r == -1 && ferror(stdout) ? 1 : 2;
    }
    /* --isa, else LLAMACHAT_ISA: a forced ISA the CPU lacks is an error, not a silent fallback. */
    const char *isa = o.isa ? o.isa : getenv("LLAMACHAT_ISA");
    if (isa && *isa) {
        char *err = NULL;
        if (lc_kernels_select(isa, &err)) {
            fprintf(stderr, "llamachat: %s %s: %s\n", o.isa ? "--isa" : "LLAMACHAT_ISA=", isa,
                    err ? err : "failed");
            free(err);
            options_free(&o);
            return 2;
        }
    }
    int status;
    if (o.mode == LC_MODE_VERSION) {
        printf("llamachat %s\nkernels: %s (built: %s)\n", PACKAGE_VERSION, lc_kernels()->isa,
               lc_kernels_built());
        status = fflush(stdout) == 0 && !ferror(stdout) ? 0 : 1;
        if (status)
            perror("llamachat: cannot write to standard output");
    } else if (o.mode == LC_MODE_TUI) {
        status = lc_tui_run(&o);
    } else if (o.chat_oneshot) {
        status = lc_cli_chat(&o);   /* the chat's engine: a local model or --remote */
    } else if ((o.cli_set & (lc_config_option_bit(lc_config_option("system", 0)) |
                             lc_config_option_bit(lc_config_option("chat-template", 0)))) ||
               o.chat_template_text) {
        /* -p and --tokenize read the prompt as it is: a system prompt or template given for
         * them would be ignored without a word (the rc file's are for the chat) */
        fprintf(stderr, "llamachat: %s applies to the chat and --chat; -p and --tokenize read the "
                "prompt as it is (add --chat for one message in the chat template)\n",
                (o.cli_set & lc_config_option_bit(lc_config_option("system", 0))) ? "--system"
                : o.chat_template_text ? "--chat-template-file" : "--chat-template");
        status = 2;
    } else if (o.remote_url && *o.remote_url) {
        /* -p and --tokenize run the local model: say so rather than ignore the server */
        lc_text_fprintf(stderr, "llamachat: --remote works in the chat and with --chat only; -p and "
                        "--tokenize use a local model (drop --remote or [remote] url, or use the "
                        "server's API)\n");
        status = 2;
    } else {
        status = lc_cli_run(&o);
    }
    options_free(&o);
    return status;
}
