"""Notifiers (HITL["NOTIFIERS"]): each event reaches every notifier after the commit and
never on a rollback; a notifier that raises is recorded and retried alone, and neither it
nor a broker that is down touches the write that caused the event."""

from datetime import timedelta
from unittest import mock

import pytest
from celery.exceptions import Retry
from django.contrib.admin.utils import quote
from django.contrib.auth.models import Group
from django.core import mail
from django.core.checks import run_checks
from django.db import transaction
from django.test import override_settings
from django.utils import timezone

from tests.approvals.test_email_links import RefusesBob
from tests.asking import WORKFLOW, ask
from tests.factories import ApproverFactory, StaffFactory, UserFactory
from workflows import dispatch, notifications, services, signals, worker
from workflows.engine.status import InterruptStatus, NodeStatus
from workflows.models import Delegation, Interrupt, Invocation, NotificationAttempt
from workflows.tasks import notify as notify_task

pytestmark = pytest.mark.django_db(transaction=True)

HERE = "tests.people.test_notifications"
RECORDER = f"{HERE}.Recorder"
RAISING = f"{HERE}.Raising"
calls: list[tuple[str, str, dict]] = []


class Recorder:
    def notify(self, event, interrupt, **context):
        calls.append((event, interrupt.pk, context))


class Raising:
    def notify(self, event, interrupt, **context):
        raise ConnectionError("chat service down")


class Partly:
    """Reaches everyone but "b"; its retry is for "b" alone."""

    def notify(self, event, interrupt, only=None, **context):
        calls.append((event, interrupt.pk, {"only": only}))
        raise notifications.Undelivered("b: refused", only=["b"])


class Off:
    def enabled(self):
        return False

    def notify(self, event, interrupt, **context):
        calls.append((event, interrupt.pk, context))


class NoNotify:
    pass


@pytest.fixture(autouse=True)
def fresh_calls():
    calls.clear()
    yield
    calls.clear()


def events() -> list[str]:
    return [event for event, _, _ in calls]


@override_settings(HITL={"NOTIFIERS": [RECORDER]})
def test_opened_reaches_the_notifier_after_the_commit_and_is_recorded():
    interrupt = ask(assignees=["user:ada"])
    assert calls == [("opened", interrupt.pk, {})]
    (attempt,) = NotificationAttempt.objects.all()
    assert (attempt.interrupt_id, attempt.event, attempt.notifier) == (
        interrupt.pk,
        "opened",
        RECORDER,
    )
    assert attempt.succeeded and attempt.attempt == 1 and attempt.error == ""


@override_settings(HITL={"NOTIFIERS": [RECORDER]})
def test_nothing_is_told_of_a_rolled_back_question():
    with mock.patch.object(dispatch, "send_run"):  # the run below, inside a transaction
        invocation = services.start(WORKFLOW, {"request": {"message": "Approve?"}})
    with pytest.raises(RuntimeError), transaction.atomic():
        worker.execute(invocation.pk)
        assert Interrupt.objects.filter(invocation=invocation).exists()
        raise RuntimeError("the caller's transaction fails")
    assert calls == [] and not NotificationAttempt.objects.exists()


@override_settings(HITL={"NOTIFIERS": [RECORDER]})
def test_a_signal_sent_inside_a_transaction_waits_for_its_commit():
    interrupt = ask()
    calls.clear()
    with pytest.raises(RuntimeError), transaction.atomic():
        signals.interrupt_opened.send(sender=None, interrupt_id=interrupt.pk)
        raise RuntimeError("rolled back")
    assert calls == []
    with transaction.atomic():
        signals.interrupt_opened.send(sender=None, interrupt_id=interrupt.pk)
        assert calls == [], "not before the commit"
    assert events() == ["opened"]


LADDER = [
    {"after": 3600, "remind": True, "assignees": None},
    {"after": 7200, "remind": False, "assignees": ["user:bob"]},
    {"after": 9000, "remind": False, "assignees": None},
]


@override_settings(HITL={"NOTIFIERS": [RECORDER]})
def test_a_reminding_step_reminds_and_a_reassigning_one_escalates():
    interrupt = ask(assignees=["user:ada"])
    Interrupt.objects.filter(pk=interrupt.pk).update(escalation=LADDER)
    calls.clear()
    for step in (0, 1, 2, 7):  # the last two did nothing to tell, or are not in the ladder
        signals.interrupt_escalated.send_robust(sender=None, interrupt_id=interrupt.pk, step=step)
    assert calls == [
        ("reminded", interrupt.pk, {"step": 0}),
        ("escalated", interrupt.pk, {"step": 1}),
    ]


