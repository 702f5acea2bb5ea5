#!/bin/sh
# Run the llama.cpp greedy references with every ISA this CPU has, forced in turn; with an ISA
# that repacks weights (the x16 layout, kernels.h: x16_native), also with LLAMACHAT_REPACK=0,
# so that both layouts are checked against llama.cpp; with AVX-512 also the Q4_1 references
# with lc_context_params.fast_math (test-greedy --fast-math: within tolerance, not bit for bit).
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
    LLAMACHAT_ISA=$isa "$B/tests/test-greedy" || rc=1
    ran=$((ran + 1))
    if [ "$isa" = avx512 ] || [ "$isa" = avx2 ]; then
        echo "== ISA $isa, weights not repacked"
        LLAMACHAT_REPACK=0 LLAMACHAT_ISA=$isa "$B/tests/test-greedy" || rc=1
    fi
    if [ "$isa" = avx512 ]; then # its opt-in fast prompt GEMMs (Q4_1, Q8_0, Q4_K, Q5_K), within tolerance
        echo "== ISA $isa, --fast-math"
        LLAMACHAT_ISA=$isa "$B/tests/test-greedy" --fast-math || rc=1
    fi
done
[ "$ran" -gt 0 ] || exit 77
exit $rc
