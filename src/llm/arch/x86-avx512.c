/* x86-avx512.c - avx512 kernels (work in progress). */
#include "kernels.h"

const struct lc_kernels lc_kernels_avx512 = {
    .isa = "avx512",
};
