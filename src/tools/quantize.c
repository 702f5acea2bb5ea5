/*
 * llamachat-quantize - convert a GGUF model to another weight type, bit-compatibly with
 * llama.cpp's llama-quantize; measure quantization error (--stats).
 *
 *   llamachat-quantize [options] IN.gguf OUT.gguf TYPE
 *   llamachat-quantize --stats MODEL.gguf [-t N]
 *
 * The model: every tensor is either copied unchanged or converted row by row with the reference
 * quantizer of its new type (ggml's `_ref` functions, quant.c / quant_k.c), so the bytes are the
 * ones llama-quantize writes.  Which tensors are converted, and to what, follows llama.cpp's
 * llama_model_quantize_impl / llama_tensor_get_type (src/llama-quant.cpp, build 4748) for the
 * types we offer:
 *   - only tensors whose name ends in "weight", with at least 2 dimensions, and not a norm
 *     ("_norm.weight"), a MoE router ("ffn_gate_inp.weight") or a position/token-type embedding;
 *   - to TYPE, except (quantized TYPEs, without --pure) the output projection -- output.weight,
 *     or token_embd.weight when the model has no output.weight -- which becomes Q6_K when its
 *     rows are a multiple of 256 and TYPE is not Q8_0, else Q8_0;
 *   - a tensor already of the chosen type is copied.
 * The tensors are written in llama.cpp's order (its weights map: tensors outside the blocks by
 * name, then block by block, names sorted within a block), the metadata copied in order with
 * general.quantization_version and general.file_type (llama_ftype) re-set at the end, so
 * that for the same input the whole file is byte-identical to llama-quantize's.
 *
 * Where llama.cpp gives up, we do not: a row length that is not a multiple of the block size
 * (stories260K's FFN of 172) keeps the tensor in F16 -- with a note -- instead of aborting.
 *
 * The input may itself be split (give its first part): all parts are read, the split keys
 * dropped.  --split-max-size writes OUT-00001-of-0000N.gguf ... as llama.cpp's gguf-split
 * does: the first part holds all metadata, every part has split.no (u16, from 0), split.count
 * (u16) and split.tensors.count (i32, all tensors); a part is closed when the next tensor
 * (padded to 32) would take its data past the size.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fileutil.h"
#include "llm/calib.h"
#include "llm/context.h"
#include "llm/gguf.h"
#include "llm/imatrix.h"
#include "llm/model.h"
#include "llm/quant.h"
#include "llm/quant_gptq.h"
#include "llm/quant_search.h"
#include "util.h"
#include "textsafe.h"

/* llama.cpp's enum llama_ftype values for the types we write (general.file_type). */
enum {
    FTYPE_ALL_F32 = 0,
    FTYPE_MOSTLY_F16 = 1,
    FTYPE_MOSTLY_Q4_0 = 2,
    FTYPE_MOSTLY_Q4_1 = 3,
    FTYPE_MOSTLY_Q8_0 = 7,
    FTYPE_MOSTLY_Q5_0 = 8,
    FTYPE_MOSTLY_Q5_1 = 9,
    FTYPE_MOSTLY_Q2_K = 10,
    FTYPE_MOSTLY_Q3_K_S = 11,
    FTYPE_MOSTLY_Q3_K_M = 12,
    FTYPE_MOSTLY_Q3_K_L = 13,
    FTYPE_MOSTLY_Q4_K_S = 14,
    FTYPE_MOSTLY_Q4_K_M = 15,
    FTYPE_MOSTLY_Q5_K_S = 16,
    FTYPE_MOSTLY_Q5_K_M = 17,
    FTYPE_MOSTLY_Q6_K = 18,
    FTYPE_MOSTLY_IQ4_NL = 25,
    FTYPE_MOSTLY_IQ4_XS = 30,
    FTYPE_MOSTLY_BF16 = 32,
};

/* ggml's GGML_QNT_VERSION, stored as general.quantization_version */
#define QNT_VERSION 2

/* The presets: name, base type (every quantized tensor unless the mix says otherwise), ftype,
 * and what the mix does (llama_tensor_get_type, see choose_type). */
static const struct {
    const char *name;
    enum lc_type type;
    int ftype;
    const char *mix;
} target_types[] = {
    {"q4_0", LC_TYPE_Q4_0, FTYPE_MOSTLY_Q4_0, ""},
    {"q4_1", LC_TYPE_Q4_1, FTYPE_MOSTLY_Q4_1, ""},
    {"q5_0", LC_TYPE_Q5_0, FTYPE_MOSTLY_Q5_0, ""},
    {"q5_1", LC_TYPE_Q5_1, FTYPE_MOSTLY_Q5_1, ""},
    {"iq4_nl", LC_TYPE_IQ4_NL, FTYPE_MOSTLY_IQ4_NL, "first 1/8 ffn_down Q5_K"},
    {"iq4_xs", LC_TYPE_IQ4_XS, FTYPE_MOSTLY_IQ4_XS, "first 1/8 ffn_down Q5_K"},
    {"q2_k", LC_TYPE_Q2_K, FTYPE_MOSTLY_Q2_K, "attn_v Q3_K/Q4_K, ffn_down attn_output Q3_K"},
    {"q3_k_s", LC_TYPE_Q3_K, FTYPE_MOSTLY_Q3_K_S, ""},
    {"q3_k_m", LC_TYPE_Q3_K, FTYPE_MOSTLY_Q3_K_M, "attn_v Q5_K/Q4_K, ffn_down attn_output Q4_K"},
    {"q3_k_l", LC_TYPE_Q3_K, FTYPE_MOSTLY_Q3_K_L, "attn_v ffn_down attn_output Q5_K"},
    {"q4_k_s", LC_TYPE_Q4_K, FTYPE_MOSTLY_Q4_K_S, "first 4 attn_v, first 1/8 ffn_down Q5_K"},
    {"q4_k_m", LC_TYPE_Q4_K, FTYPE_MOSTLY_Q4_K_M, "half of attn_v, ffn_down Q6_K"},
    {"q5_k_s", LC_TYPE_Q5_K, FTYPE_MOSTLY_Q5_K_S, ""},
    {"q5_k_m", LC_TYPE_Q5_K, FTYPE_MOSTLY_Q5_K_M, "half of attn_v, ffn_down Q6_K"},
    {"q6_k", LC_TYPE_Q6_K, FTYPE_MOSTLY_Q6_K, ""},
    {"q8_0", LC_TYPE_Q8_0, FTYPE_MOSTLY_Q8_0, ""},
    {"f16", LC_TYPE_F16, FTYPE_MOSTLY_F16, ""},
    {"bf16", LC_TYPE_BF16, FTYPE_MOSTLY_BF16, ""},
    {"f32", LC_TYPE_F32, FTYPE_ALL_F32, ""},
};
#define N_TARGETS (sizeof(target_types) / sizeof(target_types[0]))

