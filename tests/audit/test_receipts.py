"""Receipts verify offline with the public key alone, in a process where Django cannot
even be imported, and fail on any altered byte, another key, or a changed subject."""

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import cryptography
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.asking import ask
from tests.factories import ApproverFactory
from workflows.audit import InvalidDocument, check_receipt, receipt, trail, verify_receipt
from workflows.audit.canonical import canonical_json
from workflows.audit.signing import public_key_pem
from workflows.models import Interrupt

ROOT = Path(__file__).resolve().parents[2]


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


def test_text_verifies_as_a_json_library_writes_it_and_not_once_rewritten(
    decision_receipt, signing_key
):
    key = signing_key.public_key()
    for text in (json.dumps(decision_receipt), json.dumps(decision_receipt, indent=2)):
        assert verify_receipt(text, key)
    reordered = json.dumps(decision_receipt).replace(", ", ",  ", 1)
    with pytest.raises(InvalidDocument, match="bytes were changed"):
        check_receipt(reordered, key)
    assert verify_receipt(json.loads(reordered), key)  # what it says still holds


def test_an_escape_rewritten_in_another_case_fails(transactional_db, signing_key):
    entry = trail.record("interrupt.claimed", interrupt=ask(), data={"note": "tab\x1fend"})
    text = canonical_json(receipt(entry)).decode()
    assert "\\u001f" in text
    assert verify_receipt(text, signing_key.public_key())
    assert not verify_receipt(text.replace("\\u001f", "\\u001F"), signing_key.public_key())


def test_no_receipt_once_the_question_was_changed(transactional_db, signing_key):
    interrupt = ask()
    entry = trail.record("interrupt.claimed", interrupt=interrupt)
    Interrupt.objects.filter(pk=interrupt.pk).update(message="Something else?")
    with pytest.raises(ValueError, match="no longer matches the subject_hash"):
        receipt(entry)


NO_DJANGO = textwrap.dedent(
    """
    import json, sys

    class NoFrameworks:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in {"django", "celery", "rest_framework", "kombu"}:
                raise ImportError(f"{name} is not importable here")

    sys.meta_path.insert(0, NoFrameworks())
    sys.path[:0] = sys.argv[1:3]
    from workflows.audit import verify_receipt

    receipt, public_key = json.loads(sys.stdin.read())
    good = verify_receipt(receipt, public_key)
    receipt["entry"]["actor_name"] = "mallory"
    bad = verify_receipt(receipt, public_key)
    assert not [m for m in sys.modules if m.split(".")[0] in {"django", "celery"}]
    print(json.dumps([good, bad]))
    """
)


def test_it_verifies_in_a_process_with_only_cryptography_importable(decision_receipt, signing_key):
    # -S -I: no site, no environment; the path holds the repository and the directory
    # cryptography is installed in, where the finder above refuses Django and Celery.
    site = str(Path(cryptography.__file__).resolve().parents[1])
    result = subprocess.run(
        [sys.executable, "-S", "-I", "-c", NO_DJANGO, str(ROOT), site],
        input=json.dumps([decision_receipt, public_key_pem(signing_key)]),
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == [True, False]


def docs_receipt_check() -> str:
    text = (ROOT / "docs" / "audit.md").read_text(encoding="utf-8")
    after = text.split("<!-- receipt-check -->", 1)[1]
    return after.split("```python\n", 1)[1].split("```", 1)[0]


def run_docs_check(tmp_path: Path, receipt: dict, public_pem: str) -> subprocess.CompletedProcess:
    (tmp_path / "receipt.json").write_bytes(canonical_json(receipt))
    (tmp_path / "audit-public.pem").write_text(public_pem)
    guard = NO_DJANGO.split("from workflows.audit")[0]  # the finder, and the path
    site = str(Path(cryptography.__file__).resolve().parents[1])
    return subprocess.run(
        [sys.executable, "-S", "-I", "-c", guard + docs_receipt_check(), str(tmp_path), site],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )


def test_the_auditors_check_in_the_docs_passes_and_catches_a_forgery(
    decision_receipt, signing_key, tmp_path
):
    public = public_key_pem(signing_key)
    passed = run_docs_check(tmp_path, decision_receipt, public)
    assert passed.returncode == 0, passed.stderr
    forged = json.loads(canonical_json(decision_receipt))
    forged["entry"]["data"]["response"]["approved"] = False
    failed = run_docs_check(tmp_path, forged, public)
    assert failed.returncode != 0 and "InvalidSignature" in failed.stderr


def test_a_receipt_of_an_answer_changed_since_verifies_and_names_the_change(
    transactional_db, signing_key
):
    from tests.factories import grant_answer
    from workflows import services
    from workflows.models import AuditEntry

    ada = grant_answer(ApproverFactory(username="ada"), "answer_interrupt", "rewind_interrupt")
    interrupt = ask()
    services.decide(interrupt.pk, {"approved": True}, actor=ada)
    decided = AuditEntry.objects.get(action="decision.recorded")
    assert "rewound_by" not in receipt(decided)
    services.rewind(interrupt.pk, {"approved": False}, actor=ada)
    rewound = AuditEntry.objects.get(action="answer.rewound")
    later = receipt(decided)
    assert later["rewound_by"] == [{"id": rewound.id, "entry_hash": rewound.entry_hash}]
    assert verify_receipt(later, signing_key.public_key()) is True
