#!/bin/sh
# bench/peers.sh - llamachat beside llama.cpp (and ik_llama.cpp) on the same files, same
# threads, one file after the other, each engine's pp and tg right after the other's (issues 13
# and 15: "pp512 of every type at least llama.cpp's").
#
#   bench/peers.sh [FILE.gguf ...]
#
# Without files: the TinyLlama-1.1B-shaped models bench/run.sh makes in CACHE (synth-tinyllama-
# {q4_1,q4_0,q4_k_m,q5_k_m,q5_1,q8_0}.gguf, those present).  For each file: llamachat-bench
# -p P -n N, then each peer's llama-bench -p P -n N, REPS repetitions each; the table gives the
# median t/s of each (llama-bench's samples_ts, its per-repetition figures) and ours / theirs.
#
# Environment: LLAMA_BENCH (llama.cpp's llama-bench), IK_LLAMA_BENCH (ik_llama.cpp's): each
# is skipped when unset or not executable; PEER_ARGS (extra llama-bench options, default
# "-fa off": llamachat's default attention is llama.cpp's without flash attention), THREADS (2),
# REPS (3), P (512), N (128), BUILD (an optimised build directory, default: the source tree's
# own, as bench/run.sh), CACHE (bench/.cache), ISA (passed to llamachat-bench as --isa),
# OURS_ARGS (extra llamachat-bench options, e.g. "--fast-math": the opt-in prompt order of the
# AVX-512 Q4_1, Q8_0, Q4_K and Q5_K GEMMs; one-token decoding is the same either way).
#
# Checking what a peer runs: `llama-bench --list-devices` and its load lines on stderr (the
# CPU backend's variant, e.g. libggml-cpu-zen4.so; its repacking is on by default: "repack":
# true in -o jsonl).
set -eu

ROOT=${ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
THREADS=${THREADS:-2}
REPS=${REPS:-3}
P=${P:-512}
N=${N:-128}
CACHE=${CACHE:-$ROOT/bench/.cache}
PEER_ARGS=${PEER_ARGS--fa off}
BUILD=${BUILD:-$ROOT}
[ -x "$BUILD/llamachat-bench" ] || { echo "peers.sh: no $BUILD/llamachat-bench (build it, or set BUILD)" >&2; exit 1; }
if grep -q '^SAN_CFLAGS = -fsanitize' "$BUILD/Makefile" 2>/dev/null; then
    echo "peers.sh: $BUILD is a sanitizer build; benchmarks need an optimised one" >&2
    exit 1
fi
peers=""
for v in LLAMA_BENCH IK_LLAMA_BENCH; do
    eval "p=\${$v:-}"
    if [ -n "$p" ] && [ -x "$p" ]; then peers="$peers $v"; elif [ -n "$p" ]; then
        echo "peers.sh: $v=$p is not executable; skipped" >&2
    fi
done
[ -n "$peers" ] || { echo "peers.sh: neither LLAMA_BENCH nor IK_LLAMA_BENCH names a llama-bench; nothing to compare" >&2; exit 0; }
if [ "$#" -eq 0 ]; then
    for t in q4_1 q4_0 q4_k_m q5_k_m q5_1 q8_0; do
        f="$CACHE/synth-tinyllama-$t.gguf"
        [ -f "$f" ] && set -- "$@" "$f"
    done
    [ "$#" -gt 0 ] || { echo "peers.sh: no models in $CACHE (bench/run.sh makes them)" >&2; exit 1; }
fi
ISA_OPT=""
[ -n "${ISA:-}" ] && ISA_OPT="--isa $ISA"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# ours FILE TEST: the median t/s of llamachat-bench's row for TEST (pp512, tg128)
ours_col() { grep "| $2 |" "$tmp/ours.md" | awk -F'|' '{gsub(/ /, "", $8); print $8}'; }
# theirs N_PROMPT N_GEN: the median of the samples_ts of llama-bench's jsonl line for that test
theirs_col() {
    sed -n "s/.*\"n_prompt\": $1, \"n_gen\": $2,.*\"samples_ts\": \[\([^]]*\)\].*/\1/p" "$tmp/peer.jsonl" |
        head -n 1 | tr ',' '\n' | sort -g | awk '{ v[NR] = $1 } END {
            if (NR == 0) print "-"; else if (NR % 2) printf "%.2f\n", v[(NR + 1) / 2];
            else printf "%.2f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

echo "# llamachat beside its peers, $(date -u '+%Y-%m-%d %H:%M UTC'), $(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo '?')"
echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) CPUs; load average $(cut -d' ' -f1-3 /proc/loadavg)"
OURS_ARGS=${OURS_ARGS:-}
echo "threads $THREADS, $REPS repetitions, medians; peers with: $PEER_ARGS; llamachat with: ${OURS_ARGS:-(defaults)}"
for v in $peers; do eval "echo \"$v: \$$v\""; done
echo
hdr="| file | llamachat pp$P | llamachat tg$N |"
sep="| --- | ---: | ---: |"
for v in $peers; do
    hdr="$hdr $v pp$P | ours / theirs | $v tg$N | ours / theirs |"
    sep="$sep ---: | ---: | ---: | ---: |"
done
echo "$hdr"
echo "$sep"
for f in "$@"; do
    # shellcheck disable=SC2086
    "$BUILD/llamachat-bench" -m "$f" -p "$P" -n "$N" -t "$THREADS" -r "$REPS" $ISA_OPT $OURS_ARGS \
        >"$tmp/ours.md" 2>"$tmp/ours.err" || { cat "$tmp/ours.err" >&2; exit 1; }
    opp=$(ours_col "$f" "pp$P") otg=$(ours_col "$f" "tg$N")
    row="| $(basename "$f" .gguf) | $opp | $otg |"
    for v in $peers; do
        eval "pb=\$$v"
        # shellcheck disable=SC2086
        if "$pb" -m "$f" -p "$P" -n "$N" -t "$THREADS" -r "$REPS" $PEER_ARGS -o jsonl \
            >"$tmp/peer.jsonl" 2>"$tmp/peer.err"; then
            tpp=$(theirs_col "$P" 0) ttg=$(theirs_col 0 "$N")
        else
            echo "peers.sh: $v failed on $f:" >&2; tail -n 3 "$tmp/peer.err" >&2
            tpp="-" ttg="-"
        fi
        rpp=$(awk -v a="$opp" -v b="$tpp" 'BEGIN { if (b + 0 > 0) printf "%.2f", a / b; else print "-" }')
        rtg=$(awk -v a="$otg" -v b="$ttg" 'BEGIN { if (b + 0 > 0) printf "%.2f", a / b; else print "-" }')
        row="$row $tpp | $rpp | $ttg | $rtg |"
    done
    echo "$row"
done
