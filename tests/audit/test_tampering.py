"""Tampering with the trail through raw SQL (as a database owner could) is found by
`hitl_audit verify`, which names the first bad entry by id and entry_hash and exits 1:
an edited entry, a deleted one, an inserted one, two swapped, a question changed after
it was answered, the newest entries deleted (against a checkpoint kept outside)."""

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from tests.asking import ask
from tests.audit.conftest import entries, tamper
from tests.factories import ApproverFactory
from tests.integration.worker import require_postgres, test_database_url
from workflows.audit import trail
from workflows.audit.verify import verify
from workflows.models import AuditEntry, Interrupt, Invocation

pytestmark = pytest.mark.django_db(transaction=True)

ROOT = Path(__file__).resolve().parents[2]
ENTRIES = AuditEntry._meta.db_table
INTERRUPTS = Interrupt._meta.db_table


@pytest.fixture
def chain():
    """An invocation with five entries (its start and four), another with two, one
    outside invocations."""
    ada = ApproverFactory(username="ada")
    interrupt = ask()
    for action in ("interrupt.claimed", "interrupt.released", "interrupt.claimed"):
        trail.record(action, interrupt=interrupt, actor=ada)
    trail.record("decision.recorded", interrupt=interrupt, actor=ada, data={"approved": True})
    trail.record("interrupt.claimed", interrupt=ask(), actor=ada)
    trail.record("grant.created", actor=ada, data={"grant": 7})
    return entries(invocation_id=interrupt.invocation_id)


def failed_verify(*args: str) -> str:
    """Run `hitl_audit verify`; assert it exits 1 and return what it said."""
    out = io.StringIO()
    with pytest.raises(CommandError) as raised:
        call_command("hitl_audit", "verify", *args, stdout=out, stderr=io.StringIO())
    assert raised.value.returncode == 1
    return str(raised.value) + out.getvalue()


def names(output: str, entry: AuditEntry) -> bool:
    return f"entry {entry.pk} (entry_hash {entry.entry_hash})" in output


def test_an_untouched_trail_verifies():
    out = io.StringIO()
    ask()
    call_command("hitl_audit", "verify", stdout=out)
    assert out.getvalue().startswith("OK: verified")


def test_the_fixture_trail_verifies(chain):
    report = verify()
    assert report.ok, report.problems
    assert (report.entries, report.chains) == (8, 3)


def test_an_edited_entry_is_named(chain):
    tamper(f"UPDATE {ENTRIES} SET data = %s WHERE id = %s", ['{"approved": false}', chain[3].pk])
    output = failed_verify()
    assert names(output, chain[3]) and "edited" in output
    assert [p.entry_id for p in verify().problems] == [chain[3].pk]


def test_an_edited_actor_name_is_named(chain):
    tamper(f"UPDATE {ENTRIES} SET actor_name = 'bob' WHERE id = %s", [chain[1].pk])
    assert names(failed_verify(), chain[1])


def test_a_deleted_entry_is_found_at_the_entry_after_it(chain):
    tamper(f"DELETE FROM {ENTRIES} WHERE id = %s", [chain[1].pk])
    output = failed_verify()
    assert names(output, chain[2]) and "deleted, inserted or moved" in output


def test_a_deleted_first_entry_is_found(chain):
    tamper(f"DELETE FROM {ENTRIES} WHERE id = %s", [chain[0].pk])
    assert names(failed_verify(), chain[1])


def test_an_inserted_entry_is_named(chain):
    forged = AuditEntry.objects.get(pk=chain[1].pk)
    tamper(
        f"INSERT INTO {ENTRIES} (invocation_id, interrupt_id, action, actor_id, actor_name, "
        "on_behalf_of_id, data, subject_hash, prev_hash, entry_hash, created_at, "
        "canonical_text) "
        f"SELECT invocation_id, interrupt_id, 'decision.recorded', actor_id, actor_name, "
        f"on_behalf_of_id, data, subject_hash, prev_hash, %s, created_at, canonical_text "
        f"FROM {ENTRIES} "
        "WHERE id = %s",
        ["f" * 64, forged.pk],
    )
    (inserted,) = entries(entry_hash="f" * 64)
    problems = verify().problems
    assert problems and problems[0].entry_id == inserted.pk
    assert names(failed_verify(), inserted)


def test_two_swapped_entries_are_found(chain):
    first, second = chain[1], chain[2]
    for old, new in ((first.pk, -1), (second.pk, first.pk), (-1, second.pk)):
        tamper(f"UPDATE {ENTRIES} SET id = %s WHERE id = %s", [new, old])
    output = failed_verify()
    assert f"entry {first.pk} (entry_hash {second.entry_hash})" in output
    assert "deleted, inserted or moved" in output


def test_a_question_changed_after_the_entry_is_found(chain):
    tamper(
        f"UPDATE {INTERRUPTS} SET message = 'Approve 10 EUR?' WHERE id = %s",
        [chain[1].interrupt_id],
    )
    output = failed_verify()
    assert names(output, chain[1]) and "no longer matches its subject_hash" in output


def test_a_rewritten_chain_head_is_found(chain):
    Invocation.objects.filter(pk=chain[0].invocation_id).update(audit_head=chain[-2].entry_hash)
    assert names(failed_verify(), chain[-1])


def test_verify_of_one_invocation_checks_only_its_chain(chain):
    other = entries(invocation__isnull=False).pop()
    tamper(f"UPDATE {ENTRIES} SET actor_name = 'bob' WHERE id = %s", [other.pk])
    out = io.StringIO()
    call_command("hitl_audit", "verify", "--invocation", str(chain[0].invocation_id), stdout=out)
    assert "OK: verified 5 entries in 1 chain(s)" in out.getvalue()
    assert names(failed_verify("--invocation", str(other.invocation_id)), other)


def test_verify_of_an_unknown_invocation_id_says_so():
    with pytest.raises(CommandError, match="'nope' is not an invocation id"):
        call_command("hitl_audit", "verify", "--invocation", "nope")


def test_manage_py_exits_1_naming_the_entry(chain):
    require_postgres("the command runs in a process of its own, on the test database")
    tamper(f"UPDATE {ENTRIES} SET actor_name = 'mallory' WHERE id = %s", [chain[2].pk])
    finished = subprocess.run(
        [sys.executable, "manage.py", "hitl_audit", "verify"],
        cwd=ROOT,
        env={
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "tests.project.settings",
            "DATABASE_URL": test_database_url(),
        },
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert finished.returncode == 1, finished.stderr
    assert f"entry {chain[2].pk} (entry_hash {chain[2].entry_hash})" in finished.stderr
    assert f"entry {chain[2].pk} (entry_hash {chain[2].entry_hash})" in finished.stdout