struct opts {
    const char *in, *out, *type_name, *stats;
    enum lc_type type;
    int ftype;
    bool pure, leave_output, allow_requantize;
    int n_threads;
    uint64_t split_max; /* bytes, 0 = one file */
    bool search;        /* --method search: quant_search.h for the types it handles */
    bool gptq;          /* --method gptq: quant_gptq.h where the imatrix has x x^T sums */
    const char *imatrix_path;
    struct lc_imatrix *imatrix; /* --imatrix, or NULL */
};

/* One tensor of the output: where its data comes from and what it becomes. */
struct plan {
    const struct lc_gguf_tensor *src;
    enum lc_type type;  /* output type */
    bool convert;       /* false: bytes copied from the input */
    size_t nbytes;      /* output data bytes */
    const char *note;   /* why the type differs from what was asked, or NULL */
    int part;           /* split part, 0-based */
};

const char *const lc_tool_name = "llamachat-quantize";

static void usage(FILE *f)
{
    fprintf(f,
            "usage: llamachat-quantize [options] IN.gguf OUT.gguf TYPE\n"
            "       llamachat-quantize --stats MODEL.gguf [-t N]\n"
            "\n"
            "TYPE (the input: F32, F16 or BF16), as llama-quantize without an importance matrix;\n"
            "bits per weight of the base type; output.weight (or tied token_embd) Q6_K, or Q8_0\n"
            "when its rows are not a multiple of 256:\n");
    for (size_t i = 0; i < N_TARGETS; i++) {
        const struct lc_type_traits *tt = lc_type_traits((int)target_types[i].type);
        fprintf(f, "  %-8s %5.2f bpw %-7s %s\n", target_types[i].name,
                8.0 * (double)tt->type_size / tt->blck_size, tt->name, target_types[i].mix);
    }
    fprintf(f,
            "\n"
            "options:\n"
            "  --pure                  every 2-D weight in TYPE (no Q6_K/Q8_0 output tensor)\n"
            "  --leave-output-tensor   copy output.weight unchanged\n"
            "  --allow-requantize      accept an already-quantized input (loses quality)\n"
            "  -t, --threads N         quantize with N threads (default: all CPUs)\n"
            "  --split-max-size SIZE   write OUT-00001-of-0000N.gguf ... parts of at most SIZE\n"
            "                          bytes of tensor data each (SIZE: 500M, 2G, 64K, bytes)\n"
            "  --stats MODEL           per 2-D tensor: RMSE and max |error| of q4_0, q4_1, q8_0\n"
            "                          (with --method search: of the searched blocks)\n"
            "  --method ref|search|gptq  ref (default): llama.cpp's quantizers, byte-identical;\n"
            "                          search: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 blocks whose F16\n"
            "                          scale (and min) minimize the squared error; same format;\n"
            "                          gptq: the search plus GPTQ's error feedback between\n"
            "                          columns (needs --imatrix from llamachat-imatrix --cov,\n"
            "                          or --self-calibrate)\n"
            "  --imatrix FILE          weigh the search's error by an importance matrix\n"
            "                          (llamachat-imatrix or llama-imatrix, .dat or .gguf);\n"
            "                          implies --method search\n"
            "  --self-calibrate N      no text needed: the input model samples N tokens itself\n"
            "                          (sequences of up to 128 from BOS, temperature 1, seed 1)\n"
            "                          and the importance matrix -- with x x^T sums for gptq --\n"
            "                          is collected over them, as llamachat-imatrix --generate N\n"
            "                          -c 128 [--cov] does; instead of --imatrix; implies\n"
            "                          --method search unless gptq (2048: seconds for a small\n"
            "                          model; bench/QUANTIZE.md)\n"
            "  -h, --help              this help\n");
}

/* "500M" -> 500000000 (decimal units, as gguf-split); K, M, G or a plain byte count. */
static bool parse_size(const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || v == 0)
        return false;
    uint64_t mul = 1;
    if (*end == 'K' || *end == 'k')
        mul = 1000, end++;
    else if (*end == 'M' || *end == 'm')
        mul = 1000 * 1000, end++;
    else if (*end == 'G' || *end == 'g')
        mul = 1000 * 1000 * 1000, end++;
    if (*end != '\0' || v > UINT64_MAX / mul)
        return false;
    *out = v * mul;
    return true;
}

/* ---------------------------------------------------------------- tensor order and type */

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* ggml_n_dims: dimensions up to the last one that is not 1 (at least 1). */
static int n_dims_eff(const struct lc_gguf_tensor *t)
{
    for (int i = LC_GGUF_MAX_DIMS - 1; i >= 1; i--)
        if (t->ne[i] > 1)
            return i + 1;
    return 1;
}

static int64_t n_elements(const struct lc_gguf_tensor *t)
{
    int64_t n = 1;
    for (int i = 0; i < LC_GGUF_MAX_DIMS; i++)
        n *= t->ne[i];
    return n;
}

/* Block number of "blk.N.*", or -1 (llama.cpp's weight_name_comparer). */
static int layer_of(const char *name)
{
    int l = -1;
    if (sscanf(name, "blk.%d.", &l) != 1)
        return -1;
    return l;
}

static int cmp_tensor(const void *a, const void *b)
{
    const struct lc_gguf_tensor *ta = *(const struct lc_gguf_tensor *const *)a;
    const struct lc_gguf_tensor *tb = *(const struct lc_gguf_tensor *const *)b;
    int la = layer_of(ta->name), lb = layer_of(tb->name);
    if (la != lb)
        return la < lb ? -1 : 1;
    return strcmp(ta->name, tb->name);
}

static int64_t count_tensors(struct lc_gguf **parts, int n_parts)
{
    int64_t n = 0;
    for (int p = 0; p < n_parts; p++)
        n += lc_gguf_n_tensors(parts[p]);
    return n;
}

/* The tensors of all parts of a (split) model, in file order; malloc'd. */
static const struct lc_gguf_tensor **collect_tensors(struct lc_gguf **parts, int n_parts)
{
    const int64_t n = count_tensors(parts, n_parts);
    const struct lc_gguf_tensor **t = xmalloc((size_t)n * sizeof(*t));
    int64_t k = 0;
    for (int p = 0; p < n_parts; p++)
        for (int64_t i = 0; i < lc_gguf_n_tensors(parts[p]); i++)
            t[k++] = lc_gguf_tensor(parts[p], i);
    return t;
}

static bool is_float_type(enum lc_type t)
{
    return t == LC_TYPE_F32 || t == LC_TYPE_F16 || t == LC_TYPE_BF16;
}

