"""The invocation monitor through Django's test client: the graph pages, the picture data
with statuses, the node runs and timeline, cancel with confirmation, and that nothing
but the permitted admin actions changes anything."""

import json
import re

import pytest
from django.contrib.auth.models import Group, Permission
from django.core import serializers
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from tests.factories import ApproverFactory, StaffFactory, UserFactory
from workflows import services
from workflows.admin import monitor
from workflows.admin.display import decision_url
from workflows.engine import Workflow, node
from workflows.models import Interrupt, Invocation, NodeRun, SessionEvent
from workflows.registry import registry

pytestmark = pytest.mark.django_db(transaction=True)

LARGE_EXPENSE = {"employee": "Linus", "amount": 2500.0, "purpose": "laptop"}


@pytest.fixture(autouse=True)
def finance_can_reach_its_quorum(db):
    """A large expense asks group:finance for two approvals: two people must be in it."""
    finance = Group.objects.create(name="finance")
    finance.user_set.add(ApproverFactory(username="finance1"), ApproverFactory(username="finance2"))


@pytest.fixture
def admin_client(client):
    client.force_login(StaffFactory())
    return client


def viewer(*codenames: str):
    """A staff user who may view invocations (and whatever else is named), no superuser."""
    user = UserFactory(is_staff=True)
    for codename in ("view_invocation", "view_interrupt", *codenames):
        user.user_permissions.add(
            Permission.objects.get(content_type__app_label="workflows", codename=codename)
        )
    return user


def approver(*groups: str):
    """A staff approver in `groups` who may also view the monitor (no superuser)."""
    user = viewer("answer_interrupt")
    user.groups.add(*(Group.objects.get_or_create(name=name)[0] for name in groups))
    return user


def record_url(interrupt_id: str) -> str:
    return reverse("admin:workflows_interrupt_change", args=[interrupt_id])


def change_url(invocation: Invocation) -> str:
    return reverse("admin:workflows_invocation_change", args=[invocation.pk])


def page_graph(response, element_id: str = "hitl-invocation-graph") -> dict:
    match = re.search(
        rf'<script id="{element_id}" type="application/json">(.*?)</script>',
        response.content.decode(),
        re.S,
    )
    assert match, f"no graph data {element_id!r} on the page"
    return json.loads(match.group(1))


def nodes_by_id(graph: dict) -> dict:
    return {n["id"]: n for n in graph["nodes"]}


def snapshot() -> str:
    rows = [
        *Invocation.objects.all(),
        *NodeRun.objects.all(),
        *SessionEvent.objects.all(),
        *Interrupt.objects.all(),
    ]
    return serializers.serialize("json", rows)


@pytest.fixture
def failing_workflow():
    @node
    def explode(node_input):
        raise RuntimeError(f"no exchange rate for {node_input['currency']}")

    registry.register(Workflow(name="failing", edges=[("START", explode)]))
    yield
    registry.unregister("failing")


# --- the graph pages --------------------------------------------------------------------------


def test_registered_workflows_page_draws_each_graph(admin_client):
    response = admin_client.get(reverse("admin:workflows_definitions"))
    assert response.status_code == 200
    content = response.content.decode()
    assert "workflows/vendor/dagre/dagre.min.js" in content
    assert "workflows/graph.js" in content
    for name in ("test_expense", "test_moderation", "test_drafting"):
        graph = page_graph(response, f"hitl-graph-{name}")
        assert graph["name"] == name
    expense = nodes_by_id(page_graph(response, "hitl-graph-test_expense"))
    cluster = expense["test_expense/large_expense"]
    assert cluster["kind"] == "workflow"
    assert cluster["entry"] == "test_expense/large_expense/START"
    assert cluster["exits"] == ["test_expense/large_expense/combine"]
    assert expense["test_expense/large_expense/finance_approval"]["parent"] == (
        "test_expense/large_expense"
    )
    assert expense["test_expense/large_expense/both_approved"]["kind"] == "join"
    moderation = nodes_by_id(page_graph(response, "hitl-graph-test_moderation"))
    assert moderation["test_moderation/review_post"]["kind"] == "parallel_worker"


