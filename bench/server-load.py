#!/usr/bin/env python3
"""server-load.py - N concurrent streaming clients against llamachat-server (or any
OpenAI-compatible server): time to first token and throughput per client, and the total.

Usage: bench/server-load.py URL [-n CLIENTS] [-r REQUESTS_PER_CLIENT] [--max-tokens N]
                            [--prompt TEXT] [--api-key-env NAME]
Each client sends its requests one after another (stream: true, temperature 0, usage asked
for) and measures: TTFT = time from sending to the first content delta; tokens/s = completion
tokens (from usage, else deltas) / time from the first delta to the end.  Standard library only.
"""
import argparse, http.client, json, os, statistics, threading, time, urllib.parse


def one(url, body, key):
    u = urllib.parse.urlparse(url)
    c = http.client.HTTPConnection(u.hostname, u.port or 80, timeout=600)
    h = {"Content-Type": "application/json"}
    if key:
        h["Authorization"] = "Bearer " + key
    t0 = time.monotonic()
    c.request("POST", u.path.rstrip("/") + "/v1/chat/completions", json.dumps(body), h)
    r = c.getresponse()
    if r.status != 200:
        raise RuntimeError("HTTP %d: %s" % (r.status, r.read()[:200]))
    first = None
    deltas = 0
    usage = None
    buf = b""
    while True:
        line = r.fp.readline()
        if not line:
            break
        line = line.strip()
        if not line.startswith(b"data:"):
            continue
        data = line[5:].strip()
        if data == b"[DONE]":
            break
        ch = json.loads(data)
        if ch.get("usage"):
            usage = ch["usage"]
        for choice in ch.get("choices", []):
            if choice.get("delta", {}).get("content"):
                deltas += 1
                if first is None:
                    first = time.monotonic()
    t1 = time.monotonic()
    c.close()
    n = usage["completion_tokens"] if usage else deltas
    return (first or t1) - t0, n, t1 - (first or t1), t1 - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("url")
    ap.add_argument("-n", type=int, default=4)
    ap.add_argument("-r", type=int, default=3)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--prompt", default="Once upon a time, in a small village,")
    ap.add_argument("--api-key-env")
    a = ap.parse_args()
    key = os.environ.get(a.api_key_env) if a.api_key_env else None
    results = [[] for _ in range(a.n)]
    errors = []

    def client(i):
        for k in range(a.r):
            body = {"messages": [{"role": "user", "content": a.prompt}], "stream": True,
                    "stream_options": {"include_usage": True}, "temperature": 0,
                    "max_tokens": a.max_tokens, "seed": i * 100 + k}
            try:
                results[i].append(one(a.url, body, key))
            except Exception as e:  # noqa: BLE001 - report and go on
                errors.append(str(e))

    t0 = time.monotonic()
    th = [threading.Thread(target=client, args=(i,)) for i in range(a.n)]
    for t in th:
        t.start()
    for t in th:
        t.join()
    wall = time.monotonic() - t0
    print("clients %d, requests each %d, max_tokens %d" % (a.n, a.r, a.max_tokens))
    print("client  ttft_ms(median)  tok/s(median)  tokens")
    all_ttft, total = [], 0
    for i, rs in enumerate(results):
        if not rs:
            continue
        ttft = [r[0] * 1000 for r in rs]
        tps = [r[1] / r[2] if r[2] > 0 else 0 for r in rs]
        toks = sum(r[1] for r in rs)
        total += toks
        all_ttft += ttft
        print("%6d  %15.1f  %13.1f  %6d" % (i, statistics.median(ttft), statistics.median(tps), toks))
    if all_ttft:
        print("all: %d tokens in %.2f s = %.1f tok/s aggregate; TTFT median %.1f ms, max %.1f ms"
              % (total, wall, total / wall, statistics.median(all_ttft), max(all_ttft)))
    if errors:
        print("errors: %d (first: %s)" % (len(errors), errors[0]))
    return 1 if errors else 0


if __name__ == "__main__":
    raise SystemExit(main())
