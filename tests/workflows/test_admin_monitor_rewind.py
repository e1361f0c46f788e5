"""The invocation monitor of an invocation whose answer was changed (DESIGN 3.8): its
superseded runs greyed with what triggered them, and the changed answer's event naming the
event it replaces."""

import pytest
from django.urls import reverse

from tests.asking import ask
from tests.factories import StaffFactory
from workflows import services
from workflows.models import SessionEvent

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_monitor_shows_superseded_runs_and_the_changed_answer(client):
    admin = StaffFactory(username="root")
    interrupt = ask()
    services.decide(interrupt.pk, {"approved": False}, actor=admin)
    services.rewind(interrupt.pk, {"approved": True}, actor=admin, comment="wrong button")
    client.force_login(admin)
    page = client.get(reverse("admin:workflows_invocation_change", args=[interrupt.invocation_id]))
    content = page.content.decode()
    workflow = interrupt.workflow_name
    node_runs = content.split("<h2>Node runs</h2>", 1)[1].split("<h2>Questions</h2>", 1)[0]
    superseded = node_runs.split('<tr class="hitl-row-SUPERSEDED">', 1)[1].split("</tr>", 1)[0]
    assert f'title="{workflow}@1/answered@1">answered@1</span>' in superseded
    assert f'triggered by <code title="{workflow}@1/question@1">question@1</code>' in superseded
    assert "superseded: an answer it depended on was changed" in superseded
    assert "</span>Superseded</li>" in content  # the legend names the grey
    # The changed answer's event, and the one it replaces, by their numbers.
    events = list(SessionEvent.objects.filter(invocation=interrupt.invocation_id))
    (changed,) = [e for e in events if e.rewound]
    replaced = events[changed.replaces]
    assert replaced.function_responses[0]["response"] == {"approved": False}
    number = events.index(changed) + 1
    row = content.split(f'<tr id="event-{number}" class="hitl-event-rewound">', 1)[1]
    row = row.split("</tr>", 1)[0]
    expected = f'<strong>answer changed</strong>, replaces <a href="#event-{changed.replaces + 1}">'
    assert expected in row
    assert f'<tr id="event-{changed.replaces + 1}">' in content