/*
 * The model facts and counters llama.cpp's mixes look at (its quantize_state_impl): the number
 * of attn_v-like tensors and of layers, GQA factor, experts; i_* count the tensors of each kind
 * seen so far, in the order of the output file.
 */
struct mix_state {
    int n_attention_wv, i_attention_wv;
    int n_layer, i_ffn_down;
    int n_gqa, n_expert;
    bool falcon;
};

static void mix_init(struct mix_state *ms, const struct lc_gguf *g,
                     const struct lc_gguf_tensor *const *order, int64_t n)
{
    memset(ms, 0, sizeof(*ms));
    const char *arch = lc_gguf_get_str(g, "general.architecture");
    ms->falcon = arch && strcmp(arch, "falcon") == 0;
    char key[128];
    uint32_t v;
    snprintf(key, sizeof key, "%s.block_count", arch ? arch : "");
    ms->n_layer = lc_gguf_get_u32(g, key, &v) ? (int)v : 0;
    uint32_t n_head = 0, n_head_kv = 0;
    snprintf(key, sizeof key, "%s.attention.head_count", arch ? arch : "");
    if (lc_gguf_get_u32(g, key, &v))
        n_head = v;
    snprintf(key, sizeof key, "%s.attention.head_count_kv", arch ? arch : "");
    n_head_kv = lc_gguf_get_u32(g, key, &v) ? v : n_head;
    ms->n_gqa = n_head_kv ? (int)(n_head / n_head_kv) : 0;
    snprintf(key, sizeof key, "%s.expert_count", arch ? arch : "");
    ms->n_expert = lc_gguf_get_u32(g, key, &v) ? (int)v : 0;
    for (int64_t i = 0; i < n; i++) {
        const char *name = order[i]->name;
        if (strstr(name, "attn_v.weight") || strstr(name, "attn_qkv.weight") ||
            strstr(name, "attn_kv_b.weight"))
            ms->n_attention_wv++;
    }
}

/* llama.cpp's use_more_bits: the first and last eighth of the layers and every third between */
static bool use_more_bits(int i_layer, int n_layers)
{
    return i_layer < n_layers / 8 || i_layer >= 7 * n_layers / 8 || (i_layer - n_layers / 8) % 3 == 2;
}

/*
 * llama_tensor_get_type's choice for a quantized preset (llama.cpp src/llama-quant.cpp, the
 * branches of the ftypes we offer): the output projection Q6_K (Q8_0 for rows not a multiple of
 * the base type's block or for Falcon, kept for Q8_0); attn_v / ffn_down / attn_output bumped
 * per preset and layer.  Counts the attn_v and ffn_down tensors in ms as llama.cpp does.
 */
static enum lc_type mix_type(struct mix_state *ms, int ftype, enum lc_type type, bool has_output,
                             const struct lc_gguf_tensor *t)
{
    const char *name = t->name;
    const bool is_output = strcmp(name, "output.weight") == 0;
    if (is_output || (!has_output && strcmp(name, "token_embd.weight") == 0)) {
        if (ms->falcon || t->ne[0] % lc_type_traits((int)type)->blck_size != 0)
            return LC_TYPE_Q8_0;
        return type != LC_TYPE_Q8_0 ? LC_TYPE_Q6_K : type;
    }
    if (strcmp(name, "token_embd.weight") == 0)
        return type;
    if (strstr(name, "attn_v.weight") || strstr(name, "attn_qkv.weight") ||
        strstr(name, "attn_kv_b.weight")) {
        const int i = ms->i_attention_wv;
        if (ftype == FTYPE_MOSTLY_Q2_K)
            type = ms->n_gqa >= 4 ? LC_TYPE_Q4_K : LC_TYPE_Q3_K;
        else if (ftype == FTYPE_MOSTLY_Q3_K_M)
            type = i < 2 ? LC_TYPE_Q5_K : LC_TYPE_Q4_K;
        else if (ftype == FTYPE_MOSTLY_Q3_K_L)
            type = LC_TYPE_Q5_K;
        else if ((ftype == FTYPE_MOSTLY_IQ4_NL || ftype == FTYPE_MOSTLY_IQ4_XS) && ms->n_gqa >= 4)
            type = LC_TYPE_Q5_K;
        else if ((ftype == FTYPE_MOSTLY_Q4_K_M || ftype == FTYPE_MOSTLY_Q5_K_M) &&
                 use_more_bits(i, ms->n_attention_wv))
            type = LC_TYPE_Q6_K;
        else if (ftype == FTYPE_MOSTLY_Q4_K_S && i < 4)
            type = LC_TYPE_Q5_K;
        if (ms->n_expert == 8)
            type = LC_TYPE_Q8_0;
        ms->i_attention_wv++;
        return type;
    }
    if (strstr(name, "attn_k.weight")) {
        return ms->n_expert == 8 ? LC_TYPE_Q8_0 : type;
    }
    if (strstr(name, "attn_q.weight"))
        return type;
    if (strstr(name, "attn_output.weight")) {
        if (ms->falcon)
            return ftype == FTYPE_MOSTLY_Q3_K_L ? LC_TYPE_Q4_K : type;
        if (ms->n_expert == 8) {
            if (ftype == FTYPE_MOSTLY_Q2_K || ftype == FTYPE_MOSTLY_Q3_K_S ||
                ftype == FTYPE_MOSTLY_Q3_K_M || ftype == FTYPE_MOSTLY_IQ4_NL ||
                ftype == FTYPE_MOSTLY_Q4_K_S || ftype == FTYPE_MOSTLY_Q4_K_M ||
                ftype == FTYPE_MOSTLY_IQ4_XS)
                type = LC_TYPE_Q5_K;
        } else if (ftype == FTYPE_MOSTLY_Q2_K) {
            type = LC_TYPE_Q3_K;
        } else if (ftype == FTYPE_MOSTLY_Q3_K_M) {
            type = LC_TYPE_Q4_K;
        } else if (ftype == FTYPE_MOSTLY_Q3_K_L) {
            type = LC_TYPE_Q5_K;
        }
        return type;
    }
    if (strstr(name, "ffn_up") || strstr(name, "ffn_gate"))
        return type;
    if (strstr(name, "ffn_down")) {
        int i_layer = ms->i_ffn_down;
        const int n_layer = ms->n_layer;
        if (ms->n_expert > 1) /* experts are not consecutive: the layer from the name */
            i_layer = layer_of(name);
        if (ftype == FTYPE_MOSTLY_Q2_K)
            type = LC_TYPE_Q3_K;
        else if (ftype == FTYPE_MOSTLY_Q3_K_M)
            type = i_layer < n_layer / 16                          ? LC_TYPE_Q5_K
                   : !ms->falcon || use_more_bits(i_layer, n_layer) ? LC_TYPE_Q4_K
                                                                    : LC_TYPE_Q3_K;
        else if (ftype == FTYPE_MOSTLY_Q3_K_L)
            type = ms->falcon ? LC_TYPE_Q4_K : LC_TYPE_Q5_K;
        else if (ftype == FTYPE_MOSTLY_Q4_K_M) {
            if (ms->falcon)
                type = i_layer < n_layer / 16 ? LC_TYPE_Q6_K
                       : use_more_bits(i_layer, n_layer) ? LC_TYPE_Q5_K
                                                         : LC_TYPE_Q4_K;
            else if (use_more_bits(i_layer, n_layer))
                type = LC_TYPE_Q6_K;
        } else if (i_layer < n_layer / 8 &&
                   (ftype == FTYPE_MOSTLY_IQ4_NL || ftype == FTYPE_MOSTLY_IQ4_XS))
            type = LC_TYPE_Q5_K;
        else if (ftype == FTYPE_MOSTLY_Q5_K_M && use_more_bits(i_layer, n_layer))
            type = LC_TYPE_Q6_K;
        else if (ftype == FTYPE_MOSTLY_Q4_K_S && !ms->falcon && i_layer < n_layer / 8)
            type = LC_TYPE_Q5_K;
        ms->i_ffn_down++;
        return type;
    }
    return type;
}

