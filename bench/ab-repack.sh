#!/bin/sh
# bench/ab-repack.sh - decode speed with the x16 layout (repack.h) against ggml's layout, side by
# side in the same minutes: for each round and each model, `llamachat-bench -p 0 -n N` as it
# loads by default (the matrices of the types the ISA's kernels have x16 versions of, repacked),
# then the same with LLAMACHAT_REPACK=0, each run preceded by the load average and, with PROBE=1,
# a memory bandwidth probe (its median GB/s).  A shared machine moves every figure from minute to
# minute; alternating the two layouts is what makes them comparable.
#
#   bench/ab-repack.sh MODEL.gguf ...
#
# CPU=1 records llamachat-bench --cpu-time's process CPU ms per token instead of t/s (use it with
# THREADS=1: the cost of a token whatever share of the cores a loaded machine gives the run).
# Environment: ISA (default avx2; passed as --isa), THREADS (2), N (64), P (0), ROUNDS (3), PROBE (1), CPU (0),
# BUILD (a configured optimised build directory; default the source tree), BEFORE (optional:
# another build directory, e.g. of the commit before a kernel change, run as a third arm with
# its default layout).  Prints one line per
# run, then per model the median and range of t/s of each layout, of the load average and of the
# probe, and the bytes each model reads per token (llamachat-bench's load line): the bound is the
# probe's GB/s over those bytes.
set -eu

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$ROOT}
ISA=${ISA:-avx2}
THREADS=${THREADS:-2}
N=${N:-64}
P=${P:-0}
CPU=${CPU:-0}
if [ "$CPU" = 1 ]; then CPUOPT=--cpu-time FIELD=10 UNIT="CPU ms/token"; else CPUOPT="" FIELD=8 UNIT=t/s; fi
if [ "$P" -gt 0 ]; then TEST="-p $P -n 0" NAME=pp$P; else TEST="-p 0 -n $N" NAME=tg$N; fi
ROUNDS=${ROUNDS:-3}
PROBE=${PROBE:-1}
[ $# -ge 1 ] || { echo "usage: $0 MODEL.gguf ..." >&2; exit 2; }
for f in "$@"; do
    [ -f "$f" ] || { echo "$0: no such file: $f" >&2; exit 1; }
done
make -C "$BUILD" -s -j2 llamachat-bench llamachat-bandwidth >&2
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

# one run: model $1, layout $2 (x16 | ggml); appends "model layout t/s load probe" to $TMP/runs
one() {
    load=$(cut -d' ' -f1 /proc/loadavg)
    bw=-
    if [ "$PROBE" = 1 ]; then
        # shellcheck disable=SC2046
        set -- "$1" "$2" $("$BUILD/llamachat-bandwidth" -t "$THREADS" -r 3 --quiet)
        bw=$4
    fi
    if [ "$2" = before ]; then
        # shellcheck disable=SC2086
        "$BEFORE/llamachat-bench" -m "$1" $TEST -t "$THREADS" -r 1 --isa "$ISA" $CPUOPT \
            >"$TMP/out" 2>>"$TMP/err"
    elif [ "$2" = ggml ]; then
        # shellcheck disable=SC2086
        LLAMACHAT_REPACK=0 "$BUILD/llamachat-bench" -m "$1" $TEST -t "$THREADS" -r 1 \
            --isa "$ISA" $CPUOPT >"$TMP/out" 2>>"$TMP/err"
    else
        # shellcheck disable=SC2086
        "$BUILD/llamachat-bench" -m "$1" $TEST -t "$THREADS" -r 1 --isa "$ISA" $CPUOPT \
            >"$TMP/out" 2>>"$TMP/err"
    fi
    tps=$(tail -n 1 "$TMP/out" | awk -F'|' -v f="$FIELD" '{gsub(/ /, "", $f); print $f}')
    printf '%s %s %s %s %s\n' "$(basename "$1" .gguf)" "$2" "$tps" "$load" "$bw" | tee -a "$TMP/runs"
}

echo "# bench/ab-repack.sh, $(date -u '+%Y-%m-%d %H:%M UTC'), $(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo '?')"
echo "# $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) CPUs; --isa $ISA, $THREADS threads, $NAME"
echo "# model layout $UNIT load-average probe-GB/s"
r=1
while [ "$r" -le "$ROUNDS" ]; do
    for f in "$@"; do
        if [ $((r % 2)) = 1 ]; then
            one "$f" x16
            one "$f" ggml
            [ -z "${BEFORE:-}" ] || one "$f" before
        else
            [ -z "${BEFORE:-}" ] || one "$f" before
            one "$f" ggml
            one "$f" x16
        fi
    done
    r=$((r + 1))
done

echo ""
echo "| model | x16 $UNIT (median; min - max) | ggml layout $UNIT (median; min - max) | x16 / ggml (medians) | before $UNIT (median; min - max) | load average (min - max) | probe GB/s (min - max) |"
echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"
for f in "$@"; do
    m=$(basename "$f" .gguf)
    stats() { # $1 = layout, $2 = field: "median min max" of that field
        awk -v m="$m" -v l="$1" -v k="$2" '$1 == m && $2 == l && $k != "-" { print $k }' "$TMP/runs" |
            sort -g | awk '{ a[NR] = $1 } END { if (NR == 0) { print "- - -"; exit }
                med = NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2
                printf "%.2f %.2f %.2f\n", med, a[1], a[NR] }'
    }
    # shellcheck disable=SC2046
    set -- $(stats x16 3) $(stats ggml 3) $(stats before 3)
    ratio=$(awk -v a="$1" -v b="$4" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }')
    x16="$1 ($2 - $3)" ggml="$4 ($5 - $6)" before="-"
    [ "$7" = - ] || before="$7 ($8 - $9)"
    # shellcheck disable=SC2046
    set -- $(awk -v m="$m" '$1 == m { print $4 }' "$TMP/runs" | sort -g | sed -n '1p;$p')
    loads="$1 - $2"
    # shellcheck disable=SC2046
    set -- $(awk -v m="$m" '$1 == m && $5 != "-" { print $5 }' "$TMP/runs" | sort -g | sed -n '1p;$p') - -
    echo "| $m | $x16 | $ggml | $ratio | $before | $loads | $1 - $2 |"
done
echo ""
grep 'weights read per generated token' "$TMP/err" | sed 's/ in [0-9.]* s:/:/; s/^/# /' | sort -u
