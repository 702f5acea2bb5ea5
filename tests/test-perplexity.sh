#!/bin/sh
# test-perplexity.sh - llamachat-perplexity against llama.cpp's perplexity table
# (../shared/reference/README.md: tales.txt, n_ctx 128, 15 chunks): every model to the 4 decimals llama.cpp printed,
# the stories260K files and the eleven TinyStories-656K ones (F16, Q8_0 ... Q2_K, IQ4_NL).
# Then: KL divergence against a saved base (a model against itself: KLD 0, same top 100 %),
# the base file replaced whole or not at all (a write failure keeps the old one),
# stories260K (FFN 172) quantized to Q4_1 by us runs, and a split round trip gives the same
# PPL and the same greedy tokens as the single file.
set -u
B=${LC_BUILDDIR:-.}
S=${LC_SHARED:-../shared}
M=$S/models
P=$B/llamachat-perplexity
Q=$B/llamachat-quantize
TXT=$S/text/tales.txt
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail=0

bad() {
    echo "FAIL: $*"
    fail=1
}

ppl() { # MODEL [args] -> prints the final PPL
    "$P" -m "$@" -f "$TXT" -c 128 -t 2 2>"$T/err" | sed -n 's/^Final estimate: PPL = \([0-9.]*\) .*/\1/p'
}

# the reference table: "| stories260K.gguf (F32) | 3.9227 |" -> stories260K.gguf 3.9227
sed -n 's/^| \(stories[^ |]*\)[^|]*| \([0-9.]*\) |$/\1 \2/p' "$S/reference/README.md" >"$T/table"
[ "$(wc -l <"$T/table")" -ge 6 ] || bad "reference table not found in $S/reference/README.md"
while read -r name want; do
    case $name in *.gguf) ;; *) name=$name.gguf ;; esac
    got=$(ppl "$M/$name")
    if [ -z "$got" ]; then
        bad "$name: no PPL"
        cat "$T/err"
        continue
    fi
    # the same 4 decimals as llama.cpp's table (same bits through the whole forward pass)
    if [ "$got" = "$want" ]; then
        echo "ok: $name PPL $got (llama.cpp $want)"
    else
        bad "$name: PPL $got, llama.cpp $want"
    fi
done <"$T/table"

# TinyStories-656K (issue 13): every file of ../models/tinystories-656k against the table under
# "| TinyStories-656K | PPL |" (llama.cpp b4748, -c 128 -b 128), to the same 4 decimals
awk '/^\| TinyStories-656K \| PPL \|/ { on = 1; next }
     on && /^\|---/ { next }
     on && /^\| / { gsub(/ /, ""); split($0, f, "|"); print f[2], f[3]; next }
     on { exit }' "$S/reference/README.md" >"$T/ts"
[ "$(wc -l <"$T/ts")" -ge 11 ] || bad "TinyStories-656K table: $(wc -l <"$T/ts") rows in $S/reference/README.md"
while read -r type want; do
    case $type in F16) name=TinyStories-656K.f16.gguf ;; *) name=TinyStories-656K-$type.gguf ;; esac
    got=$(ppl "$M/tinystories-656k/$name")
    if [ -z "$got" ]; then
        bad "$name: no PPL"
        cat "$T/err"
    elif [ "$got" = "$want" ]; then
        echo "ok: $name PPL $got (llama.cpp $want)"
    else
        bad "$name: PPL $got, llama.cpp $want"
    fi
done <"$T/ts"

# KL divergence: base = F32; the F32 model against itself, and Q4_1 (PPL(Q) = its own PPL)
"$P" -m "$M/stories260K-ff192-f32.gguf" -f "$TXT" -c 128 -t 2 \
    --kl-divergence-base "$T/base.kld" >/dev/null 2>&1 || bad "--kl-divergence-base"
"$P" -m "$M/stories260K-ff192-f32.gguf" --kl-divergence-base "$T/base.kld" --kl-divergence \
    -t 2 >"$T/kl" 2>&1 || bad "--kl-divergence (f32)"
grep -q 'Same top p *: 100.000' "$T/kl" || bad "f32 vs itself: top-1 agreement: $(cat "$T/kl")"
# (the base is stored as 16-bit log-probabilities, so ~0 can come out a hair negative)
awk '/Mean    KLD/ { exit !($4 < 0.0001 && $4 > -0.0001) }' "$T/kl" ||
    bad "f32 vs itself: KLD not ~0: $(grep KLD "$T/kl")"
"$P" -m "$M/stories260K-ff192-q4_1.gguf" --kl-divergence-base "$T/base.kld" --kl-divergence \
    -t 2 >"$T/kl" 2>&1 || bad "--kl-divergence (q4_1)"
