"""The approvals dashboard: its figures on a small seeded set (exact medians, 90th
percentiles and rates), the rubber-stamp flag at its thresholds, who may see it, a constant
number of queries, and well-formed SVG with the bars the figures call for."""

import xml.etree.ElementTree as ET
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone
from hypothesis import given
from hypothesis import strategies as st

from approvals import charts
from approvals.figures import RubberStampRule, dashboard_figures, percentile
from tests.factories import (
    ApproverFactory,
    DecisionFactory,
    InterruptFactory,
    StaffFactory,
    UserFactory,
    grant_answer,
)

pytestmark = pytest.mark.django_db

SVG = "{http://www.w3.org/2000/svg}"
EXPENSE, MODERATION = "test_expense", "test_moderation"  # registered in tests/project
APPROVE, REJECT = {"approved": True}, {"approved": False}


def dashboard_url() -> str:
    return reverse("admin:approvals_dashboard")


def decide(actor, seconds, response, *, workflow=EXPENSE, asked):
    """A decision `seconds` after its question was asked at `asked`."""
    question = InterruptFactory(workflow_name=workflow, status="resolved", created_at=asked)
    return DecisionFactory(
        interrupt=question,
        actor=actor,
        response=response,
        created_at=asked + timedelta(seconds=seconds),
    )


@pytest.fixture
def now():
    return timezone.now()


@pytest.fixture
def seeded(now):
    """alice approves four in 4-10 s; bob approves two and rejects one in 1-10 min; carol
    answers a moderation question (no vote) and edits a gate's proposal (a vote that
    approves); and alice's decision 40 days ago, outside a 30-day period."""
    alice, bob, carol = (UserFactory(username=name) for name in ("alice", "bob", "carol"))
    asked = now - timedelta(days=2)
    for seconds in (4, 6, 8, 10):
        decide(alice, seconds, APPROVE, asked=asked)
    for seconds, response in ((60, APPROVE), (120, REJECT), (600, APPROVE)):
        decide(bob, seconds, response, asked=asked)
    decide(carol, 3600, {"decision": "publish"}, workflow=MODERATION, asked=asked)
    decide(carol, 30, {"decision": "edit", "args": {}}, workflow=MODERATION, asked=asked)
    decide(alice, 1, REJECT, asked=now - timedelta(days=40))
    # Open questions: their age, priority and due dates.
    for minutes, priority, due in (
        (30, "urgent", None),
        (120, "high", None),
        (150, "high", now + timedelta(hours=1)),
        (180, "normal", now - timedelta(minutes=5)),
        (3 * 24 * 60, "low", None),
        (10 * 24 * 60, "normal", now - timedelta(days=9)),
    ):
        InterruptFactory(
            workflow_name=EXPENSE,
            priority=priority,
            due_at=due,
            created_at=now - timedelta(minutes=minutes),
        )
    InterruptFactory(workflow_name=MODERATION, due_at=now - timedelta(seconds=1))
    InterruptFactory(workflow_name=MODERATION, status="resolved", due_at=now - timedelta(days=1))
    return now


def test_percentile_interpolates_between_ranks_as_percentile_cont():
    assert percentile([4, 6, 8, 10], 0.5) == 7
    assert percentile([4, 6, 8, 10], 0.9) == pytest.approx(9.4)
    assert percentile([5], 0.9) == 5


def test_open_questions_by_age_and_priority_and_overdue_per_workflow(seeded):
    figures = dashboard_figures(now=seeded)
    assert figures.open_by_age == {
        "under 1 hour": {"low": 0, "normal": 1, "high": 0, "urgent": 1},  # normal: moderation
        "1 to 24 hours": {"low": 0, "normal": 1, "high": 2, "urgent": 0},
        "1 to 7 days": {"low": 1, "normal": 0, "high": 0, "urgent": 0},
        "over 7 days": {"low": 0, "normal": 1, "high": 0, "urgent": 0},
    }
    assert [(row.workflow, row.open, row.overdue) for row in figures.load] == [
        (EXPENSE, 6, 2),
        (MODERATION, 1, 1),  # the answered question past its due date is not overdue
    ]


