"""RFC 8785: an entry is hashed from its canonical text (JCS), kept as it was hashed, so
a database that rewrites JSON (PostgreSQL's jsonb: `1e16`, `-0.0`, `40.0`, key order)
never makes an untouched trail fail `verify`, and a verifier in another language (a
JavaScript JCS) computes the same bytes as the receipt's hash. Entries made before the
text was kept still verify by the legacy form."""

import io
import json
import shutil
import subprocess

import pytest
from django.core.management import call_command

from tests.asking import ask
from tests.audit.conftest import tamper
from tests.factories import ApproverFactory
from workflows import services
from workflows.audit import receipt, verify_receipt
from workflows.audit.canonical import canonical_json, entry_hash, legacy_canonical_json
from workflows.audit.entries import entry_content
from workflows.audit.signing import public_key_pem
from workflows.audit.verify import verify
from workflows.models import AuditEntry, Invocation

pytestmark = pytest.mark.django_db(transaction=True)

ANY_OBJECT = {"type": "object"}
# What an approver may well answer: each number is one jsonb writes otherwise.
ANSWER = {
    "amount": 40.0,
    "limit": 1e16,
    "delta": -0.0,
    "ratio": 0.1,
    "nested": {"zeta": [1.5, {"b": 2, "a": 1}], "alpha": {"y": 1e-7, "x": 1e21}},
    "note": "Zoë \u2028 😀",
}


@pytest.fixture
def answered(signing_key):
    interrupt = ask(
        message="Refund?", payload={"limit": 1e16, "rate": 2.50}, response_schema=ANY_OBJECT
    )
    ada = ApproverFactory(username="ada")
    services.decide(interrupt.pk, ANSWER, actor=ada, comment="-0.0 is fine")
    return interrupt


def verify_output() -> str:
    out = io.StringIO()
    call_command("hitl_audit", "verify", stdout=out)
    return out.getvalue()


def test_an_untouched_trail_with_rewritten_numbers_verifies(answered):
    assert verify().ok, verify().problems
    assert verify_output().startswith("OK")
    for entry in AuditEntry.objects.all():
        assert entry.canonical_text == canonical_json({**json.loads(entry.canonical_text)}).decode(
            "utf-8"
        )
        assert entry_hash(json.loads(entry.canonical_text)) == entry.entry_hash


def test_its_receipts_verify(answered, signing_key):
    for entry in AuditEntry.objects.filter(interrupt_id=answered.pk):
        document = receipt(entry)
        assert verify_receipt(document, signing_key.public_key()) is True
        assert verify_receipt(canonical_json(document), signing_key.public_key()) is True
        assert verify_receipt(json.dumps(document, indent=2), signing_key.public_key()) is True


def test_an_edited_number_is_still_found(answered):
    entry = AuditEntry.objects.get(action="decision.recorded")
    tamper(
        f"UPDATE {AuditEntry._meta.db_table} SET data = %s WHERE id = %s",
        [json.dumps({**entry.data, "response": {**ANSWER, "amount": 4000}}), entry.pk],
    )
    problems = verify().problems
    assert {p.entry_id for p in problems} == {entry.pk}  # the entry, and the row shown
    assert "canonical text" in problems[0].reason


def test_an_edited_canonical_text_is_found(answered):
    entry = AuditEntry.objects.get(action="decision.recorded")
    forged = entry.canonical_text.replace('"amount":40', '"amount":4000')
    tamper(
        f"UPDATE {AuditEntry._meta.db_table} SET canonical_text = %s WHERE id = %s",
        [forged, entry.pk],
    )
    assert {p.entry_id for p in verify().problems} == {entry.pk}


