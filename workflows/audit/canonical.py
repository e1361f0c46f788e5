"""The canonical JSON form that audit hashes and signatures are computed over: RFC 8785
(the JSON Canonicalization Scheme, JCS), with the `rfc8785` package.

Any JCS implementation, in any language, writes the same bytes: keys sorted by UTF-16
code units, no insignificant whitespace, numbers as ECMAScript writes a double (`40` for
40.0, `10000000000000000` for 1e16, `0` for -0.0), so a database or a JSON library that
rewrites a number never changes the hash. Numbers are IEEE doubles, as in JavaScript: an
integer past 2**53 is written as the double nearest it; NaN and the infinities are
refused. Imports nothing from Django: receipts are verified with this module,
`rfc8785` and `cryptography` alone.

`legacy_canonical_json` is the form entries written before JCS were hashed with
(Python's json.dumps with sorted keys): `verify` and receipts still check them by it.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import rfc8785

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


# The largest integer a double holds exactly: past it, JCS writes the integer as a double.
SAFE_INTEGER = 2**53 - 1


def _as_doubles(value: Any) -> Any:
    """`value` with every integer past SAFE_INTEGER as the double a JSON parser in
    JavaScript reads it as (ValueError when no double holds it)."""
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        if abs(value) <= SAFE_INTEGER:
            return value
        try:
            as_float = float(value)
        except OverflowError:
            raise ValueError(f"the number {value} is past what a JSON double holds") from None
        return as_float
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{value} is not a JSON number")
    if isinstance(value, Mapping):
        return {key: _as_doubles(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_as_doubles(item) for item in value]
    return value


def canonical_json(value: Any) -> bytes:
    """`value` as RFC 8785 canonical JSON bytes (see the module docstring)."""
    try:
        return rfc8785.dumps(_as_doubles(value))
    except rfc8785.CanonicalizationError as exc:
        raise ValueError(f"not canonical JSON: {exc}") from None


def legacy_canonical_json(value: Any) -> bytes:
    """The canonical form of entries, receipts and signatures made before RFC 8785."""
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode("utf-8")


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def subject_hash(message: str, payload: Any, response_schema: Any, *, legacy: bool = False) -> str:
    """SHA-256 (hex) of what a question asked: its message, payload and response schema
    (`legacy`: as entries made before RFC 8785 hashed it)."""
    subject = {"message": message, "payload": payload, "response_schema": response_schema}
    return sha256_hex((legacy_canonical_json if legacy else canonical_json)(subject))


def timestamp(moment: datetime) -> str:
    """A time as entries hash it: UTC, microseconds, `Z` (2025-01-31T09:30:00.000000Z).
    A naive time (a project without USE_TZ) is written as it is, without the `Z`."""
    if moment.tzinfo is None:
        return moment.strftime("%Y-%m-%dT%H:%M:%S.%f")
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def entry_text(content: Mapping[str, Any]) -> str:
    """The canonical JSON text of an entry's ENTRY_FIELDS: what its entry_hash covers,
    and what the entry keeps (`canonical_text`)."""
    return canonical_json({name: content[name] for name in ENTRY_FIELDS}).decode("utf-8")


def entry_hash(content: Mapping[str, Any], *, legacy: bool = False) -> str:
    """SHA-256 (hex) of the canonical JSON of an entry's ENTRY_FIELDS, its prev_hash
    included: what chains each entry to the one before it. `legacy`: as entries made
    before RFC 8785 were hashed."""
    fields = {name: content[name] for name in ENTRY_FIELDS}
    if legacy:
        return sha256_hex(legacy_canonical_json(fields))
    return sha256_hex(canonical_json(fields))
