"""Passkeys and security keys that sign decisions (WebAuthn, with py_webauthn): a person
registers and removes their own; a question asked with `require_signature=True` accepts a
decision only with an assertion of one of them over the decision's challenge
(workflows.audit.assertions). The one write path of PasskeyCredential rows.
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any
from urllib.parse import urlsplit

from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.utils import timezone
from django.utils.crypto import salted_hmac
from webauthn import (
    base64url_to_bytes,
    generate_authentication_options,
    generate_registration_options,
    options_to_json,
    verify_authentication_response,
    verify_registration_response,
)
from webauthn.helpers import (
    parse_authentication_credential_json,
    parse_registration_credential_json,
)
from webauthn.helpers.cose import COSEAlgorithmIdentifier
from webauthn.helpers.exceptions import WebAuthnException
from webauthn.helpers.structs import (
    AuthenticationCredential,
    AuthenticatorSelectionCriteria,
    AuthenticatorTransport,
    PublicKeyCredentialDescriptor,
    ResidentKeyRequirement,
    UserVerificationRequirement,
)

from ..audit.assertions import EDDSA, ES256, RS256, b64url, decision_challenge
from ..audit.canonical import subject_hash
from ..audit.trail import question_subject
from ..conf import hitl_settings
from ..models import PASSKEY_NAME_LENGTH, Interrupt, PasskeyChallenge, PasskeyCredential

# What receipts verify offline (workflows.audit.assertions): no passkey of another kind.
ALGORITHMS = [COSEAlgorithmIdentifier(alg) for alg in (EDDSA, ES256, RS256)]
USER_VERIFICATION = UserVerificationRequirement.PREFERRED


@dataclass(frozen=True)
class RelyingParty:
    """Who passkeys are registered with: the RP id (a domain), its name, the origin."""

    id: str
    name: str
    origin: str


class PasskeyError(ValueError):
    """A registration or removal refused; the message says why."""


class SignatureRefused(PermissionDenied):
    """A decision refused for its signature: none given where the question needs one
    (`signature_required`), or one that does not verify (`invalid_signature`)."""

    def __init__(self, message: str, code: str = "invalid_signature") -> None:
        super().__init__(message)
        self.code = code


def relying_party(request: Any) -> RelyingParty:
    """HITL["WEBAUTHN_RP_ID"], ["WEBAUTHN_RP_NAME"] and ["WEBAUTHN_ORIGIN"], each taken
    from the request's host and scheme where it is not set."""
    host = request.get_host()
    rp_id = hitl_settings.WEBAUTHN_RP_ID or urlsplit(f"//{host}").hostname or host
    return RelyingParty(
        id=rp_id,
        name=hitl_settings.WEBAUTHN_RP_NAME or rp_id,
        origin=hitl_settings.WEBAUTHN_ORIGIN or f"{request.scheme}://{host}",
    )


def host_refusal(rp: RelyingParty) -> str:
    """Why browsers refuse passkeys for `rp` ("" when they do not): WebAuthn needs a
    domain name, and a page opened at an IP address (http://127.0.0.1:8000/) has none."""
    try:
        address = ipaddress.ip_address(rp.id)
    except ValueError:
        return ""
    named = ""
    if address.is_loopback:  # the same server under the name browsers accept
        parts = urlsplit(rp.origin)
        port = f":{parts.port}" if parts.port else ""
        named = f" Open this page at {parts.scheme}://localhost{port}/ instead."
    return (
        f"Passkeys cannot be added here: this page is at the address {rp.id}, and "
        f"passkeys need a domain name.{named}"
    )


def user_handle(user: Any) -> bytes:
    """The WebAuthn user id of `user`: the same for each of their passkeys (an
    authenticator keeps one passkey per account), and no personal data."""
    return salted_hmac("workflows.services.passkeys.user_handle", str(user.pk)).digest()


def _descriptor(credential: PasskeyCredential) -> PublicKeyCredentialDescriptor:
    transports = []
    for name in credential.transports:
        try:
            transports.append(AuthenticatorTransport(name))
        except ValueError:  # a transport this version of py_webauthn does not know
            continue
    return PublicKeyCredentialDescriptor(
        id=base64url_to_bytes(credential.credential_id), transports=transports or None
    )


