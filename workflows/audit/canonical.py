"""The canonical JSON form that audit hashes and signatures are computed over.

Defined once, so that a third party can recompute it with any JSON library:
keys sorted (by code point), no insignificant whitespace (`,` and `:` separators),
non-ASCII characters written as themselves, encoded as UTF-8; NaN and the infinities
are refused (they are not JSON). Imports nothing from Django: receipts are verified
with this module and `cryptography` alone.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any


def canonical_json(value: Any) -> bytes:
    """`value` as canonical JSON bytes (see the module docstring)."""
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode("utf-8")


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def subject_hash(message: str, payload: Any, response_schema: Any) -> str:
    """SHA-256 (hex) of what a question asked: its message, payload and response schema."""
    return sha256_hex(
        canonical_json({"message": message, "payload": payload, "response_schema": response_schema})
    )
