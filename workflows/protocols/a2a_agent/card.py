"""The Agent Card (DESIGN 4.5): one skill per registered workflow, the JSON-RPC and
HTTP+JSON interfaces at `a2a/`, and the API's tokens as its one security scheme."""

from __future__ import annotations

from a2a.types import a2a_pb2 as a2a
from a2a.utils.constants import PROTOCOL_VERSION_1_0, TransportProtocol

from workflows.registry import registry

JSONRPC_PATH = "/a2a/"
REST_PATH = "/a2a"
CARD_PATH = "/.well-known/agent-card.json"
BEARER = "bearer"
JSON_MODES = ["application/json"]


def _skill(name: str, version: str) -> a2a.AgentSkill:
    return a2a.AgentSkill(
        id=name,
        name=name,
        description=(
            f"Starts the workflow {name!r} (version {version}): send a data part "
            f'{{"workflow": "{name}", "input": ...}}. Its questions come back as '
            "input-required long-running function calls; answer with function_response "
            "data parts on the same task."
        ),
        tags=["workflow", "human-in-the-loop"],
        input_modes=JSON_MODES,
        output_modes=JSON_MODES,
    )


def agent_card(base_url: str) -> a2a.AgentCard:
    """The card as served at `base_url` (the site's root, without a trailing slash)."""
    definitions = sorted(registry.definitions(), key=lambda d: d.name)
    return a2a.AgentCard(
        name="Human-in-the-loop workflows",
        description=(
            "Starts the site's workflows and pauses on their questions until a person or "
            "a tool answers them."
        ),
        version="1.0",
        supported_interfaces=[
            a2a.AgentInterface(
                url=base_url + JSONRPC_PATH,
                protocol_binding=TransportProtocol.JSONRPC.value,
                protocol_version=PROTOCOL_VERSION_1_0,
            ),
            a2a.AgentInterface(
                url=base_url + REST_PATH,
                protocol_binding=TransportProtocol.HTTP_JSON.value,
                protocol_version=PROTOCOL_VERSION_1_0,
            ),
        ],
        capabilities=a2a.AgentCapabilities(streaming=True, push_notifications=True),
        security_schemes={
            BEARER: a2a.SecurityScheme(
                http_auth_security_scheme=a2a.HTTPAuthSecurityScheme(
                    scheme="Bearer",
                    description="The API's token: POST /api/token/ with a username and password.",
                )
            )
        },
        security_requirements=[a2a.SecurityRequirement(schemes={BEARER: a2a.StringList()})],
        default_input_modes=JSON_MODES,
        default_output_modes=JSON_MODES,
        skills=[_skill(d.name, d.version) for d in definitions],
    )
