#!/bin/sh
# bench/spec.sh - speculative decoding (--spec lookup, --draft FILE) beside plain decoding:
# generation tokens/s (the engine's clock: decode and verify time, without the prompt; with a
# draft model its time too, its reading of the prompt included) and the share of drafted tokens
# accepted, on a repetitive prompt (a paragraph, then its first sentence again: the model
# copies, as when a reply quotes or rewrites earlier text) and a non-repetitive one, for each
# model and mode; off and speculative runs alternate, REPS of each, medians printed.  Greedy
# (TEMP 0): every pair of runs must give the same token ids (the script stops otherwise); with
# a temperature the texts differ (another random stream), so they are not compared.  Beside the
# rates, the process CPU time per generated token (/usr/bin/time, minus a run of -n 1 in the
# same mode for loading and the prompt): with THREADS=1 that is the cost of a token however
# busy a shared machine is.
#
# Environment: BUILD (an optimised build directory with llamachat; default: the source tree),
# MODELS (space-separated GGUF files; default the stories models in ../shared/models and, when
# present, bench/.cache/synth-tinyllama-q4_1.gguf from bench/run.sh), MODES ("lookup", "draft"
# or both, space-separated; default lookup), DRAFT_MODEL (the --draft file for mode draft;
# default ../shared/models/stories260K-ff192-q8_0.gguf), TEMP (0; sampling with the chain's
# other defaults otherwise), THREADS (2), N (tokens to generate, 128), REPS (3), DRAFT
# (--draft-max, 8), ISA (passed as --isa).
set -eu

ROOT=${ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
BUILD=${BUILD:-$ROOT}
THREADS=${THREADS:-2}
N=${N:-128}
REPS=${REPS:-3}
DRAFT=${DRAFT:-8}
MODES=${MODES:-lookup}
TEMP=${TEMP:-0}
SHARED=${LC_SHARED:-$ROOT/../shared}
if [ -z "${MODELS:-}" ]; then
    MODELS="$SHARED/models/stories260K.gguf $SHARED/models/stories260K-ff192-q4_1.gguf"
    MODELS="$MODELS $SHARED/models/tinystories-656k/TinyStories-656K-Q4_1.gguf"
    [ -f "$ROOT/bench/.cache/synth-tinyllama-q4_1.gguf" ] &&
        MODELS="$MODELS $ROOT/bench/.cache/synth-tinyllama-q4_1.gguf"
fi
DRAFT_MODEL=${DRAFT_MODEL:-$SHARED/models/stories260K-ff192-q8_0.gguf}
LC="$BUILD/llamachat"
[ -x "$LC" ] || { echo "spec.sh: no $LC (set BUILD)" >&2; exit 1; }
if grep -q '^SAN_CFLAGS = -fsanitize' "$BUILD/Makefile" 2>/dev/null; then
    echo "spec.sh: $BUILD is a sanitizer build; benchmarks need an optimised one" >&2
    exit 1
fi
ISA_ARG=""
[ -n "${ISA:-}" ] && ISA_ARG="--isa $ISA"
TMP=$(mktemp -d "${TMPDIR:-/tmp}/lc-spec-bench.XXXXXX")
trap 'rm -rf "$TMP"' EXIT

PARA="Once upon a time, there was a small dog named Max. Max lived in a red house with a big yard. Every morning, Max ran around the yard and barked at the birds. The birds did not like Max. They flew up into the tall tree and sang loud songs."
REPETITIVE="$PARA
$PARA
Once upon a time, there was a small dog"
PLAIN="One day, a little girl went to the park"

median() { sort -g | awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)]; else print "?" }'; }

# cpu_run MODEL PROMPT MODE OUT NTOK: one run (MODE off, lookup or draft); ids in OUT.ids, CPU
# seconds (user, sys) in OUT.time
cpu_run() {
    case $3 in
    draft) sarg="--draft $DRAFT_MODEL" ;;
    *) sarg="--spec $3" ;;
    esac
    # shellcheck disable=SC2086
    /usr/bin/time -f '%U %S' -o "$4.time" "$LC" -m "$1" -p "$2" -n "$5" --temp "$TEMP" --seed 1 \
        -t "$THREADS" $sarg --draft-max "$DRAFT" --print-token-ids $ISA_ARG \
        >"$4.ids" 2>"$4.err"
}

