#!/bin/sh
# test-selfcal.sh - calibration without a text (bench/QUANTIZE.md, "self-generated
# calibration"): llamachat-imatrix --generate and llamachat-quantize --self-calibrate on
# stories260K (FFN 192), measured on tales.txt at n_ctx 128:
#   - the sampled text for a fixed seed is the golden one, the same bytes with 1 and 2 threads
#     and with every ISA, and so is the importance matrix (with --cov sums); another seed gives
#     another text;
#   - the imatrix loads with --imatrix; GPTQ with its x x^T sums gives the golden PPL and a
#     mean KL divergence against the F32 model at least 30 % below llama.cpp's Q4_1 (measured
#     0.0402 against 0.0765), the diagonal search with it a lower KLD than ref;
#   - --self-calibrate N does it in one command, the same bytes as the two steps;
#   - bad combinations of options are refused with a message.
set -u
B=${LC_BUILDDIR:-.}
S=${LC_SHARED:-../shared}
M=$S/models
Q=$B/llamachat-quantize
P=$B/llamachat-perplexity
I=$B/llamachat-imatrix
F=$M/stories260K-ff192-f32.gguf
TXT=$S/text/tales.txt
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail=0
bad() {
    echo "FAIL: $*"
    fail=1
}
[ -f "$F" ] || { echo "skip: no shared models"; exit 77; }

run() { # run CMD...: must succeed
    if ! "$@" >"$T/log" 2>&1; then
        bad "$*"
        cat "$T/log"
    fi
}

# 16 sequences of 128 tokens sampled from BOS at temperature 1, seed 1 (the defaults)
for t in 1 2; do
    run "$I" -m "$F" --generate 2048 -c 128 -t $t --cov -o "$T/gen$t.gguf" --save-text "$T/gen$t.txt"
done
grep -q "16 sequences of up to 128 tokens" "$T/log" || bad "not 16 sequences: $(cat "$T/log")"
cmp -s "$T/gen1.txt" "$T/gen2.txt" || bad "the sampled text differs with 1 and 2 threads"
cmp -s "$T/gen1.gguf" "$T/gen2.gguf" || bad "the imatrix differs with 1 and 2 threads"
first=$(head -n 1 "$T/gen1.txt")
want="Once upon a time, there was an a big lime named TV. Tom loved to run and play with his toys and shoot a big tree. One day, Tom went to the beool shower and put on his wife's grandma's plx. Tom was frightened, but he knew it was better."
[ "$first" = "$want" ] || bad "first sampled line: '$first'"
[ "$(cksum <"$T/gen1.txt")" = "2117021635 4605" ] || bad "sampled text: cksum $(cksum <"$T/gen1.txt")"
# and with every ISA's kernels this CPU has (4 sequences)
ref_isa=
for isa in scalar avx2 avx512 neon; do
    LLAMACHAT_ISA=$isa "$B/llamachat" --version >/dev/null 2>&1 || continue
    run env LLAMACHAT_ISA=$isa "$I" -m "$F" --generate 512 -c 128 -t 1 --cov -o "$T/$isa.gguf" \
        --save-text "$T/$isa.txt"
    if [ -z "$ref_isa" ]; then
        ref_isa=$isa
    else
        cmp -s "$T/$isa.txt" "$T/$ref_isa.txt" || bad "$isa: another text than $ref_isa's"
        cmp -s "$T/$isa.gguf" "$T/$ref_isa.gguf" || bad "$isa: another imatrix than $ref_isa's"
    fi
    echo "ok: the same sampled text and imatrix with $isa"
done
run "$I" -m "$F" --generate 256 -c 128 -t 2 --seed 2 -o "$T/seed2.dat" --save-text "$T/seed2.txt"
[ "$(head -n 1 "$T/seed2.txt")" = "$first" ] && bad "seed 2 gave seed 1's text"

# quantize with it: GPTQ (x x^T sums) and the diagonal search
run "$Q" -t 2 "$F" "$T/ref.gguf" q4_1
run "$Q" -t 2 --method gptq --imatrix "$T/gen1.gguf" "$F" "$T/gptq.gguf" q4_1
grep -q "imatrix: 36 matrices from" "$T/log" || bad "imatrix not loaded: $(cat "$T/log")"
run "$Q" -t 2 --imatrix "$T/gen1.gguf" "$F" "$T/search.gguf" q4_1
# one command: the same file
run "$Q" -t 1 --method gptq --self-calibrate 2048 "$F" "$T/one.gguf" q4_1
grep -q "self-calibrate: 2048 tokens sampled in 16 sequences, 36 matrices" "$T/log" ||
    bad "--self-calibrate: $(cat "$T/log")"
