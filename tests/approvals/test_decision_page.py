"""The decision page through Django's test client: what it shows, deciding through the
generated form, each refusal, claim/release/reassign, and the bulk actions."""

import re
from datetime import timedelta

import pytest
from django.contrib.messages import get_messages
from django.db import connection
from django.db.models.expressions import RawSQL

from approvals.links import DecisionLink, make_token
from tests.approvals.conftest import INBOX, decision_url
from tests.asking import APPROVAL, ask
from tests.factories import ApproverFactory, UserFactory, grant_answer
from workflows import services
from workflows.engine import RequestInput, Workflow, node
from workflows.engine.status import InterruptStatus, NodeStatus
from workflows.engine.values import key_order
from workflows.models import Decision, Interrupt, Invocation
from workflows.registry import registry

pytestmark = pytest.mark.django_db(transaction=True)


def messages_of(response) -> list[str]:
    return [str(m) for m in get_messages(response.wsgi_request)]


def status_of(interrupt) -> tuple[str, str]:
    interrupt.refresh_from_db()
    invocation = Invocation.objects.get(pk=interrupt.invocation_id)
    return interrupt.status, invocation.status


def test_the_page_shows_the_question_readably_with_its_context(login, approver):
    starter = UserFactory(username="sam")
    interrupt = ask(
        user=starter,
        message="Approve the trip to Oslo?",
        payload={"traveller": "Ada", "costs": {"flight": 420, "hotel": 300}, "nights": [1, 2]},
    )
    earlier = ApproverFactory(username="earl")
    Interrupt.objects.filter(pk=interrupt.pk).update(quorum=2)
    services.decide(interrupt.pk, {"approved": True, "comment": "go"}, actor=earlier)
    page = login(approver).get(decision_url(interrupt)).content.decode()
    assert "Approve the trip to Oslo?" in page
    assert '<table class="hitl-value"><tr><th>' in page
    assert "<tr><th>traveller</th><td>Ada</td></tr>" in page
    assert "<details><summary>2 field(s)</summary>" in page  # nested costs, folded
    assert '"flight": 420' not in page  # never raw JSON
    assert "hitl_test_ask" in page and "started by sam" in page
    assert "hitl_test_ask@1/prepare@1" in page  # an upstream node's output
    assert '<th>prepared</th><td><span class="bool">yes</span></td>' in page
    assert "earl" in page and "go" in page  # the earlier decision
    assert 'id="approve"' in page and 'id="reject"' in page
    scripts = re.findall(r'<script[^>]+src="([^"]+)"', page)
    assert scripts and all(src.startswith("/static/") for src in scripts), "no CDN"


def test_approve_answers_and_opens_the_next_question(login, approver):
    first = ask(message="First")
    second = ask(message="Second")
    client = login(approver)
    response = client.post(decision_url(first), {"decision": "approve", "comment": "fine"})
    assert response.status_code == 302
    assert response["Location"] == decision_url(second)
    assert any("is answered" in m for m in messages_of(response))
    assert status_of(first) == (InterruptStatus.RESOLVED, NodeStatus.COMPLETED)
    assert Invocation.objects.get(pk=first.invocation_id).output == {
        "approved": True,
        "comment": "fine",
    }
    response = client.post(decision_url(second), {"decision": "reject"})
    assert response["Location"] == INBOX
    assert Invocation.objects.get(pk=second.invocation_id).output == {"approved": False}
    # The answered question's page says who answered; no deadline talk any more.
    page = client.get(decision_url(first)).content.decode()
    assert "Answered by alice" in page
    assert "no deadline" not in page and "Decisions so far" not in page


def test_a_generated_form_answers_a_structured_question(login, approver):
    schema = {
        "type": "object",
        "properties": {
            "grade": {"enum": ["A", "B", "C"], "title": "Grade"},
            "reviewed_on": {"type": "string", "format": "date"},
            "score": {"type": "integer", "minimum": 0, "maximum": 10},
        },
        "required": ["grade", "score"],
    }
    interrupt = ask(message="Grade the essay", response_schema=schema)
    client = login(approver)
    page = client.get(decision_url(interrupt)).content.decode()
    assert 'type="date"' in page and "Submit answer" in page
    response = client.post(
        decision_url(interrupt), {"grade": '"B"', "reviewed_on": "2026-11-30", "score": "7"}
    )
    assert response.status_code == 302
    assert Invocation.objects.get(pk=interrupt.invocation_id).output == {
        "grade": "B",
        "reviewed_on": "2026-11-30",
        "score": 7,
    }