def registration_options(user: Any, rp: RelyingParty) -> tuple[dict[str, Any], bytes]:
    """The options for navigator.credentials.create() (their JSON form) and their
    challenge, which `register` must be given back."""
    options = generate_registration_options(
        rp_id=rp.id,
        rp_name=rp.name,
        user_name=user.get_username(),
        user_id=user_handle(user),
        user_display_name=user.get_full_name() or user.get_username(),
        exclude_credentials=[_descriptor(c) for c in PasskeyCredential.objects.filter(user=user)],
        authenticator_selection=AuthenticatorSelectionCriteria(
            resident_key=ResidentKeyRequirement.PREFERRED, user_verification=USER_VERIFICATION
        ),
        supported_pub_key_algs=ALGORITHMS,
    )
    return json.loads(options_to_json(options)), options.challenge


@transaction.atomic
def register(
    user: Any, credential: Any, *, challenge: bytes, rp: RelyingParty, name: str
) -> PasskeyCredential:
    """Keep the passkey `credential` (what navigator.credentials.create() returned, in its
    JSON form) as `user`'s, named `name`, once it answers `challenge` on `rp`.
    PasskeyError otherwise."""
    name = name.strip()
    if not name or len(name) > PASSKEY_NAME_LENGTH:
        raise PasskeyError(f"give the passkey a name of 1 to {PASSKEY_NAME_LENGTH} characters")
    try:
        parsed = parse_registration_credential_json(credential)
        verified = verify_registration_response(
            credential=parsed,
            expected_challenge=challenge,
            expected_rp_id=rp.id,
            expected_origin=rp.origin,
            supported_pub_key_algs=ALGORITHMS,
        )
    except (WebAuthnException, ValueError, TypeError) as exc:
        raise PasskeyError(f"the passkey was not registered: {exc}") from None
    credential_id = b64url(verified.credential_id)
    if PasskeyCredential.objects.filter(credential_id=credential_id).exists():
        raise PasskeyError("this passkey is registered already")
    return PasskeyCredential.objects.create(
        user=user,
        credential_id=credential_id,
        public_key=verified.credential_public_key,
        sign_count=verified.sign_count,
        transports=[t.value for t in parsed.response.transports or []],
        rp_id=rp.id,
        origin=rp.origin,
        name=name,
    )


def remove(user: Any, passkey_id: int) -> None:
    """Remove one of `user`'s own passkeys. Decisions it signed keep their assertion and
    its public key in their audit entries, so their receipts still verify."""
    deleted, _ = PasskeyCredential.objects.filter(pk=passkey_id, user=user.pk).delete()
    if not deleted:
        raise PasskeyError(f"you have no passkey {passkey_id}")


def challenge_for(interrupt: Interrupt, response: Any, comment: str, nonce: str) -> bytes:
    """The challenge a passkey signs to decide `response` with `comment` on `interrupt`,
    with the server's `nonce`."""
    subject = subject_hash(**question_subject(interrupt))
    return decision_challenge(str(interrupt.pk), subject, response, comment, nonce)


def issue_challenge(user: Any, interrupt: Interrupt, response: Any, comment: str) -> bytes:
    """A fresh challenge for `user` to sign `response` with `comment` on `interrupt`: its
    nonce is kept here until a decision uses it, once, within
    HITL["PASSKEY_CHALLENGE_SECONDS"] (expired ones of `user`'s are cleared)."""
    now = timezone.now()
    PasskeyChallenge.objects.filter(user=user.pk, expires_at__lte=now).delete()
    nonce = PasskeyChallenge.objects.create(
        user=user,
        interrupt_id=str(interrupt.pk),
        expires_at=now + timedelta(seconds=hitl_settings.PASSKEY_CHALLENGE_SECONDS),
    ).nonce
    return challenge_for(interrupt, response, comment, nonce)