# run MODEL PROMPT MODE OUT: one generation of N tokens; "t/s accepted% cpu_s" on stdout
run() {
    cpu_run "$1" "$2" "$3" "$4" "$N"
    c=$(awk '{ print $1 + $2 }' "$4.time")
    if [ "$3" != off ]; then
        sed -n "s/.*speculative ([a-z ]*): .*(\([0-9.]*\) t\/s); .* accepted (\([0-9]*\) %).*/\1 \2 $c/p" "$4.err"
    else
        sed -n "s/.*evaluated one by one in [0-9.]* s: \([0-9.]*\) t\/s.*/\1 - $c/p" "$4.err"
    fi
}

# CPU ms per generated token beyond the first: (median run - the -n 1 run) / (tokens - 1)
per_tok() { median | awk -v c1="$1" -v n="$2" '{ printf "%.2f", (n > 1 ? ($1 - c1) * 1000 / (n - 1) : 0) }'; }

printf '# bench/spec.sh, %s, %s; %s threads, %s tokens, --temp %s, --draft-max %s, %s reps; load %s\n' \
    "$(date -u '+%Y-%m-%d %H:%M UTC')" "$(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo '?')" \
    "$THREADS" "$N" "$TEMP" "$DRAFT" "$REPS" "$(cut -d' ' -f1-3 /proc/loadavg)"
case " $MODES " in *" draft "*) printf '# draft model: %s\n' "$(basename "$DRAFT_MODEL" .gguf)" ;; esac
printf '%-24s %-10s %-6s %8s %8s %7s %8s %10s %10s\n' model prompt mode "off t/s" "spec t/s" \
    speedup accepted "off CPU/t" "spec CPU/t"
for m in $MODELS; do
    [ -f "$m" ] || { echo "spec.sh: skipping missing $m" >&2; continue; }
    for kind in repetitive plain; do
        if [ "$kind" = repetitive ]; then prompt=$REPETITIVE; else prompt=$PLAIN; fi
        for mode in $MODES; do
            for f in off on acc coff con; do : >"$TMP/$f"; done
            cpu_run "$m" "$prompt" off "$TMP/z" 1
            c1=$(awk '{ print $1 + $2 }' "$TMP/z.time")
            cpu_run "$m" "$prompt" "$mode" "$TMP/z" 1
            c1s=$(awk '{ print $1 + $2 }' "$TMP/z.time")
            r=0
            while [ "$r" -lt "$REPS" ]; do
                out=$(run "$m" "$prompt" off "$TMP/a")
                echo "$out" | cut -d' ' -f1 >>"$TMP/off"
                echo "$out" | cut -d' ' -f3 >>"$TMP/coff"
                out=$(run "$m" "$prompt" "$mode" "$TMP/b")
                echo "$out" | cut -d' ' -f1 >>"$TMP/on"
                echo "$out" | cut -d' ' -f2 >>"$TMP/acc"
                echo "$out" | cut -d' ' -f3 >>"$TMP/con"
                if [ "$TEMP" = 0 ] && ! cmp -s "$TMP/a.ids" "$TMP/b.ids"; then
                    echo "spec.sh: $m ($kind): the ids differ with $mode" >&2
                    exit 1
                fi
                r=$((r + 1))
            done
            off=$(median <"$TMP/off")
            on=$(median <"$TMP/on")
            acc=$(median <"$TMP/acc")
            ng=$(wc -w <"$TMP/a.ids")
            ns=$(wc -w <"$TMP/b.ids")
            coff=$(per_tok "$c1" "$ng" <"$TMP/coff")
            con=$(per_tok "$c1s" "$ns" <"$TMP/con")
            sp=$(awk -v a="$off" -v b="$on" 'BEGIN { if (a > 0) printf "%.2fx", b / a; else print "?" }')
            printf '%-24s %-10s %-6s %8s %8s %7s %7s%% %8s ms %8s ms\n' "$(basename "$m" .gguf)" \
                "$kind" "$mode" "$off" "$on" "$sp" "$acc" "$coff" "$con"
        done
    done
done
