"""The three demo workflows run to completion through workflows.services, answered the way
staff answer them (services.decide by people in the assigned groups)."""

import pytest
from django.contrib.auth.models import Group
from django.core.exceptions import PermissionDenied

from tests.factories import ApproverFactory
from workflows import services
from workflows.models import Interrupt, Invocation, NodeRun

pytestmark = pytest.mark.django_db(transaction=True)


def person(*groups: str):
    user = ApproverFactory()
    user.groups.add(*(Group.objects.get_or_create(name=name)[0] for name in groups))
    return user


def question(invocation: Invocation, node: str) -> Interrupt:
    return Interrupt.objects.get(
        invocation=invocation, status="pending", path__contains=f"/{node}@"
    )


def finished(invocation: Invocation) -> Invocation:
    invocation.refresh_from_db()
    return invocation


def runs(invocation: Invocation) -> dict[str, str]:
    return dict(NodeRun.objects.filter(invocation=invocation).values_list("path", "status"))


# --- expense_approval -------------------------------------------------------------------------


def test_small_expense_is_approved_without_asking_anyone():
    invocation = finished(services.start("expense_approval", {"employee": "Ken", "amount": 42}))
    assert invocation.status == "COMPLETED"
    assert invocation.output["status"] == "reimbursed"
    assert not Interrupt.objects.filter(invocation=invocation).exists()
    assert set(runs(invocation)) == {  # needs_manager is false and no manager is asked
        "expense_approval@1",
        "expense_approval@1/prepare@1",
        "expense_approval@1/auto_approve@1",
        "expense_approval@1/decide@1",
        "expense_approval@1/reimburse@1",
    }
    prepare = NodeRun.objects.get(invocation=invocation, name="prepare")
    assert prepare.output["needs_manager"] is False and prepare.route == "auto"


@pytest.mark.parametrize(
    ("approved", "outcome"), [(True, "reimbursed"), (False, "rejected")], ids=["pay", "reject"]
)
def test_a_manager_decides_a_mid_sized_expense(approved, outcome):
    manager = person("managers")
    invocation = services.start("expense_approval", {"employee": "Ada", "amount": 420})
    asked = question(invocation, "manager_approval")
    assert asked.assignees == ["group:managers"] and asked.quorum == 1
    assert asked.payload["needs_manager"] is True
    with pytest.raises(PermissionDenied):
        services.decide(asked.id, {"approved": True}, actor=person("finance"))
    services.decide(asked.id, {"approved": approved, "comment": "ok?"}, actor=manager)
    invocation = finished(invocation)
    assert invocation.status == "COMPLETED"
    assert invocation.output["status"] == outcome
    if not approved:
        assert invocation.output["comment"] == "ok?"


def test_large_expense_needs_the_manager_and_two_finance_approvals_in_parallel():
    manager, first, second = person("managers"), person("finance"), person("finance")
    invocation = services.start("expense_approval", {"employee": "Linus", "amount": 2500})
    finance = question(invocation, "finance_approval")
    manager_question = question(invocation, "manager_approval")
    assert finance.path == "expense_approval@1/large_expense@1/finance_approval@1"
    assert (finance.assignees, finance.quorum) == (["group:finance"], 2)

    services.decide(finance.id, {"approved": True}, actor=first)
    services.decide(manager_question.id, {"approved": True, "comment": "yes"}, actor=manager)
    assert finished(invocation).status == "WAITING"  # one finance approval is not enough
    finance.refresh_from_db()
    assert finance.status == "pending"
    join = NodeRun.objects.get(invocation=invocation, name="both_approved")
    assert join.status == "PENDING"  # the manager's answer arrived, finance's not yet

    services.decide(finance.id, {"approved": True, "comment": "budgeted"}, actor=second)
    invocation = finished(invocation)
    assert invocation.status == "COMPLETED"
    assert invocation.output["status"] == "reimbursed"
    combined = NodeRun.objects.get(invocation=invocation, name="combine").output
    assert combined == {
        "approved": True,
        "comment": "manager_approval: yes; finance_approval: budgeted",
    }
    finance.refresh_from_db()
    assert [d["actor"] for d in finance.response["decisions"]] == [
        first.username,
        second.username,
    ]


def test_one_finance_rejection_rejects_a_large_expense():
    manager, finance_person = person("managers"), person("finance")
    person("finance")  # two approvals must be possible, or the question is not asked
    invocation = services.start("expense_approval", {"employee": "Linus", "amount": 2500})
    services.decide(
        question(invocation, "finance_approval").id,
        {"approved": False, "comment": "over budget"},
        actor=finance_person,
    )
    services.decide(question(invocation, "manager_approval").id, {"approved": True}, actor=manager)
    invocation = finished(invocation)
    assert invocation.status == "COMPLETED"
    assert invocation.output == {"status": "rejected", "comment": "finance_approval: over budget"}


# --- content_moderation -----------------------------------------------------------------------


