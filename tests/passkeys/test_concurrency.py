"""One passkey signing two decisions at once (PostgreSQL): its row is locked while its sign
count is checked and moved on, so the second decision waits for the first and is checked
against the count the first left. Two assertions with the same count (a cloned
authenticator) never both pass."""

import threading

import pytest
from django.db import connection

from tests.asking import ask
from tests.integration.test_concurrency import THREAD_TIMEOUT
from tests.integration.worker import require_postgres
from tests.locking import waits_on_a_lock
from tests.passkeys.conftest import enrol, signature
from workflows import services
from workflows.models import Decision, PasskeyCredential
from workflows.services import passkeys
from workflows.services.passkeys import SignatureRefused

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

YES = {"approved": True}


def test_two_decisions_signed_with_one_count_are_checked_in_turn(alice, monkeypatch):
    require_postgres("row locks and concurrent connections")
    _, key = enrol(alice)
    first, second = ask(require_signature=True), ask(require_signature=True)
    signed_first = signature(key, first, YES)
    key.sign_count = 0  # a clone of the authenticator: the same count again
    signed_second = signature(key, second, YES)

    verifying, release = threading.Event(), threading.Event()
    verify = passkeys.verify_authentication_response

    def first_pauses(**kwargs):
        if threading.current_thread().name == "first":
            verifying.set()  # it holds the passkey's row lock now
            assert release.wait(THREAD_TIMEOUT)
        return verify(**kwargs)

    monkeypatch.setattr(passkeys, "verify_authentication_response", first_pauses)
    outcomes: dict[str, str] = {}

    def decide(question, assertion) -> None:
        try:
            services.decide(question.pk, YES, actor=alice, assertion=assertion)
            outcomes[threading.current_thread().name] = "recorded"
        except SignatureRefused as exc:
            outcomes[threading.current_thread().name] = str(exc)
        finally:
            connection.close()

    one = threading.Thread(target=decide, args=(first, signed_first), name="first")
    two = threading.Thread(target=decide, args=(second, signed_second), name="second")
    one.start()
    assert verifying.wait(THREAD_TIMEOUT)
    two.start()
    # The second decision waits on the passkey's row (without the lock it would not wait,
    # finish, and both would pass).
    waited = waits_on_a_lock(two, THREAD_TIMEOUT)
    release.set()
    one.join(THREAD_TIMEOUT)
    two.join(THREAD_TIMEOUT)

    assert waited, "the second decision did not wait for the first's passkey row"
    assert outcomes["first"] == "recorded"
    assert "sign count" in outcomes["second"]
    assert list(Decision.objects.values_list("interrupt_id", flat=True)) == [first.pk]
    assert PasskeyCredential.objects.get().sign_count == 1
