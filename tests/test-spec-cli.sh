#!/bin/sh
# Speculative decoding through the one-shot CLI (--spec lookup, --draft FILE): llama.cpp's greedy
# references (every model of ../shared/reference/greedy, two prompts each, several lengths; for
# --draft the stories260K target with its Q4_1 and Q8_0 ff192 twins as drafts, every prompt)
# give the same ids as without it; a prompt that repeats itself accepts drafts (stderr figures);
# sampling runs speculatively and a seed repeats; a draft of another vocabulary and bad values
# are refused with their messages.
set -u
B=${LC_BUILDDIR:-.}
S=${LC_SHARED:-../shared}
LC="$B/llamachat"
fail=0
check() { # name, got, want
    if [ "$2" = "$3" ]; then echo "ok   $1"; else echo "FAIL $1"; echo "  got:  $2"; echo "  want: $3"; fail=1; fi
}
field() { sed -n "s/^$1: //p" "$2"; }
[ -f "$S/models/stories260K-ff192-q4_1.gguf" ] || { echo "SKIP: no models"; exit 77; }
ERR="$B/wt-spec-cli.$$.err"
trap 'rm -f "$ERR"' EXIT

for ref in "$S"/reference/greedy/*.p0.txt "$S"/reference/greedy/*.p1.txt; do
    model=$(field model "$ref")
    [ -f "$S/models/$model" ] || continue
    prompt=$(field prompt "$ref")
    n=$(field n_predict "$ref")
    want=$(field gen_ids "$ref")
    got=$("$LC" -m "$S/models/$model" -p "$prompt" -n "$n" --temp 0 --print-token-ids -t 2 \
        --spec lookup 2>/dev/null)
    check "spec gen_ids $(basename "$ref")" "$got" "$want"
    # shorter replies: the draft limit at the end of the reply
    for k in 1 2 5; do
        got=$("$LC" -m "$S/models/$model" -p "$prompt" -n "$k" --temp 0 --print-token-ids -t 2 \
            --spec lookup --draft-max 3 2>/dev/null)
        check "spec gen_ids $(basename "$ref") -n $k" "$got" "$(echo "$want" | cut -d' ' -f1-"$k")"
    done
done

# A prompt that repeats: the same ids as plain decoding, and drafts accepted.
P="One two three four five six. One two three four five six. One two three four five six. One two three"
M="$S/models/stories260K-ff192-q4_1.gguf"
for n in 7 64 300; do
    want=$("$LC" -m "$M" -p "$P" -n "$n" --temp 0 --print-token-ids -t 2 2>/dev/null)
    got=$("$LC" -m "$M" -p "$P" -n "$n" --temp 0 --print-token-ids -t 2 --spec lookup 2>"$ERR")
    check "repetitive -n $n: same ids" "$got" "$want"
done
acc=$(sed -n 's/^llamachat: speculative (lookup): 300 tokens in .* \([0-9]*\) accepted .*/\1/p' "$ERR")
check "repetitive: drafts accepted" "$([ "${acc:-0}" -gt 50 ] && echo yes || echo "no: ${acc:-none}")" "yes"

# --spec with a temperature: speculative sampling (spec.h), with its figures
"$LC" -m "$M" -p "$P" -n 64 --temp 0.8 --seed 3 --spec lookup >/dev/null 2>"$ERR"
check "temp: no note" "$(grep -c 'note: --spec' "$ERR")" "0"
check "temp: figures" "$(grep -c '^llamachat: speculative (lookup): 64 tokens in .* drafted in .* batches, .* accepted' "$ERR")" "1"
# the same seed gives the same text again (one random stream)
a=$("$LC" -m "$M" -p "$P" -n 64 --temp 0.8 --seed 3 --spec lookup --print-token-ids 2>/dev/null)
b=$("$LC" -m "$M" -p "$P" -n 64 --temp 0.8 --seed 3 --spec lookup --print-token-ids 2>/dev/null)
check "temp: seeded run repeats" "$([ -n "$a" ] && [ "$a" = "$b" ] && echo yes || echo "no: [$a] [$b]")" "yes"

