#!/bin/sh
# bench/run.sh - the issue-3 benchmark in one run (figures recorded in bench/BENCHMARKS.md).
#
#   1. build llamachat, llamachat-bench, llamachat-synth and llamachat-bandwidth (optimised,
#      no sanitizers) if needed;
#   2. generate the TinyLlama-1.1B-shaped random models, Q4_1 and Q4_0 (output.weight Q6_K, as
#      llama.cpp quantizes them), into bench/.cache (skipped when present);
#   3. measure the memory read bandwidth with THREADS threads;
#   4. llamachat-bench pp512 and tg128 on both models with THREADS threads, REPS repetitions,
#      each tg128 between two more bandwidth probes (its bound: the bandwidth beside it);
#   4a. the same tg (and, AB=1, beside it the ggml layout: LLAMACHAT_REPACK=0) for Q4_K_M,
#      Q5_K_M, Q5_1 and Q8_0 (TYPES), quantized by llamachat-quantize from an F16 file;
#   4b. the CPU time per token with 1 thread (pp128, tg32): the cost of a token whatever the
#      load of a shared machine (CPU_TEST=0 skips it);
#   5. time from start to first token and peak RSS of `llamachat -p ... -n 1`;
#   6. print tg128 as a fraction of the bandwidth bound, Q4_1 / Q4_0 for pp and tg, the
#      targets of issue 3, and idle-machine estimates from step 4b; pp512 of the TYPES;
#   7. when LLAMA_BENCH or IK_LLAMA_BENCH name a llama-bench (llama.cpp's, ik_llama.cpp's):
#      bench/peers.sh, each file's pp and tg by llamachat and by each peer, one after the other.
#
# Environment: THREADS (default 2), REPS (default 3), P and N (default 512 and 128; smaller for
# quick trials), TYPES, AB and FAST (step 4a), BUILD (an existing configured build directory), CACHE (default bench/.cache),
# SYNTH_ARGS (extra llamachat-synth options, e.g. "--output-type q8_0"; the model names then
# carry a suffix), ISA (passed as --isa), CPU_TEST, ROOT (the source tree: set it when running
# a copy of this script, e.g. while editing the original), LLAMA_BENCH, IK_LLAMA_BENCH and
# PEER_ARGS (step 7, bench/peers.sh).
set -eu

