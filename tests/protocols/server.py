"""A real ASGI server for the protocol tests: `asgi_server()` runs uvicorn (the test
project's ASGI application, tests/project/asgi.py) on a free
127.0.0.1 port in a subprocess, on the test database pytest-django created (so the test
must use committed rows: `transactional_db`), with tests/protocols/server_settings.py;
`open_stream()` reads a live stream from it with the standard library's HTTP client."""

from __future__ import annotations

import http.client
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.integration.worker import PROJECT_ROOT, QUEUE, test_database_url

READY_TIMEOUT = 30.0


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Server:
    def __init__(self, process: subprocess.Popen[bytes], port: int, log: Path) -> None:
        self.process, self.port, self.log_path = process, port, log
        self.base = f"http://127.0.0.1:{port}"

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def connection(self, timeout: float = 30.0) -> http.client.HTTPConnection:
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)


def _wait_ready(server: Server) -> None:
    deadline = time.monotonic() + READY_TIMEOUT
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise RuntimeError(f"uvicorn exited with {server.process.returncode}:\n{server.log()}")
        try:
            with socket.create_connection(("127.0.0.1", server.port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"uvicorn not ready within {READY_TIMEOUT:.0f} s:\n{server.log()}")


@contextmanager
def asgi_server(broker_url: str | None = None, **hitl: Any) -> Iterator[Server]:
    """uvicorn serving hitl_site/asgi.py with the test settings; `hitl`: the stream's
    limits (keepalive_seconds, max_clients) passed through the environment."""
    port = free_port()
    env = {
        **os.environ,
        "DATABASE_URL": test_database_url(),
        "DJANGO_SETTINGS_MODULE": "tests.protocols.server_settings",
        "PYTHONUNBUFFERED": "1",
        **{f"HITL_STREAM_{k.upper()}": str(v) for k, v in hitl.items()},
    }
    env.pop("CELERY_BROKER_URL", None)
    # As in production: the ORM refuses to run in the event loop's thread.
    env.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
    if broker_url:  # tasks the server sends go to the test workers' queue
        env["CELERY_BROKER_URL"] = broker_url
        env["CELERY_TASK_DEFAULT_QUEUE"] = QUEUE
    command = [sys.executable, "-m", "uvicorn", "tests.project.asgi:application"]
    command += ["--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"]
    with tempfile.TemporaryDirectory(prefix="hitl-asgi-") as directory:
        log = Path(directory) / "server.log"
        with log.open("wb") as out:
            process = subprocess.Popen(
                command, cwd=PROJECT_ROOT, env=env, stdout=out, stderr=subprocess.STDOUT
            )
        server = Server(process, port, log)
        try:
            _wait_ready(server)
            yield server
        except BaseException:
            print(f"--- uvicorn log ---\n{server.log()}")
            raise
        finally:
            process.terminate()
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)


class Stream:
    """An open stream: its response, and its text as it arrives."""

    def __init__(self, connection: http.client.HTTPConnection, response: Any) -> None:
        self.connection, self.response = connection, response
        self.status = response.status

    def chunks(self) -> Iterator[str]:
        while True:
            data = self.response.read1(65536)
            if not data:
                return
            yield data.decode()

    def close(self) -> None:
        """Leave as a client does: drop the connection."""
        sock = self.connection.sock
        if sock is not None:
            sock.shutdown(socket.SHUT_RDWR)
        self.connection.close()


@contextmanager
def open_stream(
    server: Server, invocation_id: Any, token: str, last_event_id: str | None = None
) -> Iterator[Stream]:
    connection = server.connection()
    headers = {"Authorization": f"Token {token}", "Accept": "text/event-stream"}
    if last_event_id is not None:
        headers["Last-Event-ID"] = last_event_id
    connection.request("GET", f"/api/invocations/{invocation_id}/stream/", headers=headers)
    stream = Stream(connection, connection.getresponse())
    try:
        yield stream
    finally:
        stream.close()