cat "$T/kl" | tail -7
q=$(ppl "$M/stories260K-ff192-q4_1.gguf")
klq=$(sed -n 's/^Mean PPL(Q) *: *\([0-9.]*\) .*/\1/p' "$T/kl")
awk -v a="$q" -v b="$klq" 'BEGIN { exit !(a - b < 0.0001 && b - a < 0.0001) }' ||
    bad "KL mode PPL(Q) $klq != perplexity $q"
awk '/Mean    KLD/ { exit !($4 > 0.01 && $4 < 0.5) }' "$T/kl" || bad "q4_1 KLD out of range"

# --kl-divergence-base FILE is replaced whole or not at all: a run whose write fails (a file
# size limit: EFBIG part way) exits 1 and leaves the old FILE byte-identical, no temporary
# file beside it; a FIFO is refused at once (not opened: that would wait for a reader); a run
# that succeeds replaces it (and keeps its mode)
cp "$T/base.kld" "$T/base.orig"
chmod 640 "$T/base.kld"
( ulimit -f 64
  exec "$P" -m "$M/stories260K-ff192-q4_1.gguf" -f "$TXT" -c 128 -t 2 \
      --kl-divergence-base "$T/base.kld" >/dev/null 2>"$T/err" )
rc=$?
[ $rc = 1 ] || bad "--kl-divergence-base over a size limit: exit $rc, want 1: $(cat "$T/err")"
grep -q 'base.kld: write failed' "$T/err" || bad "--kl-divergence-base write failure message: $(cat "$T/err")"
cmp -s "$T/base.kld" "$T/base.orig" || bad "--kl-divergence-base: a failed run changed the old file"
ls "$T" | grep -q 'base.kld.tmp' && bad "--kl-divergence-base: temporary file left: $(ls "$T")"
mkfifo "$T/fifo.kld"
timeout 60 "$P" -m "$M/stories260K-ff192-q4_1.gguf" -f "$TXT" -c 128 -t 2 \
    --kl-divergence-base "$T/fifo.kld" >/dev/null 2>"$T/err"
rc=$?
[ $rc = 1 ] && grep -q 'fifo.kld: a FIFO, not a regular file' "$T/err" ||
    bad "--kl-divergence-base FIFO: exit $rc: $(cat "$T/err")"
"$P" -m "$M/stories260K-ff192-q4_1.gguf" -f "$TXT" -c 128 -t 2 --chunks 2 \
    --kl-divergence-base "$T/base.kld" >/dev/null 2>"$T/err" || bad "--kl-divergence-base again: $(cat "$T/err")"
[ "$(wc -c <"$T/base.kld")" -lt "$(wc -c <"$T/base.orig")" ] || bad "--kl-divergence-base: not replaced"
[ "$(stat -c %a "$T/base.kld")" = 640 ] || bad "--kl-divergence-base: mode $(stat -c %a "$T/base.kld"), want 640"
ls "$T" | grep -q 'base.kld.tmp' && bad "--kl-divergence-base: temporary file left after success"

# stories260K (FFN 172): our Q4_1 (ffn_down kept F16) runs, and is between F32 and ff192-Q4_1
if "$Q" "$M/stories260K.gguf" "$T/s.gguf" q4_1 >/dev/null 2>&1; then
    s=$(ppl "$T/s.gguf")
    echo "stories260K quantized to q4_1 by llamachat-quantize: PPL $s"
    awk -v s="$s" 'BEGIN { exit !(s > 3.9227 && s < 4.2150) }' || bad "stories260K q4_1: PPL '$s'"
else
    bad "quantize stories260K"
fi

# split round trip: parts of <= 40 kB load through the first part, same PPL, same greedy tokens
"$Q" --split-max-size 40K "$M/stories260K-ff192-f32.gguf" "$T/sp.gguf" q4_1 >/dev/null 2>&1 ||
    bad "split quantize"
first=$(ls "$T"/sp-00001-of-*.gguf 2>/dev/null)
if [ -n "$first" ]; then
    a=$(ppl "$first")
    [ -n "$a" ] && [ "$a" = "$q" ] || bad "split model PPL '$a' != single file $q: $(cat "$T/err")"
    L=$B/llamachat
    if [ -x "$L" ]; then
        "$L" -m "$first" -p "Once upon a time" -n 40 --temp 0 --print-token-ids >"$T/g1" 2>/dev/null
        "$L" -m "$M/stories260K-ff192-q4_1.gguf" -p "Once upon a time" -n 40 --temp 0 \
            --print-token-ids >"$T/g2" 2>/dev/null
        [ -s "$T/g1" ] && cmp -s "$T/g1" "$T/g2" || bad "split model: greedy tokens differ"
    fi
    rm -f "$T"/sp-00002-of-*.gguf
    "$P" -m "$first" -f "$TXT" -c 128 >/dev/null 2>"$T/err" && bad "missing part accepted"
    grep -q 'part 2 of [0-9]*:.*sp-00002-of' "$T/err" || bad "missing part message: $(cat "$T/err")"
else
    bad "no split parts"
fi
exit $fail
