"""Fixtures of the passkey tests: approvers with a registered software passkey, and the
assertion of a decision."""

from typing import Any

import pytest

from tests.api.conftest import client_for  # noqa: F401 (a fixture: token-authenticated API clients)
from tests.audit.conftest import signing_key  # noqa: F401 (a fixture: receipts are signed)
from tests.factories import ApproverFactory
from tests.passkeys.authenticator import SoftAuthenticator
from workflows.models import Interrupt, PasskeyChallenge
from workflows.services import passkeys

# What the test client's requests are taken for: host "testserver", plain HTTP.
TEST_CLIENT_RP = passkeys.RelyingParty(
    id="testserver", name="testserver", origin="http://testserver"
)


def enrol(user: Any, authenticator: SoftAuthenticator | None = None, name: str = "Laptop"):
    """Register a software passkey for `user` through the service; (row, authenticator)."""
    authenticator = authenticator or SoftAuthenticator()
    options, challenge = passkeys.registration_options(user, TEST_CLIENT_RP)
    credential = authenticator.create(options)
    row = passkeys.register(user, credential, challenge=challenge, rp=TEST_CLIENT_RP, name=name)
    authenticator.user = user
    return row, authenticator


def signature(
    authenticator: SoftAuthenticator, interrupt: Interrupt, response: Any, comment: str = "", **kw
) -> dict[str, Any]:
    """`authenticator`'s assertion of the decision (`response`, `comment`) on `interrupt`,
    over a challenge the server handed its owner (a made-up nonce for a key no one
    registered)."""
    owner = getattr(authenticator, "user", None)
    if owner is None:
        return authenticator.get(passkeys.challenge_for(interrupt, response, comment, "none"), **kw)
    return authenticator.get(passkeys.issue_challenge(owner, interrupt, response, comment), **kw)


def last_issued(user: Any, interrupt: Interrupt, response: Any, comment: str = "") -> bytes:
    """The challenge of `user`'s newest server nonce for this decision."""
    nonce = PasskeyChallenge.objects.filter(user=user).latest("id").nonce
    return passkeys.challenge_for(interrupt, response, comment, nonce)


@pytest.fixture
def alice(db):
    return ApproverFactory(username="alice")


@pytest.fixture
def alices_key(alice) -> SoftAuthenticator:
    return enrol(alice)[1]