@override_settings(HITL={"NOTIFIERS": [RECORDER]})
def test_a_decided_question_is_told_with_its_outcome():
    ada = ApproverFactory(username="ada")
    interrupt = ask(assignees=["user:ada"])
    calls.clear()
    services.decide(interrupt.pk, {"approved": True}, actor=ada)
    assert calls == [("decided", interrupt.pk, {"status": InterruptStatus.RESOLVED})]


class OpenedOnly(Recorder):
    events = frozenset({"opened"})


@override_settings(HITL={"NOTIFIERS": [f"{HERE}.OpenedOnly", RECORDER]})
def test_a_notifier_is_told_only_the_events_it_names():
    ada = ApproverFactory(username="ada")
    interrupt = ask(assignees=["user:ada"])
    services.decide(interrupt.pk, {"approved": True}, actor=ada)
    told = NotificationAttempt.objects.order_by("pk").values_list("notifier", "event")
    assert list(told) == [
        (f"{HERE}.OpenedOnly", "opened"),
        (RECORDER, "opened"),
        (RECORDER, "decided"),
    ]


class AssignedOnly(Recorder):
    assigned_only = True


@override_settings(HITL={"NOTIFIERS": [f"{HERE}.AssignedOnly"]})
def test_a_notifier_of_assignees_only_is_not_told_of_a_question_assigned_to_no_one():
    with mock.patch.object(dispatch, "send", wraps=dispatch.send) as send:
        ask()
    assert send.call_args_list == []
    assert calls == [] and not NotificationAttempt.objects.exists()
    assigned = ask(assignees=["user:ada"])
    assert calls == [("opened", assigned.pk, {})]


@override_settings(HITL={"NOTIFIERS": [f"{HERE}.OpenedOnly"]})
def test_an_event_no_notifier_wants_enqueues_nothing():
    ada = ApproverFactory(username="ada")
    interrupt = ask(assignees=["user:ada"])
    with mock.patch.object(dispatch, "send", wraps=dispatch.send) as send:
        services.decide(interrupt.pk, {"approved": True}, actor=ada)
    assert send.call_args_list == []
    assert list(NotificationAttempt.objects.values_list("event", flat=True)) == ["opened"]


@override_settings(HITL={"NOTIFIERS": [RECORDER]})
def test_a_delegate_is_told_of_the_delegators_pending_questions():
    ada, bob = ApproverFactory(username="ada"), ApproverFactory(username="bob")
    Group.objects.create(name="finance").user_set.add(ada)
    direct = ask(assignees=["user:ada"])
    by_group = ask(assignees=["group:finance"])
    ask(assignees=["user:carol"])
    answered = ask(assignees=["user:ada"])
    services.decide(answered.pk, {"approved": True}, actor=ada)
    now = timezone.now()
    delegation = Delegation.objects.create(
        delegator=ada,
        delegate=bob,
        starts_at=now - timedelta(hours=1),
        ends_at=now + timedelta(days=2),
    )
    calls.clear()
    signals.delegation_changed.send_robust(
        sender=None, delegation_id=delegation.pk, action="delegation.created"
    )
    assert [(event, pk) for event, pk, _ in calls] == [
        ("delegated", direct.pk),
        ("delegated", by_group.pk),
    ]
    assert all(context == {"delegation": delegation} for _, _, context in calls)
    calls.clear()
    signals.delegation_changed.send_robust(
        sender=None, delegation_id=delegation.pk, action="delegation.ended"
    )
    assert calls == []


@override_settings(HITL={"NOTIFIERS": [RECORDER]})
def test_a_delegate_is_told_only_of_the_questions_they_may_answer():
    ada, bob = ApproverFactory(username="ada"), ApproverFactory(username="bob")
    theirs = ask(message="Pay the supplier?", assignees=["user:ada"])
    bobs_own_request = ask(
        bob, message="Approve bob's bonus?", assignees=["user:ada"], four_eyes=True
    )
    now = timezone.now()
    window = {"starts_at": now - timedelta(hours=1), "ends_at": now + timedelta(days=2)}
    to_bob = Delegation.objects.create(delegator=ada, delegate=bob, **window)
    to_carol = Delegation.objects.create(
        delegator=ada, delegate=UserFactory(username="carol", is_staff=True), **window
    )
    calls.clear()
    for delegation in (to_bob, to_carol):
        signals.delegation_changed.send_robust(
            sender=None, delegation_id=delegation.pk, action="delegation.created"
        )
    told = [(pk, context["delegation"].delegate.username) for _, pk, context in calls]
    assert told == [(theirs.pk, "bob")], "not the four-eyes question bob started; carol may not"
    assert bobs_own_request.pk not in {pk for _, pk, _ in calls}
    assert "carol" not in {name for _, name in told}
    # A retry after the delegate lost the right to answer tells nothing either.
    retry = notifications.deliver(
        "delegated",
        [],
        {"delegation_id": to_bob.pk},
        [[bobs_own_request.pk, RECORDER, {}]],
        attempt=2,
    )
    assert retry == [] and len(calls) == 1