def test_time_to_decision_per_workflow_and_per_approver(seeded):
    figures = dashboard_figures(now=seeded)
    expense, moderation = figures.per_workflow[EXPENSE], figures.per_workflow[MODERATION]
    # 4, 6, 8, 10, 60, 120, 600 s
    assert (expense.decisions, expense.median, expense.p90) == (7, 10, pytest.approx(312))
    assert (moderation.decisions, moderation.median, moderation.p90) == (
        2,
        1815,
        pytest.approx(3243),
    )
    alice, bob, carol = figures.approvers
    assert (alice.name, alice.timing.median, alice.timing.p90) == ("alice", 7, pytest.approx(9.4))
    assert (bob.timing.median, bob.timing.p90) == (120, pytest.approx(504))
    assert (carol.timing.decisions, carol.timing.median) == (2, 1815)
    assert figures.decisions == 9 and not figures.capped


def test_approval_rate_per_approver_counts_votes_only(seeded):
    alice, bob, carol = dashboard_figures(now=seeded).approvers
    assert (alice.approvals, alice.rejections, alice.approval_rate) == (4, 0, 1)
    assert (bob.approvals, bob.rejections) == (2, 1)
    assert bob.approval_rate == pytest.approx(2 / 3)
    # An edit of a gate's proposal approves; "publish" is an answer, not a vote.
    assert (carol.approvals, carol.rejections, carol.vote_median) == (1, 0, 30)


def test_the_period_and_the_workflow_filter_the_decisions(seeded):
    alice = dashboard_figures(now=seeded, days=90).approvers[0]
    assert (alice.approvals, alice.rejections) == (4, 1)  # the decision 40 days ago
    assert dashboard_figures(now=seeded, days=7).decisions == 9
    moderation = dashboard_figures(now=seeded, workflow=MODERATION)
    assert list(moderation.per_workflow) == [MODERATION]
    assert [approver.name for approver in moderation.approvers] == ["carol"]
    assert [row.workflow for row in moderation.load] == [MODERATION]
    assert sum(sum(counts.values()) for counts in moderation.open_by_age.values()) == 1


def test_at_most_the_configured_decisions_are_read_the_latest_first(seeded, settings):
    settings.HITL = {**settings.HITL, "DASHBOARD_MAX_DECISIONS": 3}
    figures = dashboard_figures(now=seeded)
    assert figures.decisions == 3 and figures.capped
    # The latest three: carol's two (3600 s and 30 s after asking) and bob's 600 s.
    assert sorted(approver.name for approver in figures.approvers) == ["bob", "carol"]


# -- the rubber-stamp rule --------------------------------------------------------------


def test_an_approver_who_approves_everything_within_seconds_is_flagged(seeded, settings):
    settings.HITL = {**settings.HITL, "RUBBER_STAMP_MIN_DECISIONS": 4}
    flagged = {a.name: a.rubber_stamp for a in dashboard_figures(now=seeded).approvers}
    assert flagged == {"alice": True, "bob": False, "carol": False}


@pytest.mark.parametrize(
    ("thresholds", "flagged"),
    [
        ({"RUBBER_STAMP_MIN_DECISIONS": 4}, True),
        ({"RUBBER_STAMP_MIN_DECISIONS": 5}, False),  # too few votes to judge
        ({"RUBBER_STAMP_MIN_DECISIONS": 4, "RUBBER_STAMP_MEDIAN_SECONDS": 7.01}, True),
        ({"RUBBER_STAMP_MIN_DECISIONS": 4, "RUBBER_STAMP_MEDIAN_SECONDS": 7}, False),  # median 7
    ],
)
def test_the_flag_at_its_vote_count_and_time_thresholds(seeded, settings, thresholds, flagged):
    settings.HITL = {**settings.HITL, **thresholds}
    assert dashboard_figures(now=seeded).approvers[0].rubber_stamp is flagged


@pytest.mark.parametrize(("approvals", "flagged"), [(19, True), (18, False)])
def test_the_flag_at_its_approval_rate_threshold(approvals, flagged):
    rule = RubberStampRule(min_decisions=20, approval_rate=0.95, median_seconds=10)
    assert rule.applies(approvals, 20 - approvals, vote_median=2) is flagged  # 95% / 90%


def test_the_default_rule_needs_twenty_votes():
    rule = RubberStampRule.from_settings()
    assert (rule.min_decisions, rule.approval_rate, rule.median_seconds) == (20, 0.95, 10)
    assert not rule.applies(19, 0, vote_median=1)
    assert rule.applies(20, 0, vote_median=9.9)
    assert not rule.applies(0, 0, vote_median=None)


# -- the pictures ------------------------------------------------------------------------


