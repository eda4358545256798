#!/usr/bin/env python3
"""A small real HTTP server for tests: serves scripted answers on a loopback port.

Usage: wire_server.py ROUTES.json [PORT]
ROUTES.json maps "METHOD /path?query" (as requested) or "METHOD /path" (any query) to an answer
{"status": 200, "headers": {"Content-Type": "..."}, "body": "...", "body_file": "...",
 "delay": 0.0, "hang": false, "require_token": "..."}; "require_token" answers 401 with
InfluxDB's JSON unless the request carries `Authorization: Token <value>`.
Requests are appended to ROUTES.json.log as JSON lines (method, path, headers).
The chosen port is printed on stdout as the first line; the server exits when stdin closes.
With PORT (a stand-in server run as a unit) it listens there and runs until stopped.
"""
import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

routes_path = sys.argv[1]
with open(routes_path) as f:
    routes = json.load(f)
log_lock = threading.Lock()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def answer(self, method):
        path = self.path.split("?", 1)[0]
        length = int(self.headers.get("Content-Length") or 0)
        body_in = self.rfile.read(length) if length else b""
        with log_lock, open(routes_path + ".log", "a") as log:
            log.write(json.dumps({"method": method, "path": self.path, "headers": dict(self.headers),
                                  "body": body_in.decode("utf-8", "replace")}) + "\n")
        # "METHOD /path?query" (exactly as requested) first, then "METHOD /path".
        route = routes.get(f"{method} {self.path}", routes.get(f"{method} {path}"))
        if route is None:
            route = {"status": 404, "body": "404 page not found\n", "headers": {"Content-Type": "text/plain"}}
        if route.get("hang"):
            time.sleep(30)
            return
        time.sleep(route.get("delay", 0))
        status = route.get("status", 200)
        headers = dict(route.get("headers", {}))
        body = route.get("body", "")
        if "body_file" in route:
            with open(route["body_file"], "rb") as f:
                body = f.read()
        if isinstance(body, str):
            body = body.encode()
        token = route.get("require_token")
        if token is not None and self.headers.get("Authorization") != f"Token {token}":
            status = 401
            headers = {"Content-Type": "application/json; charset=utf-8"}
            body = b'{"code":"unauthorized","message":"unauthorized access"}'
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if method != "HEAD":
            self.wfile.write(body)

    def do_GET(self):
        self.answer("GET")

    def do_HEAD(self):
        self.answer("HEAD")

    def do_POST(self):
        self.answer("POST")


port = int(sys.argv[2]) if len(sys.argv) > 2 else 0
server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
server.daemon_threads = True
print(server.server_address[1], flush=True)
if port:
    server.serve_forever()
else:
    threading.Thread(target=server.serve_forever, daemon=True).start()
    sys.stdin.read()
