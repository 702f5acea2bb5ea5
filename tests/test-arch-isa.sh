#!/bin/sh
# The architecture references (../shared/reference/arch: llama3, qwen2, phi3, gemma2, qwen3,
# gemma3; f16, q4_1, q8_0; two prompts) with every ISA this CPU has, forced in turn; with an ISA
# that repacks weights (the x16 layout), also with LLAMACHAT_REPACK=0.  The rules per reference
# (exact ids for b4748's, near-ties for the newer llama.cpp's) are in test-greedy.c (--arch).
set -u
B=${LC_BUILDDIR:-.}
rc=0
ran=0
for isa in scalar avx2 avx512 neon; do
    if ! LLAMACHAT_ISA=$isa "$B/llamachat" --version >/dev/null 2>&1; then
        echo "skip $isa: not available here"
        continue
    fi
    echo "== ISA $isa"
    LLAMACHAT_ISA=$isa "$B/tests/test-greedy" --arch
    r=$?
    [ $r -eq 77 ] && exit 77
    [ $r -eq 0 ] || rc=1
    ran=$((ran + 1))
    if [ "$isa" = avx512 ] || [ "$isa" = avx2 ]; then
        echo "== ISA $isa, weights not repacked"
        LLAMACHAT_REPACK=0 LLAMACHAT_ISA=$isa "$B/tests/test-greedy" --arch || rc=1
    fi
done
[ "$ran" -gt 0 ] || exit 77
exit $rc