ROOT=${ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
THREADS=${THREADS:-2}
REPS=${REPS:-3}
P=${P:-512}
N=${N:-128}
CACHE=${CACHE:-$ROOT/bench/.cache}
SYNTH_ARGS=${SYNTH_ARGS:-}
mkdir -p "$CACHE"
LOG="$CACHE/last-run.txt"
: >"$LOG"
say() { printf '%s\n' "$*" | tee -a "$LOG"; }

# ------------------------------------------------------------------ 1. build
if [ -z "${BUILD:-}" ]; then
    if [ -f "$ROOT/Makefile" ]; then
        # Configured in place: use it unless it is a sanitizer build (slow, not what we measure).
        if grep -q '^SAN_CFLAGS = -fsanitize' "$ROOT/Makefile"; then
            echo "run.sh: $ROOT is configured in place with --enable-sanitizers; run" >&2
            echo "        'make distclean' there or set BUILD to an optimised build directory" >&2
            exit 1
        fi
        BUILD=$ROOT
    else
        BUILD=$CACHE/build
        if [ ! -f "$BUILD/Makefile" ]; then
            mkdir -p "$BUILD"
            [ -x "$ROOT/configure" ] || (cd "$ROOT" && autoreconf -fi)
            (cd "$BUILD" && "$ROOT/configure" -q)
        fi
    fi
fi
if grep -q '^SAN_CFLAGS = -fsanitize' "$BUILD/Makefile"; then
    echo "run.sh: $BUILD is a sanitizer build; benchmarks need an optimised one" >&2
    exit 1
fi
make -C "$BUILD" -s -j2 llamachat llamachat-bench llamachat-synth llamachat-bandwidth >&2

# ------------------------------------------------------------------ 2. models
suffix=""
[ -n "$SYNTH_ARGS" ] && suffix="-$(printf '%s' "$SYNTH_ARGS" | tr -c 'A-Za-z0-9_' '_')"
Q41="$CACHE/synth-tinyllama-q4_1$suffix.gguf"
Q40="$CACHE/synth-tinyllama-q4_0$suffix.gguf"
for t in q4_1 q4_0; do
    f="$CACHE/synth-tinyllama-$t$suffix.gguf"
    if [ ! -f "$f" ]; then
        # shellcheck disable=SC2086
        "$BUILD/llamachat-synth" --tinyllama --type "$t" $SYNTH_ARGS -o "$f" -t "$THREADS" >&2
    fi
done

say "# llamachat benchmark, $(date -u '+%Y-%m-%d %H:%M UTC'), $(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo '?')"
say "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) CPUs, L3 $(lscpu | sed -n 's/^L3 cache: *//p'); load average $(cut -d' ' -f1-3 /proc/loadavg)"
say ""

# ------------------------------------------------------------------ 3. bandwidth
# shellcheck disable=SC2046 # split on purpose: "best median"
set -- $("$BUILD/llamachat-bandwidth" -t "$THREADS" -r 10 --quiet)
BW_BEST=$1 BW_MED=$2
say "memory read bandwidth, $THREADS threads, 1 GiB buffer, 10 reps: best $BW_BEST GB/s, median $BW_MED GB/s"
say ""

# ------------------------------------------------------------------ 4. llamachat-bench
# pp for both models in one call; then each model's tg between two bandwidth probes (5 reps
# each, just before and just after), because a shared host's memory bandwidth changes from
# one minute to the next (seen here: 36 to 83 GB/s): the bound of a tg figure is the bandwidth
# measured beside it, the mean of the two probes' medians (and, shown too, of their bests).
ISA_OPT=""
[ -n "${ISA:-}" ] && ISA_OPT="--isa $ISA"
# shellcheck disable=SC2086
"$BUILD/llamachat-bench" -m "$Q41,$Q40" -p "$P" -n 0 -t "$THREADS" -r "$REPS" $ISA_OPT \
    >"$CACHE/bench.md" 2>"$CACHE/bench.err" || { cat "$CACHE/bench.err" >&2; exit 1; }
probe() { "$BUILD/llamachat-bandwidth" -t "$THREADS" -r 5 --quiet; }
for f in "$Q41" "$Q40"; do
    # shellcheck disable=SC2046
    set -- $(probe)
    b1=$1 m1=$2
    # shellcheck disable=SC2086
    "$BUILD/llamachat-bench" -m "$f" -p 0 -n "$N" -t "$THREADS" -r "$REPS" $ISA_OPT \
        >"$CACHE/bench-tg.md" 2>>"$CACHE/bench.err" || { cat "$CACHE/bench.err" >&2; exit 1; }
    tail -n 1 "$CACHE/bench-tg.md" >>"$CACHE/bench.md"
    # shellcheck disable=SC2046
    set -- $(probe)
    bw=$(awk -v a="$m1" -v b="$2" 'BEGIN { printf "%.2f", (a + b) / 2 }')
    bwb=$(awk -v a="$b1" -v b="$1" 'BEGIN { printf "%.2f", (a + b) / 2 }')
    if [ "$f" = "$Q41" ]; then BW41=$bw BW41B=$bwb BW41R="$m1 / $2"; else BW40=$bw BW40B=$bwb BW40R="$m1 / $2"; fi
done
tee -a "$LOG" <"$CACHE/bench.md"
say ""
say "memory read bandwidth beside each tg$N (median of 5 reps before / after): Q4_1 $BW41R GB/s, Q4_0 $BW40R GB/s"
say ""

# Median t/s of test $2 for the row of model file $1 (rows are in -m order: Q4_1 then Q4_0).
tps() { # $1 = row index among models (1 or 2), $2 = pp512|tg128
    grep "| $2 |" "$CACHE/bench.md" | sed -n "$1p" | awk -F'|' '{gsub(/ /, "", $8); print $8}'
}
# Best (max) t/s of the same row: the least disturbed repetition on a shared machine.
tpsmax() {
    grep "| $2 |" "$CACHE/bench.md" | sed -n "$1p" | awk -F'|' '{n = split($9, a, "-"); gsub(/ /, "", a[n]); print a[n]}'
}
# Bytes read per generated token, from llamachat-bench's load line for file $1.
bpt() {
    grep "loaded $1 " "$CACHE/bench.err" | sed 's/.*tensors, \([0-9]*\) bytes of weights read.*/\1/' | head -n 1
}
PP41=$(tps 1 "pp$P") TG41=$(tps 1 "tg$N") PP40=$(tps 2 "pp$P") TG40=$(tps 2 "tg$N")
B41=$(bpt "$Q41") B40=$(bpt "$Q40")
TG41MAX=$(tpsmax 1 "tg$N") TG40MAX=$(tpsmax 2 "tg$N")

# ------------------------------------------------------------------ 4a. the other types (issue 13)
# Q4_K_M, Q5_K_M, Q5_1 and Q8_0 (TYPES; TYPES="" skips this step), quantized by
# llamachat-quantize from one F16 file of the same shape (llama.cpp's mixes: Q4_K_M has half of
# attn_v and ffn_down Q6_K, every preset's output Q6_K), each tg between two probes like Q4_1's
# above; with AB=1 (the default) each also with LLAMACHAT_REPACK=0 (ggml's layout, the kernels
# before the x16 layout) right after, side by side.
TYPES=${TYPES-q4_k_m q5_k_m q5_1 q8_0}
AB=${AB:-1}
: >"$CACHE/bench-types.md"
if [ -n "$TYPES" ]; then
    make -C "$BUILD" -s -j2 llamachat-quantize >&2
    F16="$CACHE/synth-tinyllama-f16$suffix.gguf"
    for t in $TYPES; do
        f="$CACHE/synth-tinyllama-$t$suffix.gguf"
        [ -f "$f" ] && continue
        if [ ! -f "$F16" ]; then
            # shellcheck disable=SC2086
            "$BUILD/llamachat-synth" --tinyllama --type f16 $SYNTH_ARGS -o "$F16" -t "$THREADS" >&2
        fi
        "$BUILD/llamachat-quantize" -t "$THREADS" "$F16" "$f" "$t" >/dev/null
    done
    for t in $TYPES; do
        f="$CACHE/synth-tinyllama-$t$suffix.gguf"
        # shellcheck disable=SC2046
        set -- $(probe)
        m1=$2
        # shellcheck disable=SC2086
        "$BUILD/llamachat-bench" -m "$f" -p 0 -n "$N" -t "$THREADS" -r "$REPS" $ISA_OPT \
            >"$CACHE/bench-tg.md" 2>>"$CACHE/bench.err" || { cat "$CACHE/bench.err" >&2; exit 1; }
        row=$(tail -n 1 "$CACHE/bench-tg.md")
        row0=""
        if [ "$AB" = 1 ]; then
            # shellcheck disable=SC2086
            LLAMACHAT_REPACK=0 "$BUILD/llamachat-bench" -m "$f" -p 0 -n "$N" -t "$THREADS" -r "$REPS" \
                $ISA_OPT >"$CACHE/bench-tg.md" 2>/dev/null || { cat "$CACHE/bench.err" >&2; exit 1; }
            row0=$(tail -n 1 "$CACHE/bench-tg.md")
        fi
        # shellcheck disable=SC2046
        set -- $(probe)
        printf '%s\t%s\t%s\t%s\t%s\n' "$t" "$(bpt "$f")" "$m1 / $2" "$row" "$row0" >>"$CACHE/bench-types.md"
    done
    # pp of every type in one call (compute-bound: no probes)
    files="" sep=""
    for t in $TYPES; do files="$files$sep$CACHE/synth-tinyllama-$t$suffix.gguf"; sep=","; done
    # shellcheck disable=SC2086
    "$BUILD/llamachat-bench" -m "$files" -p "$P" -n 0 -t "$THREADS" -r "$REPS" $ISA_OPT \
        >"$CACHE/bench-types-pp.md" 2>>"$CACHE/bench.err" || { cat "$CACHE/bench.err" >&2; exit 1; }
    # and with --fast-math (FAST=0 skips): the opt-in prompt order of the AVX-512 Q4_1, Q8_0,
    # Q4_K and Q5_K GEMMs (its rows say "fast-math"; elsewhere the same order as above)
    if [ "${FAST:-1}" = 1 ]; then
        # shellcheck disable=SC2086
        "$BUILD/llamachat-bench" -m "$Q41,$files" -p "$P" -n 0 -t "$THREADS" -r "$REPS" $ISA_OPT \
            --fast-math >>"$CACHE/bench-types-pp.md" 2>>"$CACHE/bench.err" ||
            { cat "$CACHE/bench.err" >&2; exit 1; }
    fi
fi

# ------------------------------------------------------------------ 4b. CPU cost per token
# On a machine shared with other jobs the wall-clock t/s above measure our share of it.  The
# process CPU time per token with ONE thread (no waiting at barriers) is the cost of a token
# whatever the load: from it, a single idle core would run 1000 / ms t/s, and two cores at most
# twice that (capped by the bandwidth bound).  pp128/tg32 keep this step short.
CPU41_PP="" CPU41_TG="" CPU40_PP="" CPU40_TG=""
if [ "${CPU_TEST:-1}" != 0 ]; then
    # shellcheck disable=SC2086
    "$BUILD/llamachat-bench" -m "$Q41,$Q40" -p 128 -n 32 -t 1 -r "$REPS" --cpu-time $ISA_OPT \
        >"$CACHE/bench-cpu.md" 2>>"$CACHE/bench.err" || { cat "$CACHE/bench.err" >&2; exit 1; }
    say "CPU time per token, 1 thread:"
    tee -a "$LOG" <"$CACHE/bench-cpu.md"
    say ""
    cpums() { grep "| $2 |" "$CACHE/bench-cpu.md" | sed -n "$1p" | awk -F'|' '{gsub(/ /, "", $10); print $10}'; }
    CPU41_PP=$(cpums 1 pp128) CPU41_TG=$(cpums 1 tg32) CPU40_PP=$(cpums 2 pp128) CPU40_TG=$(cpums 2 tg32)
fi

# ------------------------------------------------------------------ 5. first token, RSS
# Page cache warm (the models were just benchmarked): this is the time of a repeated start.
# KV cache at -c 2048, f16: 2 (K and V) * 22 layers * 2048 positions * 4 KV heads * 64 * 2 bytes.
N_CTX=2048
KV_BYTES=$((2 * 22 * N_CTX * 4 * 64 * 2))
FILE_BYTES=$(stat -c %s "$Q41")
# shellcheck disable=SC2086
/usr/bin/time -f '%e %M' -o "$CACHE/ttft.txt" "$BUILD/llamachat" -m "$Q41" -t "$THREADS" \
    -c $N_CTX -p "Once upon a time" -n 1 --temp 0 $ISA_OPT >/dev/null 2>"$CACHE/ttft.err" ||
    { cat "$CACHE/ttft.err" >&2; exit 1; }
# shellcheck disable=SC2046 # split on purpose: "seconds kib"
set -- $(tail -n 1 "$CACHE/ttft.txt")
TTFT=$1 RSS_KIB=$2

# ------------------------------------------------------------------ 6. figures
awk -v bw="$BW_BEST" -v bwm="$BW_MED" -v b41="$B41" -v b40="$B40" \
    -v bw41="$BW41" -v bw41b="$BW41B" -v bw40="$BW40" -v bw40b="$BW40B" \
    -v pp41="$PP41" -v tg41="$TG41" -v pp40="$PP40" -v tg40="$TG40" \
    -v c41p="$CPU41_PP" -v c41t="$CPU41_TG" -v c40p="$CPU40_PP" -v c40t="$CPU40_TG" \
    -v nth="$THREADS" -v tg41max="$TG41MAX" -v tg40max="$TG40MAX" -v P="$P" -v N="$N" -v ttft="$TTFT" -v rss="$RSS_KIB" -v file="$FILE_BYTES" -v kv="$KV_BYTES" '
function mark(ok) { return ok ? "met" : "NOT met" }
BEGIN {
    mib = 1048576
    # the bounds beside each tg run (median bandwidth), and from the first probe (best)
    bound41 = bw41 * 1e9 / b41; bound40 = bw40 * 1e9 / b40
    start41 = bw * 1e9 / b41; start40 = bw * 1e9 / b40
    printf "## figures\n\n"
    printf "| figure | value | target (issue 3) |\n| --- | ---: | --- |\n"
    printf "| weights read per token, Q4_1 / Q4_0 | %.1f / %.1f MiB | |\n", b41 / mib, b40 / mib
    printf "| bandwidth beside tg%d (median; best), Q4_1 / Q4_0 | %.1f; %.1f / %.1f; %.1f GB/s | |\n", N, bw41, bw41b, bw40, bw40b
    printf "| bandwidth bound beside tg%d, Q4_1 / Q4_0 | %.1f / %.1f t/s | |\n", N, bound41, bound40
    printf "| Q4_1 tg%d / bound | %.1f %% (median %.2f of %.1f t/s; best run %.1f %%; %.1f %% of the best-bandwidth bound; %.1f %% of the bound from the first probe, best %.1f GB/s) | >= 80 %%: %s |\n", N, \
        100 * tg41 / bound41, tg41, bound41, 100 * tg41max / bound41, 100 * tg41 / (bw41b * 1e9 / b41), 100 * tg41 / start41, bw, mark(tg41 / bound41 >= 0.8)
    printf "| Q4_0 tg%d / bound | %.1f %% (median %.2f of %.1f t/s; best run %.1f %%) | |\n", N, 100 * tg40 / bound40, tg40, bound40, 100 * tg40max / bound40
    printf "| Q4_1 pp%d | %.2f t/s | >= 100 t/s: %s |\n", P, pp41, mark(pp41 >= 100)
    printf "| Q4_1 / Q4_0, pp%d | %.3f (%.2f / %.2f t/s) | >= 0.90: %s |\n", P, pp41 / pp40, pp41, pp40, mark(pp41 / pp40 >= 0.9)
    printf "| Q4_1 / Q4_0, tg%d | %.3f (%.2f / %.2f t/s) | >= 0.90: %s |\n", N, tg41 / tg40, tg41, tg40, mark(tg41 / tg40 >= 0.9)
    printf "| start to first token, Q4_1 (warm page cache) | %.2f s | < 1 s: %s |\n", ttft, mark(ttft < 1)
    printf "| peak RSS, Q4_1 | %.1f MiB (file %.1f + KV %.1f = %.1f MiB; +64 MiB = %.1f) | <= file + KV + 64 MiB: %s |\n", \
        rss / 1024, file / mib, kv / mib, (file + kv) / mib, (file + kv) / mib + 64, \
        mark(rss * 1024 <= file + kv + 64 * mib)
    if (c41t != "") {
        # Idle-machine estimates from the 1-thread CPU cost, assuming perfect scaling.
        e41t = nth * 1000 / c41t; if (e41t > bound41) e41t = bound41
        e40t = nth * 1000 / c40t; if (e40t > bound40) e40t = bound40
        e41p = nth * 1000 / c41p; e40p = nth * 1000 / c40p
        printf "\nFrom the 1-thread CPU cost (robust to other jobs; %d idle cores, perfect scaling, capped by the bound):\n\n", nth
        printf "| estimate | Q4_1 | Q4_0 | Q4_1 / Q4_0 |\n| --- | ---: | ---: | ---: |\n"
        printf "| tg: CPU ms/token (1 thread) | %.1f | %.1f | |\n", c41t, c40t
        printf "| tg: t/s on %d cores | %.1f (%.0f %% of bound) | %.1f (%.0f %% of bound) | %.3f |\n", nth, e41t, 100 * e41t / bound41, e40t, 100 * e40t / bound40, e41t / e40t
        printf "| pp128: CPU ms/token (1 thread) | %.1f | %.1f | |\n", c41p, c40p
        printf "| pp128: t/s on %d cores | %.1f | %.1f | %.3f |\n", nth, e41p, e40p, e41p / e40p
    }
}' | tee -a "$LOG"
say ""
say "(log: $LOG)"

# ------------------------------------------------------------------ 6b. the other types
if [ -s "$CACHE/bench-types.md" ]; then
    {
        printf '\n## tg%s of the issue-13 types beside Q4_1 / Q4_0 (bound: the bandwidth probes just before and after)\n\n' "$N"
        printf '| type | weights read per token | bandwidth before / after (median GB/s) | bound t/s | tg%s t/s (median; min - max) | tg / bound | ggml layout (LLAMACHAT_REPACK=0) t/s | x16 / ggml |\n' "$N"
        printf '| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n'
        printf 'q4_1\t%s\t%s\t%s\t\n' "$B41" "$BW41R" "$(grep "| tg$N |" "$CACHE/bench.md" | sed -n 1p)"
        printf 'q4_0\t%s\t%s\t%s\t\n' "$B40" "$BW40R" "$(grep "| tg$N |" "$CACHE/bench.md" | sed -n 2p)"
        cat "$CACHE/bench-types.md"
    } | awk -F'\t' '
        NF < 4 { print; next }
        {
            n = split($3, bw, /[ \/]+/)
            b = (bw[1] + bw[n]) / 2
            split($4, c, "|"); tg = c[8]; gsub(/ /, "", tg); mm = c[9]; gsub(/^ +| +$/, "", mm)
            t0 = ""
            if ($5 != "") { split($5, c0, "|"); t0 = c0[8]; gsub(/ /, "", t0) }
            bound = b * 1e9 / $2
            ratio = (t0 != "" && t0 + 0 > 0) ? sprintf("%.2f", tg / t0) : ""
            printf("| %s | %.1f MiB | %s | %.1f | %.2f (%s) | %.0f %% | %s | %s |\n", $1, $2 / 1048576, $3, bound, tg, mm, 100 * tg / bound, t0, ratio)
        }' | tee -a "$LOG"
    {
        printf '\n## pp%s of the issue-13 types (the Q4_1 / Q4_0 rows: step 4)\n\n' "$P"
        head -n 2 "$CACHE/bench.md"
        grep "| pp$P |" "$CACHE/bench.md"
        grep "| pp$P |" "$CACHE/bench-types-pp.md"
    } | tee -a "$LOG"
fi

# ------------------------------------------------------------------ 7. the peers
# llama.cpp's and ik_llama.cpp's llama-bench on the same files, when LLAMA_BENCH /
# IK_LLAMA_BENCH name them (bench/peers.sh; skipped otherwise).
if [ -n "${LLAMA_BENCH:-}${IK_LLAMA_BENCH:-}" ]; then
    files=""
    for t in q4_1 q4_0 $TYPES; do
        f="$CACHE/synth-tinyllama-$t$suffix.gguf"
        [ -f "$f" ] && files="$files $f"
    done
    say ""
    # shellcheck disable=SC2086
    BUILD="$BUILD" CACHE="$CACHE" THREADS="$THREADS" REPS="$REPS" P="$P" N="$N" \
        "$ROOT/bench/peers.sh" $files | tee -a "$LOG"
fi
