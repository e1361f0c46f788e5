"""A question asked with `require_signature=True` takes a decision only with the
approver's passkey signature over the decision's challenge; every refusal stores nothing
(no decision, no audit entry, no sign count moved), and a signed decision's audit entry
keeps the assertion."""

import pytest
from django.core.exceptions import PermissionDenied

from tests.asking import ask
from tests.factories import ApproverFactory
from tests.passkeys.authenticator import USER_VERIFIED, SoftAuthenticator
from tests.passkeys.conftest import enrol, last_issued, signature
from workflows import services
from workflows.audit.assertions import ASSERTION_FIELDS, b64url, check_decision_assertion
from workflows.audit.documents import exported
from workflows.engine import RequestInput
from workflows.engine.errors import ResponseValidationError, UnknownInterruptError
from workflows.engine.status import InterruptStatus, NodeStatus
from workflows.models import AuditEntry, Decision, Interrupt, Invocation, PasskeyCredential
from workflows.services.passkeys import SignatureRefused

pytestmark = pytest.mark.django_db(transaction=True)

YES = {"approved": True}


def signed_question(**request):
    return ask(message="Pay 9,800 EUR to Initech?", require_signature=True, **request)


def trail_of(interrupt) -> list[str]:
    return list(
        AuditEntry.objects.filter(invocation_id=interrupt.invocation_id).values_list(
            "action", flat=True
        )
    )


def assert_nothing_stored(interrupt, sign_count: int | None = None) -> None:
    assert not Decision.objects.filter(interrupt=interrupt).exists()
    assert trail_of(interrupt) == ["invocation.started"]
    interrupt.refresh_from_db()
    assert interrupt.status == InterruptStatus.PENDING
    if sign_count is not None:
        assert PasskeyCredential.objects.get().sign_count == sign_count


def test_require_signature_is_a_plain_flag_of_the_question():
    assert RequestInput(message="?").require_signature is False
    asked = RequestInput(message="?", require_signature=True)
    assert RequestInput.from_dict(asked.to_dict()).require_signature is True
    with pytest.raises(ValueError, match="require_signature must be True or False"):
        RequestInput(message="?", require_signature="yes")


def test_the_question_row_keeps_the_flag(alice):
    assert signed_question().require_signature is True
    assert ask().require_signature is False


def test_a_signed_decision_is_recorded_with_its_assertion_in_the_entry(alice, alices_key):
    interrupt = signed_question()
    assertion = signature(alices_key, interrupt, YES, "checked the invoice")
    decision = services.decide(
        interrupt.pk, YES, actor=alice, comment="checked the invoice", assertion=assertion
    )
    assert decision.interrupt.status == InterruptStatus.RESOLVED
    assert Invocation.objects.get(pk=interrupt.invocation_id).status == NodeStatus.COMPLETED
    entry = AuditEntry.objects.get(action="decision.recorded", interrupt_id=interrupt.pk)
    kept = entry.data["assertion"]
    assert sorted(kept) == sorted([*ASSERTION_FIELDS, "nonce"])
    assert kept["credential_id"] == alices_key.id
    assert kept["signature"] == assertion["response"]["signature"]
    assert kept["authenticator_data"] == assertion["response"]["authenticatorData"]
    assert kept["client_data_json"] == assertion["response"]["clientDataJSON"]
    assert kept["public_key"] == b64url(alices_key.cose_public_key())
    assert kept["rp_id"] == "testserver"
    assert entry.data["response"] == YES
    check_decision_assertion(exported(entry), alices_key.cose_public_key())
    passkey = PasskeyCredential.objects.get()
    assert passkey.sign_count == 1
    assert passkey.last_used_at is not None


def test_no_assertion_is_refused_as_signature_required(alice, alices_key):
    interrupt = signed_question()
    with pytest.raises(SignatureRefused, match="needs your signature") as refused:
        services.decide(interrupt.pk, YES, actor=alice)
    assert refused.value.code == "signature_required"
    assert_nothing_stored(interrupt, sign_count=0)