def _used_nonce(
    interrupt: Interrupt, actor: Any, response: Any, comment: str, signed: bytes
) -> tuple[str, bytes]:
    """The nonce (and challenge) the assertion's client data `signed` names, handed to
    `actor` for this decision and still unused and unexpired: deleted in the caller's
    transaction, so no assertion is accepted twice. SignatureRefused otherwise."""
    try:
        named = base64url_to_bytes(json.loads(signed)["challenge"])
    except (ValueError, KeyError, TypeError):
        raise SignatureRefused("the assertion's client data names no challenge") from None
    issued = PasskeyChallenge.objects.select_for_update().filter(
        user=actor.pk, interrupt_id=str(interrupt.pk), expires_at__gt=timezone.now()
    )
    for row in issued:
        challenge = challenge_for(interrupt, response, comment, row.nonce)
        if challenge == named:
            row.delete()
            return row.nonce, challenge
    raise SignatureRefused(
        "the signature does not hold: it signs no challenge this server handed you for "
        "this decision (or one used already, or expired): ask for a new one"
    )


def assertion_options(user: Any, challenge: bytes, rp_id: str) -> dict[str, Any]:
    """The options for navigator.credentials.get() (their JSON form) that sign
    `challenge` with one of `user`'s passkeys; SignatureRefused when they have none."""
    passkeys = list(PasskeyCredential.objects.filter(user=user.pk))
    if not passkeys:
        raise SignatureRefused(
            "you have no passkey to sign with: register one under Approvals > Passkeys",
            code="no_passkey",
        )
    options = generate_authentication_options(
        rp_id=rp_id,
        challenge=challenge,
        allow_credentials=[_descriptor(p) for p in passkeys],
        user_verification=USER_VERIFICATION,
    )
    return json.loads(options_to_json(options))


def _parsed(assertion: Mapping[str, Any] | str) -> AuthenticationCredential:
    try:
        return parse_authentication_credential_json(assertion)  # type: ignore[arg-type]
    except (WebAuthnException, ValueError, TypeError) as exc:
        raise SignatureRefused(f"not a WebAuthn assertion: {exc}") from None


def verified_assertion(
    interrupt: Interrupt, actor: Any, response: Any, comment: str, assertion: Any
) -> dict[str, str]:
    """The assertion that signs `actor`'s decision (`response`, `comment`) on `interrupt`,
    as the decision's audit entry keeps it (workflows.audit.assertions.ASSERTION_FIELDS);
    its passkey's sign count moves on and its nonce is used up in the caller's
    transaction. SignatureRefused when there is none, or it is not by a passkey of
    `actor`'s, signs another challenge than one issue_challenge handed `actor` for this
    decision (or one used or expired), does not verify, or repeats a sign count."""
    if assertion is None or assertion == "":
        raise SignatureRefused(
            "this question needs your signature: decide on its page, where your passkey "
            "signs the decision",
            code="signature_required",
        )
    parsed = _parsed(assertion)
    passkey = (
        PasskeyCredential.objects.select_for_update()
        .filter(credential_id=b64url(parsed.raw_id), user=actor.pk)
        .first()
    )
    if passkey is None:
        raise SignatureRefused("the assertion is not by a passkey you registered")
    rp_id = hitl_settings.WEBAUTHN_RP_ID or passkey.rp_id
    nonce, challenge = _used_nonce(
        interrupt, actor, response, comment, parsed.response.client_data_json
    )
    try:
        verified = verify_authentication_response(
            credential=parsed,
            expected_challenge=challenge,
            expected_rp_id=rp_id,
            expected_origin=hitl_settings.WEBAUTHN_ORIGIN or passkey.origin,
            credential_public_key=bytes(passkey.public_key),
            credential_current_sign_count=passkey.sign_count,
        )
    except (WebAuthnException, ValueError, TypeError) as exc:
        raise SignatureRefused(f"the signature does not hold: {exc}") from None
    passkey.sign_count, passkey.last_used_at = verified.new_sign_count, timezone.now()
    passkey.save(update_fields=["sign_count", "last_used_at"])
    signed = parsed.response
    return {
        "credential_id": passkey.credential_id,
        "authenticator_data": b64url(signed.authenticator_data),
        "client_data_json": b64url(signed.client_data_json),
        "signature": b64url(signed.signature),
        "public_key": b64url(bytes(passkey.public_key)),
        "rp_id": rp_id,
        "nonce": nonce,
    }
