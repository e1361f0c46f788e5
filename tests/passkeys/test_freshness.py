"""A passkey signs a challenge that carries a server nonce: handed to one person for one
decision, used once, expiring; an assertion over any other challenge (one a client
computed itself, another person's, a used or an expired one) is refused. Adding a
passkey needs the password, with a limit on wrong ones, or for an account without a
password (SSO) a recent login."""

import time
from datetime import timedelta

import pytest
from django.core.cache import cache
from django.db import transaction
from django.utils import timezone

from approvals.passkeys import SESSION_LOGIN_AT
from tests.factories import ApproverFactory
from tests.passkeys.authenticator import SoftAuthenticator
from tests.passkeys.conftest import enrol
from tests.passkeys.test_pages import PASSKEYS, post_json
from tests.passkeys.test_signed_decisions import YES, signed_question
from workflows import services
from workflows.models import Decision, PasskeyChallenge
from workflows.services import passkeys

pytestmark = pytest.mark.django_db(transaction=True)

OPTIONS = PASSKEYS + "options/"


@pytest.fixture
def still(alice) -> SoftAuthenticator:
    """Alice's passkey, one that does not count its signatures (the sign count cannot
    tell a replay: only the nonce can)."""
    key = enrol(alice)[1]
    key.get = lambda challenge, **kw: SoftAuthenticator.get(key, challenge, count=False, **kw)
    return key


def test_an_assertion_is_accepted_once(alice, still):
    interrupt = signed_question()
    assertion = still.get(passkeys.issue_challenge(alice, interrupt, YES, ""))
    with transaction.atomic():
        signed = passkeys.verified_assertion(interrupt, alice, YES, "", assertion)
        assert signed["nonce"] and not PasskeyChallenge.objects.exists()
        with pytest.raises(passkeys.SignatureRefused, match="used already"):
            passkeys.verified_assertion(interrupt, alice, YES, "", assertion)


def test_a_challenge_the_server_did_not_hand_out_is_refused(alice, still):
    interrupt = signed_question()
    made_up = still.get(passkeys.challenge_for(interrupt, YES, "", "guessed"))
    with pytest.raises(passkeys.SignatureRefused, match="no challenge this server handed you"):
        services.decide(interrupt.pk, YES, actor=alice, assertion=made_up)
    assert not Decision.objects.exists()


def test_another_persons_challenge_is_refused(alice, still):
    interrupt = signed_question(assignees=["user:alice", "user:bob"])
    bobs = passkeys.issue_challenge(ApproverFactory(username="bob"), interrupt, YES, "")
    with pytest.raises(passkeys.SignatureRefused, match="no challenge"):
        services.decide(interrupt.pk, YES, actor=alice, assertion=still.get(bobs))


def test_an_expired_challenge_is_refused(alice, still):
    interrupt = signed_question()
    assertion = still.get(passkeys.issue_challenge(alice, interrupt, YES, ""))
    PasskeyChallenge.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    with pytest.raises(passkeys.SignatureRefused, match="expired"):
        services.decide(interrupt.pk, YES, actor=alice, assertion=assertion)
    fresh = still.get(passkeys.issue_challenge(alice, interrupt, YES, ""))
    assert services.decide(interrupt.pk, YES, actor=alice, assertion=fresh).pk
    assert not PasskeyChallenge.objects.exists()  # the expired one cleared, the fresh used


@pytest.fixture
def alice_client(client, alice):
    cache.clear()
    client.force_login(alice)
    return client


def test_wrong_passwords_are_limited(alice_client, settings):
    settings.HITL = {**settings.HITL, "PASSKEY_PASSWORD_ATTEMPTS": 3}
    for _ in range(3):
        refused = post_json(alice_client, OPTIONS, {"password": "guess"})
        assert refused.json()["error"] == "password_required"
    locked = post_json(alice_client, OPTIONS, {"password": "pw"})  # even the right one
    assert (locked.status_code, locked.json()["error"]) == (429, "too_many_attempts")
    cache.clear()  # the window passed
    assert post_json(alice_client, OPTIONS, {"password": "pw"}).status_code == 200


def test_an_account_without_a_password_needs_a_recent_login(client, alice, settings):
    cache.clear()
    alice.set_unusable_password()
    alice.save()
    client.force_login(alice)
    assert post_json(client, OPTIONS, {}).status_code == 200  # signed in just now
    session = client.session
    minutes = settings.HITL.get("PASSKEY_RECENT_LOGIN_MINUTES", 15)
    session[SESSION_LOGIN_AT] = time.time() - minutes * 60 - 1
    session.save()
    stale = post_json(client, OPTIONS, {})
    assert (stale.status_code, stale.json()["error"]) == (403, "login_required")
    assert "login_url" in stale.json()
    del session[SESSION_LOGIN_AT]  # a session from before login times were noted
    session.save()
    assert post_json(client, OPTIONS, {}).json()["error"] == "login_required"
