"""The MCP adapter's parts on their own: the requestState's codec and claims, its single use
under a race, and which response schemas MCP's elicitation forms can carry."""

from __future__ import annotations

import pytest
from mcp.server.request_state import InvalidRequestState
from mcp.shared.exceptions import MCPError

from tests.asking import APPROVAL, ask
from tests.factories import ApproverFactory
from tests.integration.worker import require_postgres
from tests.reliability.test_lock_order import race
from workflows.models import Decision, McpRequestState
from workflows.protocols.mcp_server import answers, state
from workflows.protocols.mcp_server.forms import form_schema

ACCEPT = {"action": "accept", "content": {"approved": True}}


def test_the_codec_refuses_what_it_did_not_sign():
    codec = state.SignedStateCodec()
    token = codec.seal(b'{"s": "x"}')

    assert codec.unseal(token) == b'{"s": "x"}'
    for forged in (token[:-2] + "xx", "v1." + token, "", token.replace(":", ".")):
        with pytest.raises(InvalidRequestState):
            codec.unseal(forged)


@pytest.mark.django_db
def test_a_state_names_its_user():
    amy, bob = ApproverFactory(username="amy"), ApproverFactory(username="bob")
    minted = state.mint(amy, "inv", ["q1"])

    assert state.read(minted, amy).question_ids == ("q1",)
    with pytest.raises(MCPError, match="Invalid or expired requestState"):
        state.read(minted, bob)
    with pytest.raises(MCPError):
        state.read("not json", amy)


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_two_retries_of_one_state_at_once_answer_once():
    require_postgres("two transactions racing for one state's row")
    user = ApproverFactory(username="sam")
    interrupt = ask(user=user, assignees=["user:sam"])
    minted = state.mint(user, str(interrupt.invocation_id), [interrupt.pk])

    def retry() -> object:
        return answers.answer_round(minted, {interrupt.pk: ACCEPT}, user)

    outcomes = race([retry, retry])

    errors = [o.error for o in outcomes if o.error is not None]
    assert len(errors) == 1 and isinstance(errors[0], MCPError)
    assert errors[0].error.data["error"] == "request_state_used"
    assert Decision.objects.count() == 1
    assert McpRequestState.objects.count() == 1


@pytest.mark.parametrize(
    ("schema", "fits"),
    [
        (APPROVAL, True),  # its "decisions" (the service's) is left out
        ({"type": "object", "properties": {"n": {"type": "integer", "minimum": 1}}}, True),
        ({"type": "object", "properties": {"when": {"type": "string", "format": "date"}}}, True),
        ({"type": "object", "properties": {"c": {"type": "string", "enum": ["a", "b"]}}}, True),
        (
            {
                "type": "object",
                "properties": {"t": {"type": "array", "items": {"type": "string", "enum": ["x"]}}},
            },
            True,
        ),
        ({"type": "object", "properties": {"o": {"type": "object", "properties": {}}}}, False),
        ({"type": "object", "properties": {"s": {"type": "string", "pattern": "^a"}}}, False),
        ({"type": "object", "properties": {"s": {"type": "string", "format": "ipv4"}}}, False),
        ({"type": "object", "properties": {"s": {"type": ["string", "null"]}}}, False),
        (
            {
                "type": "object",
                "properties": {"l": {"type": "array", "items": {"type": "integer"}}},
            },
            False,
        ),
        ({"type": "object", "properties": {}, "oneOf": []}, False),
        ({"type": "string"}, False),
        (None, False),
    ],
)
def test_which_schemas_make_a_form(schema, fits):
    form = form_schema(schema)

    assert (form is not None) == fits
    if form is not None:
        assert form["type"] == "object" and "decisions" not in form["properties"]
        assert "additionalProperties" not in form
