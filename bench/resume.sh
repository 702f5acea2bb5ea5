#!/bin/sh
# bench/resume.sh - start to first token of a reopened chat of about TOKENS tokens, with its KV
# state file (instant resume) and without it, alternating in one run (BENCHMARKS.md).
#   bench/resume.sh [TOKENS] [ROUNDS] [THREADS]      (from the build tree)
# Model: MODEL, default the TinyLlama-1.1B-shaped random Q4_0 model (llamachat-synth
# --tinyllama --type q4_0), made in $CACHE (default bench/.cache) when missing.  The context is
# 4096 (the chat must fit with room for the reply).  Prints the load averages before and after.
set -eu
TOKENS=${1:-2000}; ROUNDS=${2:-3}; THREADS=${3:-2}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
CACHE=${CACHE:-$ROOT/bench/.cache}
make -s llamachat-resume llamachat-synth
M=${MODEL:-$CACHE/synth-tinyllama-q4_0.gguf}
if [ ! -f "$M" ]; then
    mkdir -p "$(dirname "$M")"
    ./llamachat-synth --tinyllama --type q4_0 -o "$M" -t "$THREADS" >&2
fi
echo "# bench/resume.sh $TOKENS $ROUNDS $THREADS, $(date -u '+%Y-%m-%d %H:%M UTC'), $(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo '?')"
echo "model: $M; load average $(cut -d' ' -f1-3 /proc/loadavg)"
./llamachat-resume "$M" "$TOKENS" "$ROUNDS" "$THREADS"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
