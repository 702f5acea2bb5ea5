#!/bin/sh
# test-ring-tsan.sh - build tests/test-ring.c and src/ring.c with ThreadSanitizer, independent
# of how the tree was configured (ASan and TSan cannot share a binary), and run the stress test.
# Skips (77) when the compiler or the kernel cannot run TSan programs.
set -u
src=${LC_SRCDIR:-$(cd "$(dirname "$0")/.." && pwd)}
cc=${CC:-cc}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/lc-tsan.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT
if ! $cc -std=gnu11 -O1 -g -fsanitize=thread -pthread -I"$src/src" -I"$src/tests" \
        "$src/tests/test-ring.c" "$src/src/ring.c" -o "$tmp/test-ring-tsan" 2>"$tmp/cc.log"; then
    echo "SKIP: $cc cannot build with -fsanitize=thread:"; cat "$tmp/cc.log"; exit 77
fi
# A trivial TSan program first: some kernels (high mmap ASLR entropy) refuse TSan's layout.
printf 'int main(void){return 0;}\n' >"$tmp/t.c"
$cc -fsanitize=thread "$tmp/t.c" -o "$tmp/t" 2>/dev/null
run=""
if ! "$tmp/t" >/dev/null 2>&1; then
    if command -v setarch >/dev/null && setarch "$(uname -m)" -R "$tmp/t" >/dev/null 2>&1; then
        run="setarch $(uname -m) -R"
    else
        echo "SKIP: TSan programs cannot run on this kernel"; exit 77
    fi
fi
# TSan is ~10x slower: 1M records still cross the full/empty boundary hundreds of thousands
# of times in a 64-slot ring.
LC_RING_N=${LC_RING_N:-1000000} TSAN_OPTIONS="halt_on_error=1 exitcode=66" \
    $run "$tmp/test-ring-tsan"
