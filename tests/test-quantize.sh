#!/bin/sh
# test-quantize.sh - llamachat-quantize against llama.cpp's llama-quantize.
#
# Each shared model quantized by llama.cpp is re-made from its unquantized source and must be
# the same file byte for byte (and, to say where if not, the same keys, tensors, types and
# data: tests/gguf-compare).  Then: the FFN-172 fallback, --pure, --leave-output-tensor, the
# requantize guard, bad arguments, and a split round trip.
set -u
B=${LC_BUILDDIR:-.}
S=${LC_SHARED:-../shared}
M=$S/models
Q=$B/llamachat-quantize
C=$B/tests/gguf-compare
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail=0

bad() {
    echo "FAIL: $*"
    fail=1
}

# same SRC TYPE REF: quantize SRC to TYPE, compare with REF
same() {
    if ! "$Q" -t 2 "$M/$1.gguf" "$T/out.gguf" "$2" >"$T/log" 2>&1; then
        bad "llamachat-quantize $1 $2"
        cat "$T/log"
        return
    fi
    if ! "$C" "$T/out.gguf" "$M/$3.gguf"; then
        bad "$1 -> $2: not the same model as $3"
    elif ! cmp "$T/out.gguf" "$M/$3.gguf"; then
        bad "$1 -> $2: same model as $3 but not the same bytes"
    else
        echo "ok: $1 -> $2 is byte-identical to $3"
    fi
}

same stories260K-ff192-f32 q4_1 stories260K-ff192-q4_1
same stories260K-ff192-f32 q4_0 stories260K-ff192-q4_0
same stories260K-ff192-f32 q8_0 stories260K-ff192-q8_0
same stories260K-ff192-f32 f16 stories260K-ff192-f16
same synth-small-f16 q4_1 synth-small-q4_1
same synth-small-f16 q4_0 synth-small-q4_0
same synth-small-f16 q8_0 synth-small-q8_0
same synth-small-f16 q6_k synth-small-q6_k
same synth-small-f16 q5_0 synth-small-q5_0
same synth-small-f16 q5_1 synth-small-q5_1
# issue 13: TinyStories-656K (128-wide rows, tied embeddings: token_embd falls back to Q8_0)
same tinystories-656k/TinyStories-656K.f16 q5_0 tinystories-656k/TinyStories-656K-Q5_0
same tinystories-656k/TinyStories-656K.f16 q5_1 tinystories-656k/TinyStories-656K-Q5_1
same tinystories-656k/TinyStories-656K.f16 q4_0 tinystories-656k/TinyStories-656K-Q4_0
same tinystories-656k/TinyStories-656K.f16 q4_1 tinystories-656k/TinyStories-656K-Q4_1
same tinystories-656k/TinyStories-656K.f16 q8_0 tinystories-656k/TinyStories-656K-Q8_0
# K-quant and IQ4 presets (ggml's _ref quantizers, llama_tensor_get_type's mixes): real Q4_K,
# Q5_K, Q6_K tensors in synth-small; TinyStories-656K's 128-wide rows take the fallbacks
# (Q2_K/Q3_K -> Q4_0, Q4_K -> Q5_0, Q5_K -> Q5_1, tied token_embd Q8_0)
same synth-small-f16 q4_k_m synth-small-q4_k_m
same synth-small-f16 q5_k_m synth-small-q5_k_m
same tinystories-656k/TinyStories-656K.f16 q2_k tinystories-656k/TinyStories-656K-Q2_K
same tinystories-656k/TinyStories-656K.f16 q3_k_m tinystories-656k/TinyStories-656K-Q3_K_M
same tinystories-656k/TinyStories-656K.f16 q4_k_m tinystories-656k/TinyStories-656K-Q4_K_M
same tinystories-656k/TinyStories-656K.f16 q5_k_m tinystories-656k/TinyStories-656K-Q5_K_M
same tinystories-656k/TinyStories-656K.f16 iq4_nl tinystories-656k/TinyStories-656K-IQ4_NL

# 256-wide rows (real Q2_K, Q3_K, IQ4_XS, ... tensors) against llama.cpp 0.7.0's llama-quantize:
# the digests of its files (tests/data/llamacpp-0.7.0/README.md)
D=${LC_SRCDIR:-$(dirname "$0")/..}/tests/data/llamacpp-0.7.0
n_sha=0
while read -r sum preset; do
    if ! "$Q" -t 2 "$M/synth-small-f16.gguf" "$T/k.gguf" "$preset" >"$T/log" 2>&1; then
        bad "llamachat-quantize synth-small-f16 $preset"
        cat "$T/log"
        continue
    fi
    got=$(sha256sum "$T/k.gguf" | cut -d' ' -f1)
    if [ "$got" = "$sum" ]; then
        echo "ok: synth-small-f16 -> $preset has llama.cpp 0.7.0's sha256"
        n_sha=$((n_sha + 1))
    else
        bad "synth-small-f16 -> $preset: sha256 $got, llama.cpp 0.7.0's $sum"
        "$C" --list "$T/k.gguf" | diff "$D/synth-small-$preset.tensors" - | head -20
    fi