def test_a_schema_error_shows_on_its_field_and_changes_nothing(login, approver):
    schema = {
        **APPROVAL,
        "if": {"properties": {"approved": {"const": False}}},
        "then": {"required": ["comment"]},
        "properties": {
            **APPROVAL["properties"],
            "comment": {"type": "string", "pattern": "^[A-Z]"},
        },
    }
    interrupt = ask(response_schema=schema)
    client = login(approver)
    response = client.post(decision_url(interrupt), {"decision": "reject", "comment": ""})
    assert response.status_code == 200
    assert "comment" in response.context["form"].errors
    response = client.post(decision_url(interrupt), {"decision": "approve", "comment": "lower"})
    assert "does not match" in response.context["form"].errors["comment"][0]
    assert not Decision.objects.exists()
    assert status_of(interrupt) == (InterruptStatus.PENDING, NodeStatus.WAITING)


def test_a_late_answer_is_told_so_and_recorded_nowhere(login, approver):
    interrupt = ask()
    client = login(approver)
    client.get(decision_url(interrupt))
    services.decide(interrupt.pk, {"approved": False}, actor=ApproverFactory())
    response = client.post(decision_url(interrupt), {"decision": "approve"}, follow=True)
    assert any("Too late" in m for m in messages_of(response))
    assert not Decision.objects.filter(actor=approver).exists()


def test_a_second_decision_by_the_same_person_is_refused(login, approver):
    interrupt = ask(quorum=2)
    client = login(approver)
    client.post(decision_url(interrupt), {"decision": "approve"})
    page = client.get(decision_url(interrupt)).content.decode()
    assert "You decided on this question" in page and 'id="approve"' not in page
    response = client.post(decision_url(interrupt), {"decision": "approve"}, follow=True)
    assert any("one decision per person" in m for m in messages_of(response))
    assert Decision.objects.count() == 1


def test_who_may_not_answer_gets_403(login, approver):
    starter = ApproverFactory(username="starter")
    four_eyes = ask(user=starter, four_eyes=True)
    for_bob = ask(assignees=["user:bob"])
    staff = UserFactory(is_staff=True)
    assert login(staff).get(decision_url(four_eyes)).status_code == 403
    assert login(starter).get(decision_url(four_eyes)).status_code == 403
    assert login(starter).post(decision_url(four_eyes), {"decision": "approve"}).status_code == 403
    refused = login(approver).get(decision_url(for_bob))
    assert refused.status_code == 403
    # Why, and the way back; not what was asked.
    page = refused.content.decode()
    assert "You may not answer this question: alice is not among the assignees" in page
    assert "Open your pending approvals" in page and for_bob.message not in page
    assert login(approver).get(decision_url(four_eyes)).status_code == 200
    assert not Decision.objects.exists()


def test_claim_release_and_a_decision_over_someone_elses_claim(login, approver):
    interrupt = ask()
    bob = ApproverFactory(username="bob")
    client = login(approver)
    response = client.post(decision_url(interrupt), {"_action": "claim"})
    assert messages_of(response) == ["Claimed: others see that you are working on it."]
    assert Interrupt.objects.get(pk=interrupt.pk).claimed_by == approver
    client = login(bob)
    page = client.get(decision_url(interrupt)).content.decode()
    assert "Claimed by alice" in page and "You may still decide" in page
    assert 'value="release"' not in page  # only the claimer or a supervisor may release
    response = client.post(decision_url(interrupt), {"_action": "release"}, follow=True)
    assert any("only they or a supervisor" in m for m in messages_of(response))
    response = client.post(decision_url(interrupt), {"decision": "approve"})
    assert any("alice had claimed this question" in m for m in messages_of(response))
    assert status_of(interrupt)[0] == InterruptStatus.RESOLVED


