"""A2A benchmark: the cost of one A2A message, over real HTTP, with the `a2a-sdk` client.

Run from the repository root:

    python bench/a2a_message.py            # 200 tasks
    python bench/a2a_message.py --quick    # 50 tasks

The site's ASGI application (Django with the A2A app beside it) is served by uvicorn on a
free 127.0.0.1 port in a thread; one `a2a-sdk` JSON-RPC client (its Agent Card resolved
once, before timing) sends each message and waits for the reply. Celery runs in-process
(eager), so a message's time includes the run it causes. Timed, from the call until the
task is back:

1. SendMessage that starts a task: token check, `services.start`, the run up to its
   question, the task rendered with the question as a long-running function call
   (INPUT_REQUIRED).
2. SendMessage with the function_response: `services.decide`, the resume run to the end,
   the task rendered with its output artifact (COMPLETED).
3. GetTask of a completed task.

Services: PostgreSQL at $HITL_BENCH_DATABASE_URL (default
postgres://postgres@127.0.0.1:5432/hitl_a2a_bench; the tables are built from the models in
a scratch database `test_<name>`, dropped afterwards). DEBUG is off, as in production.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

DATABASE_URL = os.environ.get(
    "HITL_BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/hitl_a2a_bench"
)
os.environ.update(
    DJANGO_SETTINGS_MODULE="hitl_site.settings",
    DATABASE_URL=DATABASE_URL,
    CELERY_BROKER_URL="",
    DEBUG="false",
    LOG_LEVEL="WARNING",
    DJANGO_LOG_LEVEL="ERROR",
)

import django  # noqa: E402

django.setup()

import httpx  # noqa: E402
import uvicorn  # noqa: E402
from a2a.client import ClientConfig, create_client  # noqa: E402
from a2a.types import a2a_pb2 as a2a  # noqa: E402
from asgiref.sync import sync_to_async  # noqa: E402
from django.conf import settings  # noqa: E402
from django.contrib.auth.models import Permission  # noqa: E402
from django.db import connection, connections  # noqa: E402
from google.protobuf.json_format import MessageToDict  # noqa: E402
from rest_framework.authtoken.models import Token  # noqa: E402

from bench.common import machine, percentile, postgres_version, progress  # noqa: E402
from workflows.engine import RequestInput, Workflow, node  # noqa: E402
from workflows.models import Invocation  # noqa: E402
from workflows.protocols.a2a_agent.tasks import data_part  # noqa: E402
from workflows.registry import registry  # noqa: E402

WORKFLOW = "a2a_bench_approval"
APPROVAL = {
    "type": "object",
    "properties": {"approved": {"type": "boolean"}},
    "required": ["approved"],
}


@node(name="approve")
def approve(node_input: dict) -> RequestInput:
    return RequestInput(
        message="Approve?",
        payload=node_input,
        response_schema=APPROVAL,
        assignees=[f"user:{node_input['approver']}"],
    )


@node
def done(node_input: Any) -> Any:
    return node_input


registry.register(Workflow(name=WORKFLOW, edges=[("START", approve, done)]))


def bench_user() -> tuple[str, str]:
    user = Invocation._meta.get_field("started_by").related_model.objects.create(
        username=f"bench-{uuid.uuid4().hex[:8]}"
    )
    for codename in ("answer_interrupt", "add_invocation"):
        user.user_permissions.add(
            Permission.objects.get(content_type__app_label="workflows", codename=codename)
        )
    return user.username, Token.objects.create(user=user).key


def serve() -> tuple[str, uvicorn.Server]:
    from hitl_site.asgi import application

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(application, lifespan="off", log_level="warning"))
    threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True).start()
    base = f"http://127.0.0.1:{sock.getsockname()[1]}"
    for _ in range(300):  # until it listens (a benchmark, not a test)
        try:
            httpx.get(base + "/.well-known/agent-card.json")
            return base, server
        except httpx.TransportError:
            time.sleep(0.05)
    raise RuntimeError("uvicorn did not start")


def message(parts: list[a2a.Part], **ids: str) -> a2a.SendMessageRequest:
    sent = a2a.Message(message_id=str(uuid.uuid4()), role=a2a.ROLE_USER, parts=parts, **ids)
    return a2a.SendMessageRequest(message=sent)


async def timed(client: Any, request: a2a.SendMessageRequest) -> tuple[float, a2a.Task]:
    begin = time.perf_counter_ns()
    async for event in client.send_message(request):
        task = event.task
    return (time.perf_counter_ns() - begin) / 1e6, task


async def measure(base: str, username: str, token: str, n: int) -> dict[str, list[float]]:
    config = ClientConfig(
        streaming=False,
        httpx_client=httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60),
    )
    client = await create_client(base, client_config=config)
    samples: dict[str, list[float]] = {"start": [], "answer": [], "get": []}
    start = data_part({"workflow": WORKFLOW, "input": {"approver": username, "amount": 120}})
    for index in range(n + 5):  # the first five warm up
        took, asked = await timed(client, message([start]))
        assert asked.status.state == a2a.TASK_STATE_INPUT_REQUIRED, asked
        call = MessageToDict(asked.status.message.parts[0].data)
        answer = data_part(
            {"id": call["id"], "name": call["name"], "response": {"approved": True}},
            {"adk_type": "function_response"},
        )
        took_answer, done_task = await timed(client, message([answer], task_id=asked.id))
        assert done_task.status.state == a2a.TASK_STATE_COMPLETED, done_task
        begin = time.perf_counter_ns()
        await client.get_task(a2a.GetTaskRequest(id=asked.id))
        took_get = (time.perf_counter_ns() - begin) / 1e6
        if index >= 5:
            samples["start"].append(took)
            samples["answer"].append(took_answer)
            samples["get"].append(took_get)
        if (index + 1) % 50 == 0:
            progress(f"{index + 1}/{n + 5} tasks")
    await client.close()
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="50 tasks")
    n = 50 if parser.parse_args().quick else 200

    connection.settings_dict["TEST"]["MIGRATE"] = False  # tables from the models
    test_name = connection.creation.create_test_db(verbosity=0, autoclobber=True)
    try:
        username, token = bench_user()
        base, server = serve()
        print(machine(postgres_version()))
        print(f"database: {test_name}; Celery eager (runs in the request); {base}")
        samples = asyncio.run(measure(base, username, token, n))
        print(f"\nA2A message over HTTP, a2a-sdk JSON-RPC client: call to reply (ms, {n} each)")
        print(f"{'message':<48} {'p50':>8} {'p90':>8} {'p99':>8} {'max':>8}")
        names = {
            "start": "SendMessage: start -> INPUT_REQUIRED",
            "answer": "SendMessage: function_response -> COMPLETED",
            "get": "GetTask",
        }
        for key, name in names.items():
            values = samples[key]
            print(
                f"{name:<48} {statistics.median(values):8.2f} {percentile(values, 90):8.2f} "
                f"{percentile(values, 99):8.2f} {max(values):8.2f}"
            )
        server.should_exit = True
    finally:
        asyncio.run(sync_to_async(connections.close_all, thread_sensitive=True)())
        connection.creation.destroy_test_db(settings.DATABASES["default"]["NAME"], verbosity=0)


if __name__ == "__main__":
    main()