def test_an_entry_made_before_the_text_was_kept_verifies_by_the_legacy_form(signing_key):
    interrupt = ask(message="Old?", payload={"n": 3}, response_schema=ANY_OBJECT)
    entry = AuditEntry.objects.get(invocation=interrupt.invocation_id)
    legacy = {**entry_content(entry)}
    legacy["subject_hash"] = ""
    legacy_hash = entry_hash(legacy, legacy=True)
    table = AuditEntry._meta.db_table
    tamper(  # the entry as the code before RFC 8785 wrote it: no text, the legacy hash
        f"UPDATE {table} SET canonical_text = '', entry_hash = %s WHERE id = %s",
        [legacy_hash, entry.pk],
    )
    Invocation.objects.filter(pk=interrupt.invocation_id).update(audit_head=legacy_hash)
    assert verify().ok, verify().problems
    document = receipt(AuditEntry.objects.get(pk=entry.pk))
    assert document["format"] == "hitl-audit-receipt/1"
    assert verify_receipt(document, signing_key.public_key()) is True
    assert verify_receipt(legacy_canonical_json(document), signing_key.public_key()) is True
    printed = io.StringIO()
    call_command("hitl_audit", "receipt", str(entry.pk), stdout=printed)
    assert verify_receipt(printed.getvalue(), signing_key.public_key()) is True
    tamper(f"UPDATE {table} SET actor_name = 'mallory' WHERE id = %s", [entry.pk])
    assert {p.entry_id for p in verify().problems} == {entry.pk}


# A JCS in JavaScript (RFC 8785, appendix: the ECMAScript serialisation of numbers and the
# UTF-16 key order are JSON.stringify's and Array.prototype.sort's own).
NODE_VERIFIER = r"""
const crypto = require("crypto");
function jcs(v) {
  if (v === null || typeof v !== "object") return JSON.stringify(v);
  if (Array.isArray(v)) return "[" + v.map(jcs).join(",") + "]";
  return "{" + Object.keys(v).sort().map(k => JSON.stringify(k) + ":" + jcs(v[k])).join(",") + "}";
}
const receipt = JSON.parse(require("fs").readFileSync(0, "utf8"));
const entry = Object.assign({}, receipt.entry);
const expected = entry.entry_hash;
delete entry.entry_hash; delete entry.id;
const subject = crypto.createHash("sha256").update(jcs(receipt.subject), "utf8").digest("hex");
const body = Object.assign({}, receipt); delete body.signature;
const key = crypto.createPublicKey(process.env.AUDIT_PUBLIC_KEY);
const signed = crypto.verify(null, Buffer.from(jcs(body), "utf8"), key,
                             Buffer.from(receipt.signature.value, "base64"));
console.log(JSON.stringify([
  crypto.createHash("sha256").update(jcs(entry), "utf8").digest("hex") === expected,
  subject === entry.subject_hash,
  signed,
]));
"""


@pytest.mark.skipif(shutil.which("node") is None, reason="needs Node.js")
def test_a_javascript_verifier_computes_the_same_bytes(answered, signing_key):
    entry = AuditEntry.objects.get(action="decision.recorded")
    result = subprocess.run(
        ["node", "-e", NODE_VERIFIER],
        env={"AUDIT_PUBLIC_KEY": public_key_pem(signing_key)},
        input=canonical_json(receipt(entry)).decode("utf-8"),
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(result.stdout) == [True, True, True]


def test_an_entry_without_text_after_one_with_text_is_reported(answered):
    last = AuditEntry.objects.filter(invocation=answered.invocation_id).order_by("id").last()
    content = entry_content(last)
    legacy_hash = entry_hash(content, legacy=True)
    tamper(
        f"UPDATE {AuditEntry._meta.db_table} SET canonical_text = '', entry_hash = %s "
        "WHERE id = %s",
        [legacy_hash, last.pk],
    )
    Invocation.objects.filter(pk=answered.invocation_id).update(audit_head=legacy_hash)
    reasons = [p.reason for p in verify().problems if p.entry_id == last.pk]
    assert any("no canonical text, after entries that have one" in r for r in reasons)
