"""Decisions signed with a passkey (WebAuthn): the challenge an approver's assertion signs,
and its check with `cryptography` alone, so a receipt's signed decision verifies offline.
Imports nothing from Django (nor py_webauthn).

The challenge of a decision is SHA-256 of CHALLENGE_CONTEXT followed by the canonical JSON
(RFC 8785) of `{"comment", "interrupt_id", "nonce", "response", "subject_hash"}`: the
question (its id and what it asked), the answer given to it, comment included, and the
server's single-use nonce that makes the assertion fresh. Decisions signed before nonces
(their assertion has no `nonce`) used LEGACY_CONTEXT and the legacy canonical form.

An assertion, as a `decision.recorded` entry keeps it under `data["assertion"]`, holds
ASSERTION_FIELDS (and `nonce`): the rp_id and the nonce as text, every other value
base64url without padding. It verifies when the credential's key signed `authenticator_data`
followed by SHA-256 of `client_data_json`; when the client data says `webauthn.get`, names
the decision's challenge and an origin on `rp_id` or below it; and when the authenticator
data starts with SHA-256 of `rp_id` and has its user-present flag set.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from .canonical import canonical_json, legacy_canonical_json
from .signing import InvalidDocument

CHALLENGE_CONTEXT = b"hitl-decision-v2"
LEGACY_CONTEXT = b"hitl-decision-v1"
ASSERTION_FIELDS = (
    "credential_id",
    "authenticator_data",
    "client_data_json",
    "signature",
    "public_key",
    "rp_id",
)
# The COSE algorithms read here, which are the ones passkeys are registered with:
# ES256 (ECDSA P-256, SHA-256), EdDSA (Ed25519), RS256 (RSASSA-PKCS1-v1_5, SHA-256).
ES256, EDDSA, RS256 = -7, -8, -257
USER_PRESENT = 0x01


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode("ascii").rstrip("=")


def from_b64url(text: Any, name: str) -> bytes:
    """The bytes of base64url text (padding optional); nothing else is read as such."""
    if not isinstance(text, str) or "+" in text or "/" in text:
        raise InvalidDocument(f"the assertion's {name} is not base64url text")
    try:
        return base64.b64decode(text + "=" * (-len(text) % 4), altchars=b"-_", validate=True)
    except (binascii.Error, ValueError):
        raise InvalidDocument(f"the assertion's {name} is not base64url") from None


def decision_challenge(
    interrupt_id: str, subject_hash: str, response: Any, comment: str, nonce: str | None = None
) -> bytes:
    """The 32 bytes an approver's passkey signs to give `response` (with `comment`) to the
    question `interrupt_id` that asked what `subject_hash` covers, with the server's
    `nonce` (None: the form of decisions signed before nonces)."""
    bound = {
        "comment": comment,
        "interrupt_id": interrupt_id,
        "response": response,
        "subject_hash": subject_hash,
    }
    if nonce is None:
        return hashlib.sha256(LEGACY_CONTEXT + legacy_canonical_json(bound)).digest()
    return hashlib.sha256(CHALLENGE_CONTEXT + canonical_json({**bound, "nonce": nonce})).digest()


def _cbor_item(data: bytes, at: int) -> tuple[Any, int]:
    """One CBOR item from `data[at:]` and where it ends: the definite-length integers,
    strings, arrays and maps a COSE_Key is made of."""
    if at >= len(data):
        raise InvalidDocument("the public key is cut short")
    major, info = data[at] >> 5, data[at] & 0x1F
    at += 1
    if info < 24:
        argument = info
    elif info <= 27:
        size = 1 << (info - 24)
        if at + size > len(data):
            raise InvalidDocument("the public key is cut short")
        argument, at = int.from_bytes(data[at : at + size], "big"), at + size
    else:
        raise InvalidDocument("the public key is not a COSE_Key")
    if major == 0:
        return argument, at
    if major == 1:
        return -1 - argument, at
    if major in (2, 3):
        if at + argument > len(data):
            raise InvalidDocument("the public key is cut short")
        chunk = data[at : at + argument]
        try:
            return (chunk if major == 2 else chunk.decode("utf-8")), at + argument
        except UnicodeDecodeError:
            raise InvalidDocument("the public key holds text that is not UTF-8") from None
    if major == 4:
        items = []
        for _ in range(argument):
            item, at = _cbor_item(data, at)
            items.append(item)
        return items, at
    if major == 5:
        mapping: dict[Any, Any] = {}
        for _ in range(argument):
            key, at = _cbor_item(data, at)
            if not isinstance(key, int | str) or key in mapping:
                raise InvalidDocument("the public key's map has a bad or repeated key")
            mapping[key], at = _cbor_item(data, at)
        return mapping, at
    raise InvalidDocument("the public key is not a COSE_Key")


def credential_key(key: Any) -> tuple[int, Any]:
    """The COSE algorithm and `cryptography` key of a credential's public key given as a
    COSE_Key (bytes, or base64url text) or as a `cryptography` public key."""
    if isinstance(key, str):
        key = from_b64url(key, "public_key")
    if isinstance(key, bytes | bytearray | memoryview):
        return cose_key(bytes(key))
    if isinstance(key, ec.EllipticCurvePublicKey) and isinstance(key.curve, ec.SECP256R1):
        return ES256, key
    if isinstance(key, Ed25519PublicKey):
        return EDDSA, key
    if isinstance(key, rsa.RSAPublicKey):
        return RS256, key
    raise TypeError(f"not a credential public key (COSE_Key or a cryptography key): {key!r}")


def cose_key(data: bytes) -> tuple[int, Any]:
    """The COSE algorithm and the `cryptography` public key of a COSE_Key."""
    key, end = _cbor_item(data, 0)
    if end != len(data) or not isinstance(key, dict):
        raise InvalidDocument("the public key is not a COSE_Key")
    kty, alg = key.get(1), key.get(3)
    try:
        if (kty, alg, key.get(-1)) == (2, ES256, 1):
            point = b"\x04" + key[-2] + key[-3]
            return ES256, ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), point)
        if (kty, alg, key.get(-1)) == (1, EDDSA, 6):
            return EDDSA, Ed25519PublicKey.from_public_bytes(key[-2])
        if (kty, alg) == (3, RS256):
            numbers = rsa.RSAPublicNumbers(
                int.from_bytes(key[-2], "big"), int.from_bytes(key[-1], "big")
            )
            return RS256, numbers.public_key()
    except (KeyError, TypeError, ValueError):
        raise InvalidDocument("the public key's COSE parameters are not a valid key") from None
    raise InvalidDocument(f"a COSE key of type {kty} and algorithm {alg} is not read here")


def _verify(alg: int, key: Any, signature: bytes, signed: bytes) -> None:
    try:
        if alg == ES256:
            key.verify(signature, signed, ec.ECDSA(hashes.SHA256()))
        elif alg == EDDSA:
            key.verify(signature, signed)
        else:
            key.verify(signature, signed, padding.PKCS1v15(), hashes.SHA256())
    except InvalidSignature:
        raise InvalidDocument("the passkey's signature does not match") from None


def _on_rp(origin: Any, rp_id: str) -> bool:
    host = urlsplit(origin).hostname if isinstance(origin, str) else None
    return host is not None and (host == rp_id or host.endswith("." + rp_id))


def check_assertion(assertion: Any, challenge: bytes, credential: tuple[int, Any]) -> None:
    """Raise InvalidDocument (saying what does not hold) unless `assertion` (ASSERTION_FIELDS)
    is the signature over `challenge` of `credential` (credential_key's algorithm and key:
    never the key the assertion itself names, which anyone can write)."""
    if not isinstance(assertion, Mapping):
        raise InvalidDocument("the assertion is not an object")
    missing = [name for name in ASSERTION_FIELDS if name not in assertion]
    if missing:
        raise InvalidDocument(f"the assertion lacks {', '.join(missing)}")
    rp_id = assertion["rp_id"]
    if not isinstance(rp_id, str) or not rp_id:
        raise InvalidDocument("the assertion names no rp_id")
    client_data_bytes = from_b64url(assertion["client_data_json"], "client_data_json")
    authenticator_data = from_b64url(assertion["authenticator_data"], "authenticator_data")
    try:
        client_data = json.loads(client_data_bytes)
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise InvalidDocument("the assertion's client data is not JSON") from None
    if not isinstance(client_data, dict) or client_data.get("type") != "webauthn.get":
        raise InvalidDocument("the client data is not of a WebAuthn assertion (webauthn.get)")
    if from_b64url(client_data.get("challenge"), "challenge") != challenge:
        raise InvalidDocument("the passkey signed another challenge than this decision's")
    if not _on_rp(client_data.get("origin"), rp_id):
        raise InvalidDocument(f"signed on {client_data.get('origin')!r}, not on {rp_id!r}")
    if (
        len(authenticator_data) < 37
        or authenticator_data[:32] != hashlib.sha256(rp_id.encode("utf-8")).digest()
    ):
        raise InvalidDocument(f"the authenticator data is not for {rp_id!r}")
    if not authenticator_data[32] & USER_PRESENT:
        raise InvalidDocument("the authenticator says no user was present")
    alg, key = credential
    signature = from_b64url(assertion["signature"], "signature")
    _verify(alg, key, signature, authenticator_data + hashlib.sha256(client_data_bytes).digest())


def check_decision_assertion(entry: Mapping[str, Any], credential_public_key: Any) -> None:
    """Raise InvalidDocument unless the entry (a `decision.recorded` entry as receipts show
    it) carries an assertion by `credential_public_key` (credential_key) signing its own
    question and answer."""
    data, interrupt_id, subject = (
        entry.get("data"),
        entry.get("interrupt_id"),
        entry.get("subject_hash"),
    )
    if not isinstance(data, Mapping) or "assertion" not in data:
        raise InvalidDocument("the entry carries no signed decision")
    if not isinstance(interrupt_id, str) or not isinstance(subject, str):
        raise InvalidDocument("the entry names no question")
    assertion = data["assertion"]
    nonce = assertion.get("nonce") if isinstance(assertion, Mapping) else None
    if nonce is not None and not isinstance(nonce, str):
        raise InvalidDocument("the assertion's nonce is not text")
    challenge = decision_challenge(
        interrupt_id, subject, data.get("response"), data.get("comment", ""), nonce
    )
    check_assertion(assertion, challenge, credential_key(credential_public_key))