def test_reassign_from_the_page(login, approver):
    ApproverFactory(username="bob")
    interrupt = ask(assignees=["user:alice"])
    client = login(approver)
    response = client.post(
        decision_url(interrupt), {"_action": "reassign", "assignees": "user:nobody"}, follow=True
    )
    assert any("no such user:nobody" in m for m in messages_of(response))
    # The refusal names the problem, not the interrupt's id.
    assert all(interrupt.pk not in m for m in messages_of(response))
    response = client.post(
        decision_url(interrupt), {"_action": "reassign", "assignees": "finance"}, follow=True
    )
    [refusal] = messages_of(response)
    assert refusal.startswith("Refused: assignee 'finance' is not") and interrupt.pk not in refusal
    client.post(decision_url(interrupt), {"_action": "reassign", "assignees": "user:bob, group:x"})
    assert Interrupt.objects.get(pk=interrupt.pk).assignees == ["user:alice"]  # group:x unknown
    response = client.post(
        decision_url(interrupt), {"_action": "reassign", "assignees": "user:bob"}
    )
    assert "Reassigned to user:bob." in messages_of(response)
    assert Interrupt.objects.get(pk=interrupt.pk).assignees == ["user:bob"]
    assert client.get(decision_url(interrupt)).status_code == 403  # alice handed it over
    assert response["Location"] == INBOX  # so she went on to her inbox, not to that 403
    supervisor = grant_answer(UserFactory(is_staff=True), "answer_interrupt", "reassign_interrupt")
    page = login(supervisor).get(decision_url(interrupt)).content.decode()
    assert "Reassign to" in page and 'id="approve"' not in page


def test_an_expired_question_shows_the_timeout_policy_applied(login, approver):
    interrupt = ask(timeout=timedelta(hours=1), on_timeout={"approved": False})
    fails = ask(timeout=timedelta(hours=1))
    Interrupt.objects.update(deadline=interrupt.created_at - timedelta(seconds=1))
    assert services.expire_overdue_interrupts() == 2
    client = login(approver)
    page = client.get(decision_url(interrupt)).content.decode()
    assert "Expired" in page and "answered with" in page and "the timeout policy applied" in page
    assert 'id="approve"' not in page
    assert "the invocation fails" in client.get(decision_url(fails)).content.decode()


def test_bulk_approve_answers_what_it_can_and_says_why_it_skipped(login, approver):
    plain = ask(message="Plain yes/no")
    graded = ask(message="Needs a grade", response_schema={"enum": ["A", "B"]})
    needs_comment = ask(
        message="Needs a comment", response_schema={**APPROVAL, "required": ["approved", "comment"]}
    )
    response = login(approver).post(
        INBOX,
        {
            "action": "approve_selected",
            "_selected_action": [plain.pk, graded.pk, needs_comment.pk],
        },
        follow=True,
    )
    shown = messages_of(response)
    assert "Approved 1; skipped 2." in shown
    assert any("Needs a grade: its answer is not a yes/no" in m for m in shown)
    assert any("Needs a comment" in m and "'comment' is a required property" in m for m in shown)
    assert status_of(plain)[0] == InterruptStatus.RESOLVED
    assert status_of(graded)[0] == status_of(needs_comment)[0] == InterruptStatus.PENDING


def one_property(name: str, schema: dict, required: bool = True) -> dict:
    return {
        "type": "object",
        "properties": {name: schema},
        "required": [name] if required else [],
    }


@pytest.mark.parametrize(
    ("schema", "html", "posted", "answer"),
    [
        (
            one_property("ok", {"type": "boolean", "title": "All good", "description": "Tick"}),
            ['type="checkbox" name="ok"', "All good", "Tick"],
            {"ok": "on"},
            {"ok": True},
        ),
        (
            one_property("size", {"enum": ["S", "M", 3]}),
            ['<select name="size"', '<option value="3">3</option>'],
            {"size": "3"},
            {"size": 3},
        ),
        (
            one_property("day", {"type": "string", "format": "date"}),
            ['type="date" name="day"'],
            {"day": "2027-01-31"},
            {"day": "2027-01-31"},
        ),
        (
            one_property("at", {"type": "string", "format": "date-time"}),
            ['type="datetime-local" name="at"'],
            {"at": "2027-01-31T08:15"},
            {"at": "2027-01-31T08:15:00+00:00"},
        ),
        (
            one_property("mail", {"type": "string", "format": "email"}),
            ['type="email" name="mail"'],
            {"mail": "ada@example.com"},
            {"mail": "ada@example.com"},
        ),
        (
            one_property("score", {"type": "integer", "minimum": 1, "maximum": 5}),
            ['type="number" name="score"', 'min="1"', 'max="5"'],
            {"score": "4"},
            {"score": 4},
        ),
        (
            one_property("ratio", {"type": "number", "minimum": 0, "maximum": 1}),
            ['name="ratio"', 'step="any"', 'max="1"'],
            {"ratio": "0.25"},
            {"ratio": 0.25},
        ),
        (
            one_property(
                "address",
                {"type": "object", "properties": {"city": {"type": "string", "maxLength": 50}}},
            ),
            ['name="address__city"'],
            {"address__city": "Oslo"},
            {"address": {"city": "Oslo"}},
        ),
        (
            {
                **one_property("cost__center", {"type": "string"}),
                "additionalProperties": False,
            },
            ['name="cost__center"'],
            {"cost__center": "R&D"},
            {"cost__center": "R&D"},
        ),
        (
            one_property("tags", {"type": "array", "items": {"enum": ["red", "blue"]}}),
            ['type="checkbox" name="tags" value="&quot;red&quot;"'],
            {"tags": ['"red"', '"blue"']},
            {"tags": ["red", "blue"]},
        ),
        (
            one_property("lines", {"type": "array", "items": {"type": "object"}}),
            ["data-django-jsonform", "django_jsonform/react-json-form.js"],
            {"lines": '[{"sku": "A1"}]'},
            {"lines": [{"sku": "A1"}]},
        ),
    ],
)
def test_each_schema_mapping_through_the_page(login, approver, schema, html, posted, answer):
    interrupt = ask(message="Fill it in", response_schema=schema)
    client = login(approver)
    page = client.get(decision_url(interrupt)).content.decode()
    for marker in html:
        assert marker in page
    response = client.post(decision_url(interrupt), posted)
    assert response.status_code == 302, response.context["form"].errors
    assert Invocation.objects.get(pk=interrupt.invocation_id).output == answer


