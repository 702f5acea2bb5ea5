/* arm-neon.c - neon kernels (work in progress). */
#include "kernels.h"

const struct lc_kernels lc_kernels_neon = {
    .isa = "neon",
};
