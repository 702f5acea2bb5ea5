#!/bin/sh
# test-greedy-neon.sh - llama.cpp's greedy references with the NEON kernels, on x86 via a cross
# compiler and qemu-user.
#
# Builds tests/test-greedy.c with the whole engine library (libllm_a_SOURCES of Makefile.am) and
# arm-neon.c statically for AArch64, PCRE2 replaced by tests/neon-pcre2-stub.c (no arm64 PCRE2
# here; these models are SentencePiece ones, which need no regex), and runs it under
# qemu-aarch64 with LLAMACHAT_ISA=neon on the references of issue 13's types (small models:
# synth-small Q5_0, Q5_1, Q4_K_M, Q5_K_M, Q6_K and every TinyStories-656K file): `-cpu max` (the
# sdot path) all three prompts, `-cpu cortex-a57` (widening multiplies) the first prompt of each.
# Ids exactly, top-10 logits within the printed decimals, as on x86 (tests/test-greedy.c).
# Skips (77) without aarch64-linux-gnu-gcc or qemu-aarch64 (Debian: gcc-aarch64-linux-gnu,
# libc6-dev-arm64-cross, qemu-user) or without the shared references.
set -u
cc=${AARCH64_CC:-aarch64-linux-gnu-gcc}
qemu=${QEMU_AARCH64:-qemu-aarch64}
if ! command -v "$cc" >/dev/null 2>&1 || ! command -v "$qemu" >/dev/null 2>&1; then
    echo "test-greedy-neon: $cc or $qemu not installed: skipped"
    exit 77
fi
src=${LC_SRCDIR:-$(dirname "$0")/..}
S=${LC_SHARED:-$src/../shared}
R=$S/reference/greedy
[ -d "$R" ] || { echo "test-greedy-neon: no $R: skipped"; exit 77; }
out=${LC_BUILDDIR:-.}/tests/neon-cross/greedy
mkdir -p "$out" || exit 1
printf '/* lcconfig.h for the NEON cross build */\n#define LC_HAVE_NEON 1\n' >"$out/lcconfig.h"
pcre=$(printf '#include <pcre2.h>\n' | "${HOST_CC:-cc}" -E -M -x c - 2>/dev/null | tr ' \\' '\n\n' | grep '/pcre2\.h$' | head -1)
[ -n "$pcre" ] && cp "$pcre" "$out/pcre2.h" || { echo "test-greedy-neon: no pcre2.h: skipped"; exit 77; }
# the engine's C files, as Makefile.am lists them
srcs=$(sed -n '/^libllm_a_SOURCES/,/^libllm_a_CFLAGS/p' "$src/Makefile.am" | tr ' \t\\' '\n\n\n' |
    grep '^src/.*\.c$' | sed "s|^|$src/|")
[ -n "$srcs" ] || { echo "test-greedy-neon: no libllm_a_SOURCES in Makefile.am"; exit 1; }
# shellcheck disable=SC2086
"$cc" -std=gnu11 -O2 -static -ffp-contract=off -D_GNU_SOURCE -DLC_PKGDATADIR='"/nonexistent"' \
    -pthread -Wall -Wextra -Wno-unused-parameter -I"$out" -I"$src/src" -I"$src/src/llm" \
    -o "$out/test-greedy" "$src/tests/test-greedy.c" "$src/tests/neon-pcre2-stub.c" $srcs \
    "$src/src/llm/arch/arm-neon.c" -lm || { echo "test-greedy-neon: cross build failed"; exit 1; }
all=$(ls "$R"/synth-small-q5_0.p*.txt "$R"/synth-small-q5_1.p*.txt "$R"/synth-small-q4_k_m.p*.txt \
    "$R"/synth-small-q5_k_m.p*.txt "$R"/synth-small-q6_k.p*.txt "$R"/tinystories-656k-*.p*.txt)
first=$(echo "$all" | grep '\.p0\.txt$')
n_all=$(echo "$all" | wc -l)
[ "$n_all" -ge 48 ] || { echo "test-greedy-neon: $n_all references, want 48"; exit 1; }
status=0
for cpu in max cortex-a57; do
    refs=$all; [ "$cpu" = max ] || refs=$first
    log="$out/run-$cpu.log"
    # shellcheck disable=SC2086
    LC_SHARED=$S LLAMACHAT_ISA=neon "$qemu" -cpu "$cpu" "$out/test-greedy" $refs >"$log" 2>&1
    rc=$?
    grep -v '^tests/test-greedy.c.*CHECK' "$log" | grep -c '\[neon\]' | sed "s/^/-cpu $cpu: references run: /"
    grep 'CHECK\|test-greedy:' "$log" | head -20
    n=$(grep -c '\[neon\]' "$log")
    want=$(echo "$refs" | wc -l)
    if [ "$rc" -ne 0 ] || [ "$n" -ne "$want" ]; then
        echo "test-greedy-neon: -cpu $cpu: exit $rc, $n of $want references ran"
        status=1
    fi
done
exit $status