@override_settings(HITL={"NOTIFIERS": [RECORDER]})
def test_a_delegation_tells_only_of_its_workflows_and_only_while_active():
    ada, bob = ApproverFactory(username="ada"), ApproverFactory(username="bob")
    ask(assignees=["user:ada"])
    now = timezone.now()
    elsewhere = Delegation.objects.create(
        delegator=ada,
        delegate=bob,
        starts_at=now,
        ends_at=now + timedelta(days=1),
        workflows=["expense"],
    )
    later = Delegation.objects.create(
        delegator=ada,
        delegate=bob,
        starts_at=now + timedelta(days=3),
        ends_at=now + timedelta(days=4),
    )
    calls.clear()
    for delegation in (elsewhere, later):
        signals.delegation_changed.send_robust(
            sender=None, delegation_id=delegation.pk, action="delegation.created"
        )
    assert calls == []


@override_settings(HITL={"NOTIFIERS": [RAISING, RECORDER], "NOTIFY_MAX_ATTEMPTS": 3})
def test_a_raising_notifier_is_recorded_and_retried_alone_and_the_write_goes_on():
    ada = ApproverFactory(username="ada")
    interrupt = ask(assignees=["user:ada"])
    assert Invocation.objects.get(pk=interrupt.invocation_id).status == NodeStatus.WAITING
    assert events() == ["opened"], "the other notifier is called, once"
    failed = NotificationAttempt.objects.filter(notifier=RAISING).order_by("attempt")
    assert [(a.attempt, a.succeeded) for a in failed] == [(1, False), (2, False), (3, False)]
    assert all(a.error == "ConnectionError: chat service down" for a in failed)
    assert NotificationAttempt.objects.filter(notifier=RECORDER, succeeded=True).count() == 1
    decision = services.decide(interrupt.pk, {"approved": True}, actor=ada)
    assert decision.pk and Interrupt.objects.get(pk=interrupt.pk).status == InterruptStatus.RESOLVED
    assert events() == ["opened", "decided"]


@override_settings(HITL={"NOTIFIERS": [f"{HERE}.Partly"], "NOTIFY_MAX_ATTEMPTS": 2})
def test_a_partly_delivered_notification_is_retried_for_those_left():
    ask()
    assert [context for _, _, context in calls] == [{"only": None}, {"only": ["b"]}]
    assert list(NotificationAttempt.objects.values_list("error", flat=True)) == ["b: refused"] * 2


@override_settings(HITL={"NOTIFIERS": [RAISING, RECORDER], "NOTIFY_BACKOFF_SECONDS": 30})
def test_a_worker_retries_the_failed_call_alone_after_a_growing_backoff():
    interrupt = ask()
    NotificationAttempt.objects.all().delete()
    calls.clear()
    args = ["opened", [interrupt.pk], {}]
    with mock.patch.object(notify_task, "retry", side_effect=Retry) as retry:
        for retries, countdown in ((0, 30.0), (1, 60.0)):
            notify_task.push_request(retries=retries, is_eager=False)
            retrying = None if retries == 0 else [[interrupt.pk, RAISING, {}]]
            try:
                with pytest.raises(Retry):
                    notify_task.run(*args, retrying)
            finally:
                notify_task.pop_request()
            assert retry.call_args.kwargs == {
                "args": [*args, [[interrupt.pk, RAISING, {}]]],
                "countdown": countdown,
            }
    assert events() == ["opened"], "the notifier that worked is not called again"
    assert list(NotificationAttempt.objects.order_by("pk").values_list("notifier", "attempt")) == [
        (RAISING, 1),
        (RECORDER, 1),
        (RAISING, 2),
    ]


real_send = dispatch.send


def broker_down_for_notifications(name, *args, **options):
    if name == dispatch.NOTIFY:
        raise ConnectionRefusedError("no broker")
    return real_send(name, *args, **options)


@override_settings(HITL={"NOTIFIERS": [RECORDER]})
def test_a_broker_that_is_down_is_logged_and_the_question_still_opens(caplog):
    with mock.patch.object(dispatch, "send", side_effect=broker_down_for_notifications):
        interrupt = ask()
    assert Invocation.objects.get(pk=interrupt.invocation_id).status == NodeStatus.WAITING
    assert "notifications of opened" in caplog.text and "not sent" in caplog.text
    assert calls == []


@override_settings(HITL={"NOTIFIERS": [f"{HERE}.Off"]})
def test_nothing_is_enqueued_when_no_notifier_is_enabled():
    with mock.patch.object(dispatch, "send", wraps=dispatch.send) as send:
        ask()
    assert dispatch.NOTIFY not in [call.args[0] for call in send.call_args_list]
    assert calls == [] and not NotificationAttempt.objects.exists()