def test_one_workflow_page_and_an_unknown_name(admin_client):
    response = admin_client.get(reverse("admin:workflows_definition", args=["test_drafting"]))
    assert response.status_code == 200
    edges = page_graph(response, "hitl-graph-test_drafting")["edges"]
    assert {
        "source": "test_drafting/review",
        "target": "test_drafting/draft",
        "route": "revise",
    } in edges
    missing = admin_client.get(reverse("admin:workflows_definition", args=["expense_aproval"]))
    assert missing.status_code == 404


def test_graph_pages_need_the_view_permission(client):
    client.force_login(UserFactory(is_staff=True))
    assert client.get(reverse("admin:workflows_definitions")).status_code == 403


# --- the invocation page ------------------------------------------------------------------------


def test_invocation_page_shows_the_picture_with_statuses_and_links_to_questions(client):
    client.force_login(approver("managers", "finance"))
    invocation = services.start("test_expense", LARGE_EXPENSE)
    response = client.get(change_url(invocation))
    assert response.status_code == 200
    content = response.content.decode()
    assert "View invocation" in content and "Change invocation" not in content
    graph = nodes_by_id(page_graph(response))
    assert graph["test_expense/START"]["status"] == "COMPLETED"
    assert graph["test_expense/prepare"]["status"] == "COMPLETED"
    assert graph["test_expense/large_expense"]["status"] == "WAITING"
    assert graph["test_expense/manager_approval"]["status"] is None  # another route
    assert graph["test_expense/decide"]["status"] is None
    questions = {i.path: i.id for i in Interrupt.objects.filter(invocation=invocation)}
    for name in ("manager_approval", "finance_approval"):
        waiting = graph[f"test_expense/large_expense/{name}"]
        assert waiting["status"] == "WAITING"
        assert waiting["url"] == decision_url(questions[waiting["path"]])
    for status in ("Pending", "Running", "Waiting", "Completed", "Failed", "Cancelled"):
        assert f"</span>{status}</li>" in content  # the legend
    # Waiting node runs link their questions by what they ask, not by bare ids.
    node_runs = content.split("<h2>Node runs</h2>", 1)[1].split("<h2>Questions</h2>", 1)[0]
    for question in Interrupt.objects.filter(invocation=invocation):
        assert f'<a href="{decision_url(question.id)}">{question.message[:30]}' in node_runs
        assert f"waits for {question.id}" not in node_runs


def test_who_may_not_answer_a_question_is_linked_to_its_record(client):
    invocation = services.start("test_expense", LARGE_EXPENSE)
    finance = Interrupt.objects.get(invocation=invocation, path__contains="finance_approval")
    waiting = "test_expense/large_expense/finance_approval"
    # A superuser outside the finance group: the assignees bind superusers too.
    for user in (StaffFactory(), viewer(), approver("managers")):
        client.force_login(user)
        assert nodes_by_id(page_graph(client.get(change_url(invocation))))[waiting]["url"] == (
            record_url(finance.id)
        )
    # A finance approver who already approved waits for the second approval.
    fiona = approver("finance")
    client.force_login(fiona)
    assert nodes_by_id(page_graph(client.get(change_url(invocation))))[waiting]["url"] == (
        decision_url(finance.id)
    )
    services.decide(finance.id, {"approved": True}, actor=fiona)
    assert nodes_by_id(page_graph(client.get(change_url(invocation))))[waiting]["url"] == (
        record_url(finance.id)
    )


def test_the_invocation_page_is_built_without_a_request():
    invocation = services.start("test_expense", LARGE_EXPENSE)
    finance = Interrupt.objects.get(invocation=invocation, path__contains="finance_approval")
    waiting = "test_expense/large_expense/finance_approval"
    for user, link in ((approver("finance"), decision_url), (viewer(), record_url)):
        page = monitor.invocation_page(invocation, user, may_cancel=False)
        assert nodes_by_id(page["graph"])[waiting]["url"] == link(finance.id)
        assert {i.id: i.url for i in page["interrupts"]}[finance.id] == link(finance.id)
        assert not page["can_cancel"]
    assert monitor.invocation_page(invocation, viewer(), may_cancel=True)["can_cancel"]
    cancelled = services.cancel(invocation)
    assert not monitor.invocation_page(cancelled, viewer(), may_cancel=True)["can_cancel"]


