"""A webhook receiver on loopback (http.server in a thread) that verifies each request's
Standard Webhooks signature with the `standardwebhooks` package and keeps what it got
(a GET, which a followed redirect would make, is kept apart)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from standardwebhooks import Webhook
from standardwebhooks.webhooks import WebhookVerificationError


@dataclass
class Received:
    headers: dict[str, str]
    body: dict[str, Any]


@dataclass
class Receiver:
    secret: str
    url: str = ""
    # Status codes to answer, in order; 204 once they run out. A 3xx points elsewhere on
    # this server (Location: <url>/moved), where a GET is answered 200 and kept in `gets`.
    statuses: list[int] = field(default_factory=list)
    received: list[Received] = field(default_factory=list)
    gets: list[str] = field(default_factory=list)
    bad_signatures: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def events(self) -> list[str]:
        with self.lock:
            return [r.body["type"] for r in self.received]


@contextmanager
def webhook_receiver(secret: str, statuses: list[int] | None = None) -> Iterator[Receiver]:
    receiver = Receiver(secret=secret, statuses=list(statuses or []))
    verifier = Webhook(secret)

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers["Content-Length"]))
            headers = {name.lower(): value for name, value in self.headers.items()}
            with receiver.lock:
                status = receiver.statuses.pop(0) if receiver.statuses else 204
                try:
                    verifier.verify(raw, headers)
                except WebhookVerificationError as exc:
                    receiver.bad_signatures.append(str(exc))
                    status = 400
                else:
                    if status < 300:
                        receiver.received.append(Received(headers, json.loads(raw)))
            self.send_response(status)
            if 300 <= status < 400:
                self.send_header("Location", f"{receiver.url}/moved")
            self.end_headers()

        def do_GET(self) -> None:
            with receiver.lock:
                receiver.gets.append(self.path)
            self.send_response(200)
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    receiver.url = f"http://127.0.0.1:{server.server_address[1]}/hooks"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