def test_an_assertion_of_another_answer_is_refused(alice, alices_key):
    interrupt = signed_question()
    rejection = signature(alices_key, interrupt, {"approved": False})
    with pytest.raises(SignatureRefused, match="challenge"):
        services.decide(interrupt.pk, YES, actor=alice, assertion=rejection)
    assert_nothing_stored(interrupt, sign_count=0)


def test_an_assertion_with_another_comment_is_refused(alice, alices_key):
    interrupt = signed_question()
    assertion = signature(alices_key, interrupt, YES, "checked")
    with pytest.raises(SignatureRefused, match="challenge"):
        services.decide(interrupt.pk, YES, actor=alice, comment="not checked", assertion=assertion)
    assert_nothing_stored(interrupt, sign_count=0)


def test_an_assertion_made_for_another_question_is_refused(alice, alices_key):
    # The same words and payload: only the question's id tells the two apart.
    interrupt, twin = signed_question(), signed_question()
    assertion = signature(alices_key, twin, YES)
    with pytest.raises(SignatureRefused, match="challenge"):
        services.decide(interrupt.pk, YES, actor=alice, assertion=assertion)
    assert_nothing_stored(interrupt, sign_count=0)


def test_an_unknown_credential_is_refused(alice, alices_key):
    interrupt = signed_question()
    stranger = SoftAuthenticator()
    with pytest.raises(SignatureRefused, match="not by a passkey you registered"):
        services.decide(
            interrupt.pk, YES, actor=alice, assertion=signature(stranger, interrupt, YES)
        )
    assert_nothing_stored(interrupt, sign_count=0)


def test_a_credential_of_another_user_is_refused(alice):
    bob = ApproverFactory(username="bob")
    _, bobs_key = enrol(bob)
    interrupt = signed_question()
    with pytest.raises(SignatureRefused, match="not by a passkey you registered"):
        services.decide(
            interrupt.pk, YES, actor=alice, assertion=signature(bobs_key, interrupt, YES)
        )
    assert_nothing_stored(interrupt, sign_count=0)


def test_a_bad_signature_is_refused(alice, alices_key):
    interrupt = signed_question()
    assertion = signature(alices_key, interrupt, YES)
    forged = bytearray(alices_key.sign(b"something else"))
    assertion["response"]["signature"] = b64url(bytes(forged))
    with pytest.raises(SignatureRefused, match="Could not verify authentication signature"):
        services.decide(interrupt.pk, YES, actor=alice, assertion=assertion)
    assert_nothing_stored(interrupt, sign_count=0)


def test_a_replayed_sign_count_is_refused(alice, alices_key):
    first, second = signed_question(), signed_question()
    services.decide(first.pk, YES, actor=alice, assertion=signature(alices_key, first, YES))
    # A valid signature of the second question, but with the count the first one used: a
    # cloned authenticator, or a replay.
    replayed = signature(alices_key, second, YES, count=False)
    with pytest.raises(SignatureRefused, match="sign count"):
        services.decide(second.pk, YES, actor=alice, assertion=replayed)
    assert not Decision.objects.filter(interrupt=second).exists()
    assert trail_of(second) == ["invocation.started"]
    assert PasskeyCredential.objects.get().sign_count == 1


def test_an_assertion_signed_on_another_origin_is_refused(alice, alices_key):
    interrupt = signed_question()
    assertion = signature(alices_key, interrupt, YES, origin="https://phish.example")
    with pytest.raises(SignatureRefused, match="origin"):
        services.decide(interrupt.pk, YES, actor=alice, assertion=assertion)
    assert_nothing_stored(interrupt, sign_count=0)


