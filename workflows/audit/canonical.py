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
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

# The prev_hash of a chain's first entry.
GENESIS = "0" * 64

# What an entry's entry_hash covers, each under this key (see entry_hash). The actors are
# user primary keys as strings, the invocation its id as a string, times ISO 8601 UTC.
ENTRY_FIELDS = (
    "invocation",
    "interrupt_id",
    "action",
    "actor",
    "actor_name",
    "on_behalf_of",
    "data",
    "subject_hash",
    "prev_hash",
    "created_at",
)


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


def timestamp(moment: datetime) -> str:
    """A time as entries hash it: UTC, microseconds, `Z` (2025-01-31T09:30:00.000000Z).
    A naive time (a project without USE_TZ) is written as it is, without the `Z`."""
    if moment.tzinfo is None:
        return moment.strftime("%Y-%m-%dT%H:%M:%S.%f")
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def entry_hash(content: Mapping[str, Any]) -> str:
    """SHA-256 (hex) of the canonical JSON of an entry's ENTRY_FIELDS, its prev_hash
    included: what chains each entry to the one before it."""
    return sha256_hex(canonical_json({name: content[name] for name in ENTRY_FIELDS}))