def list_items(svg: str) -> list[ET.Element]:
    root = ET.fromstring(svg)  # well-formed, or this raises
    assert root.tag == f"{SVG}svg" and root.get("viewBox", "").startswith("0 0 480 ")
    assert root.find(f"{SVG}title").text
    return [g for g in root.iter(f"{SVG}g") if g.get("role") == "listitem"]


def bars(item: ET.Element) -> list[tuple[str, str]]:
    """(fill, tooltip) of each segment of a bar (its track and outline left out)."""
    return [
        (rect.get("fill"), rect.find(f"{SVG}title").text)
        for rect in item.iter(f"{SVG}rect")
        if rect.find(f"{SVG}title") is not None
    ]


def test_the_charts_are_well_formed_svg_with_a_bar_per_figure(seeded):
    figures = dashboard_figures(now=seeded)
    by_age = list_items(charts.open_by_age_chart(figures.open_by_age))
    assert [item.get("aria-label") for item in by_age] == [
        "under 1 hour: 2 open (1 normal, 1 urgent)",
        "1 to 24 hours: 3 open (1 normal, 2 high)",
        "1 to 7 days: 1 open (1 low)",
        "over 7 days: 1 open (1 normal)",
    ]
    assert bars(by_age[1]) == [
        (charts.BLUE, "1 to 24 hours, normal: 1"),
        (charts.ORANGE, "1 to 24 hours, high: 2"),
    ]
    overdue = list_items(charts.overdue_chart(figures.load))
    assert overdue[0].get("aria-label") == f"{EXPENSE}: 2 of 6 open overdue"
    timing = list_items(charts.timing_chart(list(figures.per_workflow.items()), "t", "Time"))
    assert timing[0].get("aria-label") == (
        f"{EXPENSE}: median 10 s, 90th percentile 5 min 12 s (7 decisions)"
    )
    rates = list_items(charts.approval_rate_chart(figures.approvers, figures.rule))
    assert [item.get("aria-label") for item in rates] == [
        "alice: 100% of 4 votes approve",
        "bob: 67% of 3 votes approve",
        "carol: 100% of 1 vote approve",
    ]
    assert bars(rates[1]) == [(charts.BLUE, "approved 2"), (charts.ORANGE, "rejected 1")]


def test_the_numbers_are_written_on_the_bars_and_the_flag_in_words(seeded, settings):
    settings.HITL = {**settings.HITL, "RUBBER_STAMP_MIN_DECISIONS": 4}
    figures = dashboard_figures(now=seeded)
    svg = charts.approval_rate_chart(figures.approvers, figures.rule)
    alice = list_items(svg)[0]
    texts = ["".join(text.itertext()) for text in alice.iter(f"{SVG}text")]
    assert texts == ["alice: 100% of 4 approve ⚑ rubber stamp?", "4"]
    assert "possible rubber stamp (median 7.00 s to decide)" in alice.get("aria-label")
    assert any(rect.get("stroke-dasharray") for rect in alice.iter(f"{SVG}rect"))  # outlined
    bob = list_items(svg)[1]
    assert not any(rect.get("stroke") for rect in bob.iter(f"{SVG}rect"))


def test_text_is_escaped_in_the_svg():
    from approvals.figures import Timing

    svg = charts.timing_chart([("<b>&'\"", Timing(1, 1, 2))], "x", "A <title>")
    item = list_items(svg)[0]
    assert item.get("aria-label").startswith("<b>&'\"")


def test_empty_charts_say_so():
    figures = dashboard_figures()
    for svg in (
        charts.open_by_age_chart(figures.open_by_age),
        charts.overdue_chart(figures.load),
        charts.timing_chart([], "t", "Time"),
        charts.approval_rate_chart([], figures.rule),
    ):
        root = ET.fromstring(svg)
        assert "No " in "".join(root.itertext())


# -- the page: who sees it, filters, queries -----------------------------------------------


def viewer(**kwargs):
    """A staff user (not a superuser) with the permissions the dashboard takes."""
    return grant_answer(ApproverFactory(**kwargs), "view_interrupt", "view_decision")


def test_anonymous_visitors_are_sent_to_the_login_page(client):
    response = client.get(dashboard_url())
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("admin:login"))


def test_a_user_who_is_not_staff_is_refused_even_with_the_permissions(client):
    user = grant_answer(UserFactory(username="nonstaff"), "view_interrupt", "view_decision")
    client.force_login(user)
    response = client.get(dashboard_url())
    assert response.status_code == 302 and reverse("admin:login") in response["Location"]


