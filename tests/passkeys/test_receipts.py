"""A signed decision's receipt carries the approver's assertion and their passkey's public
key: `verify_assertion` checks the approver's own signature, with the credential's public
key the caller supplies, with `cryptography` alone (in a process where Django cannot be
imported), and fails on any altered byte of it, another answer, another question, or
another site; `verify_receipt` checks the project's signature first, then the assertion
with the key the signed receipt carries. A receipt made by anyone else is refused."""

import json
import subprocess
import sys
from pathlib import Path

import cbor2
import cryptography
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.asking import ask
from tests.audit.test_receipts import NO_DJANGO, ROOT
from tests.passkeys.authenticator import USER_VERIFIED, SoftAuthenticator
from tests.passkeys.conftest import enrol, signature
from workflows import services
from workflows.audit import receipt, verify_assertion, verify_receipt
from workflows.audit.assertions import (
    b64url,
    check_assertion,
    check_decision_assertion,
    cose_key,
    credential_key,
    decision_challenge,
    from_b64url,
)
from workflows.audit.canonical import canonical_json, entry_hash, subject_hash
from workflows.audit.receipts import check_receipt
from workflows.audit.signing import InvalidDocument, public_key_pem, sign
from workflows.models import AuditEntry

pytestmark = pytest.mark.django_db(transaction=True)

SIGNED_PARTS = ["authenticator_data", "client_data_json", "signature", "public_key"]


def signed_receipt(approver, key=None, comment="invoice checked"):
    key = key or enrol(approver)[1]
    interrupt = ask(
        message="Pay 9,800 EUR to Initech?", payload={"iban": "DE89…"}, require_signature=True
    )
    response = {"approved": True}
    assertion = signature(key, interrupt, response, comment)
    services.decide(interrupt.pk, response, actor=approver, comment=comment, assertion=assertion)
    entry = AuditEntry.objects.get(action="decision.recorded", interrupt_id=interrupt.pk)
    return receipt(entry)


@pytest.fixture
def decision_receipt(alice, signing_key):
    return signed_receipt(alice)


@pytest.fixture
def alices_credential(decision_receipt, alice) -> bytes:
    """Alice's passkey's public key (COSE_Key) as the server registered it."""
    return bytes(alice.passkeys.get().public_key)


def copy(document):
    return json.loads(canonical_json(document))


def resigned(document, signing_key):
    """The receipt as a server holding the signing key would issue it for the entry as
    changed (its entry_hash recomputed): only the approver's signature can tell."""
    document["entry"]["entry_hash"] = entry_hash(document["entry"])
    return sign(document, signing_key)


def test_the_receipt_carries_the_assertion_and_the_public_key(decision_receipt, alice):
    kept = decision_receipt["entry"]["data"]["assertion"]
    key = alice.passkeys.get()
    assert kept["credential_id"] == key.credential_id
    assert from_b64url(kept["public_key"], "public_key") == bytes(key.public_key)
    assert decision_receipt["entry"]["data"]["comment"] == "invoice checked"


def test_it_verifies_offline(decision_receipt, signing_key, alices_credential):
    assert verify_assertion(decision_receipt, alices_credential) is True
    assert verify_assertion(canonical_json(decision_receipt), b64url(alices_credential)) is True
    assert verify_assertion(decision_receipt, credential_key(alices_credential)[1]) is True
    assert verify_receipt(decision_receipt, signing_key.public_key()) is True


@pytest.mark.parametrize("kind", ["EdDSA", "RS256"])
def test_each_algorithm_verifies_offline(alice, signing_key, kind):
    key = enrol(alice, SoftAuthenticator(kind=kind))[1]
    document = signed_receipt(alice, key)
    assert verify_assertion(document, key.cose_public_key()) is True
    assert verify_receipt(document, signing_key.public_key()) is True