done <"$D/synth-small.sha256"
[ "$n_sha" = 7 ] || bad "$n_sha of 7 llama.cpp 0.7.0 digests matched"

# Presets without a llama.cpp file here: the per-tensor types of llama.cpp's mixes on
# synth-small (2 layers, GQA 2, 256-wide rows; output Q6_K)
mix() {
    "$Q" -t 2 "$M/synth-small-f16.gguf" "$T/mix.gguf" "$1" >"$T/log" 2>&1 || { bad "quantize $1"; return; }
    shift
    for want in "$@"; do
        grep -q "^$want " "$T/log" || bad "mix: no '$want' in: $(cat "$T/log")"
    done
}
# 16 tensors quantized: 7 per layer, token_embd (base type: not tied), output.weight
mix q2_k 'q2_K  *9' 'q3_K  *6' 'q6_K  *1'         # attn_v (GQA < 4), ffn_down, attn_output Q3_K
mix q3_k_s 'q3_K  *15' 'q6_K  *1'
mix q3_k_m 'q3_K  *9' 'q4_K  *4' 'q5_K  *2' 'q6_K  *1' # attn_v 0,1 Q5_K; ffn_down attn_output Q4_K
mix q3_k_l 'q3_K  *9' 'q5_K  *6' 'q6_K  *1'
mix q4_k_s 'q4_K  *13' 'q5_K  *2' 'q6_K  *1'        # attn_v 0..3 Q5_K; 2 layers / 8 = no ffn_down
mix q5_k_s 'q5_K  *15' 'q6_K  *1'
mix iq4_xs 'iq4_xs  *15' 'q6_K  *1'                 # GQA < 4: attn_v not bumped
mix iq4_nl 'iq4_nl  *15' 'q6_K  *1'

# The closing table: tensors per type, sizes, bits per weight (synth-small q4_1: 5 F32 norms,
# 15 Q4_1, output Q6_K).
"$Q" -t 1 "$M/synth-small-f16.gguf" "$T/q.gguf" q4_1 >"$T/log" 2>&1 || bad "quantize q4_1"
grep -q '^f32  *5 ' "$T/log" || bad "table: 5 f32 tensors"
grep -q '^q4_1  *15 ' "$T/log" || bad "table: 15 q4_1 tensors"
grep -q '^q6_K  *1 ' "$T/log" || bad "table: 1 q6_K tensor"
grep -q '^total  *21 ' "$T/log" || bad "table: 21 tensors"
cat "$T/log"

# stories260K: FFN 172 is not a multiple of 32: ffn_down stays F16 (with a note), the rest is
# quantized as usual (output Q8_0: 64 columns).
if "$Q" "$M/stories260K.gguf" "$T/s.gguf" q4_1 >"$T/log" 2>&1; then
    "$C" --list "$T/s.gguf" >"$T/list"
    [ "$(grep -c 'ffn_down.weight f16 172x64' "$T/list")" = 5 ] || bad "stories260K: ffn_down F16"
    [ "$(grep -c 'ffn_gate.weight q4_1 64x172' "$T/list")" = 5 ] || bad "stories260K: ffn_gate Q4_1"
    grep -q '^output.weight q8_0 ' "$T/list" || bad "stories260K: output Q8_0"
    grep -q '^token_embd.weight q4_1 ' "$T/list" || bad "stories260K: token_embd Q4_1"
    grep -q 'note: blk.0.ffn_down.weight \[172 x 64\]: row length is not a multiple' "$T/log" ||
        bad "stories260K: no note for ffn_down"
else
    bad "stories260K to q4_1 failed"
    cat "$T/log"
fi

# --pure: output.weight in Q4_1 too; --leave-output-tensor: output.weight copied (F16)
"$Q" --pure "$M/synth-small-f16.gguf" "$T/p.gguf" q4_1 >/dev/null 2>&1 || bad "--pure"
"$C" --list "$T/p.gguf" | grep -q '^output.weight q4_1 256x512' || bad "--pure: output q4_1"
"$Q" --leave-output-tensor "$M/synth-small-f16.gguf" "$T/l.gguf" q4_1 >/dev/null 2>&1 ||
    bad "--leave-output-tensor"
"$C" --list "$T/l.gguf" | grep -q '^output.weight f16 256x512' || bad "--leave-output-tensor: f16"

