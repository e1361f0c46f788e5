"""The `@modelcontextprotocol/conformance` server scenarios (npm, 0.1.16) against our server
at `mcp/` (DESIGN 4.5, proof against real clients).

The scenarios speak 2025-06-18/2025-11-25 and most of them call the tools of the SDKs'
"everything" reference server (`test_simple_text`, `test_image_content`, resources,
prompts, logging...), which a workflow server does not have; APPLICABLE lists those that
apply to ours and must pass, NOT_APPLICABLE says why each other one does not. The
scenarios' client cannot send a bearer token, so it reaches the app through a wrapper that
adds a real API token's header: authentication itself is proven in test_mcp_answers.py.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import uvicorn

from tests.protocols.mcp_live import asgi_application, free_port, starter, token_for

HERE = Path(__file__).parent / "mcp_conformance"
CLI = HERE / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"

APPLICABLE = ["server-initialize", "ping", "tools-list", "dns-rebinding-protection"]
NOT_APPLICABLE = {
    "logging-set-level": "no logging capability (deprecated by 2026-07-28, SEP-2577)",
    "completion-complete": "no prompts or resource templates to complete",
    "tools-call-simple-text": "calls the reference server's test_simple_text tool",
    "tools-call-image": "calls the reference server's test_image_content tool",
    "tools-call-audio": "calls the reference server's test_audio_content tool",
    "tools-call-embedded-resource": "calls the reference server's test_embedded_resource tool",
    "tools-call-mixed-content": "calls the reference server's test_multiple_content_types tool",
    "tools-call-with-logging": "calls the reference server's test_tool_with_logging tool",
    "tools-call-error": "calls the reference server's test_error_handling tool",
    "tools-call-with-progress": "calls the reference server's test_tool_with_progress tool",
    "tools-call-sampling": "calls the reference server's test_sampling tool",
    "tools-call-elicitation": "calls the reference server's test_elicitation tool (legacy "
    "server-to-client elicitation; ours is the 2026-07-28 input_required round)",
    "json-schema-2020-12": "lists the reference server's json_schema_2020_12_tool",
    "elicitation-sep1034-defaults": "calls the reference server's "
    "test_elicitation_sep1034_defaults",
    "elicitation-sep1330-enums": "calls the reference server's test_elicitation_sep1330_enums",
    "server-sse-polling": "calls the reference server's test_reconnection over SSE "
    "(this server answers plain JSON)",
    "server-sse-multiple-streams": "opens SSE streams of a stateful session (this server is "
    "stateless and answers plain JSON)",
    "resources-list": "no resources",
    "resources-read-text": "no resources",
    "resources-read-binary": "no resources",
    "resources-templates-read": "no resource templates",
    "resources-subscribe": "no resources",
    "resources-unsubscribe": "no resources",
    "prompts-list": "no prompts",
    "prompts-get-simple": "no prompts",
    "prompts-get-with-args": "no prompts",
    "prompts-get-embedded-resource": "no prompts",
    "prompts-get-with-image": "no prompts",
}

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        shutil.which("node") is None or not CLI.exists(),
        reason="needs node and `npm ci` in tests/protocols/mcp_conformance",
    ),
]


def with_token(app: Any, token: str) -> Any:
    """`app`, with every request carrying `token` as its bearer token."""

    async def signed_in(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = [(k, v) for k, v in scope["headers"] if k != b"authorization"]
            scope = {**scope, "headers": [*headers, (b"authorization", f"Bearer {token}".encode())]}
        await app(scope, receive, send)

    return signed_in


@pytest.fixture
def conformance_url(transactional_db: Any) -> Iterator[str]:
    port = free_port()
    app = with_token(asgi_application(), token_for(starter()))
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, lifespan="off", log_level="warning")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        threading.Event().wait(0.01)
    yield f"http://localhost:{port}/mcp/"
    server.should_exit = True
    thread.join(timeout=10)


def checks(url: str, scenario: str, output: Path) -> list[dict[str, Any]]:
    subprocess.run(
        [
            "node",
            "--import",
            "./node20.mjs",
            str(CLI),
            "server",
            "--url",
            url,
            "--scenario",
            scenario,
            "-o",
            str(output),
        ],
        cwd=HERE,
        capture_output=True,
        text=True,
        timeout=120,
    )
    found = sorted(output.glob("**/checks.json"))
    assert found, f"{scenario}: no checks.json written"
    return json.loads(found[-1].read_text())


@pytest.mark.parametrize("scenario", APPLICABLE)
def test_the_applicable_scenarios_pass(conformance_url, scenario, tmp_path):
    results = checks(conformance_url, scenario, tmp_path)
    failed = [c for c in results if c["status"] == "FAILURE"]
    assert results and not failed, failed
