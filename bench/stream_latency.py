"""The live stream under one uvicorn process on PostgreSQL (issue 25): the delay from a
commit to its event reaching a client, with 1 and with 200 open streams, and how many
open streams one ASGI process holds.

Run from the repository root:

    python bench/stream_latency.py                      # 1 and 200 streams, up to 2,000 held
    python bench/stream_latency.py --commits 100 --hold 1000 4000 --step 1000

What it does: builds a scratch database with the migrations (so the NOTIFY triggers are
there: $HITL_BENCH_STREAM_DATABASE_URL, default
postgres://postgres@127.0.0.1:5432/hitl_bench_stream, dropped and created anew), one
superuser with an API token and an invocation per stream, WAITING. It starts one uvicorn
process (hitl_site's settings, DEBUG off, STREAM_MAX_CLIENTS lifted) and opens the streams
from asyncio clients in this process. A commit is one transaction that inserts a session
event (what a node's step writes; the trigger sends the NOTIFY); the delay runs from that
transaction's COMMIT returning to the client reading the event's `id:` line. The commits
are one at a time, each after the previous one arrived:

- 1 stream: commits to its invocation;
- 200 streams, one invocation each: commits to them in turn (one stream woken per commit);
- 200 streams on one invocation: every commit reaches all 200 (each delivery a sample).

Then it opens streams in steps up to each `--hold` count, and at each step gives the
process's resident memory, its threads, the database connections it holds, and the delay
of one commit to one of them. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.common import build_database, machine, percentile, progress  # noqa: E402

DATABASE_URL = os.environ.get(
    "HITL_BENCH_STREAM_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/hitl_bench_stream"
)
SETTINGS = """from hitl_site.settings import *  # noqa: F403
HITL = {**HITL, "STREAM_MAX_CLIENTS": 1_000_000}
"""
EVENT_ID = re.compile(rb"id: (\d+)\n")
OPEN_AT_ONCE = 20


def setup_django() -> None:
    os.environ["DATABASE_URL"] = DATABASE_URL
    os.environ["DEBUG"] = "false"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hitl_site.settings")
    import django

    django.setup()


def seed(count: int) -> tuple[str, list[str]]:
    """A superuser's API token and `count` waiting invocations."""
    from django.contrib.auth.models import User
    from rest_framework.authtoken.models import Token

    from workflows.models import Invocation, Session

    user = User.objects.create_superuser("bench", password="bench")
    session = Session.objects.create(created_by=user)
    rows = [
        Invocation(
            id=uuid.uuid4(),
            session=session,
            workflow_name="expense_approval",
            workflow_version="v1",
            status="WAITING",
            started_by=user,
        )
        for _ in range(count)
    ]
    Invocation.objects.bulk_create(rows)
    return Token.objects.create(user=user).key, [str(r.id) for r in rows]


def commit_event(invocation_id: str) -> tuple[int, float]:
    """Insert a session event in a transaction of its own: its id, and when COMMIT returned."""
    from django.db import transaction

    from workflows.models import SessionEvent

    with transaction.atomic():
        event = SessionEvent.objects.create(
            invocation_id=invocation_id, author="bench", path="bench@1/step@1", timestamp=0.0
        )
    return event.pk, time.perf_counter()


class Clients:
    """Stream clients on an event loop of their own; `arrived[(stream, id)]` is when a
    stream read the event's id line."""

    def __init__(self, port: int, token: str) -> None:
        self.port, self.token = port, token
        self.arrived: dict[tuple[int, int], float] = {}
        self.opened = 0
        self.failed: list[str] = []
        self.running: list[Any] = []
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.changed = threading.Condition()

    def open(self, invocation_ids: list[str], first: int) -> None:
        """Open one stream per id (numbered from `first`), OPEN_AT_ONCE at a time (each
        request's view runs in a thread of its own, with a database connection until the
        stream starts); returns once all answer."""
        for start in range(0, len(invocation_ids), OPEN_AT_ONCE):
            self._open(invocation_ids[start : start + OPEN_AT_ONCE], first + start)

    def _open(self, invocation_ids: list[str], first: int) -> None:
        futures = [
            asyncio.run_coroutine_threadsafe(self._stream(first + n, inv), self.loop)
            for n, inv in enumerate(invocation_ids)
        ]
        self.running += futures  # the loop keeps only weak references to its tasks
        with self.changed:
            self.changed.wait_for(lambda: self.opened + len(self.failed) >= first + len(futures))
        if self.failed:
            raise RuntimeError(f"{len(self.failed)} streams failed: {self.failed[0]}")

    async def _stream(self, number: int, invocation_id: str) -> None:
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", self.port, limit=2**20)
            writer.write(
                f"GET /api/invocations/{invocation_id}/stream/ HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                f"Authorization: Token {self.token}\r\nAccept: text/event-stream\r\n\r\n".encode()
            )
            head = await reader.readuntil(b"\r\n\r\n")
            if not head.startswith(b"HTTP/1.1 200"):
                raise RuntimeError(head.split(b"\r\n")[0].decode())
        except Exception as exc:
            with self.changed:
                self.failed.append(f"{type(exc).__name__}: {exc}")
                self.changed.notify_all()
            return
        with self.changed:
            self.opened += 1
            self.changed.notify_all()
        pending = b""
        while data := await reader.read(65536):
            now = time.perf_counter()
            # An id line may come in two reads: look at whole lines only.
            whole, _, pending = (pending + data).rpartition(b"\n")
            ids = EVENT_ID.findall(whole + b"\n")
            if ids:
                with self.changed:
                    for found in ids:
                        self.arrived[(number, int(found))] = now
                    self.changed.notify_all()

    def wait(self, streams: list[int], event_id: int, timeout: float = 30.0) -> list[float]:
        keys = [(s, event_id) for s in streams]
        with self.changed:
            if not self.changed.wait_for(lambda: all(k in self.arrived for k in keys), timeout):
                raise TimeoutError(f"event {event_id} did not reach every stream")
            return [self.arrived[k] for k in keys]