def test_questions_show_for_whom_and_each_decision_so_far(admin_client):
    invocation = services.start("test_expense", LARGE_EXPENSE)
    finance = Interrupt.objects.get(invocation=invocation, path__contains="finance_approval")
    approver = ApproverFactory(username="fiona")
    approver.groups.add(Group.objects.get(name="finance"))
    services.decide(finance.id, {"approved": True}, actor=approver, comment="budgeted")
    questions = admin_client.get(change_url(invocation)).content.decode()
    questions = questions.split("<h2>Questions</h2>", 1)[1].split("<h2>Event timeline</h2>")[0]
    assert "for group:finance · 2 approvals needed" in questions
    assert "fiona: approved “budgeted”" in questions


def test_parallel_worker_items_are_drawn_inside_their_node_and_resume_one_by_one(client):
    client.force_login(approver("moderators"))
    invocation = services.start(
        "test_moderation", {"posts": ["Hello", "Buy cheap pills", "Nice photo"]}
    )
    questions = list(Interrupt.objects.filter(invocation=invocation).order_by("path"))
    services.submit_function_responses(
        [{"id": questions[1].id, "response": {"decision": "remove", "reason": "spam"}}]
    )
    worker = nodes_by_id(page_graph(client.get(change_url(invocation))))[
        "test_moderation/review_post"
    ]
    assert worker["status"] == "WAITING"
    items = {item["label"]: item for item in worker["items"]}
    assert {label: item["status"] for label, item in items.items()} == {
        "review_post@1": "WAITING",
        "review_post@2": "COMPLETED",
        "review_post@3": "WAITING",
    }
    assert items["review_post@1"]["url"] == decision_url(questions[0].id)
    assert "url" not in items["review_post@2"]


