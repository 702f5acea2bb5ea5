/*
 * dispatch.c - choose the kernel table once, from what the CPU and the OS support.
 *
 * x86: an ISA is usable only when cpuid reports its instructions AND the OS saves the register
 * state they use (XCR0 read with xgetbv, after checking OSXSAVE): YMM (bits 1, 2) for AVX2,
 * opmask/ZMM (bits 5, 6, 7) on top for AVX-512.  ARM: getauxval(AT_HWCAP) (ASIMD, ASIMDDP).
 * The environment variable LLAMACHAT_ISA=scalar|avx2|avx512|neon|auto forces a choice.
 *
 * Tables are merged: an entry the chosen ISA lacks (NULL) comes from the next-best ISA built,
 * down to scalar, so the result is always complete.  Only ISA files configure built
 * (lcconfig.h LC_HAVE_AVX2 / LC_HAVE_AVX512 / LC_HAVE_NEON) are referenced.
 */
#include "lcconfig.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define LC_X86 1
#endif
#if defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>
#ifndef HWCAP_ASIMD
#define HWCAP_ASIMD (1 << 1)
#endif
#ifndef HWCAP_ASIMDDP
#define HWCAP_ASIMDDP (1 << 20)
#endif
#endif

/* ---------------------------------------------------------------- CPU features */

struct cpu_features {
    int avx2;   /* AVX2 + FMA + F16C, YMM state enabled */
    int avx512; /* AVX-512 F/BW/VL/DQ/VNNI, ZMM + opmask state enabled (and avx2) */
    int neon;   /* ASIMD */
    int neon_dot; /* ASIMD dot product (sdot/udot) */
};

static struct cpu_features detect(void)
{
    struct cpu_features f = {0};
#ifdef LC_X86
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d))
        return f;
    const int osxsave = (c >> 27) & 1, avx = (c >> 28) & 1, fma = (c >> 12) & 1,
              f16c = (c >> 29) & 1;
    if (!osxsave || !avx)
        return f;
    unsigned xlo, xhi;
    __asm__ volatile("xgetbv" : "=a"(xlo), "=d"(xhi) : "c"(0));
    const int ymm_os = (xlo & 0x6) == 0x6;   /* SSE + AVX state */
    const int zmm_os = (xlo & 0xE0) == 0xE0; /* opmask, ZMM_Hi256, Hi16_ZMM */
    if (__get_cpuid_max(0, NULL) < 7)
        return f;
    __cpuid_count(7, 0, a, b, c, d);
    const int avx2 = (b >> 5) & 1;
    const int avx512f = (b >> 16) & 1, avx512dq = (b >> 17) & 1, avx512bw = (b >> 30) & 1,
              avx512vl = (b >> 31) & 1, avx512vnni = (c >> 11) & 1;
    f.avx2 = ymm_os && avx2 && fma && f16c;
    f.avx512 = f.avx2 && zmm_os && avx512f && avx512dq && avx512bw && avx512vl && avx512vnni;
#elif defined(__aarch64__) && defined(__linux__)
    const unsigned long hw = getauxval(AT_HWCAP);
    f.neon = (hw & HWCAP_ASIMD) != 0;
    f.neon_dot = (hw & HWCAP_ASIMDDP) != 0;
#elif defined(__aarch64__)
    f.neon = 1; /* ASIMD is architectural on AArch64 */
#endif
    return f;
}

/* ---------------------------------------------------------------- ISAs */

struct isa {
    const char *name;
    const struct lc_kernels *table; /* NULL when not built */
    int (*supported)(const struct cpu_features *f);
};

#if defined(LC_HAVE_AVX2) || defined(LC_HAVE_AVX512)
static int sup_avx2(const struct cpu_features *f) { return f->avx2; }
#endif
#ifdef LC_HAVE_AVX512
static int sup_avx512(const struct cpu_features *f) { return f->avx512; }
#endif
#ifdef LC_HAVE_NEON
static int sup_neon(const struct cpu_features *f) { return f->neon; }
#endif
static int sup_scalar(const struct cpu_features *f) { (void)f; return 1; }

/* Best first: the merge walks from the chosen entry to the end. */
static const struct isa isas[] = {
#ifdef LC_HAVE_AVX512
    {"avx512", &lc_kernels_avx512, sup_avx512},
#endif
#ifdef LC_HAVE_AVX2
    {"avx2", &lc_kernels_avx2, sup_avx2},
#endif
#ifdef LC_HAVE_NEON
    {"neon", &lc_kernels_neon, sup_neon},
#endif
    {"scalar", &lc_kernels_scalar, sup_scalar},
};
#define N_ISAS ((int)(sizeof(isas) / sizeof(isas[0])))

static const char *const known_isas[] = {"scalar", "avx2", "avx512", "neon"};

static struct cpu_features cpu;
static pthread_once_t cpu_once = PTHREAD_ONCE_INIT;

static void cpu_init(void)
{
    cpu = detect();
    lc_quant_init(); /* the scalar kernels read the fp16 table */
}

static int find_isa(const char *name)
{
    for (int i = 0; i < N_ISAS; i++)
        if (strcmp(isas[i].name, name) == 0)
            return i;
    return -1;
}