def forged_receipt(victim_key: bytes, interrupt_id: str = "q-ceo") -> dict:
    """A receipt "the ceo approved paying 1,000,000 EUR", made by someone with neither the
    project's signing key nor the ceo's passkey: their own passkey signs the decision,
    their own Ed25519 key signs the receipt, every hash is right."""
    mallory = SoftAuthenticator()
    subject = {
        "message": "Pay 1,000,000 EUR to Mallory Ltd?",
        "payload": {},
        "response_schema": None,
    }
    bound = subject_hash(**subject)
    response, nonce = {"approved": True}, "n"
    made = mallory.get(decision_challenge(interrupt_id, bound, response, "", nonce))
    entry = {
        "id": 1,
        "invocation": "00000000-0000-0000-0000-000000000001",
        "interrupt_id": interrupt_id,
        "action": "decision.recorded",
        "actor": "1",
        "actor_name": "ceo",
        "on_behalf_of": None,
        "data": {
            "decision": 1,
            "response": response,
            "comment": "",
            "assertion": {**kept(mallory, made), "nonce": nonce},
        },
        "subject_hash": bound,
        "prev_hash": "0" * 64,
        "created_at": "2026-01-31T09:30:00.000000Z",
    }
    entry["entry_hash"] = entry_hash(entry)
    document = {
        "format": "hitl-audit-receipt/2",
        "entry": entry,
        "chain": {"invocation": entry["invocation"], "position": 1},
        "subject": subject,
        "issued_at": "2026-01-31T09:31:00.000000Z",
    }
    return sign(document, Ed25519PrivateKey.generate())


def test_a_forged_receipt_is_refused(decision_receipt, signing_key, alices_credential):
    forged = forged_receipt(alices_credential)
    assert verify_receipt(forged, signing_key.public_key()) is False
    assert verify_assertion(forged, alices_credential) is False  # not alice's passkey
    with pytest.raises(InvalidDocument, match="signed by key"):
        check_receipt(forged, signing_key.public_key())
    # The signature is checked before anything else: a receipt whose entry does not even
    # hash is refused for its signature.
    broken = copy(forged)
    broken["entry"]["entry_hash"] = "0" * 64
    with pytest.raises(InvalidDocument, match="signed by key"):
        check_receipt(broken, signing_key.public_key())


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_any_altered_bit_of_the_assertion_fails(decision_receipt, signing_key, data):
    part = data.draw(st.sampled_from(SIGNED_PARTS), label="part")
    document = copy(decision_receipt)
    raw = bytearray(from_b64url(document["entry"]["data"]["assertion"][part], part))
    index = data.draw(st.integers(0, len(raw) - 1), label="byte")
    raw[index] ^= 1 << data.draw(st.integers(0, 7), label="bit")
    document["entry"]["data"]["assertion"][part] = b64url(bytes(raw))
    credential = from_b64url(decision_receipt["entry"]["data"]["assertion"]["public_key"], "key")
    assert verify_assertion(document, credential) is False  # no longer hashes
    # verify_assertion never reads the key the document carries: the caller's holds.
    holds = part == "public_key"
    assert verify_assertion(resigned(document, signing_key), credential) is holds
    assert verify_receipt(resigned(document, signing_key), signing_key.public_key()) is False


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (lambda e: e["data"].update(response={"approved": False}), "another challenge"),
        (lambda e: e["data"].update(comment="not checked"), "another challenge"),
        (lambda e: e.update(interrupt_id="another-question"), "another challenge"),
        (lambda e: e["data"]["assertion"].update(rp_id="example.com"), "signed on"),
        (lambda e: e["data"].pop("assertion"), "no signed decision"),
    ],
)
def test_an_entry_changed_around_the_assertion_fails(
    decision_receipt, signing_key, alices_credential, change, reason
):
    document = copy(decision_receipt)
    change(document["entry"])
    forged = resigned(document, signing_key)
    assert verify_assertion(forged, alices_credential) is False
    with pytest.raises(InvalidDocument, match=reason):
        check_decision_assertion(forged["entry"], alices_credential)


def test_a_subject_that_no_longer_matches_fails(decision_receipt, alices_credential):
    document = copy(decision_receipt)
    document["subject"]["payload"] = {"iban": "GB33…"}  # what was shown, rewritten
    assert verify_assertion(document, alices_credential) is False


