"""workflows.audit.trail.record: one chain per invocation with its head on the invocation
row, one chain for actions outside invocations, nothing kept from a rolled-back change,
and an entry_hash a third party recomputes from the documented canonical form."""

import hashlib
import json

import pytest
from django.db import transaction

from tests.asking import ask
from tests.audit.conftest import entries
from tests.factories import ApproverFactory
from workflows.audit import trail
from workflows.audit.canonical import GENESIS
from workflows.audit.entries import entry_content
from workflows.models import AuditChainHead, AuditEntry, Invocation

pytestmark = pytest.mark.django_db(transaction=True)


def head(invocation_id) -> str:
    return Invocation.objects.values_list("audit_head", flat=True).get(pk=invocation_id)


def test_each_invocation_has_its_own_chain_with_its_head_on_the_invocation_row():
    first, second = ask(), ask()
    ada = ApproverFactory(username="ada")
    a0, b0 = head(first.invocation_id), head(second.invocation_id)  # their start
    a1 = trail.record("interrupt.claimed", interrupt=first, actor=ada)
    b1 = trail.record("interrupt.claimed", interrupt=second, actor=ada)
    a2 = trail.record("interrupt.released", interrupt=first, actor=ada)
    assert (a1.prev_hash, b1.prev_hash, a2.prev_hash) == (a0, b0, a1.entry_hash)
    started = AuditEntry.objects.get(entry_hash=a0)
    assert (started.action, started.prev_hash) == ("invocation.started", GENESIS)
    assert head(first.invocation_id) == a2.entry_hash
    assert head(second.invocation_id) == b1.entry_hash
    stored = AuditEntry.objects.get(pk=a2.pk)
    assert (stored.invocation_id, stored.interrupt_id, stored.actor, stored.actor_name) == (
        first.invocation_id,
        first.pk,
        ada,
        "ada",
    )
    assert stored.entry_hash == a2.entry_hash and stored.created_at == a2.created_at


def test_actions_outside_invocations_share_one_chain_headed_by_one_row():
    first = trail.record("grant.created", data={"grant": 1})
    second = trail.record("grant.revoked", data={"grant": 1})
    assert (first.invocation_id, first.interrupt_id, first.actor_id) == (None, None, None)
    assert second.prev_hash == first.entry_hash
    assert list(AuditChainHead.objects.values_list("entry_hash", flat=True)) == [second.entry_hash]


def test_an_entry_is_kept_only_with_the_transaction_it_was_written_in():
    interrupt = ask()
    kept = trail.record("interrupt.claimed", interrupt=interrupt)
    with pytest.raises(RuntimeError), transaction.atomic():
        trail.record("interrupt.released", interrupt=interrupt)
        trail.record("grant.created")
        raise RuntimeError("the change failed")
    assert [e.action for e in entries()] == ["invocation.started", "interrupt.claimed"]
    assert head(interrupt.invocation_id) == kept.entry_hash
    assert not AuditChainHead.objects.exists()


def test_an_unknown_action_or_invocation_is_refused_and_writes_nothing():
    with pytest.raises(ValueError, match=r"unknown audit action 'interrupt\.opened'"):
        trail.record("interrupt.opened")
    with pytest.raises(Invocation.DoesNotExist):
        trail.record("invocation.cancelled", invocation_id="0" * 32)
    assert entries() == []


def test_a_third_party_recomputes_the_hashes_from_the_documented_canonical_form():
    interrupt = ask(message="Pay 120 € to Zoë?", payload={"amount": 120, "to": "Zoë"})
    ada = ApproverFactory(username="ada")
    head_before = head(interrupt.invocation_id)
    entry = trail.record(
        "decision.recorded", interrupt=interrupt, actor=ada, data={"b": [1.5, None], "a": "é"}
    )
    stored = AuditEntry.objects.get(pk=entry.pk)

    def canonical(value) -> bytes:
        return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()

    subject = {
        "message": "Pay 120 € to Zoë?",
        "payload": {"amount": 120, "to": "Zoë"},
        "response_schema": interrupt.response_schema,
    }
    assert stored.subject_hash == hashlib.sha256(canonical(subject)).hexdigest()
    content = {
        "invocation": str(interrupt.invocation_id),
        "interrupt_id": interrupt.pk,
        "action": "decision.recorded",
        "actor": str(ada.pk),
        "actor_name": "ada",
        "on_behalf_of": None,
        "data": {"a": "é", "b": [1.5, None]},
        "subject_hash": stored.subject_hash,
        "prev_hash": head_before,
        "created_at": stored.created_at.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
    }
    assert stored.entry_hash == hashlib.sha256(canonical(content)).hexdigest()


def test_on_behalf_of_is_recorded_and_hashed():
    interrupt = ask()
    ada, bob = ApproverFactory(username="ada"), ApproverFactory(username="bob")
    entry = trail.record("decision.recorded", interrupt=interrupt, actor=ada, on_behalf_of=bob)
    stored = AuditEntry.objects.get(pk=entry.pk)
    assert (stored.actor, stored.on_behalf_of) == (ada, bob)
    assert entry_content(stored)["on_behalf_of"] == str(bob.pk)


@pytest.mark.parametrize("function", [True, False], ids=["function", "statement"])
def test_on_postgresql_an_entry_is_one_call_of_the_append_function_or_its_statement(
    function, monkeypatch
):
    """The server-side append (audit/functions.py) and the one-statement CTE it replaces
    write the same chain, which verifies; with the function installed, it is used."""
    from django.db import connection

    from tests.integration.worker import require_postgres
    from tests.sent import sent_statements
    from workflows.audit import functions
    from workflows.audit.verify import verify

    require_postgres("the append function is PL/pgSQL")
    monkeypatch.setitem(functions._installed, connection.alias, function)
    question, ada = ask(), ApproverFactory(username="ada")
    name, _ = functions.definition(connection.alias)
    with sent_statements() as sent:
        claimed = trail.record("interrupt.claimed", interrupt=question, actor=ada)
        system = trail.record("delegation.created", actor=ada, data={"to": "bob"})
    calls = [sql for sql, _ in sent if f" FROM {name}(" in sql]
    assert len(calls) == (2 if function else 0)
    assert head(question.invocation_id) == claimed.entry_hash
    assert AuditChainHead.objects.get().entry_hash == system.entry_hash
    stored = AuditEntry.objects.get(pk=claimed.pk)
    assert (stored.prev_hash, stored.entry_hash) == (claimed.prev_hash, claimed.entry_hash)
    assert hashlib.sha256(stored.canonical_text.encode()).hexdigest() == stored.entry_hash
    report = verify(question.invocation_id)
    assert report.ok and report.entries >= 2, report.problems