@pytest.mark.parametrize(
    ("schema", "posted", "field", "message"),
    [
        (one_property("score", {"type": "integer", "maximum": 5}), {"score": "9"}, "score", "5"),
        (one_property("mail", {"type": "string", "format": "email"}), {"mail": "x"}, "mail", ""),
        (one_property("size", {"enum": ["S"]}), {"size": '"XL"'}, "size", "valid choice"),
        (one_property("size", {"enum": ["S", "M"]}), {}, "size", "required"),
        (one_property("day", {"type": "string", "format": "date"}), {"day": "soon"}, "day", ""),
        (one_property("n", {"type": "integer", "multipleOf": 2}), {"n": "3"}, "n", "multiple"),
    ],
)
def test_bad_values_show_on_their_field_and_store_nothing(
    login, approver, schema, posted, field, message
):
    interrupt = ask(response_schema=schema)
    response = login(approver).post(decision_url(interrupt), posted)
    assert response.status_code == 200
    errors = response.context["form"].errors
    assert field in errors and message in errors[field][0]
    assert not Decision.objects.exists()


def test_the_decisions_list_says_what_was_asked_and_answered_in_words(login, approver):
    first = ask(message="Approve the offsite")
    second = ask(message="Approve the laptop")
    services.decide(first.pk, {"approved": True}, actor=approver, comment="fine")
    services.decide(second.pk, {"approved": False}, actor=approver, comment="too dear")
    client = login(grant_answer(approver, "view_decision"))
    page = client.get("/admin/workflows/decision/").content.decode()
    assert page.index("Approve the laptop") < page.index("Approve the offsite")  # latest first
    assert "approved: no" in page and "too dear" in page
    assert "{&quot;approved&quot;" not in page and first.pk not in page  # no JSON, no UUIDs
    decision = Decision.objects.get(interrupt=second)
    page = client.get(f"/admin/workflows/decision/{decision.pk}/change/").content.decode()
    assert "approved: no" in page and "too dear" in page and "Close" in page


def store_json_text(model, pk, column: str, text: str) -> None:
    """Write JSON text as it is: deeper than Django's JSON encoding (it recurses) goes."""
    cast = "%s::jsonb" if connection.vendor == "postgresql" else "%s"
    model.objects.filter(pk=pk).update(**{column: RawSQL(cast, [text])})


@pytest.mark.parametrize("levels", [200, 1000])
def test_deeply_nested_values_show_folded_never_a_server_error(login, approver, levels):
    interrupt = ask(message="Deep?", timeout=timedelta(hours=1))
    deep = '{"a": ' * levels + "1" + "}" * levels
    store_json_text(Interrupt, interrupt.pk, "payload", deep)
    store_json_text(Interrupt, interrupt.pk, "on_timeout", f'{{"response": {deep}}}')
    store_json_text(Invocation, interrupt.invocation_id, "input", deep)
    client = login(grant_answer(approver, "view_decision"))
    page = client.get(decision_url(interrupt))
    assert page.status_code == 200
    html = page.content.decode()
    if levels == 200:  # folded 20 levels down, the rest as one line of JSON, cut short
        shown = re.findall(r'<code class="hitl-deep">([^<]*)</code>', html)
        assert len(shown) == 2  # the payload and the invocation's input
        assert shown[0].startswith("{&quot;a&quot;: {&quot;a&quot;: ") and shown[0].endswith("…")
    else:  # too deep to decode at all: a note in each place
        assert html.count("(nested too deeply to show)") == 3
    link = client.get(
        f"/approvals/email/{make_token(DecisionLink(interrupt.pk, approver.pk, 'approve'))}/"
    )
    assert link.status_code == 200


