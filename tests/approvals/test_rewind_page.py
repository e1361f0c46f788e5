""" "Change this answer" (approvals/rewind.py) through Django's test client: the plan shown
first, the answer changed through the form, every refusal said on the page with nothing
stored, and who may open it."""

import json

import pytest
from django.contrib.admin.utils import quote
from django.core import serializers
from django.urls import reverse

from tests.approvals.conftest import decision_url
from tests.asking import APPROVAL, ask
from tests.factories import ApproverFactory, StaffFactory, UserFactory, grant_answer
from workflows import services
from workflows.engine import RequestInput, Workflow, node
from workflows.engine.status import InterruptStatus, NodeStatus
from workflows.models import AuditEntry, Decision, Interrupt, Invocation, NodeRun, SessionEvent
from workflows.registry import registry

pytestmark = pytest.mark.django_db(transaction=True)

PAYOUT = "hitl_test_rewind_payout"
PAID: list[str] = []


@node(name="approve_payout")
def approve_payout(node_input: dict) -> RequestInput:
    return RequestInput(message="Pay it out?", response_schema=APPROVAL, interrupt_id="payout")


@node(name="pay")
def pay(ctx, node_input: dict) -> dict:
    def transfer(idempotency_key: str) -> str:
        PAID.append(idempotency_key)
        return "paid"

    return {"transfer": ctx.effect_sync("transfer", transfer), **node_input}


@pytest.fixture
def payout_workflow():
    registry.register(Workflow(name=PAYOUT, edges=[("START", approve_payout, pay)]))
    PAID.clear()
    yield
    registry.unregister(PAYOUT)


def rewind_url(interrupt) -> str:
    return reverse("admin:approvals_pendingapproval_rewind", args=[quote(interrupt.pk)])


def rewinder(**kwargs):
    return grant_answer(ApproverFactory(**kwargs), "answer_interrupt", "rewind_interrupt")


def snapshot() -> str:
    rows = [*Invocation.objects.all(), *Interrupt.objects.all(), *Decision.objects.all()]
    rows += [*SessionEvent.objects.all(), *NodeRun.objects.all(), *AuditEntry.objects.all()]
    return serializers.serialize("json", rows)


def answered(approved=False, by=None, **request):
    interrupt = ask(**request)
    services.decide(interrupt.pk, {"approved": approved}, actor=by or rewinder())
    interrupt.refresh_from_db()
    return interrupt


def test_the_page_shows_the_plan_then_the_form_prefilled(login):
    bob = rewinder(username="bob")
    interrupt = answered(False, by=bob, message="Approve the trip to Oslo?")
    page = login(bob).get(rewind_url(interrupt))
    assert page.status_code == 200
    text = page.content.decode()
    assert "What changing it does" in text and "Approve the trip to Oslo?" in text
    workflow = interrupt.workflow_name
    # The question's step continues from the new answer; the step after it runs again.
    assert f'question <code class="quiet">{workflow}@1/question@1</code>' in text
    assert f'answered <code class="quiet">{workflow}@1/answered@1</code>' in text
    assert 'id="plan-effects"' not in text  # nothing would repeat
    assert 'id="approve"' in text and 'id="reject"' in text and 'name="_comment"' in text
    assert 'id="reopen"' not in text


def test_the_decision_page_links_the_change_for_whoever_may_make_it(login):
    bob = rewinder(username="bob")
    interrupt = answered(by=bob)
    link = f'href="{rewind_url(interrupt)}" id="change-answer"'
    assert link in login(bob).get(decision_url(interrupt)).content.decode()
    answerer = ApproverFactory(username="ann")  # may answer, not change answers
    assert link not in login(answerer).get(decision_url(interrupt)).content.decode()
    pending = ask()
    assert 'id="change-answer"' not in login(bob).get(decision_url(pending)).content.decode()


def test_the_same_answer_again_changes_nothing_and_says_so(login):
    bob = rewinder(username="bob")
    interrupt = answered(False, by=bob)
    before = snapshot()
    response = login(bob).post(rewind_url(interrupt), {"decision": "reject"}, follow=True)
    assert "nothing changed" in response.content.decode()
    assert snapshot() == before


