"""What the trail hands out: a signed checkpoint that finds the newest entries deleted
(even with the heads rewritten to match), exports in JSON lines and CSV, receipts."""

import csv
import io
import json
from datetime import timedelta

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone

from tests.asking import ask
from tests.audit.conftest import entries, tamper
from tests.factories import ApproverFactory
from workflows.audit import receipt, trail, verify_receipt
from workflows.audit.canonical import ENTRY_FIELDS, canonical_json
from workflows.audit.entries import entry_content
from workflows.audit.signing import public_key_pem
from workflows.models import AuditEntry, Invocation

pytestmark = pytest.mark.django_db(transaction=True)

ENTRIES = AuditEntry._meta.db_table


def run(*args: str) -> str:
    out = io.StringIO()
    call_command("hitl_audit", *args, stdout=out)
    return out.getvalue()


def failed(*args: str) -> str:
    out = io.StringIO()
    with pytest.raises(CommandError) as raised:
        call_command("hitl_audit", *args, stdout=out, stderr=io.StringIO())
    assert raised.value.returncode == 1
    return str(raised.value) + out.getvalue()


@pytest.fixture
def trail_of_two():
    """Two invocations, four entries each (their start and three); one entry outside
    invocations."""
    ada = ApproverFactory(username="ada")
    questions = [ask(), ask()]
    for interrupt in questions:
        for action in ("interrupt.claimed", "interrupt.released", "interrupt.claimed"):
            trail.record(action, interrupt=interrupt, actor=ada)
    trail.record("grant.created", actor=ada)
    return questions


@pytest.fixture
def kept_checkpoint(trail_of_two, signing_key, tmp_path):
    path = tmp_path / "checkpoint.json"
    path.write_text(run("checkpoint"))
    return path


def test_the_checkpoint_is_signed_and_lists_every_chain_head(trail_of_two, signing_key):
    document = json.loads(run("checkpoint"))
    heads = {chain["invocation"]: chain for chain in document["chains"]}
    for interrupt in trail_of_two:
        newest = entries(invocation_id=interrupt.invocation_id)[-1]
        assert heads[str(interrupt.invocation_id)] == {
            "invocation": str(interrupt.invocation_id),
            "head": newest.entry_hash,
            "last_id": newest.pk,
            "length": 4,
        }
    assert heads[None]["length"] == 1
    assert document["signature"]["algorithm"] == "Ed25519"


def test_the_trail_verifies_against_its_checkpoint_and_entries_added_since(kept_checkpoint):
    trail.record("interrupt.released", invocation_id=entries()[0].invocation_id)
    assert run("verify", "--checkpoint", str(kept_checkpoint)).startswith("OK: verified 10")


def test_newest_entries_deleted_and_heads_rewritten_are_found_only_with_a_checkpoint(
    trail_of_two, kept_checkpoint
):
    chain = entries(invocation_id=trail_of_two[0].invocation_id)
    tamper(f"DELETE FROM {ENTRIES} WHERE id IN (%s, %s)", [chain[-2].pk, chain[-1].pk])
    Invocation.objects.filter(pk=chain[0].invocation_id).update(audit_head=chain[-3].entry_hash)
    assert run("verify").startswith("OK")  # consistent as it now stands
    output = failed("verify", "--checkpoint", str(kept_checkpoint))
    assert f"entry {chain[-1].pk} (entry_hash {chain[-1].entry_hash})" in output
    assert "is missing" in output


def test_everything_deleted_is_found_against_the_checkpoint(trail_of_two, kept_checkpoint):
    tamper(f"DELETE FROM {ENTRIES}")
    Invocation.objects.update(audit_head="")
    tamper("DELETE FROM workflows_auditchainhead")
    assert run("verify").startswith("OK: verified 0 entries")
    assert "is missing" in failed("verify", "--checkpoint", str(kept_checkpoint))


def test_a_checkpoint_altered_or_signed_by_another_key_is_refused(kept_checkpoint, tmp_path):
    document = json.loads(kept_checkpoint.read_text())
    document["chains"][0]["length"] = 2
    kept_checkpoint.write_text(json.dumps(document))
    with pytest.raises(CommandError, match="does not match the document"):
        call_command("hitl_audit", "verify", "--checkpoint", str(kept_checkpoint))
    other = tmp_path / "other.pem"
    other.write_text(public_key_pem(Ed25519PrivateKey.generate()))
    with pytest.raises(CommandError, match="not by this key"):
        call_command(
            "hitl_audit", "verify", "--checkpoint", str(kept_checkpoint), "--public-key", other
        )


def test_a_checkpoint_verifies_with_the_published_public_key(kept_checkpoint, tmp_path, settings):
    public = tmp_path / "audit.pub"
    public.write_text(run("public-key"))
    settings.HITL = {"WORKFLOW_MODULES": settings.HITL["WORKFLOW_MODULES"]}  # no private key
    output = run("verify", "--checkpoint", str(kept_checkpoint), "--public-key", str(public))
    assert output.startswith("OK")