cmp -s "$T/one.gguf" "$T/gptq.gguf" || bad "--self-calibrate 2048 is not imatrix --generate 2048 + --imatrix"
run "$Q" -t 1 --self-calibrate 2048 "$F" "$T/one-search.gguf" q4_1
cmp -s "$T/one-search.gguf" "$T/search.gguf" || bad "--self-calibrate (search) differs from the two steps"

run "$P" -m "$F" -f "$TXT" -c 128 -t 2 --kl-divergence-base "$T/base.kld"
for f in ref gptq search; do
    "$P" -m "$T/$f.gguf" --kl-divergence-base "$T/base.kld" --kl-divergence -t 2 >"$T/$f.out" 2>&1 ||
        bad "perplexity $f"
    sed -n 's/^Mean PPL(Q) *: *\([0-9.]*\).*/\1/p' "$T/$f.out" >"$T/$f.ppl"
    sed -n 's/^Mean *KLD *: *\([0-9.]*\).*/\1/p' "$T/$f.out" >"$T/$f.kld"
    echo "$f: PPL $(cat "$T/$f.ppl") KLD $(cat "$T/$f.kld")"
done
lt() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a + 0 < b + 0 && a != "") }'; }
[ "$(cat "$T/ref.ppl")" = 4.214984 ] || bad "ref PPL $(cat "$T/ref.ppl"), llama.cpp 4.2150"
# bench/QUANTIZE.md: 4.0598 (gap to F32's 3.9226 -53 %), KLD 0.0402 (-47 %)
[ "$(cat "$T/gptq.ppl")" = 4.059807 ] || bad "gptq (self-generated) PPL $(cat "$T/gptq.ppl"), want 4.059807"
lt "$(cat "$T/gptq.kld")" "$(awk -v r="$(cat "$T/ref.kld")" 'BEGIN { print r * 0.7 }')" ||
    bad "gptq (self-generated): KLD $(cat "$T/gptq.kld") not 30 % below ref $(cat "$T/ref.kld")"
lt "$(cat "$T/search.kld")" "$(cat "$T/ref.kld")" ||
    bad "search + imatrix (self-generated): KLD $(cat "$T/search.kld") not below ref"
"$B/tests/test-quant-search" "$T/gptq.gguf" "$T/search.gguf" || bad "invalid Q4_1 blocks"

# bad combinations
"$I" -m "$F" -f "$TXT" --generate 256 -o "$T/x.dat" 2>"$T/err" && bad "-f with --generate accepted"
grep -q "one or the other" "$T/err" || bad "-f + --generate: $(cat "$T/err")"
"$I" -m "$F" -f "$TXT" -o "$T/x.dat" --save-text "$T/x.txt" 2>"$T/err" &&
    bad "--save-text without --generate accepted"
grep -q "goes with --generate" "$T/err" || bad "--save-text: $(cat "$T/err")"
"$I" -m "$F" -f "$TXT" -o "$T/x.dat" --seed 3 2>"$T/err"
rc=$?
[ $rc = 2 ] && grep -q "llamachat-imatrix: --seed / --temp goes with --generate" "$T/err" ||
    bad "--seed without --generate: exit $rc, $(cat "$T/err")"
# --chunks stops the generation early: the file says what was sampled
run "$I" -m "$F" --generate 600 -c 128 --chunks 2 -o "$T/two.gguf"
grep -q "generated: 256 tokens, seed 1, temp 1" "$T/two.gguf" || bad "--chunks 2: dataset not 256 tokens"
"$I" -m "$F" --generate 256 --temp 0 -o "$T/x.dat" 2>"$T/err" && bad "--temp 0 accepted"
grep -q "not a temperature" "$T/err" || bad "--temp 0: $(cat "$T/err")"
"$Q" --imatrix "$T/gen1.gguf" --self-calibrate 256 "$F" "$T/x.gguf" q4_1 2>"$T/err" &&
    bad "--imatrix with --self-calibrate accepted"
grep -q "one or the other" "$T/err" || bad "--imatrix + --self-calibrate: $(cat "$T/err")"
"$Q" --method ref --self-calibrate 256 "$F" "$T/x.gguf" q4_1 2>"$T/err" &&
    bad "--method ref --self-calibrate accepted"
grep -q "self-calibrate needs --method search" "$T/err" || bad "ref + self-calibrate: $(cat "$T/err")"
"$Q" --self-calibrate 256 "$F" "$T/x.gguf" q9_9 2>"$T/err" && bad "an unknown type accepted"
grep -q "unknown type" "$T/err" || bad "unknown type: $(cat "$T/err")"
grep -q "self-calibrate:" "$T/err" && bad "generated before the type was checked"
[ -e "$T/x.gguf" ] && bad "an output was left behind"
[ -e "$T/x.dat" ] && bad "an imatrix was left behind"
exit $fail
