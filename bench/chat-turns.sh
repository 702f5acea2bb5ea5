#!/bin/sh
# bench/chat-turns.sh - chat turn latency as the context fills, with the context shift and
# without it (LLAMACHAT_NO_SHIFT=1), side by side in one run, alternating.
#   bench/chat-turns.sh [N_CTX] [TURNS] [THREADS]      (from the build tree)
# Model: a random-weight llama of 512 x 8 layers, Q4_1, 32000-token vocab (llamachat-synth).
set -eu
N_CTX=${1:-512}; TURNS=${2:-40}; THREADS=${3:-2}
make -s llamachat-chat-turns llamachat-synth
M=${TMPDIR:-/tmp}/lc-chat-turns-model.gguf
[ -f "$M" ] || ./llamachat-synth -q -o "$M" --n-embd 512 --n-layer 8 --n-head 8 --n-ff 1536 \
    --n-vocab 32000 --type q4_1 --ctx 2048
for round in 1 2; do
    echo "== round $round: context shift"
    ./llamachat-chat-turns "$M" "$N_CTX" "$TURNS" 24 "$THREADS" | tail -2
    echo "== round $round: LLAMACHAT_NO_SHIFT=1 (re-evaluate the kept history)"
    LLAMACHAT_NO_SHIFT=1 ./llamachat-chat-turns "$M" "$N_CTX" "$TURNS" 24 "$THREADS" | tail -2
done