/*
 * llama.cpp's fallback for a row length that is not a multiple of the chosen type's block
 * (tensor_type_fallback): IQ4_XS -> IQ4_NL, Q2_K/Q3_K -> Q4_0, Q4_K -> Q5_0, Q5_K -> Q5_1,
 * Q6_K -> Q8_0, and F16 when that does not fit either.  Other types (llama.cpp aborts) are
 * kept in F16 too.  Returns type when it fits; sets *note otherwise.
 */
static enum lc_type fallback_type(enum lc_type type, const struct lc_gguf_tensor *t,
                                  const char **note)
{
    if (t->ne[0] % lc_type_traits((int)type)->blck_size == 0)
        return type;
    enum lc_type fb;
    switch (type) {
    case LC_TYPE_IQ4_XS: fb = LC_TYPE_IQ4_NL; break;
    case LC_TYPE_Q2_K:
    case LC_TYPE_Q3_K: fb = LC_TYPE_Q4_0; break;
    case LC_TYPE_Q4_K: fb = LC_TYPE_Q5_0; break;
    case LC_TYPE_Q5_K: fb = LC_TYPE_Q5_1; break;
    case LC_TYPE_Q6_K: fb = LC_TYPE_Q8_0; break;
    default: fb = LC_TYPE_F16; break;
    }
    if (t->ne[0] % lc_type_traits((int)fb)->blck_size != 0)
        fb = LC_TYPE_F16;
    if (fb == LC_TYPE_F16) {
        *note = "row length is not a multiple of the block size: kept in F16";
        if (t->type == LC_TYPE_F16)
            fb = t->type;
    }
    return fb;
}

/*
 * The type tensor t gets in the output (llama_model_quantize_impl + llama_tensor_get_type).
 * Sets *convert (false: copy the bytes) and *note when the type is a fallback.
 */
static enum lc_type choose_type(const struct opts *o, struct mix_state *ms, bool has_output,
                                const struct lc_gguf_tensor *t, bool *convert, const char **note)
{
    const char *name = t->name;
    *note = NULL;
    *convert = false;
    bool quantize = ends_with(name, "weight") && n_dims_eff(t) >= 2;
    quantize = quantize && strstr(name, "_norm.weight") == NULL;
    quantize = quantize && !(o->leave_output && strcmp(name, "output.weight") == 0);
    quantize = quantize && strstr(name, "ffn_gate_inp.weight") == NULL;
    quantize = quantize && strcmp(name, "position_embd.weight") != 0;
    quantize = quantize && strcmp(name, "token_types.weight") != 0;
    quantize = quantize && strstr(name, "ssm_conv1d.weight") == NULL;
    quantize = quantize && strstr(name, "attn_rel_b.weight") == NULL;
    if (!quantize)
        return t->type;

    enum lc_type type = o->type;
    if (lc_type_traits((int)o->type)->is_quantized) {
        if (!o->pure)
            type = mix_type(ms, o->ftype, type, has_output, t);
        type = fallback_type(type, t, note);
    }
    *convert = type != t->type;
    return type;
}

/* ---------------------------------------------------------------- parallel conversion */

struct job {
    const struct lc_gguf_tensor *src;
    enum lc_type type;
    void *dst;
    int64_t nrows, ncols;
    int ith, nth;
    bool search;            /* lc_quantize_row_search instead of the reference quantizer */
    const float *weights;   /* (ncols) importance of each column, or NULL */
    const struct lc_gptq *gptq; /* GPTQ's statistics of this matrix (quant_gptq.h), or NULL */
};

/* Convert rows [lo, hi) of the source tensor: to float, then the reference quantizer (or the
 * search, quant_search.h). */
static void *convert_rows(void *arg)
{
    const struct job *j = arg;
    const struct lc_type_traits *ts = lc_type_traits((int)j->src->type);
    const struct lc_type_traits *td = lc_type_traits((int)j->type);
    const size_t src_row = lc_row_size(j->src->type, j->ncols);
    const size_t dst_row = lc_row_size(j->type, j->ncols);
    int64_t per = j->nrows / j->nth, rem = j->nrows % j->nth;
    int64_t lo = j->ith * per + (j->ith < rem ? j->ith : rem);
    int64_t hi = lo + per + (j->ith < rem ? 1 : 0);
    float *row = xmalloc((size_t)j->ncols * sizeof(float));
    for (int64_t r = lo; r < hi; r++) {
        ts->to_float((const uint8_t *)j->src->data + (size_t)r * src_row, row, j->ncols);
        void *out = (uint8_t *)j->dst + (size_t)r * dst_row;
        if (j->gptq && lc_quantize_row_gptq(j->type, row, out, j->gptq) == 0)
            continue;
        /* without an importance matrix ggml's weights sqrt(sigma2 + x^2), which give a lower
         * KL divergence than w = 1 on stories260K and TinyStories-656K (bench/QUANTIZE.md) */
        const int rc = !j->search ? -1
                       : j->weights ? lc_quantize_row_search(j->type, row, out, j->ncols, j->weights)
                                    : lc_quantize_row_search_rms(j->type, row, out, j->ncols);
        if (rc != 0)
            td->from_float_ref(row, out, j->ncols);
    }
    free(row);
    return NULL;
}

/* The importance of each column of tensor t (ncols floats) from o->imatrix, or NULL: none
 * given, no entry for t (warned about once per tensor), or a row length that differs. */