def test_posting_changes_the_answer_and_leads_to_the_monitor(login):
    bob = grant_answer(rewinder(username="bob"), "view_invocation")
    interrupt = answered(False, by=bob)
    response = login(bob).post(
        rewind_url(interrupt), {"decision": "approve", "comment": "", "_comment": "wrong button"}
    )
    monitor = reverse("admin:workflows_invocation_change", args=[interrupt.invocation_id])
    assert response.status_code == 302 and response.url == monitor
    invocation = Invocation.objects.get(pk=interrupt.invocation_id)
    assert invocation.status == NodeStatus.COMPLETED
    assert invocation.output == {"approved": True}
    entry = AuditEntry.objects.get(action="answer.rewound")
    assert entry.data["comment"] == "wrong button" and entry.actor_id == bob.pk
    runs = dict(NodeRun.objects.filter(invocation=invocation).values_list("path", "status"))
    assert runs[f"{interrupt.workflow_name}@1/answered@1"] == NodeStatus.SUPERSEDED


def test_an_invalid_answer_is_shown_on_its_field_and_changes_nothing(login):
    bob = rewinder(username="bob")
    schema = {
        "type": "object",
        "properties": {"amount": {"type": "integer", "minimum": 1}},
        "required": ["amount"],
    }
    interrupt = ask(response_schema=schema)
    services.decide(interrupt.pk, {"amount": 5}, actor=bob)
    before = snapshot()
    page = login(bob).post(rewind_url(interrupt), {"amount": "0"})
    assert page.status_code == 400
    assert "greater than or equal to 1" in page.content.decode()
    assert snapshot() == before
    # The form starts from the current answer.
    assert 'value="5"' in login(bob).get(rewind_url(interrupt)).content.decode()


def test_effects_that_would_repeat_are_confirmed_one_by_one(login, payout_workflow):
    bob = rewinder(username="bob")
    invocation = services.start(PAYOUT, {})
    services.decide("payout", {"approved": True}, actor=bob)
    first_key = f"{invocation.pk}:{PAYOUT}@1/pay@1:transfer"
    assert [first_key] == PAID
    interrupt = Interrupt.objects.get(pk="payout")
    page = login(bob).get(rewind_url(interrupt)).content.decode()
    box = json.dumps([f"{PAYOUT}@1/pay@1", "transfer"])
    assert 'id="plan-effects"' in page and "<strong>transfer</strong> of pay" in page
    assert f'value="{box}"' in page.replace("&quot;", '"')

    before = snapshot()
    refused = login(bob).post(rewind_url(interrupt), {"decision": "reject"})
    assert refused.status_code == 409
    text = refused.content.decode()
    assert "confirm each effect" in text and "Not confirmed: tick it to go on." in text
    assert snapshot() == before and len(PAID) == 1

    done = login(bob).post(rewind_url(interrupt), {"decision": "reject", "confirm": box})
    assert done.status_code == 302
    assert Invocation.objects.get(pk=invocation.pk).output["approved"] is False
    assert PAID[1] == f"{invocation.pk}:{PAYOUT}@1/pay@2:transfer"


@pytest.mark.parametrize("state", ["pending", "cancelled", "superseded"])
def test_a_question_whose_answer_cannot_change_says_why(login, state):
    bob = rewinder(username="bob")
    interrupt = ask() if state != "superseded" else answered(by=bob)
    if state == "cancelled":
        services.cancel(interrupt.invocation_id)
    if state == "superseded":
        Interrupt.objects.filter(pk=interrupt.pk).update(status=InterruptStatus.SUPERSEDED)
    before = snapshot()
    page = login(bob).get(rewind_url(interrupt))
    assert page.status_code == 409 and 'id="rewind-form"' not in page.content.decode()
    assert "This answer cannot be changed now" in page.content.decode()
    posted = login(bob).post(rewind_url(interrupt), {"decision": "approve"})
    assert posted.status_code == 409 and "Nothing was changed" in posted.content.decode()
    assert snapshot() == before


