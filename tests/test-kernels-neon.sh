#!/bin/sh
# test-kernels-neon.sh - the NEON kernels against scalar, on x86 via a cross compiler and qemu-user.
#
# Builds tests/test-kernels.c with the engine's quantizers, scalar.c, dispatch.c and arm-neon.c
# statically for AArch64 (base ARMv8-A: the sdot functions carry their own target attribute) and
# runs it twice under qemu-aarch64: `-cpu max` (has the dot-product extension: the sdot path) and
# `-cpu cortex-a57` (no ASIMDDP in the hwcaps: the widening-multiply path).  Skips (77) when
# aarch64-linux-gnu-gcc or qemu-aarch64 is missing (Debian: gcc-aarch64-linux-gnu,
# libc6-dev-arm64-cross, qemu-user).
set -u
cc=${AARCH64_CC:-aarch64-linux-gnu-gcc}
qemu=${QEMU_AARCH64:-qemu-aarch64}
if ! command -v "$cc" >/dev/null 2>&1 || ! command -v "$qemu" >/dev/null 2>&1; then
    echo "test-kernels-neon: $cc or $qemu not installed: skipped"
    exit 77
fi
src=${LC_SRCDIR:-$(dirname "$0")/..}
out=${LC_BUILDDIR:-.}/tests/neon-cross
mkdir -p "$out" || exit 1
printf '/* lcconfig.h for the NEON cross build */\n#define LC_HAVE_NEON 1\n' >"$out/lcconfig.h"
# shellcheck disable=SC2086
"$cc" -std=gnu11 -O2 -static -ffp-contract=off -D_GNU_SOURCE -pthread \
    -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wdouble-promotion \
    -Wno-unused-parameter \
    -I"$out" -I"$src/src" -I"$src/src/llm" -o "$out/test-kernels" \
    "$src/tests/test-kernels.c" "$src/src/llm/quant.c" "$src/src/llm/quant_k.c" "$src/src/llm/repack.c" \
    "$src/src/llm/arch/scalar.c" "$src/src/llm/arch/dispatch.c" "$src/src/llm/arch/arm-neon.c" \
    -lm || { echo "test-kernels-neon: cross build failed"; exit 1; }
status=0
for cpu in max cortex-a57; do
    log="$out/run-$cpu.log"
    "$qemu" -cpu "$cpu" "$out/test-kernels" >"$log" 2>&1
    rc=$?
    cat "$log"
    want=yes; [ "$cpu" = max ] || want=no
    if ! grep -q "neon dotprod: $want" "$log"; then
        echo "test-kernels-neon: -cpu $cpu: expected 'neon dotprod: $want'"
        status=1
    fi
    if [ "$rc" -ne 0 ]; then
        echo "test-kernels-neon: -cpu $cpu: test-kernels exited $rc"
        status=1
    fi
done
exit $status