@pytest.mark.parametrize(
    "permissions",
    [(), ("answer_interrupt",), ("view_interrupt",), ("view_decision",)],
)
def test_staff_without_both_view_permissions_are_refused(client, permissions):
    user = grant_answer(UserFactory(username="staff", is_staff=True), *permissions)
    client.force_login(user)
    response = client.get(dashboard_url())
    assert response.status_code == 403
    assert b"workflows.view_interrupt" in response.content
    assert b"hitl-chart" not in response.content
    assert b"approvals-dashboard-link" not in client.get(reverse("admin:index")).content


@pytest.mark.parametrize("make_user", [viewer, StaffFactory], ids=["viewer", "superuser"])
def test_staff_with_the_permissions_see_it_linked_from_the_admin_index(client, seeded, make_user):
    client.force_login(make_user(username="supervisor"))
    index = client.get(reverse("admin:index")).content.decode()
    assert f'href="{dashboard_url()}"' in index
    response = client.get(dashboard_url())
    assert response.status_code == 200
    page = response.content.decode()
    assert page.count('<svg xmlns="http://www.w3.org/2000/svg" class="hitl-chart"') == 5
    assert "9 decisions in the last 30 days" in page
    assert '<option value="30" selected>' in page  # the default period, shown chosen


def test_the_filters_reach_the_figures(client, seeded):
    client.force_login(viewer())
    response = client.get(dashboard_url(), {"period": "90", "workflow": MODERATION})
    figures = response.context["figures"]
    assert (figures.days, figures.workflow, figures.decisions) == (90, MODERATION, 2)


@pytest.mark.parametrize(
    "query", [{"period": "5"}, {"period": "x"}, {"period": ""}, {"workflow": "nope"}]
)
def test_an_unknown_filter_value_is_a_clear_400(client, seeded, query):
    client.force_login(viewer())
    response = client.get(dashboard_url(), query)
    assert response.status_code == 400
    assert b"errornote" in response.content and b"hitl-chart" not in response.content


def test_the_page_takes_the_same_queries_however_much_it_counts(client, now):
    client.force_login(viewer())
    client.get(dashboard_url())  # warm the session and permission caches

    def queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            assert client.get(dashboard_url()).status_code == 200
        return len(captured)

    empty = queries()
    people = [UserFactory(username=f"approver{n}") for n in range(6)]
    for n in range(30):
        decide(people[n % 6], n, APPROVE if n % 4 else REJECT, asked=now - timedelta(hours=n))
        InterruptFactory(workflow_name=(EXPENSE, MODERATION)[n % 2], priority="high")
    assert queries() == empty


def test_the_figures_take_two_queries(seeded, django_assert_num_queries):
    with django_assert_num_queries(2):
        dashboard_figures(now=seeded)


def test_answers_of_other_shapes_are_decisions_but_no_votes(client, now):
    odd = UserFactory(username="odd")
    asked = now - timedelta(hours=1)
    for response in ("low risk", ["a"], {"decision": {"nested": 1}}, {"approved": "yes"}):
        decide(odd, 5, response, asked=asked)
    decide(odd, 5, {"approved": "yes", "decision": "reject"}, asked=asked)  # the gate's word
    (approver,) = dashboard_figures(now=now).approvers
    assert (approver.timing.decisions, approver.approvals, approver.rejections) == (5, 0, 1)
    client.force_login(viewer())
    assert client.get(dashboard_url()).status_code == 200


@pytest.mark.parametrize(
    ("part", "whole", "percent"),
    [(2, 3, 67), (1, 3, 33), (1, 2, 50), (0, 5, 0), (5, 5, 100), (199, 200, 99), (1, 200, 1)],
)
def test_a_rate_is_rounded_to_the_nearest_percent_and_all_or_none_only_when_so(
    part, whole, percent
):
    assert charts.whole_percent(part, whole) == percent


@given(
    st.integers(min_value=1, max_value=10**6).flatmap(
        lambda whole: st.tuples(st.integers(min_value=0, max_value=whole), st.just(whole))
    )
)
def test_a_rate_is_within_one_percent_of_the_exact_share(pair):
    part, whole = pair
    percent = charts.whole_percent(part, whole)
    assert abs(percent - 100 * part / whole) <= 1
    assert (percent == 100) == (part == whole) and (percent == 0) == (part == 0)