def test_a_deeply_nested_answer_shows_in_the_decisions_lists(login, approver):
    interrupt = ask(response_schema={"type": "object"}, quorum=1)
    deep: dict = {"a": 1}
    for _ in range(300):
        deep = {"a": deep}
    Interrupt.objects.filter(pk=interrupt.pk).update(status=InterruptStatus.RESOLVED)
    Decision.objects.create(interrupt=interrupt, actor=approver, response=deep)
    client = login(grant_answer(approver, "view_decision"))
    assert client.get(decision_url(interrupt)).status_code == 200
    listed = client.get("/admin/workflows/decision/")
    assert listed.status_code == 200 and "a: a: a: a:" in listed.content.decode()


def test_a_structured_answer_reads_as_fields_in_the_decisions_table(login, approver):
    schema = {
        "type": "object",
        "properties": {"grade": {"enum": ["A", "B"]}, "notes": {"type": "array"}},
    }
    graded = ask(message="Grade it", response_schema=schema)
    services.decide(graded.pk, {"grade": "B", "notes": ["late", "tidy"]}, actor=approver)
    approved = ask(
        message="Approve it",
        response_schema={**APPROVAL, "properties": {**APPROVAL["properties"], "n": {}}},
    )
    services.decide(approved.pk, {"approved": False, "n": 3, "comment": "no"}, actor=approver)
    client = login(approver)
    page = client.get(decision_url(graded)).content.decode()
    table = page[page.index('<table class="hitl-decisions">') :]
    assert "<tr><th>grade</th><td>B</td></tr>" in table
    assert "<li>late</li><li>tidy</li>" in table
    assert "{&#x27;grade&#x27;" not in page and "{'grade'" not in page  # no Python dict
    page = client.get(decision_url(approved)).content.decode()
    table = page[page.index('<table class="hitl-decisions">') :]
    assert "<td>rejected<table" in table and "<tr><th>n</th><td>3</td></tr>" in table


# Declared in a node's code: a value that comes through the invocation's input is
# already re-sorted by PostgreSQL's jsonb when the node reads it.
ORDERED_SCHEMA = {
    "type": "object",
    "properties": {  # jsonb gives them back by length: po, amount, cost_centre, ...
        "vendor_name": {"type": "string"},
        "amount": {"type": "number"},
        "po": {"type": "string"},
        "cost_centre": {"type": "string"},
        "address": {
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        },
    },
}
ORDERED_PAYLOAD = {"requested_by": "Grace", "budget_eur": 4200, "dates": {"to": "3", "from": "1"}}
ORDERED_ON_TIMEOUT = {"vendor_name": "none", "amount": 0}


@node(name="ordered_question")
def ordered_question() -> RequestInput:
    return RequestInput(
        message="Order it",
        response_schema=ORDERED_SCHEMA,
        payload=ORDERED_PAYLOAD,
        timeout=timedelta(hours=1),
        on_timeout=ORDERED_ON_TIMEOUT,
    )


ORDERED = "hitl_test_declared_order"
if ORDERED not in {d.name for d in registry.definitions()}:
    registry.register(Workflow(name=ORDERED, edges=[("START", ordered_question)]))


def test_fields_payload_and_timeout_text_keep_the_declared_order(login, approver):
    invocation = services.start(ORDERED, {})
    interrupt = Interrupt.objects.get(invocation=invocation)
    # The store keeps the declared order beside the values (jsonb re-sorts the keys).
    assert interrupt.key_order["response_schema"] == key_order(ORDERED_SCHEMA)
    response = login(approver).get(decision_url(interrupt))
    fields = list(response.context["form"].fields)
    assert fields == [
        "vendor_name",
        "amount",
        "po",
        "cost_centre",
        "address__street",
        "address__city",
    ]
    page = response.content.decode()
    details = page[page.index('<div class="hitl-payload">') :]
    assert re.findall(r"<th>(\w+)</th>", details)[:5] == [
        "requested_by",
        "budget_eur",
        "dates",
        "to",
        "from",
    ]
    assert ", then answered with “vendor_name: none, amount: 0”" in page
    inbox = login(approver).get(INBOX).content.decode()
    assert "answered with “vendor_name: none, amount: 0”" in inbox