EMAIL = {
    "NOTIFIERS": ["approvals.notifiers.email.EmailNotifier"],
    "EMAIL_NOTIFICATIONS": True,
    "EMAIL_BASE_URL": "https://ops.example.com",
    "NOTIFY_MAX_ATTEMPTS": 3,
}


@override_settings(HITL=EMAIL, EMAIL_BACKEND=f"{RefusesBob.__module__}.RefusesBob")
def test_one_bad_address_does_not_stop_the_others_and_its_failure_is_recorded():
    for name in ("alice", "bob", "carol"):
        ApproverFactory(username=name, email=f"{name}@example.com")
    interrupt = ask(assignees=["user:alice", "user:bob", "user:carol"])
    assert sorted(m.to[0] for m in mail.outbox) == ["alice@example.com", "carol@example.com"]
    attempts = NotificationAttempt.objects.filter(interrupt=interrupt).order_by("attempt")
    assert [(a.attempt, a.succeeded) for a in attempts] == [(1, False), (2, False), (3, False)]
    assert all(a.error.startswith("bob@example.com: SMTPRecipientsRefused") for a in attempts)
    assert "alice" not in attempts[0].error and "carol" not in attempts[0].error


@override_settings(HITL=EMAIL)
def test_the_delegate_is_mailed_about_a_delegated_question_and_reminders_go_to_the_assignees():
    ada = ApproverFactory(username="ada", email="ada@example.com")
    bob = ApproverFactory(username="bob", email="bob@example.com")
    interrupt = ask(message="Approve the offsite?", assignees=["user:ada"])
    now = timezone.now()
    delegation = Delegation.objects.create(
        delegator=ada, delegate=bob, starts_at=now, ends_at=now + timedelta(days=2)
    )
    mail.outbox.clear()
    signals.delegation_changed.send_robust(
        sender=None, delegation_id=delegation.pk, action="delegation.created"
    )
    (message,) = mail.outbox
    assert message.to == ["bob@example.com"]
    assert "for\nada, who is away until" in message.body
    Interrupt.objects.filter(pk=interrupt.pk).update(escalation=LADDER)
    mail.outbox.clear()
    signals.interrupt_escalated.send_robust(sender=None, interrupt_id=interrupt.pk, step=0)
    (reminder,) = mail.outbox
    assert reminder.to == ["ada@example.com"]
    assert reminder.subject == "Reminder: decision needed: Approve the offsite?"


@pytest.mark.parametrize(
    ("paths", "problem"),
    [
        (["nope.Missing"], "'nope.Missing', which cannot be imported"),
        ([f"{HERE}.Absent"], f"'{HERE}.Absent', which cannot be imported"),
        ([f"{HERE}.NoNotify"], f"'{HERE}.NoNotify', which has no notify("),
    ],
)
def test_the_system_check_names_a_notifier_that_cannot_be_used(paths, problem):
    with override_settings(HITL={"NOTIFIERS": [RECORDER, *paths]}):
        errors = [m for m in run_checks() if m.id == "workflows.E103"]
    assert len(errors) == 1 and problem in errors[0].msg


def test_the_default_notifiers_pass_the_check():
    assert [m for m in run_checks() if m.id == "workflows.E103"] == []
    with override_settings(HITL={"NOTIFIERS": ["approvals.notifiers.slack.SlackNotifier"]}):
        assert [m for m in run_checks() if m.id == "workflows.E103"] == []


@override_settings(HITL={"NOTIFIERS": [RAISING, RECORDER], "NOTIFY_MAX_ATTEMPTS": 2})
def test_the_attempts_are_listed_read_only_in_the_admin_and_on_the_questions_page(client):
    interrupt = ask(message="Approve the offsite?")
    client.force_login(StaffFactory(username="root"))
    listing = client.get("/admin/workflows/notificationattempt/").content.decode()
    assert listing.count("Approve the offsite?") == 3  # two failed attempts, one sent
    assert "/admin/workflows/notificationattempt/add/" not in listing
    attempt = NotificationAttempt.objects.filter(succeeded=False).first()
    page = client.get(f"/admin/workflows/notificationattempt/{attempt.pk}/change/")
    assert page.status_code == 200 and b'name="_save"' not in page.content
    assert b"ConnectionError: chat service down" in page.content
    question = client.get(f"/admin/workflows/interrupt/{quote(interrupt.pk)}/change/")
    shown = question.content.decode()
    assert shown.count("ConnectionError: chat service down") == 2
    assert RECORDER in shown and 'name="_save"' not in shown
    assert client.post("/admin/workflows/notificationattempt/add/").status_code == 403
