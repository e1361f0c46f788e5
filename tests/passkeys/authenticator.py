"""A passkey in software: a key pair made and used the way an authenticator does it, so
registering and signing are tested without a browser.

`create(options)` answers registration options (the JSON form py_webauthn gives) with a
credential as navigator.credentials.create() returns it in its JSON form; `get(challenge)`
signs like navigator.credentials.get(). P-256 (ES256) by default; Ed25519 and RSA keys
too, for the offline check of each algorithm a passkey is registered with.
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any

import cbor2
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from workflows.audit.assertions import b64url

USER_PRESENT, USER_VERIFIED, ATTESTED = 0x01, 0x04, 0x40


class SoftAuthenticator:
    def __init__(
        self, rp_id: str = "testserver", origin: str = "http://testserver", kind: str = "ES256"
    ) -> None:
        self.rp_id, self.origin, self.kind = rp_id, origin, kind
        self.key: Any = {
            "ES256": lambda: ec.generate_private_key(ec.SECP256R1()),
            "EdDSA": Ed25519PrivateKey.generate,
            "RS256": lambda: rsa.generate_private_key(public_exponent=65537, key_size=2048),
        }[kind]()
        self.credential_id = os.urandom(16)
        self.sign_count = 0
        self.user: Any = None  # whose passkey it is, once registered (conftest.enrol)

    @property
    def id(self) -> str:
        return b64url(self.credential_id)

    def cose_public_key(self) -> bytes:
        public = self.key.public_key()
        if self.kind == "ES256":
            numbers = public.public_numbers()
            x, y = numbers.x.to_bytes(32, "big"), numbers.y.to_bytes(32, "big")
            return cbor2.dumps({1: 2, 3: -7, -1: 1, -2: x, -3: y})
        if self.kind == "EdDSA":
            raw = public.public_bytes(Encoding.Raw, PublicFormat.Raw)
            return cbor2.dumps({1: 1, 3: -8, -1: 6, -2: raw})
        numbers = public.public_numbers()
        n = numbers.n.to_bytes((numbers.n.bit_length() + 7) // 8, "big")
        return cbor2.dumps({1: 3, 3: -257, -1: n, -2: numbers.e.to_bytes(3, "big")})

    def authenticator_data(self, flags: int, rp_id: str | None = None, tail: bytes = b"") -> bytes:
        rp_hash = hashlib.sha256((rp_id or self.rp_id).encode()).digest()
        return rp_hash + bytes([flags]) + self.sign_count.to_bytes(4, "big") + tail

    @staticmethod
    def client_data(kind: str, challenge: str, origin: str) -> bytes:
        fields = {"type": kind, "challenge": challenge, "origin": origin, "crossOrigin": False}
        return json.dumps(fields).encode()

    def create(self, options: dict[str, Any], *, origin: str | None = None) -> dict[str, Any]:
        """A registration credential answering `options`."""
        attested = (
            bytes(16)  # AAGUID: none
            + len(self.credential_id).to_bytes(2, "big")
            + self.credential_id
            + self.cose_public_key()
        )
        flags = USER_PRESENT | USER_VERIFIED | ATTESTED
        data = self.authenticator_data(flags, options["rp"]["id"], attested)
        attestation = cbor2.dumps({"fmt": "none", "attStmt": {}, "authData": data})
        client_data = self.client_data(
            "webauthn.create", options["challenge"], origin or self.origin
        )
        return {
            "id": self.id,
            "rawId": self.id,
            "type": "public-key",
            "response": {
                "clientDataJSON": b64url(client_data),
                "attestationObject": b64url(attestation),
                "transports": ["internal"],
            },
            "authenticatorAttachment": "platform",
            "clientExtensionResults": {},
        }

    def sign(self, data: bytes) -> bytes:
        if self.kind == "ES256":
            return self.key.sign(data, ec.ECDSA(hashes.SHA256()))
        if self.kind == "EdDSA":
            return self.key.sign(data)
        return self.key.sign(data, padding.PKCS1v15(), hashes.SHA256())

    def get(
        self,
        challenge: bytes,
        *,
        origin: str | None = None,
        rp_id: str | None = None,
        count: bool = True,
        flags: int = USER_PRESENT | USER_VERIFIED,
    ) -> dict[str, Any]:
        """An assertion signing `challenge` (the sign count goes up unless `count` is
        False, as an authenticator replaying an old count would do)."""
        if count:
            self.sign_count += 1
        data = self.authenticator_data(flags, rp_id)
        client_data = self.client_data("webauthn.get", b64url(challenge), origin or self.origin)
        signature = self.sign(data + hashlib.sha256(client_data).digest())
        return {
            "id": self.id,
            "rawId": self.id,
            "type": "public-key",
            "response": {
                "authenticatorData": b64url(data),
                "clientDataJSON": b64url(client_data),
                "signature": b64url(signature),
                "userHandle": None,
            },
            "clientExtensionResults": {},
        }
