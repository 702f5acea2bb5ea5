#!/bin/bash
# tests/fuzz/run.sh [SECONDS] - build every libFuzzer harness of tests/fuzz/ with clang (ASan +
# UBSan) and run each for SECONDS (default 60) on a copy of its seeds, tests/fuzz/corpus/NAME/
# (the committed corpus is never written).  One line per harness: executions and result; a crash,
# leak, sanitizer report or hang (-timeout) fails it, and its input is printed in hex with the
# report.  Ends with "fuzz: N harnesses, N clean"; exit 0 when all are clean, 1 when one is not,
# 77 (skipped) when clang or its libFuzzer runtime is missing (Debian: clang libclang-rt-14-dev).
#
# Environment: FUZZ_BUILD (build and work dir; default a temporary dir, removed when all are
# clean), FUZZ_JOBS (harnesses run at once; default 2, at most nproc), LC_SHARED (../shared,
# for the tokenizer's vocabs), CC (a clang; default clang).
set -u
secs=${1:-60}
case "$secs" in ''|*[!0-9]*) echo "usage: $0 [SECONDS]" >&2; exit 2 ;; esac
src=$(cd "$(dirname "$0")/../.." && pwd)
shared=${LC_SHARED:-$src/../shared}
cc=${CC:-clang}
case "$cc" in *clang*) ;; *) cc=clang ;; esac   # configure's gcc has no libFuzzer
jobs=${FUZZ_JOBS:-2}
n=$(nproc 2>/dev/null || echo 1)
[ "$jobs" -gt "$n" ] && jobs=$n
[ "$jobs" -lt 1 ] && jobs=1

if ! command -v "$cc" >/dev/null 2>&1; then
    echo "fuzz: SKIP: $cc not found (Debian: apt-get install clang libclang-rt-14-dev)"
    exit 77
fi
if [ -n "${FUZZ_BUILD:-}" ]; then
    build=$FUZZ_BUILD
    keep=1
    mkdir -p "$build" || exit 1
else
    build=$(mktemp -d /tmp/llamachat-fuzz.XXXXXX) || exit 1
    keep=0
fi
build=$(cd "$build" && pwd)
printf 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n);\n'\
'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n) { (void)d; (void)n; return 0; }\n' \
    > "$build/probe.c"
if ! "$cc" -fsanitize=fuzzer,address,undefined "$build/probe.c" -o "$build/probe" \
        >"$build/probe.log" 2>&1; then
    echo "fuzz: SKIP: $cc cannot link -fsanitize=fuzzer (Debian: apt-get install libclang-rt-14-dev)"
    sed 's/^/  /' "$build/probe.log" | head -5
    [ "$keep" -eq 1 ] || rm -rf "$build"
    exit 77
fi

# name | max_len | sources and libraries (paths from the source root)
harnesses="
gguf|4096|src/llm/gguf.c src/llm/quant.c src/llm/quant_k.c -lm
tokenizer|512|src/llm/tokenizer.c src/llm/gguf.c src/llm/strbuf.c src/llm/quant.c src/llm/quant_k.c PCRE2 -lm
chat-template|4096|src/llm/chat_template.c src/llm/jinja.c src/llm/strbuf.c
transcript|8192|src/chat.c src/textsafe.c src/fileutil.c src/llm/sampler.c src/llm/strbuf.c JSONC -lm
config|4096|src/config.c src/fileutil.c src/llm/chat_template.c src/llm/jinja.c src/llm/sampler.c src/llm/strbuf.c -liniparser -lm
keydec|4096|src/tui/keydec.c
markdown|8192|src/tui/markdown.c -lcmark
jinja|4096|src/llm/chat_template.c src/llm/jinja.c src/llm/strbuf.c
kvstate|8192|src/llm/kvstate.c src/llm/context.c src/llm/model.c src/llm/gguf.c src/llm/gguf_split.c src/llm/quant.c src/llm/quant_k.c src/llm/repack.c src/llm/tokenizer.c src/llm/strbuf.c src/llm/threadpool.c src/llm/arch/scalar.c src/llm/arch/dispatch.c SCALAR PCRE2 -lm -pthread
"
flags="-g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -D_GNU_SOURCE
       -I$src/src -I$src/src/llm"

mkdir -p "$build/scalar" && : >"$build/scalar/lcconfig.h"

