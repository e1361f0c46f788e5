"""Decision receipts: one audit entry, signed, checked with the public key alone.

A receipt is a JSON object:
`{"format": RECEIPT_FORMAT, "entry": {...}, "chain": {"invocation", "position"},
"subject": {"message", "payload", "response_schema"} or null, "issued_at", "signature"}`.
`entry` holds the entry's id, entry_hash and ENTRY_FIELDS (as the canonical text it was
hashed from says); `subject` what the question asked. A receipt proves something only
through the project's signature: it verifies when the signature holds (checked first),
the entry's fields hash to its entry_hash, the subject hashes to its subject_hash, and a
decision signed with a passkey carries an assertion that verifies with the credential's
public key the signed entry carries (workflows.audit.assertions). Format
LEGACY_RECEIPT_FORMAT is of entries hashed before RFC 8785: everything in it is in the
legacy canonical form. Imports nothing from Django.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from .assertions import check_decision_assertion
from .canonical import ENTRY_FIELDS, canonical_json, entry_hash, subject_hash
from .signing import InvalidDocument, check_signature, load_public_key, sign

RECEIPT_FORMAT = "hitl-audit-receipt/2"
LEGACY_RECEIPT_FORMAT = "hitl-audit-receipt/1"
FORMATS = {RECEIPT_FORMAT: False, LEGACY_RECEIPT_FORMAT: True}  # format: legacy form
SUBJECT_KEYS = {"message", "payload", "response_schema"}


def signed_receipt(
    entry: Mapping[str, Any],
    *,
    position: int,
    subject: Mapping[str, Any] | None,
    issued_at: str,
    private_key: Ed25519PrivateKey,
    legacy: bool = False,
    rewound_by: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The receipt of `entry` (its id, entry_hash and ENTRY_FIELDS), the `position`-th
    (from 1) of its chain, binding `subject` (what its question asked, or None);
    `legacy`: of an entry hashed before RFC 8785. `rewound_by`: the later `answer.rewound`
    entries of its question ({id, entry_hash}), when its answer was changed since."""
    document: dict[str, Any] = {
        "format": LEGACY_RECEIPT_FORMAT if legacy else RECEIPT_FORMAT,
        "entry": dict(entry),
        "chain": {"invocation": entry["invocation"], "position": position},
        "subject": dict(subject) if subject is not None else None,
        "issued_at": issued_at,
    }
    if rewound_by:
        document["rewound_by"] = rewound_by
    return sign(document, private_key, legacy=legacy)


def _refuse_constant(name: str) -> Any:
    raise InvalidDocument(f"{name} is not JSON")


# The ways of writing JSON text a receipt is accepted in: its canonical form (RFC 8785,
# or the legacy one), and what Python's json.dumps writes (compact or not, indented or
# not, escaping non-ASCII or not).
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
    if not (
        any(json.dumps(parsed, **form) == written for form in TEXT_FORMS)
        or _jcs_text(parsed) == written
    ):
        raise InvalidDocument("not JSON as a JSON library writes it (bytes were changed)")
    return parsed


def _jcs_text(parsed: Any) -> str | None:
    try:
        return canonical_json(parsed).decode("utf-8")
    except ValueError:
        return None


def _legacy(document: Mapping[str, Any]) -> bool:
    """Whether the receipt is in the legacy form; InvalidDocument when not a receipt."""
    if document.get("format") not in FORMATS:
        raise InvalidDocument(f"not a receipt of format {RECEIPT_FORMAT!r}")
    return FORMATS[document["format"]]


def check_receipt(
    receipt: Mapping[str, Any] | str | bytes,
    public_key: str | bytes | Ed25519PublicKey,
) -> Mapping[str, Any]:
    """The receipt's entry when the receipt verifies with `public_key`; InvalidDocument
    (a ValueError) saying what does not hold otherwise. The project's signature is
    checked first: nothing else in a receipt is worth anything without it."""
    key = load_public_key(public_key)
    document = _parsed(receipt)
    legacy = _legacy(document)
    check_signature(document, key, legacy=legacy)
    entry = _checked_entry(document, legacy)
    data = entry["data"]
    if isinstance(data, Mapping) and "assertion" in data:
        assertion = data["assertion"]
        carried = assertion.get("public_key") if isinstance(assertion, Mapping) else None
        if carried is None:
            raise InvalidDocument("the signed decision names no credential public key")
        check_decision_assertion(entry, carried)  # the key the signed receipt carries
    return entry


def _checked_entry(document: Mapping[str, Any], legacy: bool) -> Mapping[str, Any]:
    """The receipt's entry when it hashes to its entry_hash and its subject to its
    subject_hash (which proves nothing without the signature: anyone can hash)."""
    entry, chain, subject = document.get("entry"), document.get("chain"), document.get("subject")
    if not isinstance(entry, Mapping) or not isinstance(chain, Mapping):
        raise InvalidDocument("the receipt has no entry or no chain")
    missing = [name for name in (*ENTRY_FIELDS, "id", "entry_hash") if name not in entry]
    if missing:
        raise InvalidDocument(f"the entry lacks {', '.join(missing)}")
    if entry_hash(entry, legacy=legacy) != entry["entry_hash"]:
        raise InvalidDocument("the entry's fields do not hash to its entry_hash")
    if chain.get("invocation") != entry["invocation"]:
        raise InvalidDocument("the chain named is not the entry's")
    if subject is None:
        if entry["subject_hash"]:
            raise InvalidDocument("the entry binds a subject the receipt does not show")
    elif not isinstance(subject, Mapping) or subject.keys() != SUBJECT_KEYS:
        raise InvalidDocument(f"the subject is not an object of {', '.join(sorted(SUBJECT_KEYS))}")
    elif entry["subject_hash"] != subject_hash(**subject, legacy=legacy):
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


def verify_assertion(receipt: Mapping[str, Any] | str | bytes, credential_public_key: Any) -> bool:
    """True when the receipt's entry is a decision its approver signed with a passkey, and
    the assertion verifies with `credential_public_key` (the approver's credential public
    key as a COSE_Key, in bytes or base64url text, or a `cryptography` public key), which
    the caller obtained from a source it trusts: never the key written in the receipt,
    which anyone can write there. The approver's own signature over what was asked and
    answered, checked without the server's key. False otherwise. Needs no database and no
    Django."""
    try:
        document = _parsed(receipt)
        entry = _checked_entry(document, _legacy(document))
        check_decision_assertion(entry, credential_public_key)
    except (ValueError, TypeError):
        return False
    return True
