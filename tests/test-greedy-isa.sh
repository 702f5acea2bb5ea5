#!/bin/sh
# Run the llama.cpp greedy references with every ISA this CPU has, forced in turn.
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
done
[ "$ran" -gt 0 ] || exit 77
exit $rc
