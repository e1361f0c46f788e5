"""What the trail hands out: receipts of entries, signed checkpoints of the chain heads,
exports for auditors. Signed with HITL["AUDIT_SIGNING_KEY"]."""

from __future__ import annotations

import csv
import functools
import json
import os
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any, Protocol

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from django.core.exceptions import ImproperlyConfigured
from django.db import DEFAULT_DB_ALIAS, connections
from django.db.models import QuerySet
from django.utils import timezone

from ..conf import hitl_settings
from ..models import AuditEntry, Interrupt
from . import actions
from .canonical import ENTRY_FIELDS, canonical_json, subject_hash, timestamp
from .dialects import ENTRIES
from .entries import entry_content, question_subject
from .receipts import signed_receipt
from .signing import load_private_key, sign

CHECKPOINT_FORMAT = "hitl-audit-checkpoint/1"
SIGNING_KEY_HINT = (
    'Set HITL["AUDIT_SIGNING_KEY"] to an Ed25519 private key in PEM (PKCS#8), e.g. the output '
    "of `openssl genpkey -algorithm ed25519`; see docs/audit.md."
)

# Each chain's newest entry and its length, in one statement (one snapshot).
CHAIN_HEADS = (
    f"SELECT e.invocation_id, e.id, e.entry_hash, g.length FROM {ENTRIES} e JOIN "
    f"(SELECT MAX(id) AS last_id, COUNT(*) AS length FROM {ENTRIES} GROUP BY invocation_id) g "
    "ON e.id = g.last_id ORDER BY e.id"
)


@functools.lru_cache(maxsize=4)
def _loaded_key(pem: str | bytes) -> Ed25519PrivateKey:
    return load_private_key(pem)


def signing_key() -> Ed25519PrivateKey:
    """The configured signing key; ImproperlyConfigured when it is missing or not one."""
    pem = hitl_settings.AUDIT_SIGNING_KEY
    if not pem:
        raise ImproperlyConfigured(f'HITL["AUDIT_SIGNING_KEY"] is not set. {SIGNING_KEY_HINT}')
    try:
        return _loaded_key(pem)
    except ValueError as exc:
        raise ImproperlyConfigured(
            f'HITL["AUDIT_SIGNING_KEY"] is {exc}. {SIGNING_KEY_HINT}'
        ) from None


def exported(entry: AuditEntry) -> dict[str, Any]:
    """An entry as receipts and exports show it: its id, its entry_hash, ENTRY_FIELDS as
    the canonical text it was hashed from says (the columns, for a legacy entry)."""
    content = json.loads(entry.canonical_text) if entry.canonical_text else entry_content(entry)
    return {"id": entry.id, "entry_hash": entry.entry_hash, **content}


def chain_position(entry: AuditEntry) -> int:
    """Where `entry` stands in its chain, counted from 1."""
    entries = AuditEntry.objects.filter(id__lte=entry.id)
    if entry.invocation_id is None:
        return entries.filter(invocation__isnull=True).count()
    return entries.filter(invocation_id=entry.invocation_id).count()


def entry_subject(entry: AuditEntry) -> dict[str, Any] | None:
    """What the entry's question asked, checked against its subject_hash (None: the entry
    concerns no question). ValueError when the question is gone or no longer matches."""
    if not entry.subject_hash:
        return None
    interrupt = Interrupt.objects.filter(pk=entry.interrupt_id).first()
    if interrupt is None:
        raise ValueError(f"entry {entry.pk}: its question {entry.interrupt_id!r} is gone")
    subject = question_subject(interrupt)
    if subject_hash(**subject, legacy=not entry.canonical_text) != entry.subject_hash:
        raise ValueError(
            f"entry {entry.pk}: question {entry.interrupt_id!r} no longer matches the "
            "subject_hash the entry recorded (its text, payload or schema was changed)"
        )
    return subject