def test_moderation_reviews_each_post_and_resumes_item_by_item():
    moderator = person("moderators")
    posts = ["Hello", "BUY NOW", "Nice photo"]
    invocation = services.start("content_moderation", {"posts": posts})
    questions = list(Interrupt.objects.filter(invocation=invocation).order_by("path"))
    assert [q.payload for q in questions] == [
        {"post": 1, "text": "Hello"},
        {"post": 2, "text": "BUY NOW"},
        {"post": 3, "text": "Nice photo"},
    ]
    services.decide(questions[1].id, {"decision": "remove", "reason": "spam"}, actor=moderator)
    assert finished(invocation).status == "WAITING"
    assert {path: status for path, status in runs(invocation).items() if path.count("/") == 2} == {
        "content_moderation@1/review_post@1/review_post@1": "WAITING",
        "content_moderation@1/review_post@1/review_post@2": "COMPLETED",
        "content_moderation@1/review_post@1/review_post@3": "WAITING",
    }
    for asked in (questions[0], questions[2]):
        services.decide(asked.id, {"decision": "publish"}, actor=moderator)
    invocation = finished(invocation)
    assert invocation.status == "COMPLETED"
    assert invocation.output == {"published": [1, 3], "removed": [2]}


# --- document_drafting ------------------------------------------------------------------------


def test_a_rejected_draft_is_redrafted_with_a_fresh_run_id_until_approved():
    editor = person("editors")
    invocation = services.start(
        "document_drafting", {"title": "Holiday policy", "brief": "how leave works"}
    )
    first = question(invocation, "review")
    assert first.payload["version"] == 1
    services.decide(first.id, {"approved": False, "comment": "add carry-over rules"}, actor=editor)

    second = question(invocation, "review")
    assert second.path == "document_drafting@1/review@2"
    assert second.payload["version"] == 2
    assert "Revised for: add carry-over rules" in second.payload["text"]
    redraft = NodeRun.objects.get(invocation=invocation, path="document_drafting@1/draft@2")
    assert redraft.run_id == 2 and redraft.status == "COMPLETED"

    services.decide(second.id, {"approved": True}, actor=editor)
    invocation = finished(invocation)
    assert invocation.status == "COMPLETED"
    assert invocation.output["status"] == "published"
    assert invocation.output["version"] == 2
    assert sorted(
        NodeRun.objects.filter(invocation=invocation, name="draft").values_list("run_id", flat=True)
    ) == [1, 2]


# --- support_agent ----------------------------------------------------------------------------

TICKET = {
    "id": "T-1",
    "issue": "damaged",
    "customer": "Ada",
    "email": "ada@example.com",
    "order": "A-17",
    "amount": 80,
}


def test_the_agents_rejected_refund_is_proposed_again_from_the_reason_then_mailed():
    support = person("support")
    invocation = services.start("support_agent", TICKET)
    first = question(invocation, "refund")
    assert first.message == "Refund 80 to Ada for order A-17?"
    services.decide(first.pk, {"decision": "reject", "reason": "at most 40"}, actor=support)
    second = question(invocation, "refund")
    assert second.payload["args"] == {"order": "A-17", "customer": "Ada", "amount": 40}
    services.decide(second.pk, {"decision": "approve"}, actor=support)
    mail = question(invocation, "email_customer")
    assert mail.payload["args"]["body"] == "We refunded 40 for order A-17."
    edited = {**mail.payload["args"], "body": "We refunded 40. Sorry for the trouble!"}
    services.decide(mail.pk, {"decision": "edit", "args": edited}, actor=support)
    done = finished(invocation)
    assert done.status == "COMPLETED"
    steps = done.output["steps"]
    assert [s["tool"] for s in steps] == ["refund", "refund", "email_customer"]
    assert steps[0]["result"] == {"rejected": True, "reason": "at most 40"}
    assert steps[1]["result"]["refund_id"].startswith("rf-")
    assert {e.name: e.status for e in done.effects.all()} == {
        "payment": "finished",
        "mail": "finished",
    }


def test_a_standing_grant_with_an_amount_pin_lets_small_refunds_pass():
    from workflows.services import grants

    boss = ApproverFactory(is_superuser=True)
    pins = {"properties": {"amount": {"maximum": 50}}}
    grants.create_grant("support_agent", "refund", "always", actor=boss, pins=pins)
    small = services.start("support_agent", {**TICKET, "amount": 30})
    assert question(small, "email_customer")  # the refund passed; the mail asks
    large = services.start("support_agent", TICKET)
    assert question(large, "refund").payload["args"]["amount"] == 80


def test_deleting_records_needs_two_managers_and_a_rejection_is_explained_to_the_customer():
    ann, ben, support = person("managers"), person("managers"), person("support")
    ticket = {"id": "T-2", "issue": "close_account", "customer": "Bob", "email": "b@example.com"}
    invocation = services.start("support_agent", ticket)
    deletion = question(invocation, "delete_records")
    assert deletion.quorum == 2
    with pytest.raises(PermissionDenied):
        services.decide(deletion.pk, {"decision": "approve"}, actor=support)
    services.decide(deletion.pk, {"decision": "approve"}, actor=ann)
    services.decide(deletion.pk, {"decision": "approve"}, actor=ben)
    mail = question(invocation, "email_customer")
    assert mail.payload["args"]["body"] == "Your account is closed and its records are deleted."

    refused = services.start("support_agent", {**ticket, "id": "T-3"})
    services.decide(
        question(refused, "delete_records").pk,
        {"decision": "reject", "reason": "open invoices"},
        actor=ann,
    )
    body = question(refused, "email_customer").payload["args"]["body"]
    assert body == "We could not close your account yet: open invoices"
