"""A real HTTP receiver on loopback for webhook tests: it records every request and answers
with the statuses it is told (then 200)."""

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Receiver:
    def __init__(self, statuses=()):
        self.statuses = list(statuses)
        self.requests: list[tuple[dict, bytes, int]] = []
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                with receiver.lock:
                    status = receiver.statuses.pop(0) if receiver.statuses else 200
                    receiver.requests.append(({k.lower(): v for k, v in self.headers.items()},
                                              body, status))  # fmt: skip
                self.send_response(status)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/hooks"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()

    def accepted(self):
        """(headers, body) of the requests answered 2xx, in arrival order."""
        with self.lock:
            return [(h, b) for h, b, status in self.requests if 200 <= status < 300]