def test_another_key_in_place_of_the_approvers_fails(decision_receipt, signing_key):
    document = copy(decision_receipt)
    other = SoftAuthenticator().cose_public_key()
    assert verify_assertion(document, other) is False
    document["entry"]["data"]["assertion"]["public_key"] = b64url(other)
    assert verify_receipt(resigned(document, signing_key), signing_key.public_key()) is False


@pytest.mark.parametrize(
    ("cose", "reason"),
    [
        (b"", "cut short"),
        (cbor2.dumps([1, 2]), "not a COSE_Key"),
        (cbor2.dumps({1: 2, 3: -7, -1: 1, -2: b"x", -3: b"y"}), "not a valid key"),
        (cbor2.dumps({1: 2, 3: -35, -1: 2, -2: b"x" * 48, -3: b"y" * 48}), "not read here"),
        (cbor2.dumps({1: 2, 3: -7}) + b"\x00", "not a COSE_Key"),
        (bytes([0xA1, 0x01, 0x5A, 0xFF, 0xFF, 0xFF, 0xFF]), "cut short"),
    ],
)
def test_a_public_key_that_is_not_one_is_named(cose, reason):
    with pytest.raises(InvalidDocument, match=reason):
        cose_key(cose)


VERIFY = """
from workflows.audit import verify_assertion, verify_receipt

receipt, public_key, credential = json.loads(sys.stdin.read())
good = [verify_assertion(receipt, credential), verify_receipt(receipt, public_key)]
receipt["entry"]["data"]["response"]["approved"] = False
bad = verify_assertion(receipt, credential)
assert not [m for m in sys.modules if m.split(".")[0] in {"django", "webauthn", "cbor2"}]
print(json.dumps([*good, bad]))
"""


def test_it_verifies_in_a_process_with_only_cryptography_importable(
    decision_receipt, signing_key, alices_credential
):
    # The audit tests' interpreter: no site, no environment, Django and Celery refused.
    guard = NO_DJANGO.split("from workflows.audit")[0]
    site = str(Path(cryptography.__file__).resolve().parents[1])
    result = subprocess.run(
        [sys.executable, "-S", "-I", "-c", guard + VERIFY, str(ROOT), site],
        input=json.dumps(
            [decision_receipt, public_key_pem(signing_key), b64url(alices_credential)]
        ),
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == [True, True, False]


def kept(authenticator: SoftAuthenticator, assertion: dict, rp_id: str = "testserver") -> dict:
    """An assertion as an entry keeps it."""
    return {
        "credential_id": assertion["id"],
        "authenticator_data": assertion["response"]["authenticatorData"],
        "client_data_json": assertion["response"]["clientDataJSON"],
        "signature": assertion["response"]["signature"],
        "public_key": b64url(authenticator.cose_public_key()),
        "rp_id": rp_id,
    }


def test_the_offline_check_asks_what_an_authenticator_vouches_for():
    key, challenge = SoftAuthenticator(), bytes(range(32))
    credential = credential_key(key.cose_public_key())
    check_assertion(kept(key, key.get(challenge)), challenge, credential)
    origin = "https://a.testserver"
    check_assertion(kept(key, key.get(challenge, origin=origin)), challenge, credential)
    refusals = [
        (kept(key, key.get(challenge, flags=USER_VERIFIED)), "no user was present"),
        (kept(key, key.get(challenge, rp_id="example.com")), "not for 'testserver'"),
        (kept(key, key.get(challenge, origin="https://testserver.evil")), "signed on"),
        (kept(key, key.get(bytes(32))), "another challenge"),
        ({**kept(key, key.get(challenge)), "signature": "%%%"}, "not base64url"),
        ({k: v for k, v in kept(key, key.get(challenge)).items() if k != "rp_id"}, "lacks rp_id"),
    ]
    created = key.get(challenge)
    client_data = json.loads(from_b64url(created["response"]["clientDataJSON"], "data"))
    created["response"]["clientDataJSON"] = b64url(
        json.dumps({**client_data, "type": "webauthn.create"}).encode()
    )
    refusals.append((kept(key, created), "not of a WebAuthn assertion"))
    for assertion, reason in refusals:
        with pytest.raises(InvalidDocument, match=reason):
            check_assertion(assertion, challenge, credential)