def entry_receipt(entry: AuditEntry | int) -> dict[str, Any]:
    """The signed receipt of an entry (see workflows.audit.receipts)."""
    if not isinstance(entry, AuditEntry):
        entry = AuditEntry.objects.get(pk=entry)
    return signed_receipt(
        exported(entry),
        position=chain_position(entry),
        subject=entry_subject(entry),
        issued_at=timestamp(timezone.now()),
        private_key=signing_key(),
        legacy=not entry.canonical_text,
        rewound_by=rewound_since(entry),
    )


def rewound_since(entry: AuditEntry) -> list[dict[str, Any]]:
    """The `answer.rewound` entries of the entry's question after it (DESIGN 3.8): a
    receipt of an answer later changed still verifies, and says so."""
    if not entry.interrupt_id:
        return []
    later = AuditEntry.objects.filter(
        interrupt_id=entry.interrupt_id, action=actions.ANSWER_REWOUND, id__gt=entry.id
    ).order_by("id")
    return [{"id": e.id, "entry_hash": e.entry_hash} for e in later]


def chain_heads(using: str = DEFAULT_DB_ALIAS) -> list[dict[str, Any]]:
    """Every chain's newest entry: `invocation` (None: outside invocations), `head` (its
    entry_hash), `last_id`, `length`."""
    with connections[using].cursor() as cursor:
        cursor.execute(CHAIN_HEADS)
        rows = cursor.fetchall()
    pk = AuditEntry._meta.get_field("invocation").target_field
    return [
        {
            "invocation": str(pk.to_python(invocation)) if invocation is not None else None,
            "head": head,
            "last_id": last_id,
            "length": length,
        }
        for invocation, last_id, head, length in rows
    ]


def checkpoint(using: str = DEFAULT_DB_ALIAS) -> dict[str, Any]:
    """A signed list of every chain's head, to keep outside the database: verifying the
    trail against it shows entries deleted since (the newest ones included)."""
    document = {
        "format": CHECKPOINT_FORMAT,
        "created_at": timestamp(timezone.now()),
        "chains": chain_heads(using),
    }
    return sign(document, signing_key())


def write_checkpoint() -> str | None:
    """Write a checkpoint to HITL["AUDIT_CHECKPOINT_PATH"] (strftime codes filled in with
    the time, UTC); the path written, or None when no path is set."""
    path = hitl_settings.AUDIT_CHECKPOINT_PATH
    if not path:
        return None
    target = timezone.now().astimezone(UTC).strftime(str(path))
    partial = f"{target}.partial"
    with open(partial, "wb") as handle:
        handle.write(canonical_json(checkpoint()) + b"\n")
    os.replace(partial, target)  # a reader never sees half a checkpoint
    return target


EXPORT_COLUMNS = ["id", *ENTRY_FIELDS, "entry_hash"]


def exported_entries(
    since: datetime | None = None, entries: QuerySet | None = None
) -> Iterator[dict[str, Any]]:
    entries = (AuditEntry.objects.all() if entries is None else entries).order_by("id")
    if since is not None:
        entries = entries.filter(created_at__gte=since)
    for entry in entries.iterator(chunk_size=2000):
        yield exported(entry)


class Writer(Protocol):
    def write(self, text: str, /) -> Any: ...


def export(
    out: Writer,
    *,
    since: datetime | None = None,
    fmt: str = "jsonl",
    entries: QuerySet | None = None,
) -> int:
    """Write the entries (all, or of the queryset `entries`; from `since` on) as JSON lines
    (each its canonical JSON) or CSV (`data` as canonical JSON text, null as empty); how
    many."""
    count = 0
    if fmt == "csv":
        writer = csv.DictWriter(out, fieldnames=EXPORT_COLUMNS, lineterminator="\n")
        writer.writeheader()
        for row in exported_entries(since, entries):
            row["data"] = canonical_json(row["data"]).decode("utf-8")
            writer.writerow({name: "" if value is None else value for name, value in row.items()})
            count += 1
        return count
    for row in exported_entries(since, entries):
        out.write(canonical_json(row).decode("utf-8") + "\n")
        count += 1
    return count