static const float *tensor_weights(const struct opts *o, const struct lc_gguf_tensor *t)
{
    if (!o->imatrix)
        return NULL;
    int64_t n = 0;
    const float *w = lc_imatrix_get(o->imatrix, t->name, &n);
    if (!w) {
        lc_text_fprintf(stderr, "note: %s: not in the importance matrix: unweighted search\n",
                        t->name);
        return NULL;
    }
    if (n != t->ne[0]) {
        lc_text_fprintf(stderr, "warning: %s: the importance matrix has %" PRId64
                                " values for rows of %" PRId64 ": unweighted search\n",
                        t->name, n, t->ne[0]);
        return NULL;
    }
    return w;
}

static void convert_tensor(const struct opts *o, const struct lc_gguf_tensor *src,
                           enum lc_type type, void *dst, int n_threads)
{
    const bool search = o->search && lc_quant_search_supported(type);
    const float *weights = search ? tensor_weights(o, src) : NULL;
    const int64_t ncols = src->ne[0];
    struct lc_gptq *gptq = NULL;
    if (search && o->gptq) {
        int64_t n = 0;
        double rows = 0;
        const double *cov = lc_imatrix_get_cov(o->imatrix, src->name, &n, &rows);
        if (!cov || n != ncols)
            lc_text_fprintf(stderr, "note: %s: no x x^T sums in the importance matrix: search "
                                    "without GPTQ\n", src->name);
        else if (!(gptq = lc_gptq_prepare(cov, rows, n, 0.01f)))
            lc_text_fprintf(stderr, "warning: %s: the x x^T sums are singular even dampened: "
                                    "search without GPTQ\n", src->name);

    }
    const int64_t nrows = n_elements(src) / ncols;
    int nth = n_threads;
    if (nrows < nth)
        nth = (int)nrows;
    if (nth < 1)
        nth = 1;
    struct job jobs[nth];
    pthread_t tid[nth];
    for (int i = 0; i < nth; i++) {
        jobs[i] = (struct job){src, type, dst, nrows, ncols, i, nth, search, weights, gptq};
        if (i > 0 && pthread_create(&tid[i], NULL, convert_rows, &jobs[i]) != 0)
            die("cannot start a thread");
    }
    convert_rows(&jobs[0]);
    for (int i = 1; i < nth; i++)
        pthread_join(tid[i], NULL);
    lc_gptq_free(gptq);
}

/* ---------------------------------------------------------------- progress, table */

static bool progress_on;

static void progress(int done, int total, const char *name)
{
    if (!progress_on)
        return;
    const int width = 30;
    int fill = total ? done * width / total : width;
    char bar[64];
    for (int i = 0; i < width; i++)
        bar[i] = i < fill ? '#' : '.';
    bar[width] = '\0';
    fprintf(stderr, "\r\033[K[%s] %d/%d %.40s", bar, done, total, name ? name : "");
    fflush(stderr);
}

static double mib(double bytes)
{
    return bytes / (1024.0 * 1024.0);
}

static void print_table(const struct plan *p, int n, double seconds, int n_parts, const char *out)
{
    struct {
        int n;
        double before, after, elems;
    } by[LC_TYPE_COUNT] = {{0, 0, 0, 0}};
    double before = 0, after = 0, elems = 0;
    for (int i = 0; i < n; i++) {
        const int t = (int)p[i].type;
        by[t].n++;
        by[t].before += (double)p[i].src->nbytes;
        by[t].after += (double)p[i].nbytes;
        by[t].elems += (double)n_elements(p[i].src);
        before += (double)p[i].src->nbytes;
        after += (double)p[i].nbytes;
        elems += (double)n_elements(p[i].src);
    }
    printf("%-8s %8s %14s %14s %8s\n", "type", "tensors", "before (MiB)", "after (MiB)", "bpw");
    for (int t = 0; t < LC_TYPE_COUNT; t++) {
        if (!by[t].n)
            continue;
        printf("%-8s %8d %14.2f %14.2f %8.2f\n", lc_type_name(t), by[t].n, mib(by[t].before),
               mib(by[t].after), by[t].after * 8 / by[t].elems);
    }
    printf("%-8s %8d %14.2f %14.2f %8.2f\n", "total", n, mib(before), mib(after),
           after * 8 / elems);
    printf("wrote %s%s in %.2f s (%d part%s)\n", out, n_parts > 1 ? " (split)" : "", seconds,
           n_parts, n_parts > 1 ? "s" : "");
}

/* ---------------------------------------------------------------- writing */

static void check(int rc, char *err, const char *what)
{
    if (rc != 0) {
        if (err)
            die("%s: %s", what, err);
        die("%s failed", what);
    }
}

/* What a failed run leaves behind: nothing.  die() exits; this atexit handler then removes
 * the temporary file of the part being written and every part already written. */
static struct {
    char **parts;               /* real paths of the parts written so far */
    int n;
    struct lc_gguf_writer *cur; /* the writer of the part being written */
    bool done;
} written;

static void remove_written(void)
{
    if (written.done)
        return;
    lc_gguf_writer_free(written.cur);   /* removes its temporary file */
    written.cur = NULL;
    for (int i = 0; i < written.n; i++) {
        unlink(written.parts[i]);
        free(written.parts[i]);
    }
    free(written.parts);
    written.parts = NULL;
    written.n = 0;
}

/* OUT.gguf -> OUT-00001-of-00003.gguf (llama_split_path on the prefix without ".gguf"). */
static char *part_path(const char *out, int part, int n_parts)
{
    size_t n = strlen(out);
    if (ends_with(out, ".gguf"))
        n -= 5;
    char *prefix = xmalloc(n + 1);
    memcpy(prefix, out, n);
    prefix[n] = '\0';
    char *p = xmalloc(n + 32);
    if (lc_gguf_split_path(p, n + 32, prefix, part + 1, n_parts) != 0)
        die("%s: cannot name part %d of %d", out, part + 1, n_parts);
    free(prefix);
    return p;
}