# --draft: a small model of the same vocabulary guesses; greedy ids are llama.cpp's references
T="$S/models/stories260K.gguf"
for d in stories260K-ff192-q4_1 stories260K-ff192-q8_0; do
    for ref in "$S"/reference/greedy/stories260K.p*.txt; do
        prompt=$(field prompt "$ref")
        n=$(field n_predict "$ref")
        want=$(field gen_ids "$ref")
        got=$("$LC" -m "$T" -p "$prompt" -n "$n" --temp 0 --print-token-ids -t 2 \
            --draft "$S/models/$d.gguf" 2>"$ERR")
        check "draft $d gen_ids $(basename "$ref")" "$got" "$want"
        for k in 1 2 5; do
            got=$("$LC" -m "$T" -p "$prompt" -n "$k" --temp 0 --print-token-ids -t 2 \
                --draft "$S/models/$d.gguf" --draft-max 3 2>/dev/null)
            check "draft $d gen_ids $(basename "$ref") -n $k" "$got" "$(echo "$want" | cut -d' ' -f1-"$k")"
        done
    done
done
# figures: the draft's guesses are counted, and most are accepted (q8_0 of a near twin)
"$LC" -m "$T" -p "$P" -n 100 --temp 0 -t 2 --draft "$S/models/stories260K-ff192-q8_0.gguf" \
    >/dev/null 2>"$ERR"
acc=$(sed -n 's/^llamachat: speculative (draft model): 100 tokens in .* \([0-9]*\) accepted .*/\1/p' "$ERR")
check "draft: guesses accepted" "$([ "${acc:-0}" -gt 50 ] && echo yes || echo "no: ${acc:-none}")" "yes"
# sampling with the draft model: figures, and a seed repeats its text
a=$("$LC" -m "$T" -p "$P" -n 64 --temp 0.8 --seed 9 --print-token-ids -t 2 \
    --draft "$S/models/stories260K-ff192-q4_1.gguf" 2>"$ERR")
check "draft temp: figures" "$(grep -c '^llamachat: speculative (draft model): 64 tokens in .* accepted' "$ERR")" "1"
b=$("$LC" -m "$T" -p "$P" -n 64 --temp 0.8 --seed 9 --print-token-ids -t 2 \
    --draft "$S/models/stories260K-ff192-q4_1.gguf" 2>/dev/null)
check "draft temp: seeded run repeats" "$([ -n "$a" ] && [ "$a" = "$b" ] && echo yes || echo "no")" "yes"
# --draft off: plain decoding, no figures
"$LC" -m "$T" -p "Hi" -n 4 --temp 0 --draft off >/dev/null 2>"$ERR"
check "draft off" "$(grep -c 'speculative' "$ERR")" "0"
# a draft model of another vocabulary is refused, naming both files
D2="$S/models/tinystories-656k/TinyStories-656K-Q4_1.gguf"
if [ -f "$D2" ]; then
    got=$("$LC" -m "$T" -p "Hi" -n 4 --temp 0 --draft "$D2" 2>&1 >/dev/null)
    check "draft: other vocabulary" "$got" "llamachat: the draft model $D2 has a vocabulary of 2048 tokens, the model $T one of 512: a draft model must have the same vocabulary"
    "$LC" -m "$T" -p "Hi" -n 4 --temp 0 --draft "$D2" >/dev/null 2>&1
    check "draft: other vocabulary exit status" "$?" "1"
fi
got=$("$LC" -m "$T" -p "Hi" -n 4 --draft "$B/no-such-draft.gguf" 2>&1 >/dev/null)
check "draft: missing file" "$got" "llamachat: draft model: $B/no-such-draft.gguf: cannot open: No such file or directory"

# bad values
got=$("$LC" -m "$M" -p "Hi" --spec ngram 2>&1 >/dev/null)
check "bad --spec" "$got" "llamachat: --spec: bad value 'ngram' for speculative: expected lookup or off"
got=$("$LC" -m "$M" -p "Hi" --draft-max 0 2>&1 >/dev/null)
check "bad --draft-max" "$got" "llamachat: --draft-max: bad value '0' for draft_max: expected an integer from 1 to 64"
exit $fail
