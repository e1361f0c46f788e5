"""The cost of one MCP round trip: the `mcp` SDK's client against the server at `mcp/`,
over HTTP (uvicorn serving hitl_site's ASGI app in a process of its own).

Run from the repository root:

    python bench/mcp_round_trip.py                 # 200 invocations, SQLite
    python bench/mcp_round_trip.py --rounds 50
    python bench/mcp_round_trip.py --database-url postgres://postgres@127.0.0.1:5432/hitl_bench_mcp

What is timed, each from the call until its answer is back in the client (protocol
2026-07-28, JSON answers, one connection kept by the client):

1. `tools/list`: the floor of a call: HTTP, the bearer token looked up, JSON-RPC.
2. start: `tools/call start_expense_approval` with an expense its manager must approve,
   until the `input_required` result: the invocation started, its run (Celery eager, in
   the server's process, as in `make demo`) stopped on the question, the envelope, the
   elicitation form and the signed requestState.
3. answer: the retried call with the `accept` and the requestState, until the final
   result: the state verified and taken, `services.decide`, the resumed run to the end,
   the result read.

A round trip of the protocol is 2 or 3 (each asks or answers one question). The database
is a scratch SQLite file (or, with --database-url, a PostgreSQL database dropped and made
anew); the server logs warnings only. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.common import machine, percentile, progress  # noqa: E402

EXPENSE = {"employee": "Ada", "amount": 240.0, "purpose": "a train ticket"}


def environment(database_url: str | None, sqlite_path: str) -> dict[str, str]:
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "hitl_site.settings",
        "DEBUG": "false",
        "ALLOWED_HOSTS": "127.0.0.1",
        "LOG_LEVEL": "WARNING",
        "DJANGO_LOG_LEVEL": "ERROR",
        "SQLITE_PATH": sqlite_path,
    }
    env.pop("CELERY_BROKER_URL", None)  # eager: the run happens in the server's process
    env.pop("DATABASE_URL", None)
    if database_url:
        env["DATABASE_URL"] = database_url
    return env


def prepare(env: dict[str, str], database_url: str | None) -> str:
    """A migrated database with a superuser among the managers; returns their API token."""
    if database_url:
        name = database_url.rsplit("/", 1)[1]
        admin = database_url.rsplit("/", 1)[0] + "/postgres"
        for statement in (f"DROP DATABASE IF EXISTS {name}", f"CREATE DATABASE {name}"):
            subprocess.run(["psql", admin, "-qc", statement], check=True)
    manage = [sys.executable, str(ROOT / "manage.py")]
    subprocess.run([*manage, "migrate", "-v0"], env=env, check=True, cwd=ROOT)
    create = (
        "from django.contrib.auth import get_user_model;"
        "from django.contrib.auth.models import Group;"
        "from rest_framework.authtoken.models import Token;"
        "u = get_user_model().objects.create_superuser('bench', 'bench@example.com', 'bench');"
        "u.groups.add(Group.objects.get_or_create(name='managers')[0]);"  # who answers
        "print(Token.objects.create(user=u).key)"
    )
    shell = subprocess.run(
        [*manage, "shell", "-c", create],
        env=env,
        check=True,
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    return shell.stdout.strip().splitlines()[-1]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def serve(env: dict[str, str], port: int) -> subprocess.Popen[bytes]:
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "uvicorn",
            "hitl_site.asgi:application",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--log-level",
            "warning",
            "--no-access-log",
        ],
        env=env,
        cwd=ROOT,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return server
        time.sleep(0.1)
    server.kill()
    raise RuntimeError("uvicorn did not start")


async def measure(url: str, token: str, rounds: int) -> dict[str, list[float]]:
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    samples: dict[str, list[float]] = {"tools/list": [], "start": [], "answer": []}
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60)
    transport = streamable_http_client(url, http_client=http)

    async def shows_forms(context: object, params: object) -> object:
        raise AssertionError("the rounds are answered by the loop below")

    options = {"mode": "2026-07-28", "cache": None, "elicitation_callback": shows_forms}
    async with http, Client(transport, **options) as client:
        session = client.session
        for number in range(rounds + 1):  # the first one warms up
            began = time.perf_counter()
            await session.list_tools()
            listed = time.perf_counter()
            asked = await session.call_tool(
                "start_expense_approval", EXPENSE, allow_input_required=True
            )
            started = time.perf_counter()
            (question,) = asked.input_requests
            answer = {question: {"action": "accept", "content": {"approved": True}}}
            done = await session.call_tool(
                "start_expense_approval",
                EXPENSE,
                input_responses=answer,
                request_state=asked.request_state,
                allow_input_required=True,
            )
            answered = time.perf_counter()
            assert done.structured_content["status"] == "COMPLETED", done
            if number:
                samples["tools/list"].append(listed - began)
                samples["start"].append(started - listed)
                samples["answer"].append(answered - started)
            if number % 50 == 0:
                progress(f"{number}/{rounds}")
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=200, help="invocations started and answered")
    parser.add_argument("--database-url", help="PostgreSQL (dropped and made anew); default SQLite")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        env = environment(options.database_url, str(Path(scratch) / "bench.sqlite3"))
        progress("migrating")
        token = prepare(env, options.database_url)
        port = free_port()
        server = serve(env, port)
        try:
            samples = asyncio.run(measure(f"http://127.0.0.1:{port}/mcp/", token, options.rounds))
        finally:
            server.terminate()
            server.wait(timeout=10)
    database = "PostgreSQL" if options.database_url else "SQLite"
    print(machine(f"database: {database}", f"load average: {os.getloadavg()[0]:.2f}"))
    print(f"\nMCP round trips over HTTP, {options.rounds} invocations (ms)\n")
    print(f"| {'call':<11} | {'median':>7} | {'p99':>7} | {'fastest':>7} |")
    print(f"|{'-' * 13}|{'-' * 9}|{'-' * 9}|{'-' * 9}|")
    for name, values in samples.items():
        ms = [v * 1000 for v in values]
        median, p99 = statistics.median(ms), percentile(ms, 99)
        print(f"| {name:<11} | {median:7.1f} | {p99:7.1f} | {min(ms):7.1f} |")


if __name__ == "__main__":
    main()