static int quantize_model(const struct opts *o)
{
    char *err = NULL;
    int n_in = 0;
    struct lc_gguf **in = lc_gguf_open_split(o->in, &n_in, &err);
    if (!in)
        die("%s", err ? err : "cannot open input");
    const struct lc_gguf *g = in[0]; /* the metadata */

    const struct lc_gguf_tensor **order = collect_tensors(in, n_in);
    const int64_t n = count_tensors(in, n_in);
    bool has_output = false;
    for (int64_t i = 0; i < n; i++)
        has_output = has_output || strcmp(order[i]->name, "output.weight") == 0;
    qsort(order, (size_t)n, sizeof(*order), cmp_tensor);
    struct mix_state ms;
    mix_init(&ms, g, order, n);

    /* 1. plan: the type of every tensor, the part it goes to */
    struct plan *p = xmalloc((size_t)n * sizeof(*p));
    bool requant_warned = false;
    for (int64_t i = 0; i < n; i++) {
        const struct lc_gguf_tensor *t = order[i];
        p[i].src = t;
        p[i].type = choose_type(o, &ms, has_output, t, &p[i].convert, &p[i].note);
        if (p[i].convert) {
            const struct lc_type_traits *ts = lc_type_traits((int)t->type);
            if (!is_float_type(t->type)) {
                if (!o->allow_requantize)
                    die("%s: tensor '%s' is already %s; requantizing loses quality, use "
                        "--allow-requantize to do it anyway",
                        o->in, t->name, lc_type_name((int)t->type));
                if (!ts || !ts->to_float)
                    die("%s: tensor '%s': cannot read type %s", o->in, t->name,
                        lc_type_name((int)t->type));
                if (!requant_warned)
                    fprintf(stderr, "warning: requantizing from %s: the result is worse than "
                                    "quantizing the original F32/F16 model\n",
                            lc_type_name((int)t->type));
                requant_warned = true;
            }
            if (!lc_type_traits((int)p[i].type)->from_float_ref)
                die("cannot quantize to %s", lc_type_name((int)p[i].type));
        }
        p[i].nbytes = p[i].convert ? lc_row_size(p[i].type, t->ne[0]) *
                                         (size_t)(n_elements(t) / t->ne[0])
                                   : t->nbytes;
        if (p[i].note)
            lc_text_fprintf(stderr, "note: %s [%" PRId64 " x %" PRId64 "]: %s\n", t->name, t->ne[0],
                    n_elements(t) / t->ne[0], p[i].note);
    }
    int n_parts = 1;
    if (o->split_max) {
        uint64_t cur = 0;
        int64_t in_part = 0;
        for (int64_t i = 0; i < n; i++) {
            const uint64_t padded = (p[i].nbytes + 31) / 32 * 32;
            /* gguf-split: a new part when this tensor would take the data past the size;
             * unlike it, never leave a part without tensors (a tensor larger than the size
             * gets a part of its own instead of an error). */
            if (in_part > 0 && cur + padded > o->split_max) {
                n_parts++;
                cur = 0;
                in_part = 0;
            }
            cur += padded;
            in_part++;
            p[i].part = n_parts - 1;
        }
        if (n_parts > 65535) /* split.count is a u16 */
            die("--split-max-size %" PRIu64 " would make %d parts (at most 65535)", o->split_max,
                n_parts);
    } else {
        for (int64_t i = 0; i < n; i++)
            p[i].part = 0;
    }

    /* 2. write each part: metadata, tensor infos, then the data tensor by tensor */
    progress_on = isatty(2);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int64_t next = 0;
    written.parts = xmalloc((size_t)n_parts * sizeof(*written.parts));
    atexit(remove_written);
    for (int part = 0; part < n_parts; part++) {
        char *out_path = o->split_max ? part_path(o->out, part, n_parts) : strdup(o->out);
        /* write the file a symlink points to; refuse a FIFO or a device (fileutil.h) */
        struct lc_file_target target;
        if (!out_path)
            die("out of memory");
        int trc = lc_file_target(out_path, &target, &err);
        free(out_path);
        if (trc != 0)
            die("%s", err);
        char *path = target.path;
        struct lc_gguf_writer *w = lc_gguf_writer_new();
        written.cur = w;
        if (!w || !path)
            die("out of memory");
        if (part == 0) {
            check(lc_gguf_writer_copy_kvs(w, g), NULL, "copying the metadata");
            /* gguf_set_val_* in llama.cpp removes the key and appends it */
            lc_gguf_writer_remove_key(w, "general.quantization_version");
            check(lc_gguf_writer_set_u32(w, "general.quantization_version", QNT_VERSION), NULL,
                  "metadata");
            lc_gguf_writer_remove_key(w, "general.file_type");
            check(lc_gguf_writer_set_u32(w, "general.file_type", (uint32_t)o->ftype), NULL,
                  "metadata");
            lc_gguf_writer_remove_key(w, "split.no");
            lc_gguf_writer_remove_key(w, "split.count");
            lc_gguf_writer_remove_key(w, "split.tensors.count");
        } else {
            const int64_t ia = lc_gguf_find_key(g, "general.alignment");
            uint32_t align;
            if (ia >= 0 && lc_gguf_get_u32(g, "general.alignment", &align))
                check(lc_gguf_writer_set_u32(w, "general.alignment", align), NULL, "metadata");
        }
        if (o->split_max) {
            int rc = lc_gguf_writer_set_u16(w, LC_GGUF_KEY_SPLIT_NO, (uint16_t)part);
            rc |= lc_gguf_writer_set_u16(w, LC_GGUF_KEY_SPLIT_COUNT, (uint16_t)n_parts);
            rc |= lc_gguf_writer_set_i32(w, LC_GGUF_KEY_SPLIT_TENSORS_COUNT, (int32_t)n);
            check(rc, NULL, "split metadata");
        }
        int64_t first = next, end = next;
        while (end < n && p[end].part == part)
            end++;
        for (int64_t i = first; i < end; i++)
            check(lc_gguf_writer_add_tensor(w, p[i].src->name, p[i].type, p[i].src->n_dims,
                                            p[i].src->ne),
                  NULL, "adding a tensor");
        /* each call before check(): the order in which a call's arguments are evaluated is
         * unspecified, and err is set by the writer call */
        int rc = lc_gguf_writer_begin(w, path, &err);
        check(rc, err, "writing");
        for (int64_t i = first; i < end; i++) {
            progress((int)i, (int)n, p[i].src->name);
            if (!p[i].convert) {
                rc = lc_gguf_writer_write_data(w, p[i].src->data, p[i].nbytes, &err);
                check(rc, err, "writing");
                continue;
            }
            void *buf = xmalloc(p[i].nbytes);
            convert_tensor(o, p[i].src, p[i].type, buf, o->n_threads);
            rc = lc_gguf_writer_write_data(w, buf, p[i].nbytes, &err);
            check(rc, err, "writing");
            free(buf);
        }
        rc = lc_gguf_writer_end(w, &err);
        check(rc, err, "writing");
        written.cur = NULL;
        lc_gguf_writer_free(w);
        written.parts[written.n] = strdup(path);
        if (!written.parts[written.n++])
            die("out of memory");
        /* the old file's mode, the directory synced: the data is complete and in place by now,
         * so a failure here is a warning, not a reason to remove the file */
        if (lc_file_finish(&target, &err) != 0) {
            lc_text_fprintf(stderr, "%s: warning: %s\n", lc_tool_name, err ? err : path);
            free(err);
            err = NULL;
        }
        lc_file_target_free(&target);
        next = end;
    }
    progress((int)n, (int)n, NULL);
    written.done = true;
    for (int i = 0; i < written.n; i++)
        free(written.parts[i]);
    free(written.parts);
    written.parts = NULL;
    if (progress_on)
        fputs("\r\033[K", stderr);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    const double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
    char *shown = o->split_max ? part_path(o->out, 0, n_parts) : strdup(o->out);
    print_table(p, (int)n, secs, n_parts, shown ? shown : o->out);
    free(shown);
    free(p);
    free(order);
    lc_gguf_free_split(in, n_in);
    return 0;
}