# Build one harness into $build/fuzz-NAME; the log in $build/NAME.build.log.
build_one() {
    local name=$1 srcs=$2 args=() w
    for w in $srcs; do
        case "$w" in
        PCRE2) args+=($(pkg-config --cflags --libs libpcre2-8)) ;;
        JSONC) args+=($(pkg-config --cflags --libs json-c)) ;;
        SCALAR) args+=("-I$build/scalar") ;;   # an empty lcconfig.h: the scalar kernels only
        src/*) args+=("$src/$w") ;;
        *) args+=("$w") ;;
        esac
    done
    # shellcheck disable=SC2086
    "$cc" $flags "$src/tests/fuzz/fuzz-$name.c" "${args[@]}" -o "$build/fuzz-$name" \
        >"$build/$name.build.log" 2>&1
}

# Run one harness for $secs seconds; writes $build/NAME.result ("EXECS RESULT").
run_one() {
    local name=$1 maxlen=$2 work=$build/work/$name rc execs
    rm -rf "$work"
    mkdir -p "$work/corpus"
    [ -d "$src/tests/fuzz/corpus/$name" ] && cp "$src/tests/fuzz/corpus/$name"/* "$work/corpus/" 2>/dev/null
    (cd "$work" && LC_SHARED=$shared \
        ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
        "$build/fuzz-$name" -max_total_time="$secs" -max_len="$maxlen" -timeout=25 \
        -rss_limit_mb=2560 -print_final_stats=1 -artifact_prefix="$work/" corpus >"$work/log" 2>&1)
    rc=$?
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/log" | tail -1)
    [ -n "$execs" ] || execs=$(sed -n 's/^Done \([0-9]*\) runs.*/\1/p' "$work/log" | tail -1)
    if [ "$rc" -eq 0 ]; then
        echo "${execs:-?} clean" >"$build/$name.result"
    else
        echo "${execs:-?} FAILED(rc=$rc)" >"$build/$name.result"
    fi
}

names=""
total=0
clean=0
failed=0
skipped=0
while IFS='|' read -r name maxlen srcs; do
    [ -n "$name" ] || continue
    names="$names $name"
    echo "$maxlen" >"$build/$name.maxlen"
    echo "$srcs" >"$build/$name.srcs"
done <<EOF
$harnesses
EOF

# Build (jobs at a time).
for name in $names; do
    build_one "$name" "$(cat "$build/$name.srcs")" &
    while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n; done
done
wait

# Run (jobs at a time).
for name in $names; do
    total=$((total + 1))
    if [ ! -x "$build/fuzz-$name" ]; then
        echo "- FAILED(build)" >"$build/$name.result"
        continue
    fi
    if [ "$name" = tokenizer ] && [ ! -f "$shared/reference/tokenizer/ggml-vocab-llama-spm.gguf" ]; then
        echo "- SKIPPED(no $shared/reference/tokenizer)" >"$build/$name.result"
        continue
    fi
    run_one "$name" "$(cat "$build/$name.maxlen")" &
    while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n; done
done
wait

for name in $names; do
    read -r execs result <"$build/$name.result"
    printf 'fuzz-%-14s %10s executions  %s\n' "$name" "$execs" "$result"
    case "$result" in
    clean) clean=$((clean + 1)) ;;
    SKIPPED*) skipped=$((skipped + 1)) ;;
    FAILED\(build\))
        failed=$((failed + 1))
        sed 's/^/    /' "$build/$name.build.log" | head -30 ;;
    *)
        failed=$((failed + 1))
        for a in "$build/work/$name"/crash-* "$build/work/$name"/leak-* "$build/work/$name"/timeout-* \
                 "$build/work/$name"/oom-*; do
            [ -f "$a" ] || continue
            echo "    input $a ($(wc -c <"$a") bytes):"
            od -An -tx1 -v "$a" | head -40 | sed 's/^/     /'
        done
        grep -n -m1 -E 'ERROR|runtime error|deadly signal|SUMMARY' "$build/work/$name/log" >/dev/null &&
            sed -n '/==ERROR\|runtime error\|deadly signal\|ERROR: libFuzzer/,/^SUMMARY/p' \
                "$build/work/$name/log" | head -60 | sed 's/^/    /' ;;
    esac
done
echo "fuzz: $total harnesses, $clean clean${skipped:+, $skipped skipped}" | sed 's/, 0 skipped//'
if [ "$failed" -gt 0 ]; then
    echo "fuzz: logs and inputs kept in $build"
    exit 1
fi
[ "$keep" -eq 1 ] || rm -rf "$build"
exit 0
