/*
 * neon-pcre2-stub.c - PCRE2 for the AArch64 cross build of test-greedy (test-greedy-neon.sh),
 * where no arm64 libpcre2 is installed.  Only the byte-pair (gpt2) vocabularies compile
 * regexes (tokenizer.c, bpe_setup); the models that test runs are SentencePiece ones, so every
 * entry refuses cleanly: compiling fails with a message naming this stub, nothing else is
 * reached.  Signatures: pcre2.h (8-bit code units), copied next to the build by the script.
 */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <string.h>

pcre2_code *pcre2_compile(PCRE2_SPTR pattern, PCRE2_SIZE length, uint32_t options, int *errorcode,
                          PCRE2_SIZE *erroroffset, pcre2_compile_context *ccontext)
{
    (void)pattern, (void)length, (void)options, (void)ccontext;
    *errorcode = 0;
    *erroroffset = 0;
    return NULL;
}

int pcre2_get_error_message(int errorcode, PCRE2_UCHAR *buffer, PCRE2_SIZE bufflen)
{
    (void)errorcode;
    const char msg[] = "no PCRE2 in the NEON cross build (tests/neon-pcre2-stub.c)";
    if (bufflen == 0)
        return PCRE2_ERROR_NOMEMORY;
    const size_t n = sizeof msg - 1 < bufflen - 1 ? sizeof msg - 1 : bufflen - 1;
    memcpy(buffer, msg, n);
    buffer[n] = 0;
    return (int)n;
}

int pcre2_jit_compile(pcre2_code *code, uint32_t options)
{
    (void)code, (void)options;
    return PCRE2_ERROR_JIT_BADOPTION;
}

void pcre2_code_free(pcre2_code *code)
{
    (void)code;
}

pcre2_match_data *pcre2_match_data_create_from_pattern(const pcre2_code *code,
                                                       pcre2_general_context *gcontext)
{
    (void)code, (void)gcontext;
    return NULL;
}

void pcre2_match_data_free(pcre2_match_data *match_data)
{
    (void)match_data;
}

int pcre2_match(const pcre2_code *code, PCRE2_SPTR subject, PCRE2_SIZE length, PCRE2_SIZE startoffset,
                uint32_t options, pcre2_match_data *match_data, pcre2_match_context *mcontext)
{
    (void)code, (void)subject, (void)length, (void)startoffset, (void)options, (void)match_data,
        (void)mcontext;
    return PCRE2_ERROR_NOMATCH;
}

PCRE2_SIZE *pcre2_get_ovector_pointer(pcre2_match_data *match_data)
{
    (void)match_data;
    return NULL;
}
