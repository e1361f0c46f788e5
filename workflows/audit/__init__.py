"""The tamper-evident audit trail: canonical JSON, hash chains and receipts.

This package imports nothing from Django: `verify_receipt` and `verify_assertion` run
anywhere `cryptography` is installed. `receipt` reads the database and imports what it
needs when called.
"""

from __future__ import annotations

from typing import Any

from .assertions import decision_challenge
from .canonical import canonical_json, entry_hash, subject_hash
from .receipts import RECEIPT_FORMAT, check_receipt, verify_assertion, verify_receipt
from .signing import InvalidDocument

__all__ = [
    "RECEIPT_FORMAT",
    "InvalidDocument",
    "canonical_json",
    "check_receipt",
    "decision_challenge",
    "entry_hash",
    "receipt",
    "subject_hash",
    "verify_assertion",
    "verify_receipt",
]


def receipt(entry: Any) -> dict[str, Any]:
    """The signed receipt of an AuditEntry (or its id), with HITL["AUDIT_SIGNING_KEY"]."""
    from .documents import entry_receipt

    return entry_receipt(entry)
