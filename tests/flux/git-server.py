#!/usr/bin/env python3
"""A Git server on loopback for the local control plane: Git's smart HTTP protocol, served by
`git http-backend` (Git's own CGI program) behind Python's threading HTTP server.

source-controller clones and fetches from it as from any Git host; the tests and the demo push to
the bare repositories under ROOT (or write them with plain `git`). Read-only over HTTP: pushes go
through the file system.

Usage: git-server.py ROOT PORT      (serves http://127.0.0.1:PORT/<repo>.git for ROOT/<repo>.git)
"""

import http.server
import os
import shutil
import subprocess
import sys

BACKEND = None


def read_body(handler):
    """The request body, whether sent with Content-Length or chunked."""
    if handler.headers.get("Transfer-Encoding", "").lower() == "chunked":
        body = bytearray()
        while True:
            size = int(handler.rfile.readline().split(b";")[0].strip() or b"0", 16)
            if size == 0:
                handler.rfile.readline()
                return bytes(body)
            body += handler.rfile.read(size)
            handler.rfile.readline()
    length = int(handler.headers.get("Content-Length") or 0)
    return handler.rfile.read(length) if length else b""


class GitHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        self.run_backend(b"")

    def do_POST(self):
        self.run_backend(read_body(self))

    def run_backend(self, body):
        path, _, query = self.path.partition("?")
        if path.startswith("/") and "/." in path:
            self.send_error(404)
            return
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "GIT_PROJECT_ROOT": self.server.root,
            "GIT_HTTP_EXPORT_ALL": "1",
            "REQUEST_METHOD": self.command,
            "PATH_INFO": path,
            "QUERY_STRING": query,
            "CONTENT_TYPE": self.headers.get("Content-Type", ""),
            "CONTENT_LENGTH": str(len(body)),
            "REMOTE_ADDR": self.client_address[0],
            "GIT_PROTOCOL": self.headers.get("Git-Protocol", ""),
            "HTTP_CONTENT_ENCODING": self.headers.get("Content-Encoding", ""),
        }
        result = subprocess.run([BACKEND], input=body, env=env, capture_output=True, check=False)
        head, _, payload = result.stdout.partition(b"\r\n\r\n")
        if not _:
            head, _, payload = result.stdout.partition(b"\n\n")
        status, headers = 200, []
        for line in head.decode("latin-1").splitlines():
            name, _, value = line.partition(":")
            if name.lower() == "status":
                status = int(value.strip().split()[0])
            elif name:
                headers.append((name, value.strip()))
        if result.returncode != 0 and not result.stdout:
            status, payload = 500, result.stderr
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, fmt, *args):
        sys.stderr.write("%s %s\n" % (self.address_string(), fmt % args))


def main():
    global BACKEND
    if len(sys.argv) != 3:
        sys.exit("usage: git-server.py ROOT PORT")
    exec_path = subprocess.run(["git", "--exec-path"], capture_output=True, text=True, check=True)
    BACKEND = os.path.join(exec_path.stdout.strip(), "git-http-backend")
    if not os.access(BACKEND, os.X_OK):
        BACKEND = shutil.which("git-http-backend") or sys.exit("git-http-backend not found")
    server = http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[2])), GitHandler)
    server.root = os.path.abspath(sys.argv[1])
    server.serve_forever()


if __name__ == "__main__":
    main()
