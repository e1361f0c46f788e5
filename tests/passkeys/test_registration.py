"""Registering and removing passkeys through workflows.services.passkeys: the ceremony's options,
what a registration keeps, each refusal, and the relying party taken from the settings
or the request."""

import pytest
from django.test import RequestFactory

from tests.factories import ApproverFactory
from tests.passkeys.authenticator import SoftAuthenticator
from tests.passkeys.conftest import TEST_CLIENT_RP, enrol
from workflows.audit.assertions import b64url
from workflows.models import PasskeyCredential
from workflows.services import passkeys
from workflows.services.passkeys import PasskeyError, RelyingParty

pytestmark = pytest.mark.django_db


def test_the_options_name_the_site_the_person_and_the_algorithms_checked_offline(alice):
    options, challenge = passkeys.registration_options(alice, TEST_CLIENT_RP)
    assert options["rp"] == {"id": "testserver", "name": "testserver"}
    assert options["user"]["name"] == "alice"
    assert options["challenge"] == b64url(challenge)
    assert len(challenge) >= 32
    assert [p["alg"] for p in options["pubKeyCredParams"]] == [-8, -7, -257]
    again, other = passkeys.registration_options(alice, TEST_CLIENT_RP)
    assert again["user"]["id"] == options["user"]["id"]  # one account, one user handle
    assert other != challenge
    bob = ApproverFactory(username="bob")
    assert (
        passkeys.registration_options(bob, TEST_CLIENT_RP)[0]["user"]["id"] != options["user"]["id"]
    )


def test_a_registration_keeps_the_key_where_it_was_made(alice):
    row, key = enrol(alice, name="  Work laptop ")
    row.refresh_from_db()
    assert row.user == alice
    assert row.credential_id == key.id
    assert bytes(row.public_key) == key.cose_public_key()
    assert row.sign_count == 0
    assert row.transports == ["internal"]
    assert (row.rp_id, row.origin, row.name) == ("testserver", "http://testserver", "Work laptop")
    options, _ = passkeys.registration_options(alice, TEST_CLIENT_RP)
    assert [c["id"] for c in options["excludeCredentials"]] == [key.id]


@pytest.mark.parametrize("kind", ["ES256", "EdDSA", "RS256"])
def test_each_algorithm_offered_registers(alice, kind):
    row, _ = enrol(alice, SoftAuthenticator(kind=kind))
    assert PasskeyCredential.objects.filter(pk=row.pk).exists()


def test_an_answer_to_another_challenge_is_refused(alice):
    options, _ = passkeys.registration_options(alice, TEST_CLIENT_RP)
    _, other_challenge = passkeys.registration_options(alice, TEST_CLIENT_RP)
    credential = SoftAuthenticator().create(options)
    with pytest.raises(PasskeyError, match="challenge"):
        passkeys.register(
            alice, credential, challenge=other_challenge, rp=TEST_CLIENT_RP, name="Laptop"
        )
    assert not PasskeyCredential.objects.exists()


@pytest.mark.parametrize(
    ("origin", "rp_id", "reason"),
    [("https://phish.example", None, "origin"), (None, "phish.example", "RP ID")],
)
def test_a_credential_made_for_another_site_is_refused(alice, origin, rp_id, reason):
    options, challenge = passkeys.registration_options(alice, TEST_CLIENT_RP)
    if rp_id:
        options["rp"]["id"] = rp_id
    credential = SoftAuthenticator().create(options, origin=origin)
    with pytest.raises(PasskeyError, match=reason):
        passkeys.register(alice, credential, challenge=challenge, rp=TEST_CLIENT_RP, name="X")
    assert not PasskeyCredential.objects.exists()


@pytest.mark.parametrize("credential", [None, "not json", {}, {"id": "abc"}])
def test_what_is_not_a_credential_is_refused(alice, credential):
    _, challenge = passkeys.registration_options(alice, TEST_CLIENT_RP)
    with pytest.raises(PasskeyError, match="not registered"):
        passkeys.register(alice, credential, challenge=challenge, rp=TEST_CLIENT_RP, name="X")


def test_a_passkey_registers_once(alice):
    _, key = enrol(alice)
    with pytest.raises(PasskeyError, match="registered already"):
        enrol(ApproverFactory(username="bob"), key)
    assert PasskeyCredential.objects.get().user == alice


@pytest.mark.parametrize("name", ["", "   ", "x" * 101])
def test_a_passkey_needs_a_name(alice, name):
    with pytest.raises(PasskeyError, match="name of 1 to 100"):
        enrol(alice, name=name)
    assert not PasskeyCredential.objects.exists()


def test_one_removes_only_ones_own_passkeys(alice):
    mine, _ = enrol(alice)
    bob = ApproverFactory(username="bob")
    theirs, _ = enrol(bob)
    with pytest.raises(PasskeyError, match="no passkey"):
        passkeys.remove(alice, theirs.pk)
    passkeys.remove(alice, mine.pk)
    assert list(PasskeyCredential.objects.values_list("user__username", flat=True)) == ["bob"]


def test_the_relying_party_comes_from_the_request_unless_set(settings):
    settings.ALLOWED_HOSTS = ["ops.example.com"]
    request = RequestFactory().get("/", HTTP_HOST="ops.example.com:8443", secure=True)
    assert passkeys.relying_party(request) == RelyingParty(
        id="ops.example.com", name="ops.example.com", origin="https://ops.example.com:8443"
    )
    settings.HITL = {
        **settings.HITL,
        "WEBAUTHN_RP_ID": "example.com",
        "WEBAUTHN_ORIGIN": "https://ops.example.com",
        "WEBAUTHN_RP_NAME": "Example approvals",
    }
    assert passkeys.relying_party(request) == RelyingParty(
        id="example.com", name="Example approvals", origin="https://ops.example.com"
    )
