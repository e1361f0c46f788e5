"""Receipts verify offline with the public key alone, in a process where Django cannot
even be imported, and fail on any altered byte, another key, or a changed subject."""

import json

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.asking import ask
from tests.factories import ApproverFactory
from tests.offline import run_offline
from workflows.audit import InvalidDocument, check_receipt, receipt, trail, verify_receipt
from workflows.audit.canonical import canonical_json
from workflows.audit.signing import public_key_pem
from workflows.models import Interrupt


@pytest.fixture
def decision_receipt(transactional_db, signing_key):
    interrupt = ask(message="Refund 40 EUR to Zoë?", payload={"amount": 40})
    ada = ApproverFactory(username="ada")
    entry = trail.record(
        "decision.recorded",
        interrupt=interrupt,
        actor=ada,
        data={"response": {"approved": True}, "comment": "ok\nfine"},
    )
    return receipt(entry)


def test_a_receipt_shows_the_entry_its_position_and_what_was_asked(decision_receipt):
    assert decision_receipt["entry"]["action"] == "decision.recorded"
    assert decision_receipt["entry"]["actor_name"] == "ada"
    assert decision_receipt["chain"]["position"] == 2  # after the invocation's start
    assert decision_receipt["subject"]["message"] == "Refund 40 EUR to Zoë?"
    assert decision_receipt["subject"]["payload"] == {"amount": 40}


def test_it_verifies_with_the_public_key_as_pem_or_key_object(decision_receipt, signing_key):
    assert verify_receipt(decision_receipt, public_key_pem(signing_key)) is True
    assert verify_receipt(decision_receipt, signing_key.public_key()) is True
    assert verify_receipt(canonical_json(decision_receipt), signing_key.public_key()) is True


def test_it_fails_with_another_key(decision_receipt):
    other = Ed25519PrivateKey.generate().public_key()
    assert verify_receipt(decision_receipt, other) is False
    with pytest.raises(InvalidDocument, match="not by this key"):
        check_receipt(decision_receipt, other)


@pytest.mark.parametrize(
    ("path", "value", "reason"),
    [
        (("entry", "data", "response", "approved"), False, "signature does not match"),
        (("subject", "message"), "Refund 400 EUR to Zoë?", "signature does not match"),
        (("chain", "position"), 1, "signature does not match"),
    ],
)
def test_any_changed_value_fails(decision_receipt, signing_key, path, value, reason):
    changed = json.loads(canonical_json(decision_receipt))
    target = changed
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    assert verify_receipt(changed, signing_key.public_key()) is False
    with pytest.raises(InvalidDocument, match=reason):
        check_receipt(changed, signing_key.public_key())


def test_a_receipt_signed_over_a_false_entry_or_subject_fails(decision_receipt, signing_key):
    from workflows.audit.signing import sign

    forged = json.loads(canonical_json(decision_receipt))
    forged["entry"]["actor_name"] = "bob"
    with pytest.raises(InvalidDocument, match="do not hash to its entry_hash"):
        check_receipt(sign(forged, signing_key), signing_key.public_key())
    forged = json.loads(canonical_json(decision_receipt))
    forged["subject"]["payload"] = {"amount": 400}
    with pytest.raises(InvalidDocument, match="does not hash to the entry's subject_hash"):
        check_receipt(sign(forged, signing_key), signing_key.public_key())


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(data=st.data())
def test_flipping_any_bit_of_any_byte_of_the_canonical_receipt_fails(
    decision_receipt, signing_key, data
):
    text = bytearray(canonical_json(decision_receipt))
    index = data.draw(st.integers(0, len(text) - 1), label="byte")
    bit = data.draw(st.integers(0, 7), label="bit")
    text[index] ^= 1 << bit
    assert verify_receipt(bytes(text), signing_key.public_key()) is False


def test_text_must_be_canonical(decision_receipt, signing_key):
    pretty = json.dumps(decision_receipt, indent=2)
    with pytest.raises(InvalidDocument, match="not in canonical form"):
        check_receipt(pretty, signing_key.public_key())
    assert verify_receipt(json.loads(pretty), signing_key.public_key())


def test_no_receipt_once_the_question_was_changed(transactional_db, signing_key):
    interrupt = ask()
    entry = trail.record("interrupt.claimed", interrupt=interrupt)
    Interrupt.objects.filter(pk=interrupt.pk).update(message="Something else?")
    with pytest.raises(ValueError, match="no longer matches the subject_hash"):
        receipt(entry)


VERIFY = """
    from workflows.audit import verify_receipt

    receipt, public_key = json.loads(sys.stdin.read())
    good = verify_receipt(receipt, public_key)
    receipt["entry"]["actor_name"] = "mallory"
    bad = verify_receipt(receipt, public_key)
    assert not [m for m in sys.modules if m.split(".")[0] in {"django", "celery"}]
    print(json.dumps([good, bad]))
"""


def test_it_verifies_in_a_process_with_only_cryptography_importable(decision_receipt, signing_key):
    given = [decision_receipt, public_key_pem(signing_key)]
    assert run_offline(VERIFY, given) == [True, False]
