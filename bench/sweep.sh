#!/bin/sh
# bench/sweep.sh - decode speed against the context already in the KV cache (an n_kv sweep, as
# ik_llama.cpp's sweep-bench / llama-bench -d): tg N at depths 0, 512, 1024, 2048 on the
# TinyLlama-1.1B-shaped Q4_0 model of bench/run.sh, for the default attention, the fused one
# (-fa 1) and the q8_0 cache; then each depth's t/s as a fraction of depth 0's (issue 15's
# target: >= 0.85 at 2048).
#
# Environment: THREADS (default 2), REPS (default 3), N (default 32), DEPTHS (default
# 0,512,1024,2048), VARIANTS (default "f16 fa q8_0"), CPU_TIME=1 adds --cpu-time (with
# THREADS=1, the CPU ms per token: the cost whatever the load of a shared machine), BUILD (an
# optimised build directory; default: the source tree, which must not be a sanitizer build),
# CACHE (default bench/.cache, where bench/run.sh keeps the model), ROOT.
set -eu
ROOT=${ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
BUILD=${BUILD:-$ROOT}
CACHE=${CACHE:-$ROOT/bench/.cache}
THREADS=${THREADS:-2}
REPS=${REPS:-3}
N=${N:-32}
DEPTHS=${DEPTHS:-0,512,1024,2048}
VARIANTS=${VARIANTS:-f16 fa q8_0}
if grep -q '^SAN_CFLAGS = -fsanitize' "$BUILD/Makefile"; then
    echo "sweep.sh: $BUILD is a sanitizer build; set BUILD to an optimised one" >&2
    exit 1
fi
make -C "$BUILD" -s -j2 llamachat-bench llamachat-synth >&2
mkdir -p "$CACHE"
M="$CACHE/synth-tinyllama-q4_0.gguf"
[ -f "$M" ] || "$BUILD/llamachat-synth" --tinyllama --type q4_0 -o "$M" -t "$THREADS" >&2
CPU=""
[ "${CPU_TIME:-0}" = 1 ] && CPU="--cpu-time"
echo "# n_kv sweep, $(date -u '+%Y-%m-%d %H:%M UTC'), $(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo '?'), load $(cut -d' ' -f1-3 /proc/loadavg)"
for v in $VARIANTS; do
    case $v in
    f16) opt="" ;;
    fa) opt="-fa 1" ;;
    q8_0) opt="-ctk q8_0" ;;
    *) echo "sweep.sh: unknown variant $v" >&2; exit 2 ;;
    esac
    echo "## $v"
    # shellcheck disable=SC2086
    "$BUILD/llamachat-bench" -m "$M" -p 0 -n "$N" -d "$DEPTHS" -t "$THREADS" -r "$REPS" $opt $CPU \
        2>/dev/null | tee "$CACHE/sweep-$v.md"
    # t/s at each depth / at depth 0 (and CPU ms per token, when measured)
    awk -F'|' 'NR > 2 { gsub(/^ +| +$/, "", $7); gsub(/ /, "", $8); gsub(/ /, "", $10);
                         name[NR] = $7; t[NR] = $8; c[NR] = $10; n = NR }
        END { for (i = 3; i <= n; i++) printf "  %s: %.2f of depth 0%s\n", name[i], t[i] / t[3],
              c[i] != "" ? sprintf(" (CPU ms/token %s)", c[i]) : "" }' "$CACHE/sweep-$v.md"
done
