#!/usr/bin/env python3
"""markov-gguf.py - write a tiny llama GGUF whose greedy output is a chosen Markov chain.

usage: markov-gguf.py OUT.gguf VOCAB.gguf 'JSON'
JSON: {"trans": {FROM: TO, ...}, "default": ID, "extra": [[TEXT, TYPE], ...],
       "kv": {KEY: [GGUF_TYPE, VALUE]}, "name": NAME}
FROM/TO are token ids or exact token texts (after "extra" tokens are appended to the vocab).

One layer, n_embd 64, attention and FFN weights all zero, so the residual stream is the token
embedding: token t's embedding is 1000 on dimension state(t) (1 + its rank among the FROM
tokens, 0 for the rest) and output.weight maps state(FROM) to TO, dimension 0 to "default".
Greedy decoding then follows the table exactly: tests can make a model emit any token sequence
(byte tokens, a 1 KiB token, special tokens as text) and check what llamachat shows, saves and
feeds back.  The tokenizer.* keys come from VOCAB.gguf (GGUF v3, as the GGUF spec lays it out).
"""
import json
import math
import struct
import sys

T_U32, T_I32, T_F32, T_STR, T_ARR = 4, 5, 6, 8, 9
FMT = {0: 'B', 1: 'b', 2: 'H', 3: 'h', 4: 'I', 5: 'i', 6: 'f', 7: '?', 10: 'Q', 11: 'q', 12: 'd'}


def read_kv(path):
    d = open(path, 'rb').read()
    p = [4]

    def u(f):
        v = struct.unpack_from('<' + f, d, p[0])[0]
        p[0] += struct.calcsize(f)
        return v

    def s():
        n = u('Q')
        v = d[p[0]:p[0] + n]
        p[0] += n
        return v

    def val(t):
        if t == T_STR:
            return s()
        if t == T_ARR:
            et = u('I')
            n = u('Q')
            return (et, [val(et) for _ in range(n)])
        return u(FMT[t])

    u('I')
    u('Q')
    nkv = u('Q')
    kv = {}
    for _ in range(nkv):
        k = s().decode()
        t = u('I')
        kv[k] = (t, val(t))
    return kv


def S(b):
    b = b.encode() if isinstance(b, str) else b
    return struct.pack('<Q', len(b)) + b


def V(t, v):
    if t == T_STR:
        return S(v)
    if t == T_ARR:
        et, a = v
        return struct.pack('<IQ', et, len(a)) + b''.join(V(et, x) for x in a)
    return struct.pack('<' + FMT[t], v)


def KV(k, t, v):
    return S(k) + struct.pack('<I', t) + V(t, v)


def main():
    out, vocab, cfg = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    kv = {k: v for k, v in read_kv(vocab).items() if k.startswith('tokenizer.')}
    toks = list(kv['tokenizer.ggml.tokens'][1][1])
    types = list(kv['tokenizer.ggml.token_type'][1][1])
    sc = list(kv['tokenizer.ggml.scores'][1][1]) if 'tokenizer.ggml.scores' in kv else None
    for t, ty in cfg.get('extra', []):
        toks.append(t.encode())
        types.append(ty)
        if sc is not None:
            sc.append(0.0)
    kv['tokenizer.ggml.tokens'] = (T_ARR, (T_STR, toks))
    kv['tokenizer.ggml.token_type'] = (T_ARR, (T_I32, types))
    if sc is not None:
        kv['tokenizer.ggml.scores'] = (T_ARR, (T_F32, sc))
    for k, (t, v) in cfg.get('kv', {}).items():
        kv[k] = (t, v.encode() if t == T_STR else v)
    E, NV = 64, len(toks)

    def tid(x):
        x = str(x)
        return int(x) if x.isdigit() else toks.index(x.encode())

    trans = {tid(a): tid(b) for a, b in cfg['trans'].items()}
    state = {t: i + 1 for i, t in enumerate(sorted(trans))}
    assert len(state) < E
    emb = bytearray(2 * E * NV)
    outw = bytearray(2 * E * NV)
    for t in range(NV):
        struct.pack_into('<e', emb, 2 * (t * E + state.get(t, 0)), 1000.0)
    g = 20.0 / math.sqrt(E)
    for a, b in trans.items():
        struct.pack_into('<e', outw, 2 * (b * E + state[a]), g)
    if 'default' in cfg:
        struct.pack_into('<e', outw, 2 * (tid(cfg['default']) * E), g)

    def f32(n, x):
        return struct.pack('<%df' % n, *([x] * n))

    tens = [('token_embd.weight', [E, NV], 1, bytes(emb)), ('output_norm.weight', [E], 0, f32(E, 1.0)),
            ('output.weight', [E, NV], 1, bytes(outw))]
    for n in ('attn_norm', 'ffn_norm'):
        tens.append(('blk.0.%s.weight' % n, [E], 0, f32(E, 1.0)))
    for n in ('attn_q', 'attn_k', 'attn_v', 'attn_output', 'ffn_gate', 'ffn_up', 'ffn_down'):
        tens.append(('blk.0.%s.weight' % n, [E, E], 0, f32(E * E, 0.0)))
    hp = [('general.architecture', T_STR, 'llama'), ('general.name', T_STR, cfg.get('name', 'markov')),
          ('llama.context_length', T_U32, cfg.get('ctx', 2048)), ('llama.embedding_length', T_U32, E),
          ('llama.block_count', T_U32, 1), ('llama.feed_forward_length', T_U32, E),
          ('llama.attention.head_count', T_U32, 1), ('llama.attention.head_count_kv', T_U32, 1),
          ('llama.rope.dimension_count', T_U32, E), ('llama.attention.layer_norm_rms_epsilon', T_F32, 1e-5)]
    body = b''.join(KV(k, t, v) for k, t, v in hp) + b''.join(KV(k, t, v) for k, (t, v) in kv.items())
    b = bytearray(b'GGUF' + struct.pack('<IQQ', 3, len(tens), len(hp) + len(kv)) + body)
    off = 0
    for nm, dims, gt, raw in tens:
        b += S(nm) + struct.pack('<I', len(dims)) + b''.join(struct.pack('<Q', x) for x in dims)
        b += struct.pack('<IQ', gt, off)
        off += (len(raw) + 31) // 32 * 32
    b += b'\0' * (-len(b) % 32)
    for nm, dims, gt, raw in tens:
        b += raw + b'\0' * (-len(raw) % 32)
    open(out, 'wb').write(b)


if __name__ == '__main__':
    main()