/* ---------------------------------------------------------------- --stats */

struct stats_job {
    const struct lc_gguf_tensor *src;
    enum lc_type type;
    bool search;
    int64_t nrows, ncols;
    int ith, nth;
    double sum2; /* sum of squared errors */
    double maxe; /* largest |error| */
};

static void *stats_rows(void *arg)
{
    struct stats_job *j = arg;
    const struct lc_type_traits *ts = lc_type_traits((int)j->src->type);
    const struct lc_type_traits *tq = lc_type_traits((int)j->type);
    const size_t src_row = lc_row_size(j->src->type, j->ncols);
    int64_t per = j->nrows / j->nth, rem = j->nrows % j->nth;
    int64_t lo = j->ith * per + (j->ith < rem ? j->ith : rem);
    int64_t hi = lo + per + (j->ith < rem ? 1 : 0);
    float *x = xmalloc((size_t)j->ncols * sizeof(float));
    float *y = xmalloc((size_t)j->ncols * sizeof(float));
    void *q = xmalloc(lc_row_size(j->type, j->ncols));
    for (int64_t r = lo; r < hi; r++) {
        ts->to_float((const uint8_t *)j->src->data + (size_t)r * src_row, x, j->ncols);
        if (!j->search || lc_quantize_row_search(j->type, x, q, j->ncols, NULL) != 0)
            tq->from_float_ref(x, q, j->ncols);
        tq->to_float(q, y, j->ncols);
        for (int64_t c = 0; c < j->ncols; c++) {
            const double e = fabs((double)x[c] - (double)y[c]);
            j->sum2 += e * e;
            if (e > j->maxe)
                j->maxe = e;
        }
    }
    free(x);
    free(y);
    free(q);
    return NULL;
}

/* RMSE and max |error| of quantize -> dequantize of tensor t in type q (all rows). */
static void tensor_error(const struct lc_gguf_tensor *t, enum lc_type type, bool search,
                         int n_threads, double *sum2, double *maxe)
{
    const int64_t ncols = t->ne[0], nrows = n_elements(t) / ncols;
    int nth = nrows < n_threads ? (int)nrows : n_threads;
    if (nth < 1)
        nth = 1;
    struct stats_job jobs[nth];
    pthread_t tid[nth];
    for (int i = 0; i < nth; i++) {
        jobs[i] = (struct stats_job){t, type, search, nrows, ncols, i, nth, 0, 0};
        if (i > 0 && pthread_create(&tid[i], NULL, stats_rows, &jobs[i]) != 0)
            die("cannot start a thread");
    }
    stats_rows(&jobs[0]);
    *sum2 = jobs[0].sum2;
    *maxe = jobs[0].maxe;
    for (int i = 1; i < nth; i++) {
        pthread_join(tid[i], NULL);
        *sum2 += jobs[i].sum2;
        if (jobs[i].maxe > *maxe)
            *maxe = jobs[i].maxe;
    }
}

static int quant_stats(const struct opts *o)
{
    static const enum lc_type types[] = {LC_TYPE_Q4_0, LC_TYPE_Q4_1, LC_TYPE_Q8_0};
    enum { NT = sizeof(types) / sizeof(types[0]) };
    char *err = NULL;
    int n_in = 0;
    struct lc_gguf **in = lc_gguf_open_split(o->stats, &n_in, &err);
    if (!in)
        die("%s", err ? err : "cannot open model");
    const struct lc_gguf_tensor **all = collect_tensors(in, n_in);
    const int64_t n_all = count_tensors(in, n_in);
    double tot2[NT] = {0}, totmax[NT] = {0}, tot_n[NT] = {0};
    int skipped = 0;

    printf("%-28s %14s", "tensor", "shape");
    for (int k = 0; k < NT; k++)
        printf("  %9s %9s", lc_type_name((int)types[k]), "max");
    printf("\n%-28s %14s", "", "");
    for (int k = 0; k < NT; k++)
        printf("  %9s %9s", "rmse", "|err|");
    printf("\n");
    for (int64_t i = 0; i < n_all; i++) {
        const struct lc_gguf_tensor *t = all[i];
        if (n_dims_eff(t) < 2)
            continue;
        const struct lc_type_traits *ts = lc_type_traits((int)t->type);
        char shape[32];
        snprintf(shape, sizeof(shape), "%" PRId64 "x%" PRId64, t->ne[0], n_elements(t) / t->ne[0]);
        printf("%-28.28s %14s", t->name, shape);
        if (!ts || !ts->to_float || t->ne[0] % LC_QK4_0 != 0) {
            printf("  %s\n", !ts || !ts->to_float ? "(type not readable)"
                                                  : "(row length not a multiple of 32)");
            skipped++;
            continue;
        }
        const double ne = (double)n_elements(t);
        for (int k = 0; k < NT; k++) {
            double s2, mx;
            tensor_error(t, types[k], o->search, o->n_threads, &s2, &mx);
            printf("  %9.3e %9.3e", sqrt(s2 / ne), mx);
            tot2[k] += s2;
            tot_n[k] += ne;
            if (mx > totmax[k])
                totmax[k] = mx;
        }
        printf("\n");
        fflush(stdout);
    }
    printf("%-28s %14s", "total", "");
    for (int k = 0; k < NT; k++)
        printf("  %9.3e %9.3e", tot_n[k] > 0 ? sqrt(tot2[k] / tot_n[k]) : 0.0, totmax[k]);
    printf("\n");
    if (skipped)
        printf("(%d tensor%s skipped)\n", skipped, skipped > 1 ? "s" : "");
    free(all);
    lc_gguf_free_split(in, n_in);
    return 0;
}

/* ---------------------------------------------------------------- main */

/* lc_calib_seq_fn of --self-calibrate: counts the tokens of each sequence into *(long *)user */
static void count_tokens(void *user, const int32_t *tokens, int32_t n, int i_seq)
{
    (void)tokens;
    (void)i_seq;
    *(long *)user += n;
}

/*
 * --self-calibrate N: the importance matrix (with x x^T sums when cov) over N tokens that the
 * model at path samples itself -- llamachat-imatrix --generate N -c 128 --seed 1 --temp 1
 * [--cov], in memory.  Dies on failure.
 */