def test_export_jsonl_lists_every_entry_with_its_hashes(trail_of_two):
    lines = run("export").splitlines()
    rows = [json.loads(line) for line in lines]
    assert [row["id"] for row in rows] == [e.pk for e in entries()]
    first = entries()[0]
    assert rows[0] == {"id": first.pk, "entry_hash": first.entry_hash, **entry_content(first)}
    assert lines[0].encode() == canonical_json(rows[0])


def test_export_csv_has_a_header_and_the_data_as_json(trail_of_two):
    rows = list(csv.DictReader(io.StringIO(run("export", "--format", "csv"))))
    assert len(rows) == 9
    assert list(rows[0]) == ["id", *ENTRY_FIELDS, "entry_hash"]  # the fields hashed, in order
    first = entries()[0]
    assert (rows[0]["id"], rows[0]["entry_hash"], rows[0]["action"]) == (
        str(first.pk),
        first.entry_hash,
        "invocation.started",
    )
    assert rows[0]["actor"] == rows[0]["actor_name"] == ""  # the system started it
    claimed = next(row for row in rows if row["action"] == "interrupt.claimed")
    assert (claimed["actor_name"], claimed["interrupt_id"]) == ("ada", str(trail_of_two[0].pk))
    system = rows[-1]
    assert (system["invocation"], system["action"], json.loads(system["data"])) == (
        "",
        "grant.created",
        {},
    )


def test_export_since_takes_an_iso_date_time(trail_of_two):
    later = entries()[2].created_at
    since = later.isoformat().replace("+00:00", "Z")
    rows = [json.loads(line) for line in run("export", "--since", since).splitlines()]
    assert [row["id"] for row in rows] == [e.pk for e in entries(created_at__gte=later)]
    future = (timezone.now() + timedelta(days=1)).isoformat()
    assert run("export", "--since", future) == ""
    with pytest.raises(CommandError, match="not an ISO 8601 date-time"):
        call_command("hitl_audit", "export", "--since", "yesterday")


@pytest.mark.parametrize("since", ["2026-01-01T00:00:00+16:00", "2026-01-01T00:00:00-23:59"])
def test_export_since_with_an_offset_postgresql_refuses_is_a_clear_error(trail_of_two, since):
    with pytest.raises(CommandError, match=r"--since: .* has the UTC offset .*at most ±15:59"):
        call_command("hitl_audit", "export", "--since", since)


def test_the_receipt_command_prints_a_receipt_that_verifies(trail_of_two, signing_key):
    entry = entries(action="interrupt.released")[0]
    printed = run("receipt", str(entry.pk))
    assert verify_receipt(printed, public_key_pem(signing_key))
    assert verify_receipt(json.loads(printed), signing_key.public_key())
    assert json.loads(printed)["entry"]["entry_hash"] == entry.entry_hash
    assert receipt(entry)["chain"] == {"invocation": str(entry.invocation_id), "position": 3}
    assert receipt(entry)["subject"]["message"] == "Approve?"


def test_receipts_need_the_signing_key(trail_of_two):
    with pytest.raises(CommandError, match=r'HITL\["AUDIT_SIGNING_KEY"\] is not set'):
        call_command("hitl_audit", "receipt", str(entries()[0].pk))
    with pytest.raises(CommandError, match="no audit entry 999"):
        call_command("hitl_audit", "receipt", "999")


def test_the_periodic_task_writes_a_checkpoint_where_configured(
    trail_of_two, signing_key, settings, tmp_path
):
    from workflows.tasks import write_audit_checkpoint

    assert write_audit_checkpoint() is None  # no path: off
    settings.HITL = {**settings.HITL, "AUDIT_CHECKPOINT_PATH": str(tmp_path / "cp-%Y.json")}
    written = write_audit_checkpoint()
    assert written == str(tmp_path / f"cp-{timezone.now():%Y}.json")
    assert run("verify", "--checkpoint", written).startswith("OK: verified 9 entries")
    assert [p.name for p in tmp_path.iterdir()] == [f"cp-{timezone.now():%Y}.json"]


def test_hitl_periodic_writes_a_checkpoint_once_per_period(
    trail_of_two, signing_key, settings, tmp_path
):
    from workflows.management.commands.hitl_periodic import Command

    settings.HITL = {**settings.HITL, "AUDIT_CHECKPOINT_PATH": str(tmp_path / "cp.json")}
    command = Command(stdout=io.StringIO())
    command.run_jobs("test")
    first = (tmp_path / "cp.json").read_text()
    trail.record("grant.revoked")
    command.run_jobs("test")
    assert (tmp_path / "cp.json").read_text() == first  # not due yet
    settings.HITL = {**settings.HITL, "AUDIT_CHECKPOINT_SECONDS": 0}
    command.run_jobs("test")
    assert (tmp_path / "cp.json").read_text() != first
