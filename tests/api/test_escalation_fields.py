"""The escalation ladder's state through the API (DESIGN 4.3): every interrupt, in the
inbox list and in its detail, shows its ladder as asked (`escalation`), how many steps the
sweep applied (`escalation_step`) and when the next is due (`next_escalation_at`), read
only, and the OpenAPI schema documents them."""

from datetime import timedelta

import pytest
from django.utils.dateparse import parse_datetime
from rest_framework.test import APIClient

from tests.asking import ask
from tests.people.conftest import DIRECTORS, HAND_OVER_AFTER, LADDER, MANAGERS, REMIND_AFTER, member
from workflows import services

pytestmark = pytest.mark.django_db(transaction=True)

ASKED_LADDER = [
    {"after": REMIND_AFTER.total_seconds(), "remind": True, "assignees": None},
    {"after": HAND_OVER_AFTER.total_seconds(), "remind": False, "assignees": [DIRECTORS]},
]


def client_of(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def ladder_state(client: APIClient, interrupt_id: str) -> dict:
    detail = client.get(f"/api/interrupts/{interrupt_id}/")
    assert detail.status_code == 200, detail.content
    listed = client.get("/api/interrupts/").json()["results"]
    (in_list,) = [item for item in listed if item["id"] == interrupt_id]
    fields = ("escalation", "escalation_step", "next_escalation_at")
    state = {name: detail.json()[name] for name in fields}
    assert {name: in_list[name] for name in fields} == state, "the list shows the same"
    if state["next_escalation_at"] is not None:
        state["next_escalation_at"] = parse_datetime(state["next_escalation_at"])
    return state


def test_the_api_shows_the_ladder_the_steps_applied_and_the_next_due():
    manager, director = member("mia", MANAGERS), member("dora", DIRECTORS)
    question = ask(assignees=[MANAGERS], escalation=LADDER)
    asked = question.next_escalation_at - REMIND_AFTER
    assert ladder_state(client_of(manager), question.pk) == {
        "escalation": ASKED_LADDER,
        "escalation_step": 0,
        "next_escalation_at": asked + REMIND_AFTER,
    }
    services.escalate_interrupts(now=asked + REMIND_AFTER)
    assert ladder_state(client_of(manager), question.pk) == {
        "escalation": ASKED_LADDER,
        "escalation_step": 1,
        "next_escalation_at": asked + HAND_OVER_AFTER,
    }
    services.escalate_interrupts(now=asked + HAND_OVER_AFTER + timedelta(minutes=1))
    assert ladder_state(client_of(director), question.pk) == {
        "escalation": ASKED_LADDER,
        "escalation_step": 2,
        "next_escalation_at": None,
    }


def test_a_question_without_a_ladder_shows_an_empty_one():
    manager = member("mia", MANAGERS)
    question = ask(assignees=[MANAGERS])
    assert ladder_state(client_of(manager), question.pk) == {
        "escalation": [],
        "escalation_step": 0,
        "next_escalation_at": None,
    }


def test_the_schema_documents_the_ladder_fields_read_only():
    schema = APIClient().get("/api/schema/?format=json").json()["components"]["schemas"]
    for name in ("InterruptSummary", "InterruptDetail"):
        properties = schema[name]["properties"]
        assert properties["escalation"]["type"] == "array"
        assert properties["escalation"]["items"] == {"$ref": "#/components/schemas/EscalationStep"}
        assert properties["escalation_step"] == {
            "type": "integer",
            "readOnly": True,
            "description": "How many steps of the ladder have been applied.",
        }
        assert properties["next_escalation_at"]["format"] == "date-time"
        assert properties["next_escalation_at"]["nullable"] is True
        assert all(properties[f]["readOnly"] for f in ("escalation", "next_escalation_at"))
    step = schema["EscalationStep"]["properties"]
    assert set(step) == {"after", "remind", "assignees"}
    assert step["assignees"]["nullable"] is True