def server(port: int, directory: str) -> subprocess.Popen[bytes]:
    Path(directory, "bench_stream_settings.py").write_text(SETTINGS)
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "bench_stream_settings",
        "PYTHONPATH": os.pathsep.join([directory, str(ROOT)]),
    }
    command = [sys.executable, "-m", "uvicorn", "hitl_site.asgi:application"]
    command += ["--port", str(port), "--log-level", "warning", "--timeout-keep-alive", "600"]
    process = subprocess.Popen(command, cwd=ROOT, env=env)
    import socket

    for _ in range(300):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return process
        except OSError:
            time.sleep(0.1)
    raise RuntimeError("uvicorn did not start")


def delays(clients: Clients, watched: list[tuple[list[int], str]], commits: int) -> list[float]:
    """Commit to each watched invocation in turn; every delivery's delay, in ms."""
    samples = []
    for n in range(commits):
        streams, invocation_id = watched[n % len(watched)]
        event_id, committed = commit_event(invocation_id)
        samples += [(t - committed) * 1000 for t in clients.wait(streams, event_id)]
    return samples


def process_facts(pid: int) -> tuple[float, int]:
    status = Path(f"/proc/{pid}/status").read_text()
    rss = int(re.search(r"VmRSS:\s+(\d+)", status)[1]) / 1024  # type: ignore[index]
    threads = int(re.search(r"Threads:\s+(\d+)", status)[1])  # type: ignore[index]
    return rss, threads


def connections() -> int:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND pid <> pg_backend_pid()"
        )
        return cursor.fetchone()[0]


def row(name: str, samples: list[float]) -> str:
    return (
        f"| {name} | {len(samples)} | {percentile(samples, 50):.1f} | "
        f"{percentile(samples, 99):.1f} | {max(samples):.1f} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--commits", type=int, default=200)
    parser.add_argument("--hold", type=int, nargs="+", default=[500, 1000, 2000])
    parser.add_argument("--port", type=int, default=18791)
    args = parser.parse_args()
    setup_django()
    build_database(migrate=True)
    most = max([*args.hold, 401])
    token, invocations = seed(most)
    progress(f"seeded {most} invocations; starting uvicorn")
    with tempfile.TemporaryDirectory(prefix="hitl-bench-stream-") as directory:
        uvicorn = server(args.port, directory)
        try:
            clients = Clients(args.port, token)
            results = []
            clients.open(invocations[:1], 0)
            delays(clients, [([0], invocations[0])], 10)  # warm-up
            results.append(row("1 stream", delays(clients, [([0], invocations[0])], args.commits)))
            clients.open(invocations[1:200], 1)
            own = [([n], invocations[n]) for n in range(200)]
            results.append(
                row("200 streams, one invocation each", delays(clients, own, args.commits))
            )
            clients.open([invocations[200]] * 200, 200)
            shared = [(list(range(200, 400)), invocations[200])]
            results.append(
                row("200 streams on one invocation (each delivery)", delays(clients, shared, 50))
            )
            held = []
            opened = 400
            for target in sorted(args.hold):
                if target > opened:
                    clients.open(invocations[opened:target], opened)
                    opened = target
                one = delays(clients, [([opened - 1], invocations[opened - 1])], 20)
                rss, threads = process_facts(uvicorn.pid)
                held.append(
                    f"| {opened} | {rss:.0f} | {threads} | {connections()} | "
                    f"{percentile(one, 50):.1f} |"
                )
                progress(f"holding {opened} streams")
        finally:
            uvicorn.terminate()
            try:
                uvicorn.wait(10)
            except subprocess.TimeoutExpired:  # streams still open: no graceful end
                uvicorn.kill()
                uvicorn.wait(10)
    print(machine())
    print()
    print("| streams | delays | median ms | p99 ms | max ms |")
    print("|---|---|---|---|---|")
    print("\n".join(results))
    print()
    print("| open streams | server RSS MB | server threads | DB connections | delay median ms |")
    print("|---|---|---|---|---|")
    print("\n".join(held))


if __name__ == "__main__":
    main()