#define MERGE(field)                                                                        \
    do {                                                                                    \
        for (int i_ = from; i_ < N_ISAS && !t->field; i_++)                                 \
            if (isas[i_].supported(&cpu))                                                   \
                t->field = isas[i_].table->field;                                           \
    } while (0)

/* Fill t with isas[from]'s entries, then the next supported ISAs' for the NULL ones. */
static void merge(struct lc_kernels *t, int from)
{
    memset(t, 0, sizeof(*t));
    t->isa = isas[from].name;
    for (int k = 0; k < LC_TYPE_COUNT; k++) {
        MERGE(vec_dot[k]);
        MERGE(quantize_row[k]);
        MERGE(gemm[k]);
        MERGE(gemv[k]);
        MERGE(gemv_x16[k]);
        MERGE(gemm_x16[k]);
        MERGE(recode[k]);
    }
    t->x16_native = isas[from].table->x16_native;
    for (int k = 0; k < LC_TYPE_COUNT; k++) /* the chosen ISA's own only (kernels.h) */
        t->gemm_x16_fast[k] = isas[from].table->gemm_x16_fast[k];
    MERGE(vec_dot_q4_0x8);
    MERGE(gemm_q4_0x8);
    MERGE(gemv_q4_0x8);
    MERGE(rms_norm);
    MERGE(softmax);
    MERGE(swiglu);
    MERGE(dot_f32);
    MERGE(dot_f16);
    MERGE(axpy_f16);
    MERGE(axpy_f32);
    MERGE(mad_f16);
    /* never from another ISA, and only beside this ISA's own dot_f16: they have its bits
     * (kernels.h) */
    if (t->dot_f16 == isas[from].table->dot_f16) {
        t->dot_f16_rows = isas[from].table->dot_f16_rows;
        t->dot_f16_rows_multi = isas[from].table->dot_f16_rows_multi;
    }
    MERGE(scale_f16);
    MERGE(mad_f32);
    MERGE(exp_sum);
    MERGE(qk_f16_rows);
    MERGE(mad_f16_rows);
    MERGE(mad_f32_rows);
    MERGE(qsearch_asym);
}

/*
 * The active table.  A pointer to one of two static slots is published atomically, so a
 * lc_kernels_select() while other threads read the old table never shows them a half-written one
 * (selecting twice while kernels run is still the caller's problem).
 */
static struct lc_kernels slots[2];
static _Atomic(const struct lc_kernels *) active;
static int next_slot;
static pthread_mutex_t select_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t auto_once = PTHREAD_ONCE_INIT;

static char *msg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *msg(const char *fmt, ...)
{
    char buf[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return strdup(buf);
}

int lc_kernels_isa_available(const char *isa)
{
    pthread_once(&cpu_once, cpu_init);
    const int i = isa ? find_isa(isa) : -1;
    return i >= 0 && isas[i].supported(&cpu);
}

const char *lc_kernels_built(void)
{
    return "scalar"
#ifdef LC_HAVE_AVX2
           " avx2"
#endif
#ifdef LC_HAVE_AVX512
           " avx512"
#endif
#ifdef LC_HAVE_NEON
           " neon"
#endif
        ;
}

int lc_kernels_select(const char *isa, char **err)
{
    pthread_once(&cpu_once, cpu_init);
    if (err)
        *err = NULL;
    if (!isa || !*isa || strcmp(isa, "auto") == 0) {
        int best = 0;
        while (!isas[best].supported(&cpu))
            best++; /* scalar, last, is always supported */
        isa = isas[best].name;
    }
    const int i = find_isa(isa);
    if (i < 0) {
        int known = 0;
        for (size_t k = 0; k < sizeof known_isas / sizeof known_isas[0]; k++)
            known |= strcmp(known_isas[k], isa) == 0;
        if (err)
            *err = known ? msg("kernel ISA '%s' is not built into this binary (built: %s)", isa,
                               lc_kernels_built())
                         : msg("unknown kernel ISA '%s' (expected scalar, avx2, avx512, neon or "
                               "auto; built: %s)",
                               isa, lc_kernels_built());
        return -1;
    }
    if (!isas[i].supported(&cpu)) {
        if (err)
            *err = msg("kernel ISA '%s' is not supported by this CPU/OS%s", isa,
                       strcmp(isa, "avx512") == 0
                           ? " (needs AVX-512 F/BW/VL/DQ/VNNI with ZMM state enabled)"
                       : strcmp(isa, "avx2") == 0 ? " (needs AVX2, FMA, F16C with YMM state enabled)"
                                                  : "");
        return -1;
    }
    pthread_mutex_lock(&select_lock);
    struct lc_kernels *t = &slots[next_slot];
    next_slot ^= 1;
    merge(t, i);
    active = t;
    pthread_mutex_unlock(&select_lock);
    return 0;
}

static void auto_select(void)
{
    const char *env = getenv("LLAMACHAT_ISA");
    char *err = NULL;
    /* An unusable LLAMACHAT_ISA falls back to auto here; lc_kernels_select() reports it to
     * callers that ask (the library never prints). */
    if (lc_kernels_select(env, &err) != 0) {
        free(err);
        lc_kernels_select("auto", NULL);
    }
}

const struct lc_kernels *lc_kernels(void)
{
    const struct lc_kernels *t = active;
    if (t)
        return t;
    pthread_once(&auto_once, auto_select);
    return active;
}
