"""The decision page's feed is woken on PostgreSQL (migration 0018): a decision recorded on
a question, and its hand-over, notify the question's invocation's channel when they
commit, as the open feeds listen (workflows.protocols.wakeup)."""

import psycopg
import pytest

from tests.asking import ask
from tests.factories import ApproverFactory
from tests.integration.worker import require_postgres
from workflows import services
from workflows.protocols import wakeup

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def test_a_vote_and_a_hand_over_wake_the_questions_channel():
    require_postgres("the feed is woken by LISTEN/NOTIFY")
    alice = ApproverFactory(username="alice")
    ApproverFactory(username="bob")
    ApproverFactory(username="carl")
    question = ask(message="Approve the offsite?", assignees=["user:alice", "user:bob"], quorum=2)
    with psycopg.connect(wakeup.conninfo(), autocommit=True) as listening:
        listening.execute(f"LISTEN {wakeup.CHANNEL}")
        services.reassign(question.pk, ["user:alice", "user:bob", "user:carl"], actor=alice)
        handed = [n.payload for n in listening.notifies(timeout=10, stop_after=1)]
        services.decide(question.pk, {"approved": True}, actor=alice)
        voted = [n.payload for n in listening.notifies(timeout=10, stop_after=1)]
    assert handed == [str(question.invocation_id)]
    assert voted == [str(question.invocation_id)]