static struct lc_imatrix *self_calibrate(const char *path, long n_tokens, int n_threads, bool cov)
{
    enum { CALIB_CTX = 128 };
    char *err = NULL;
    struct lc_model *m = lc_model_load(path, false, &err);
    if (!m)
        die("--self-calibrate: %s", err ? err : path);
    struct lc_context_params cp = lc_context_default_params();
    cp.n_ctx = CALIB_CTX;
    cp.n_batch = CALIB_CTX;
    cp.n_threads = n_threads;
    struct lc_context *ctx = lc_context_new(m, &cp, &err);
    if (!ctx)
        die("--self-calibrate: %s", err ? err : "cannot create a context");
    struct lc_imatrix *im = lc_imatrix_new();
    struct lc_calib *cal = im ? lc_calib_new(ctx, im) : NULL;
    if (!cal)
        die("out of memory");
    lc_imatrix_collect_cov(im, cov ? 4096 : 0);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    const struct lc_sampler_params sp = lc_calib_sampler_params(1.0f, 1);
    long done = 0; /* tokens sampled (BOS counted; a last remainder of one is not) */
    const int n_seq = lc_calib_generate(cal, &sp, n_tokens, 0, count_tokens, &done, &err);
    if (n_seq < 0)
        die("--self-calibrate: %s", err ? err : "generation failed");
    clock_gettime(CLOCK_MONOTONIC, &t1);
    fprintf(stderr, "self-calibrate: %ld tokens sampled in %d sequences, %d matrices, %.2f s\n",
            done, n_seq, lc_imatrix_count(im),
            (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9);
    lc_imatrix_round_f32(im); /* the file's precision: the same bytes as the two-step way */
    lc_calib_free(cal);
    lc_context_free(ctx);
    lc_model_free(m);
    return im;
}

static bool same_file(const char *a, const char *b)
{
    struct stat sa, sb;
    return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev &&
           sa.st_ino == sb.st_ino;
}

int main(int argc, char **argv)
{
    struct opts o = {0};
    o.n_threads = 0;
    enum { OPT_PURE = 256, OPT_LEAVE, OPT_REQ, OPT_SPLIT, OPT_STATS, OPT_METHOD, OPT_IMATRIX,
           OPT_SELF_CALIBRATE };
    const char *method = NULL;
    long self_cal = 0;
    static const struct option longopts[] = {
        {"pure", no_argument, NULL, OPT_PURE},
        {"leave-output-tensor", no_argument, NULL, OPT_LEAVE},
        {"allow-requantize", no_argument, NULL, OPT_REQ},
        {"split-max-size", required_argument, NULL, OPT_SPLIT},
        {"stats", required_argument, NULL, OPT_STATS},
        {"method", required_argument, NULL, OPT_METHOD},
        {"imatrix", required_argument, NULL, OPT_IMATRIX},
        {"self-calibrate", required_argument, NULL, OPT_SELF_CALIBRATE},
        {"threads", required_argument, NULL, 't'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int c;
    lc_check_stdout_at_exit();   /* results lost to a full disk: exit 1 */
    while ((c = getopt_long(argc, argv, "t:h", longopts, NULL)) != -1) {
        switch (c) {
        case OPT_PURE: o.pure = true; break;
        case OPT_LEAVE: o.leave_output = true; break;
        case OPT_REQ: o.allow_requantize = true; break;
        case OPT_SPLIT:
            if (!parse_size(optarg, &o.split_max))
                die("--split-max-size: '%s' is not a size (e.g. 500M, 2G, 64K, 1000000)", optarg);
            break;
        case OPT_STATS: o.stats = optarg; break;
        case OPT_METHOD:
            if (strcmp(optarg, "ref") != 0 && strcmp(optarg, "search") != 0 &&
                strcmp(optarg, "gptq") != 0)
                die("--method: '%s' is not 'ref', 'search' or 'gptq'", optarg);
            method = optarg;
            break;
        case OPT_IMATRIX: o.imatrix_path = optarg; break;
        case OPT_SELF_CALIBRATE:
            self_cal = lc_parse_long("--self-calibrate", optarg, 2, 1L << 30);
            break;
        case 't': {
            char *end;
            long v = strtol(optarg, &end, 10);
            if (*end || v < 1 || v > 512)
                die("-t: '%s' is not a thread count (1..512)", optarg);
            o.n_threads = (int)v;
            break;
        }
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (o.n_threads == 0) {
        long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
        o.n_threads = ncpu > 0 ? (int)ncpu : 1;
    }
    lc_quant_init();
    if (o.imatrix_path && self_cal)
        die("--imatrix and --self-calibrate: one or the other");
    if ((o.imatrix_path || self_cal) && method && strcmp(method, "ref") == 0)
        die("%s needs --method search (ref is llama.cpp's quantizer, which ignores it)",
            self_cal ? "--self-calibrate" : "--imatrix");
    o.gptq = method && strcmp(method, "gptq") == 0;
    if (o.gptq && !o.imatrix_path && !self_cal)
        die("--method gptq needs --imatrix FILE.gguf with x x^T sums (llamachat-imatrix --cov) "
            "or --self-calibrate N");
    o.search = (method && strcmp(method, "search") == 0) || o.imatrix_path || self_cal;
    if (o.stats ? optind != argc : argc - optind != 3) {
        usage(stderr);
        return 2;
    }
    if (!o.stats) {
        o.in = argv[optind];
        o.out = argv[optind + 1];
        o.type_name = argv[optind + 2];
        bool found = false;
        for (size_t i = 0; i < sizeof(target_types) / sizeof(target_types[0]); i++) {
            if (strcasecmp(o.type_name, target_types[i].name) == 0) {
                o.type = target_types[i].type;
                o.ftype = target_types[i].ftype;
                found = true;
            }
        }
        if (!found && lc_type_from_name(o.type_name) >= 0) /* a ggml type, not one we write */
            die("cannot write %s (a ggml type, not one of the presets: see --help for those)",
                lc_type_name(lc_type_from_name(o.type_name)));
        if (!found)
            die("unknown type '%s' (see --help for the list)", o.type_name);
        if (same_file(o.in, o.out))
            die("%s: the output would overwrite the input", o.out);
    }
    if (self_cal)
        o.imatrix = self_calibrate(o.stats ? o.stats : argv[optind], self_cal, o.n_threads,
                                   o.gptq);
    if (o.imatrix_path) {
        char *ierr = NULL;
        o.imatrix = lc_imatrix_load(o.imatrix_path, &ierr);
        if (!o.imatrix)
            die("%s", ierr ? ierr : o.imatrix_path);
        fprintf(stderr, "imatrix: %d matrices from %s\n", lc_imatrix_count(o.imatrix),
                o.imatrix_path);
    }
    if (o.stats) {
        const int rc = quant_stats(&o);
        lc_imatrix_free(o.imatrix);
        return rc;
    }
    const int rc = quantize_model(&o);
    lc_imatrix_free(o.imatrix);
    return rc;
}
