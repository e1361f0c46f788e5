"""Drive a workflow from the `mcp` SDK's client: start it, answer its questions as they come
(elicitation forms), print the outcome.

    python docs/mcp_client.py http://127.0.0.1:8000/mcp/ TOKEN            # asks you
    python docs/mcp_client.py http://127.0.0.1:8000/mcp/ TOKEN --approve  # approves all

`make demo` prints the URL and a token. Any workflow: --workflow NAME --input JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from typing import Any

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import ElicitResult

DEMO_INPUT = {"employee": "Ada", "amount": 240.0, "purpose": "a train ticket"}


def ask_person(message: str, schema: dict[str, Any]) -> ElicitResult:
    print(f"\n{message}")
    content: dict[str, Any] = {}
    for name, field in schema["properties"].items():
        typed = input(f"  {name} ({field.get('enum') or field['type']}): ").strip()
        if typed:
            kind = field["type"]
            content[name] = {
                "boolean": lambda t: t.lower() in ("y", "yes", "true", "1"),
                "integer": int,
                "number": float,
            }.get(kind, str)(typed)
    return ElicitResult(action="accept", content=content)


def approve_all(message: str, schema: dict[str, Any]) -> ElicitResult:
    print(f"\n{message}\n  -> approved")
    content: dict[str, Any] = {"approved": True} if "approved" in schema["properties"] else {}
    return ElicitResult(action="accept", content=content)


async def drive(url: str, token: str, workflow: str, node_input: Any, approve: bool) -> Any:
    answer = approve_all if approve else ask_person

    async def elicitation(context: Any, params: Any) -> ElicitResult:
        return answer(params.message, params.requested_schema)

    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60)
    transport = streamable_http_client(url, http_client=http)
    async with (
        http,
        Client(transport, mode="2026-07-28", elicitation_callback=elicitation) as client,
    ):
        tools = [tool.name for tool in (await client.list_tools()).tools]
        print("tools:", ", ".join(tools))
        result = await client.call_tool(f"start_{workflow}", node_input)
    print("\n" + result.content[0].text)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url")
    parser.add_argument("token")
    parser.add_argument("--workflow", default="expense_approval")
    parser.add_argument("--input", type=json.loads, default=DEMO_INPUT)
    parser.add_argument("--approve", action="store_true", help="approve every question")
    options = parser.parse_args()
    asyncio.run(drive(options.url, options.token, options.workflow, options.input, options.approve))


if __name__ == "__main__":
    main()