# requantizing needs --allow-requantize
if "$Q" "$M/synth-small-q4_1.gguf" "$T/r.gguf" q4_0 >"$T/log" 2>&1; then
    bad "requantize without --allow-requantize succeeded"
fi
grep -q "already q4_1.*--allow-requantize" "$T/log" || bad "requantize message: $(cat "$T/log")"
"$Q" --allow-requantize "$M/synth-small-q8_0.gguf" "$T/r.gguf" q4_0 >"$T/log" 2>&1 ||
    bad "--allow-requantize"
grep -q "warning: requantizing from q8_0" "$T/log" || bad "requantize warning"

# bad arguments
"$Q" "$M/synth-small-f16.gguf" "$T/x.gguf" q3_x >"$T/log" 2>&1 && bad "unknown type accepted"
grep -q "unknown type 'q3_x'" "$T/log" || bad "unknown type message"
# a type ggml has and the quantizer does not write: named, not "unknown"
"$Q" "$M/synth-small-f16.gguf" "$T/x.gguf" NVFP4 >"$T/log" 2>&1 && bad "nvfp4 accepted"
grep -q "^llamachat-quantize: cannot write nvfp4 (a ggml type, not one of the presets" "$T/log" || bad "nvfp4 message: $(cat "$T/log")"
"$Q" --split-max-size 12Q "$M/synth-small-f16.gguf" "$T/x.gguf" q4_1 >"$T/log" 2>&1 &&
    bad "bad size accepted"
grep -q "'12Q' is not a size" "$T/log" || bad "bad size message"
"$Q" "$T/nonexistent.gguf" "$T/x.gguf" q4_1 >"$T/log" 2>&1 && bad "missing input accepted"
grep -q "nonexistent.gguf" "$T/log" || bad "missing input message"

# split: parts of at most 300 kB of tensor data; together the same model as the single file
if "$Q" --split-max-size 300K "$M/synth-small-f16.gguf" "$T/sp.gguf" q4_1 >"$T/log" 2>&1; then
    n=$(ls "$T"/sp-000*-of-0000*.gguf | wc -l)
    [ "$n" -ge 3 ] || bad "split: $n parts"
    first=$(ls "$T"/sp-00001-of-0000*.gguf)
    "$C" "$first" "$M/synth-small-q4_1.gguf" || bad "split model differs from the single file"
    echo "ok: split into $n parts, same model"
else
    bad "split"
    cat "$T/log"
fi
# a split input: synth-small F16 split into parts, then quantized from its first part, gives
# llama.cpp's file byte for byte (split keys dropped, all parts read)
if "$Q" --split-max-size 1M "$M/synth-small-f16.gguf" "$T/in.gguf" f16 >/dev/null 2>&1; then
    first=$(ls "$T"/in-00001-of-0000*.gguf)
    "$Q" "$first" "$T/from-split.gguf" q4_1 >"$T/log" 2>&1 || bad "quantize a split input"
    cmp "$T/from-split.gguf" "$M/synth-small-q4_1.gguf" || bad "split input: not llama.cpp's file"
    "$Q" --stats "$first" -t 2 | grep -q '^blk.1.ffn_up.weight ' || bad "--stats of a split input"
else
    bad "split f16"
fi

# --stats: the q4_0 / q4_1 / q8_0 columns must be the error of llama.cpp's own files against
# the source (gguf-compare --rmse dequantizes both), tensor by tensor.
if "$Q" --stats "$M/stories260K-ff192-f32.gguf" -t 2 >"$T/stats" 2>&1; then
    cat "$T/stats"
    for k in q4_0:3 q4_1:5 q8_0:7; do
        ty=${k%:*}
        col=${k#*:}
        "$C" --rmse "$M/stories260K-ff192-f32.gguf" "$M/stories260K-ff192-$ty.gguf" >"$T/rmse"
        "$C" --list "$M/stories260K-ff192-$ty.gguf" | awk -v t="$ty" '$2 == t {print $1}' >"$T/names"
        [ "$(wc -l <"$T/names")" -ge 36 ] || bad "stats: too few $ty tensors"
        while read -r name; do
            want=$(awk -v n="$name" '$1 == n {print $2, $3}' "$T/rmse")
            got=$(awk -v n="$name" -v c="$col" '$1 == n {print $c, $(c + 1)}' "$T/stats")
            [ -n "$want" ] && [ "$want" = "$got" ] || bad "stats $ty $name: '$got', llama.cpp's file: '$want'"
        done <"$T/names"
    done
    grep -q '^total ' "$T/stats" || bad "stats: no total"
else
    bad "--stats"
    cat "$T/stats"
fi
exit $fail