def test_an_assertion_without_user_presence_is_refused(alice, alices_key):
    interrupt = signed_question()
    assertion = signature(alices_key, interrupt, YES, flags=USER_VERIFIED)
    with pytest.raises(SignatureRefused, match="not present"):
        services.decide(interrupt.pk, YES, actor=alice, assertion=assertion)
    assert_nothing_stored(interrupt, sign_count=0)


@pytest.mark.parametrize("text", ["not json", "{}", '{"id": "x"}', "[1]"])
def test_what_is_not_an_assertion_is_refused(alice, alices_key, text):
    interrupt = signed_question()
    with pytest.raises(SignatureRefused, match="not a WebAuthn assertion"):
        services.decide(interrupt.pk, YES, actor=alice, assertion=text)
    assert_nothing_stored(interrupt, sign_count=0)


def test_the_answer_rule_and_schema_are_asked_before_the_signature(alice, alices_key):
    not_hers = signed_question(assignees=["user:bob"])
    assertion = signature(alices_key, not_hers, YES)
    with pytest.raises(PermissionDenied, match="not among the assignees") as refused:
        services.decide(not_hers.pk, YES, actor=alice, assertion=assertion)
    assert not isinstance(refused.value, SignatureRefused)
    interrupt = signed_question()
    with pytest.raises(ResponseValidationError):
        services.decide(interrupt.pk, {"approved": "yes"}, actor=alice, assertion=assertion)
    assert PasskeyCredential.objects.get().sign_count == 0


def test_a_question_without_the_flag_takes_a_signature_when_given(alice, alices_key):
    interrupt = ask()
    services.decide(interrupt.pk, YES, actor=alice)  # no signature needed
    signed = ask()
    services.decide(signed.pk, YES, actor=alice, assertion=signature(alices_key, signed, YES))
    entries = AuditEntry.objects.filter(action="decision.recorded").order_by("id")
    assert ["assertion" in entry.data for entry in entries] == [False, True]
    bad = ask()
    with pytest.raises(SignatureRefused):  # given, it must hold
        services.decide(bad.pk, YES, actor=alice, assertion=signature(alices_key, signed, YES))


def test_each_quorum_decision_is_signed_by_its_own_approver(alice, alices_key):
    bob = ApproverFactory(username="bob")
    _, bobs_key = enrol(bob)
    interrupt = signed_question(quorum=2)
    services.decide(interrupt.pk, YES, actor=alice, assertion=signature(alices_key, interrupt, YES))
    interrupt.refresh_from_db()
    assert interrupt.status == InterruptStatus.PENDING
    services.decide(interrupt.pk, YES, actor=bob, assertion=signature(bobs_key, interrupt, YES))
    entries = AuditEntry.objects.filter(action="decision.recorded", interrupt_id=interrupt.pk)
    assert [e.data["assertion"]["credential_id"] for e in entries] == [alices_key.id, bobs_key.id]
    assert Interrupt.objects.get(pk=interrupt.pk).status == InterruptStatus.RESOLVED


def test_signing_challenge_is_what_decide_checks(alice, alices_key):
    interrupt = signed_question()
    challenge = services.signing_challenge(interrupt.pk, YES, actor=alice, comment="ok")
    assert challenge == last_issued(alice, interrupt, YES, "ok")
    services.decide(
        interrupt.pk, YES, actor=alice, comment="ok", assertion=alices_key.get(challenge)
    )
    assert Decision.objects.get(interrupt=interrupt).comment == "ok"


def test_signing_challenge_checks_the_answer_and_who_asks(alice):
    interrupt = signed_question(assignees=["user:alice"])
    with pytest.raises(ResponseValidationError, match="approved"):
        services.signing_challenge(interrupt.pk, {"approved": "yes"}, actor=alice)
    with pytest.raises(PermissionDenied, match="not among the assignees"):
        services.signing_challenge(interrupt.pk, YES, actor=ApproverFactory(username="bob"))
    with pytest.raises(UnknownInterruptError):
        services.signing_challenge("no-such-question", YES, actor=alice)
