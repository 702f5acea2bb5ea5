/* x86-avx2.c - avx2 kernels (work in progress). */
#include "kernels.h"

const struct lc_kernels lc_kernels_avx2 = {
    .isa = "avx2",
};
