"""A loopback HTTP server for the shard-source tests: serves a folder, answering Range requests, and fails as told.

Usage: faulty_range_server.py ROOT PORT MODE, MODE one of
  fail-first:N   the first N requests get 503 Service Unavailable, the rest are served
  cut-after:N    every answer (to a Range request or for the whole file) promises its bytes, sends N of them and
                 closes the connection
  ignore-range   every request gets the whole file with 200 OK, Range or not
One line per request goes to standard output: "METHOD PATH STATUS".
"""
import http.server
import os
import re
import sys
import threading

root, port, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
kind, _, arg = mode.partition(":")
lock = threading.Lock()
served = [0]


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def answer(self, status, headers, body):
        print(self.command, self.path, status, flush=True)
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        self.end_headers()
        return body

    def do_GET(self):
        with lock:
            served[0] += 1
            n = served[0]
        if kind == "fail-first" and n <= int(arg):
            self.wfile.write(self.answer(503, [("Content-Length", "4")], b"busy"))
            return
        path = os.path.join(root, self.path.lstrip("/"))
        if not os.path.isfile(path):
            self.wfile.write(self.answer(404, [("Content-Length", "4")], b"none"))
            return
        data = open(path, "rb").read()
        m = re.fullmatch(r"bytes=(\d+)-(\d+)", self.headers.get("Range", ""))
        if not m or kind == "ignore-range":
            body = self.answer(200, [("Content-Length", str(len(data)))], data)
            self.wfile.write(body[:int(arg)] if kind == "cut-after" else body)
            self.close_connection = kind == "cut-after"
            return
        first, last = int(m.group(1)), min(int(m.group(2)), len(data) - 1)
        part = data[first:last + 1]
        headers = [("Content-Length", str(len(part))), ("Content-Range", "bytes %d-%d/%d" % (first, last, len(data)))]
        body = self.answer(206, headers, part)
        if kind == "cut-after":
            self.wfile.write(body[:int(arg)])
            self.wfile.flush()
            self.close_connection = True
            return
        self.wfile.write(body)


http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()
