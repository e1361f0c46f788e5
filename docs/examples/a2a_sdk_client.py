"""The `a2a-sdk` client driving the project's A2A agent: it reads the Agent Card, starts a
workflow, finds the question the task is waiting on (a long-running function call), and
answers it with a function_response on the same task.

Against `make demo`, with the token of a user who may answer (the demo's admin):

    TOKEN=$(curl -s -H 'Content-Type: application/json' \\
        -d '{"username": "admin", "password": "admin"}' http://127.0.0.1:8000/api/token/ \\
        | python -c 'import json, sys; print(json.load(sys.stdin)["token"])')
    .venv/bin/python docs/examples/a2a_sdk_client.py --url http://127.0.0.1:8000 --token "$TOKEN"
"""

from __future__ import annotations

import argparse
import asyncio
import json
import uuid
from typing import Any

import httpx
from a2a.client import ClientConfig, create_client
from a2a.types import a2a_pb2 as a2a
from google.protobuf.json_format import MessageToDict, ParseDict


def data_part(data: Any, metadata: dict[str, Any] | None = None) -> a2a.Part:
    part = a2a.Part(metadata=metadata or {})
    ParseDict(data, part.data)
    return part


async def send(client: Any, parts: list[a2a.Part], task_id: str = "") -> a2a.Task:
    message = a2a.Message(
        message_id=str(uuid.uuid4()), role=a2a.ROLE_USER, parts=parts, task_id=task_id
    )
    async for event in client.send_message(a2a.SendMessageRequest(message=message)):
        task = event.task
    return task


async def main(url: str, token: str, workflow: str, node_input: Any, answer: Any) -> None:
    config = ClientConfig(
        streaming=False,
        httpx_client=httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60),
    )
    client = await create_client(url, client_config=config)  # reads the Agent Card

    task = await send(client, [data_part({"workflow": workflow, "input": node_input})])
    print(f"task {task.id} (context {task.context_id}): {a2a.TaskState.Name(task.status.state)}")
    for part in task.status.message.parts:
        if part.HasField("data") and part.metadata["adk_type"] == "function_call":
            call = MessageToDict(part.data)
            print(f"  question {call['id']} ({call['name']}): {call['args']['message']}")
            print(f"  answer schema: {json.dumps(call['args']['response_schema'])}")
            reply = {"id": call["id"], "name": call["name"], "response": answer}
            task = await send(
                client, [data_part(reply, {"adk_type": "function_response"})], task.id
            )
    print(f"task {task.id}: {a2a.TaskState.Name(task.status.state)}")
    for artifact in task.artifacts:
        print(f"  {artifact.name}: {json.dumps(MessageToDict(artifact.parts[0].data))}")
    await client.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="http://127.0.0.1:8000")
    parser.add_argument("--token", required=True, help="the API token of a user who may answer")
    parser.add_argument("--workflow", default="expense_approval")
    parser.add_argument("--input", default='{"amount": 250, "employee": "Grace"}')
    parser.add_argument("--answer", default='{"approved": true, "comment": "fine"}')
    args = parser.parse_args()
    asyncio.run(
        main(args.url, args.token, args.workflow, json.loads(args.input), json.loads(args.answer))
    )
