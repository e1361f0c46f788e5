"""Ed25519 signatures over canonical JSON documents (receipts, checkpoints).

A signed document is a JSON object with a `signature` member,
`{"algorithm": "Ed25519", "key_id": ..., "value": <base64>}`, over the canonical JSON of
the object without that member. `key_id` is the SHA-256 (hex) of the raw 32-byte public
key: it says which key signed, so keys can be rotated. Imports nothing from Django.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from .canonical import canonical_json, legacy_canonical_json, sha256_hex

ALGORITHM = "Ed25519"


class InvalidDocument(ValueError):
    """A receipt or checkpoint that does not verify; the message says why."""


def _pem_bytes(pem: str | bytes) -> bytes:
    return pem.encode("ascii") if isinstance(pem, str) else pem


def load_private_key(pem: str | bytes) -> Ed25519PrivateKey:
    """An Ed25519 private key from PEM text (PKCS#8, unencrypted); ValueError otherwise."""
    try:
        key = serialization.load_pem_private_key(_pem_bytes(pem), password=None)
    except (ValueError, TypeError, UnicodeEncodeError) as exc:
        raise ValueError(f"not an unencrypted PEM private key ({exc})") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise ValueError(f"a {type(key).__name__.removeprefix('_')}, not an Ed25519 key")
    return key


def load_public_key(key: str | bytes | Ed25519PublicKey | Ed25519PrivateKey) -> Ed25519PublicKey:
    """An Ed25519 public key from PEM text or a `cryptography` key object (a private key
    stands for its public half)."""
    if isinstance(key, Ed25519PublicKey):
        return key
    if isinstance(key, Ed25519PrivateKey):
        return key.public_key()
    if not isinstance(key, str | bytes):
        raise TypeError(f"wants an Ed25519 public key as PEM text or a key object, not {key!r}")
    try:
        loaded = serialization.load_pem_public_key(_pem_bytes(key))
    except (ValueError, UnicodeEncodeError) as exc:
        raise ValueError(f"not a PEM public key ({exc})") from None
    if not isinstance(loaded, Ed25519PublicKey):
        raise ValueError(f"a {type(loaded).__name__.removeprefix('_')}, not an Ed25519 key")
    return loaded


def public_key_pem(key: Ed25519PrivateKey | Ed25519PublicKey) -> str:
    """The public key as PEM text (SubjectPublicKeyInfo), to hand to verifiers."""
    return (
        load_public_key(key)
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode("ascii")
    )


def key_id(key: Ed25519PrivateKey | Ed25519PublicKey) -> str:
    raw = load_public_key(key).public_bytes(
        serialization.Encoding.Raw, serialization.PublicFormat.Raw
    )
    return sha256_hex(raw)


def _signed_bytes(body: Mapping[str, Any], legacy: bool) -> bytes:
    return legacy_canonical_json(body) if legacy else canonical_json(body)


def sign(
    document: Mapping[str, Any], private_key: Ed25519PrivateKey, *, legacy: bool = False
) -> dict[str, Any]:
    """`document` with its `signature` member added (`legacy`: over the canonical form
    used before RFC 8785, for receipts of entries hashed by it)."""
    body = {name: value for name, value in document.items() if name != "signature"}
    value = private_key.sign(_signed_bytes(body, legacy))
    signature = {
        "algorithm": ALGORITHM,
        "key_id": key_id(private_key),
        "value": base64.b64encode(value).decode("ascii"),
    }
    return {**body, "signature": signature}


def check_signature(
    document: Mapping[str, Any], public_key: Ed25519PublicKey, *, legacy: bool = False
) -> None:
    """Raise InvalidDocument unless `public_key` signed `document`."""
    signature = document.get("signature")
    if not isinstance(signature, Mapping) or signature.get("algorithm") != ALGORITHM:
        raise InvalidDocument(f"no {ALGORITHM} signature")
    if signature.get("key_id") != key_id(public_key):
        raise InvalidDocument(
            f"signed by key {signature.get('key_id')!r}, not by this key ({key_id(public_key)})"
        )
    try:
        value = base64.b64decode(str(signature.get("value")), validate=True)
    except binascii.Error:
        raise InvalidDocument("the signature is not base64") from None
    body = {name: item for name, item in document.items() if name != "signature"}
    try:
        public_key.verify(value, _signed_bytes(body, legacy))
    except InvalidSignature:
        raise InvalidDocument("the signature does not match the document") from None
