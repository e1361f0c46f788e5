"""Google ADK's RemoteA2aAgent driving the project's A2A agent: it starts a workflow, pauses
on the workflow's question (a long-running function call), and resumes when the answer is
sent back as a function_response.

Run it by hand against `make demo` (or any site serving `hitl_site.asgi:application`), in
a virtualenv of its own (google-adk is not a dependency of the project):

    python -m venv .venv-adk
    .venv-adk/bin/pip install "google-adk[a2a]==2.13.0" "a2a-sdk[http-server]==1.3.0"
    TOKEN=$(curl -s -H 'Content-Type: application/json' \\
        -d '{"username": "admin", "password": "admin"}' http://127.0.0.1:8000/api/token/ \\
        | python -c 'import json, sys; print(json.load(sys.stdin)["token"])')
    .venv-adk/bin/python docs/examples/a2a_adk_remote_agent.py \\
        --url http://127.0.0.1:8000 --token "$TOKEN"

No model is called: the RemoteA2aAgent is the root agent, so ADK only relays.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import warnings
from typing import Any

import httpx
from google.adk.agents.remote_a2a_agent import RemoteA2aAgent
from google.adk.runners import Runner
from google.adk.sessions import InMemorySessionService
from google.genai import types

APP, USER = "a2a_example", "example-user"
warnings.filterwarnings("ignore", message=r"\[EXPERIMENTAL\]")  # ADK's A2A support says so


def said(event: Any) -> str:
    parts = event.content.parts if event.content else []
    shown = []
    for part in parts:
        if part.text:
            shown.append(part.text)
        elif part.function_call:
            shown.append(f"function_call {part.function_call.name}({part.function_call.id})")
        elif part.function_response:
            shown.append(f"function_response {part.function_response.response}")
        elif part.inline_data:
            shown.append(part.inline_data.data.decode(errors="replace"))
    return " | ".join(shown)


async def main(url: str, token: str, workflow: str, node_input: Any, answer: Any) -> None:
    agent = RemoteA2aAgent(
        name="hitl_workflows",
        agent_card=f"{url}/.well-known/agent-card.json",
        httpx_client=httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60),
    )
    sessions = InMemorySessionService()
    runner = Runner(app_name=APP, agent=agent, session_service=sessions)
    session = await sessions.create_session(app_name=APP, user_id=USER)

    start = json.dumps({"workflow": workflow, "input": node_input})
    question = None
    async for event in runner.run_async(
        user_id=USER,
        session_id=session.id,
        new_message=types.Content(role="user", parts=[types.Part(text=start)]),
    ):
        print(f"[{event.author}] {said(event)}")
        for call in event.get_function_calls():
            if call.id in (event.long_running_tool_ids or ()):
                question = call
    if question is None:
        raise SystemExit("the remote agent did not pause on a question")
    print(f"\nPaused on {question.name} ({question.id}): {question.args.get('message')}")
    print(f"Its response schema: {json.dumps(question.args.get('response_schema'))}\n")

    reply = types.Part(
        function_response=types.FunctionResponse(
            id=question.id, name=question.name, response=answer
        )
    )
    async for event in runner.run_async(
        user_id=USER,
        session_id=session.id,
        new_message=types.Content(role="user", parts=[reply]),
    ):
        print(f"[{event.author}] {said(event)}")


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
