"""Decision receipts: one audit entry, signed, checked with the public key alone.

A receipt is a JSON object:
`{"format": RECEIPT_FORMAT, "entry": {...}, "chain": {"invocation", "position"},
"subject": {"message", "payload", "response_schema"} or null, "issued_at", "signature"}`.
`entry` holds the entry's id, entry_hash and ENTRY_FIELDS; `subject` what the question
asked. It verifies when the signature holds, the entry's fields hash to its entry_hash,
the subject hashes to its subject_hash, and a decision signed with a passkey carries an
assertion that verifies (workflows.audit.assertions). Imports nothing from Django.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from .assertions import check_decision_assertion
from .canonical import ENTRY_FIELDS, entry_hash, subject_hash
from .signing import InvalidDocument, check_signature, load_public_key, sign

RECEIPT_FORMAT = "hitl-audit-receipt/1"
SUBJECT_KEYS = {"message", "payload", "response_schema"}


def signed_receipt(
    entry: Mapping[str, Any],
    *,
    position: int,
    subject: Mapping[str, Any] | None,
    issued_at: str,
    private_key: Ed25519PrivateKey,
) -> dict[str, Any]:
    """The receipt of `entry` (its id, entry_hash and ENTRY_FIELDS), the `position`-th
    (from 1) of its chain, binding `subject` (what its question asked, or None)."""
    document = {
        "format": RECEIPT_FORMAT,
        "entry": dict(entry),
        "chain": {"invocation": entry["invocation"], "position": position},
        "subject": dict(subject) if subject is not None else None,
        "issued_at": issued_at,
    }
    return sign(document, private_key)


def _refuse_constant(name: str) -> Any:
    raise InvalidDocument(f"{name} is not JSON")


# The ways of writing JSON text a receipt is accepted in: its canonical form, and what
# Python's json.dumps writes (compact or not, indented or not, escaping non-ASCII or not).
TEXT_FORMS: list[dict[str, Any]] = [
    {"sort_keys": True, "separators": (",", ":"), "ensure_ascii": False},
    *(
        {"ensure_ascii": ascii_only, "indent": indent, "separators": separators}
        for ascii_only in (True, False)
        for indent, separators in ((None, (", ", ": ")), (None, (",", ":")), (2, (",", ": ")))
    ),
]


def _parsed(receipt: Mapping[str, Any] | str | bytes) -> Mapping[str, Any]:
    """The receipt as an object. Text must be written exactly in one of TEXT_FORMS (a
    trailing newline allowed): then no byte of it can change and still verify, not even
    one that would not change what the JSON says (the case of an escape, a space)."""
    if isinstance(receipt, Mapping):
        return receipt
    if not isinstance(receipt, str | bytes):
        raise InvalidDocument(f"a receipt is a JSON object or its text, not {type(receipt)}")
    try:
        text = receipt.decode("utf-8") if isinstance(receipt, bytes) else receipt
        parsed = json.loads(text, parse_constant=_refuse_constant)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InvalidDocument(f"not JSON text ({exc})") from None
    if not isinstance(parsed, Mapping):
        raise InvalidDocument("not a JSON object")
    written = text.removesuffix("\n")
    if not any(json.dumps(parsed, **form) == written for form in TEXT_FORMS):
        raise InvalidDocument("not JSON as a JSON library writes it (bytes were changed)")
    return parsed


def check_receipt(
    receipt: Mapping[str, Any] | str | bytes,
    public_key: str | bytes | Ed25519PublicKey,
) -> Mapping[str, Any]:
    """The receipt's entry when the receipt verifies with `public_key`; InvalidDocument
    (a ValueError) saying what does not hold otherwise."""
    key = load_public_key(public_key)
    document = _parsed(receipt)
    if document.get("format") != RECEIPT_FORMAT:
        raise InvalidDocument(f"not a receipt of format {RECEIPT_FORMAT!r}")
    check_signature(document, key)
    entry = _checked_entry(document)
    if isinstance(entry["data"], Mapping) and "assertion" in entry["data"]:
        check_decision_assertion(entry)
    return entry


def _checked_entry(document: Mapping[str, Any]) -> Mapping[str, Any]:
    """The receipt's entry when it hashes to its entry_hash and its subject to its
    subject_hash (what holds without the server's key)."""
    entry, chain, subject = document.get("entry"), document.get("chain"), document.get("subject")
    if not isinstance(entry, Mapping) or not isinstance(chain, Mapping):
        raise InvalidDocument("the receipt has no entry or no chain")
    missing = [name for name in (*ENTRY_FIELDS, "id", "entry_hash") if name not in entry]
    if missing:
        raise InvalidDocument(f"the entry lacks {', '.join(missing)}")
    if entry_hash(entry) != entry["entry_hash"]:
        raise InvalidDocument("the entry's fields do not hash to its entry_hash")
    if chain.get("invocation") != entry["invocation"]:
        raise InvalidDocument("the chain named is not the entry's")
    if subject is None:
        if entry["subject_hash"]:
            raise InvalidDocument("the entry binds a subject the receipt does not show")
    elif not isinstance(subject, Mapping) or subject.keys() != SUBJECT_KEYS:
        raise InvalidDocument(f"the subject is not an object of {', '.join(sorted(SUBJECT_KEYS))}")
    elif entry["subject_hash"] != subject_hash(**subject):
        raise InvalidDocument("the subject shown does not hash to the entry's subject_hash")
    return entry


def verify_receipt(
    receipt: Mapping[str, Any] | str | bytes,
    public_key: str | bytes | Ed25519PublicKey,
) -> bool:
    """True when the receipt verifies with `public_key` (PEM text or a `cryptography`
    Ed25519 public key), False when anything in it does not hold (check_receipt says
    what). Needs no database and no Django."""
    key = load_public_key(public_key)  # a bad key is the caller's error: it raises
    try:
        check_receipt(receipt, key)
    except (ValueError, TypeError):  # InvalidDocument, or a value that is not JSON
        return False
    return True


def verify_assertion(receipt: Mapping[str, Any] | str | bytes) -> bool:
    """True when the receipt's entry is a decision its approver signed with a passkey, and
    the assertion verifies with the credential's public key the entry carries: the
    approver's own signature over what was asked and answered, checked without the
    server's key. False otherwise. Needs no database and no Django."""
    try:
        check_decision_assertion(_checked_entry(_parsed(receipt)))
    except (ValueError, TypeError):
        return False
    return True