def test_a_quorum_question_opens_a_new_round_and_leads_to_its_decision_page(login):
    voters = [rewinder(username=f"voter{n}") for n in range(2)]
    interrupt = ask(assignees=[f"user:{v.username}" for v in voters], quorum=2)
    for voter in voters:
        services.decide(interrupt.pk, {"approved": True}, actor=voter)
    outsider = rewinder(username="outsider")  # may rewind, not an assignee
    before = snapshot()
    refused = login(outsider).post(rewind_url(interrupt), {"_action": "reopen"})
    assert refused.status_code == 403 and snapshot() == before
    page = login(voters[0]).get(rewind_url(interrupt)).content.decode()
    assert 'id="reopen"' in page and 'id="rewind-form"' not in page
    assert "2 approvals decide this question" in page
    before = snapshot()
    direct = login(voters[0]).post(rewind_url(interrupt), {"decision": "reject"})
    assert direct.status_code == 409 and snapshot() == before
    opened = login(voters[0]).post(rewind_url(interrupt), {"_action": "reopen", "_comment": "x"})
    assert opened.status_code == 302 and opened.url == decision_url(interrupt)
    interrupt.refresh_from_db()
    assert interrupt.status == InterruptStatus.PENDING and interrupt.round == 2
    assert AuditEntry.objects.get(action="interrupt.reopened").data["comment"] == "x"


# -- who may open it: each person against each way in -------------------------------------


def people():
    """(name, user, may change) for the question answered by bob, assigned to bob and
    ann, its invocation started by sam (four eyes)."""
    sam = rewinder(username="sam")
    bob = rewinder(username="bob")
    ann = ApproverFactory(username="ann")  # may answer, lacks rewind_interrupt
    outsider = StaffFactory(username="outsider")  # a superuser, not an assignee
    carol = rewinder(username="carol")  # may rewind, not an assignee
    inactive = rewinder(username="gone")
    inactive.is_active = False
    inactive.save()
    root = StaffFactory(username="root")  # a superuser, an assignee (assignees bind them too)
    plain = UserFactory(username="plain", is_staff=True)  # no permission at all
    return sam, [
        ("bob", bob, True),
        ("root", root, True),
        ("ann", ann, False),
        ("outsider", outsider, False),
        ("carol", carol, False),
        ("sam, who started it", sam, False),
        ("plain", plain, False),
        ("inactive", inactive, False),
    ]


@pytest.mark.parametrize("method", ["get", "post"])
def test_who_may_open_the_page_and_change_the_answer(client, method):
    sam, matrix = people()
    assignees = ["user:bob", "user:ann", "user:sam", "user:root"]
    interrupt = ask(user=sam, assignees=assignees, four_eyes=True)
    services.decide(interrupt.pk, {"approved": False}, actor=matrix[0][1])
    anonymous = getattr(client, method)(rewind_url(interrupt), {"decision": "approve"})
    assert anonymous.status_code == 302 and "/login/" in anonymous.url
    for name, user, may in matrix:
        before = snapshot()
        client.force_login(user)
        response = getattr(client, method)(rewind_url(interrupt), {"decision": "reject"})
        if not may:
            assert response.status_code in (302, 403), name  # 302: the admin's login
            if response.status_code == 403:
                assert "You may not change the answer to this question" in response.content.decode()
            assert snapshot() == before, name
            continue
        assert response.status_code == (200 if method == "get" else 302), name


def test_an_unknown_question_is_404(login):
    page = login(rewinder()).get(reverse("admin:approvals_pendingapproval_rewind", args=["nope"]))
    assert page.status_code == 404


def test_the_questions_record_in_the_monitor_links_the_change(login):
    bob = grant_answer(rewinder(username="bob"), "view_interrupt")
    interrupt = answered(by=bob)
    record = reverse("admin:workflows_interrupt_change", args=[quote(interrupt.pk)])
    link = f'href="{rewind_url(interrupt)}" id="change-answer"'
    assert link in login(bob).get(record).content.decode()
    viewer = grant_answer(ApproverFactory(username="vic"), "view_interrupt")
    assert link not in login(viewer).get(record).content.decode()


def test_the_decision_page_marks_a_decision_whose_answer_was_changed_since(login):
    bob = rewinder(username="bob")
    interrupt = answered(False, by=bob)
    note = "replaced: the answer was changed since"
    assert note not in login(bob).get(decision_url(interrupt)).content.decode()
    services.rewind(interrupt.pk, {"approved": True}, actor=bob)
    assert note in login(bob).get(decision_url(interrupt)).content.decode()
