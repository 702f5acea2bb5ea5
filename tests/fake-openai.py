#!/usr/bin/env python3
"""fake-openai.py - a misbehaving OpenAI-compatible server for the remote client's tests.

Usage: fake-openai.py PORTFILE [SSEDIR]   (listens on 127.0.0.1, any free port, written to
PORTFILE).  The first path element picks the behaviour, the rest is the API path, so that the
client's URL is http://127.0.0.1:PORT/MODE:

  ok       a normal short stream            401   401 that echoes the key it was sent
  429      429 with Retry-After: 7          500   500 with an error message
  404      404 for chat (model unknown)     stall role delta, then silence
  cut      two content deltas, then the connection closes without [DONE]
  fix-NAME replays SSEDIR/NAME.sse as the body
GET /MODE/v1/models answers a list for every mode but 401; GET /fix-NAME/props answers
SSEDIR/NAME.props.json (llama-server's /props) when there is one, else 404 as other servers do.  Every request body is appended,
one line of JSON each, to PORTFILE.requests.
"""
import http.server, json, os, socketserver, sys, time

portfile = sys.argv[1]
ssedir = sys.argv[2] if len(sys.argv) > 2 else "."


def chunk(content=None, role=None, finish=None):
    d = {}
    if role:
        d["role"] = role
    if content is not None:
        d["content"] = content
    return ("data: " + json.dumps({"id": "x", "object": "chat.completion.chunk", "model": "fake",
            "choices": [{"index": 0, "delta": d, "finish_reason": finish}]}) + "\n\n").encode()


class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def send(self, code, obj, extra=()):
        b = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(b)))
        for k, v in extra:
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(b)

    def mode(self):
        parts = self.path.split("/", 2)
        return parts[1] if len(parts) > 1 else ""

    def do_GET(self):
        m = self.mode()
        if m == "401":
            return self.send(401, {"error": {"message": "Incorrect API key provided: "
                                   + self.headers.get("Authorization", "")}})
        if self.path.endswith("/props"):   # llama-server's: fix-NAME serves NAME.props.json
            name = os.path.join(ssedir, m[4:] + ".props.json") if m.startswith("fix-") else ""
            if name and os.path.exists(name):
                with open(name) as f:
                    return self.send(200, json.load(f))
            return self.send(404, {"error": {"message": "File Not Found"}})
        self.send(200, {"object": "list", "data": [{"id": "fake-model", "object": "model"},
                                                    {"id": "other-model", "object": "model"}]})

    def stream_head(self):
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()

    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0"))
        body = self.rfile.read(n)
        with open(portfile + ".requests", "ab") as f:
            f.write(body + b"\n")
        m = self.mode()
        if m == "401":
            return self.send(401, {"error": {"message": "Incorrect API key provided: "
                                   + self.headers.get("Authorization", "")}})
        if m == "429":
            return self.send(429, {"error": {"message": "Rate limit reached"}}, [("Retry-After", "7")])
        if m == "500":
            return self.send(500, {"error": {"message": "the model crashed"}})
        if m == "404":
            return self.send(404, {"error": {"message": "model 'fake-model' not found"}})
        self.close_connection = True
        self.stream_head()
        if m.startswith("fix-"):
            with open(os.path.join(ssedir, m[4:] + ".sse"), "rb") as f:
                self.wfile.write(f.read())
            return
        self.wfile.write(chunk("", role="assistant"))
        self.wfile.flush()
        if m == "stall":
            time.sleep(60)
            return
        self.wfile.write(chunk("Hello"))
        self.wfile.write(chunk(" there"))
        self.wfile.flush()
        if m == "cut":
            time.sleep(0.2)
            return
        self.wfile.write(chunk(finish="stop"))
        self.wfile.write(b"data: [DONE]\n\n")


class S(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True


srv = S(("127.0.0.1", 0), H)
with open(portfile + ".tmp", "w") as f:
    f.write(str(srv.server_address[1]))
os.rename(portfile + ".tmp", portfile)
srv.serve_forever()