def test_the_page_takes_as_many_queries_for_twenty_items_as_for_two(admin_client):
    def queries_for(count: int) -> int:
        invocation = services.start("test_moderation", {"posts": ["post"] * count})
        moderator = ApproverFactory()
        moderator.groups.add(Group.objects.get_or_create(name="moderators")[0])
        for question in Interrupt.objects.filter(invocation=invocation)[: count // 2]:
            services.decide(question.id, {"decision": "publish"}, actor=moderator)
        with CaptureQueriesContext(connection) as queries:
            assert admin_client.get(change_url(invocation)).status_code == 200
        return len(queries)

    queries_for(2)  # warms Django's content-type cache
    assert queries_for(20) == queries_for(2)


def test_timeline_shows_times_function_calls_answers_and_routes(admin_client):
    invocation = services.start("test_expense", {"employee": "Ada", "amount": 420.0})
    question = Interrupt.objects.get(invocation=invocation)
    services.submit_function_responses(
        [{"id": question.id, "response": {"approved": True, "comment": "fine by me"}}]
    )
    response = admin_client.get(change_url(invocation))
    content = response.content.decode()
    timeline = content.split("<h2>Event timeline</h2>", 1)[1]
    assert re.search(
        r"<time datetime=\"[^\"]+\">\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}</time>", timeline
    )
    assert f"function call request_input ({question.id})" in timeline
    assert "Approve an expense of 420.00 for Ada?" in timeline  # the call's arguments
    assert f"answer to {question.id}" in timeline
    assert "&quot;comment&quot;: &quot;fine by me&quot;" in timeline
    assert '<dt>route</dt><dd><pre class="hitl-json">approve</pre>' in timeline
    node_runs = content.split("<h2>Node runs</h2>", 1)[1].split("<h2>Questions</h2>", 1)[0]
    assert 'title="test_expense@1/reimburse@1">reimburse@1<' in node_runs
    assert re.search(r"<td>\d+\.\d\d s</td>", node_runs)  # durations of finished runs


def test_an_unfinished_invocation_says_so_instead_of_output_null(admin_client):
    invocation = services.start("test_expense", {"employee": "Ada", "amount": 420.0})
    content = admin_client.get(change_url(invocation)).content.decode()
    assert "- (not finished yet)" in content
    assert '<pre class="hitl-json">null</pre>' not in content


def test_a_failed_node_shows_its_traceback(admin_client, failing_workflow):
    invocation = services.start("failing", {"currency": "XTS"})
    invocation.refresh_from_db()
    assert invocation.status == "FAILED"
    content = admin_client.get(change_url(invocation)).content.decode()
    tracebacks = re.findall(r'<pre class="hitl-traceback">(.*?)</pre>', content, re.S)
    assert any(
        "Traceback (most recent call last)" in text and "no exchange rate for XTS" in text
        for text in tracebacks
    )
    graph = nodes_by_id(page_graph(admin_client.get(change_url(invocation))))
    assert graph["failing/explode"]["status"] == "FAILED"


def test_an_invocation_of_a_workflow_no_longer_registered_still_shows(admin_client):
    @node
    def gone(node_input):
        return node_input

    registry.register(Workflow(name="retired", edges=[("START", gone)]))
    invocation = services.start("retired", 1)
    registry.unregister("retired")
    response = admin_client.get(change_url(invocation))
    assert response.status_code == 200
    content = response.content.decode()
    assert "No workflow named “retired” is registered any more: no picture." in content
    assert 'title="retired@1/gone@1">gone@1<' in content  # its node runs still show


def test_questions_link_to_the_inbox_while_pending_and_to_their_record_after(client):
    client.force_login(approver("managers"))
    invocation = services.start("test_expense", {"employee": "Ada", "amount": 420.0})
    question = Interrupt.objects.get(invocation=invocation)
    inbox_url = reverse("admin:approvals_pendingapproval_change", args=[question.id])
    assert decision_url(question.id) == inbox_url
    content = client.get(change_url(invocation)).content.decode()
    assert f'<a href="{inbox_url}">Approve an expense' in content
    assert client.get(inbox_url).status_code == 200
    # The read-only record of a question this user may answer links to where they answer.
    answer_it = f'<a href="{inbox_url}" id="answer-it">Answer it</a>'
    assert answer_it in client.get(record_url(question.id)).content.decode()
    client.force_login(approver("finance"))  # not among the assignees: no link
    assert "answer-it" not in client.get(record_url(question.id)).content.decode()
    client.force_login(approver("managers"))
    services.submit_function_responses([{"id": question.id, "response": {"approved": True}}])
    content = client.get(change_url(invocation)).content.decode()
    assert f'<a href="{record_url(question.id)}">Approve an expense' in content
    response = client.get(record_url(question.id))
    assert response.status_code == 200
    assert "answer-it" not in response.content.decode()  # answered: nothing to answer


def test_a_questions_record_reads_as_a_question_not_as_raw_fields(admin_client):
    invocation = services.start("test_expense", {"employee": "Ada", "amount": 420.0})
    question = Interrupt.objects.get(invocation=invocation)
    page = admin_client.get(record_url(question.id)).content.decode()
    # Indented JSON blocks, not JSON squeezed onto one line.
    assert '<pre class="hitl-json">{\n  &quot;' in page  # key order is the database's
    assert "\n  &quot;employee&quot;: &quot;Ada&quot;," in page
    assert "[&quot;group:managers&quot;]" not in page
    assert "group:managers" in page  # for whom, as the inbox writes it
    assert "the invocation fails" in page  # what happens when overdue, in words
    assert page.index("Question and answer") < page.index("Internals")


def test_the_questions_list_is_narrow_and_links_the_question(admin_client):
    invocation = services.start("test_expense", {"employee": "Ada", "amount": 420.0})
    question = Interrupt.objects.get(invocation=invocation)
    content = admin_client.get(reverse("admin:workflows_interrupt_changelist")).content.decode()
    # The question links to its record; the workflow and a short id in small print.
    assert f'<a href="{record_url(question.id)}">Approve an expense of 420.00' in content
    assert f'<small class="quiet">test_expense · {question.id[:8]}</small>' in content
    assert question.id not in content.replace(record_url(question.id), "")


def test_without_the_approvals_inbox_questions_link_to_the_interrupt_page(monkeypatch):
    monkeypatch.setattr(
        "workflows.admin.display.DECISION_URL_NAMES",
        ["admin:no_such_inbox_change", "admin:workflows_interrupt_change"],
    )
    assert decision_url("fc-1") == reverse("admin:workflows_interrupt_change", args=["fc-1"])


# --- nothing changes but through the actions --------------------------------------------------


@pytest.mark.parametrize("user_kind", ["superuser", "viewer"])
def test_a_post_to_the_change_form_changes_nothing(client, user_kind):
    client.force_login(StaffFactory() if user_kind == "superuser" else viewer())
    invocation = services.start("test_expense", {"employee": "Ada", "amount": 420.0})
    before = snapshot()
    response = client.post(
        change_url(invocation),
        {"status": "COMPLETED", "workflow_name": "other", "output": '{"hacked": true}'},
    )
    assert response.status_code == 403
    assert snapshot() == before
    question = Interrupt.objects.get(invocation=invocation)
    interrupt_url = reverse("admin:workflows_interrupt_change", args=[question.id])
    assert client.post(interrupt_url, {"status": "resolved"}).status_code == 403
    assert snapshot() == before


def test_cancel_asks_for_confirmation_and_shows_what_will_be_cancelled(admin_client):
    invocation = services.start("test_expense", LARGE_EXPENSE)
    cancel_url = reverse("admin:workflows_invocation_cancel", args=[invocation.pk])
    assert cancel_url in admin_client.get(change_url(invocation)).content.decode()
    before = snapshot()
    confirmation = admin_client.get(cancel_url)
    assert confirmation.status_code == 200
    content = confirmation.content.decode()
    assert "Cancel 1 invocation(s)?" in content
    assert "node run test_expense@1/large_expense@1/finance_approval@1 (WAITING) stops" in content
    assert "Finance: approve a large expense of 2500.00" in content
    assert snapshot() == before  # asking changes nothing

    response = admin_client.post(cancel_url, {"post": "yes"}, follow=True)
    assert response.redirect_chain[-1][0] == change_url(invocation)
    assert "Cancelled 1 invocation(s)." in response.content.decode()
    invocation.refresh_from_db()
    assert invocation.status == "CANCELLED"
    assert set(
        Interrupt.objects.filter(invocation=invocation).values_list("status", flat=True)
    ) == {"cancelled"}
    finished = admin_client.get(change_url(invocation)).content.decode()
    assert cancel_url not in finished  # nothing left to cancel


def test_cancel_action_confirms_first_and_skips_finished_invocations(admin_client):
    waiting = services.start("test_expense", LARGE_EXPENSE)
    done = services.start("test_expense", {"employee": "Grace", "amount": 50.0})
    done.refresh_from_db()
    assert done.status == "COMPLETED"  # small amounts need no approval
    changelist = reverse("admin:workflows_invocation_changelist")
    selection = {"action": "cancel_invocations", "_selected_action": [waiting.pk, done.pk]}
    before = snapshot()
    confirmation = admin_client.post(changelist, {**selection, "index": 0})
    assert confirmation.status_code == 200
    content = confirmation.content.decode()
    assert "Cancel 1 invocation(s)?" in content
    assert "already finished: skipped" in content
    assert snapshot() == before

    response = admin_client.post(changelist, {**selection, "post": "yes"}, follow=True)
    content = response.content.decode()
    assert "Cancelled 1 invocation(s)." in content
    assert "cannot cancel" in content.lower()  # the service's reason for the finished one
    waiting.refresh_from_db()
    done.refresh_from_db()
    assert (waiting.status, done.status) == ("CANCELLED", "COMPLETED")


def test_cancel_and_retry_need_their_own_permissions(client):
    client.force_login(viewer())
    invocation = services.start("test_expense", LARGE_EXPENSE)
    changelist = client.get(reverse("admin:workflows_invocation_changelist"))
    assert changelist.status_code == 200
    assert changelist.context["action_form"] is None  # no action is offered
    before = snapshot()
    cancel_url = reverse("admin:workflows_invocation_cancel", args=[invocation.pk])
    assert client.get(cancel_url).status_code == 403
    assert client.post(cancel_url, {"post": "yes"}).status_code == 403
    assert cancel_url not in client.get(change_url(invocation)).content.decode()
    assert snapshot() == before

    client.force_login(viewer("cancel_invocation"))
    actions = client.get(reverse("admin:workflows_invocation_changelist")).context["action_form"]
    names = {name for name, _ in actions.fields["action"].choices}
    assert "cancel_invocations" in names and "retry_invocations" not in names
    client.post(cancel_url, {"post": "yes"})
    invocation.refresh_from_db()
    assert invocation.status == "CANCELLED"


def test_retry_action_re_drives_a_failed_invocation(admin_client, failing_workflow):
    invocation = services.start("failing", {"currency": "XTS"})
    changelist = reverse("admin:workflows_invocation_changelist")
    response = admin_client.post(
        changelist,
        {"action": "retry_invocations", "_selected_action": [invocation.pk], "index": 0},
        follow=True,
    )
    assert "Retried 1 invocation(s)." in response.content.decode()
    explode = NodeRun.objects.get(invocation=invocation, name="explode")
    assert explode.attempt == 2
