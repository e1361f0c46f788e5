"""Verifying the trail: recompute every chain from the database, and compare it with a
checkpoint kept outside the database.

Each entry must hash to its entry_hash (else it was edited), name the entry before it in
its prev_hash (else one was deleted, inserted or moved), still match its question
(subject_hash), and each chain must end at the head its invocation row (or the one row of
AuditChainHead) holds. Against a checkpoint, every head it lists must still stand at the
same position of its chain: what shows the newest entries deleted, even with the heads
rewritten or the table truncated. Then the rows people see must say what the entries
recorded (workflows.audit.rows).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from django.db.models import QuerySet

from ..models import AuditChainHead, AuditEntry, Interrupt, Invocation
from .canonical import GENESIS, entry_hash, entry_text, sha256_hex, subject_hash
from .documents import CHECKPOINT_FORMAT
from .entries import entry_content, question_subject
from .rows import RowProblem, check_rows
from .signing import InvalidDocument, check_signature, load_public_key

BATCH = 2000
LEGACY_AFTER_TEXT = (
    "has no canonical text, after entries that have one: the app no longer writes such "
    "entries (one was inserted)"
)
CHAIN_KEYS = {"invocation", "head", "last_id", "length"}


@dataclass(frozen=True)
class Problem:
    """What does not hold, at the first entry where it shows."""

    entry_id: int | None
    entry_hash: str
    invocation: str | None
    reason: str

    def __str__(self) -> str:
        chain = f"invocation {self.invocation}" if self.invocation else "outside invocations"
        entry = f"entry {self.entry_id} " if self.entry_id is not None else "the entry "
        return f"{entry}(entry_hash {self.entry_hash}), chain of {chain}: {self.reason}"


@dataclass
class Report:
    chains: int = 0
    entries: int = 0
    problems: list[Problem | RowProblem] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def check_checkpoint(document: Mapping[str, Any], public_key: Any) -> None:
    """Raise InvalidDocument unless `document` is a checkpoint `public_key` signed."""
    if not isinstance(document, Mapping) or document.get("format") != CHECKPOINT_FORMAT:
        raise InvalidDocument(f"not a checkpoint of format {CHECKPOINT_FORMAT!r}")
    check_signature(document, load_public_key(public_key))
    chains = document.get("chains")
    if not isinstance(chains, list) or not all(
        isinstance(chain, Mapping) and chain.keys() >= CHAIN_KEYS for chain in chains
    ):
        raise InvalidDocument(f"its chains are not a list of {', '.join(sorted(CHAIN_KEYS))}")


def edited(entry: AuditEntry) -> str | None:
    """Why the entry no longer holds, or None. An entry keeps the canonical text it was
    hashed from: the text must hash to entry_hash, and the columns must say what the text
    says (compared in canonical form, so PostgreSQL's rewriting of JSON numbers and key
    order changes nothing). An entry made before the text was kept (legacy) is hashed
    from its columns in the legacy form."""
    if not entry.canonical_text:
        if entry_hash(entry_content(entry), legacy=True) != entry.entry_hash:
            return "edited: its fields no longer hash to its entry_hash"
        return None
    if sha256_hex(entry.canonical_text.encode("utf-8")) != entry.entry_hash:
        return "edited: its canonical text no longer hashes to its entry_hash"
    if entry_text(entry_content(entry)) != entry.canonical_text:
        return "edited: its fields no longer say what the canonical text it was hashed from says"
    return None


class _Subjects:
    """What each question the entries name asks, read a batch at a time."""

    def __init__(self) -> None:
        self.subjects: dict[str, dict[str, Any] | None] = {}
        self.hashes: dict[tuple[str | None, bool], str] = {}

    def load(self, entries: Iterable[AuditEntry]) -> None:
        asked = {e.interrupt_id for e in entries if e.subject_hash and e.interrupt_id}
        wanted = asked - self.subjects.keys()
        if not wanted:
            return
        self.subjects.update(dict.fromkeys(wanted))  # None: the question is gone
        for interrupt in Interrupt.objects.filter(pk__in=wanted).only(
            "id", "message", "payload", "response_schema"
        ):
            self.subjects[interrupt.pk] = question_subject(interrupt)

    def problem(self, entry: AuditEntry) -> str | None:
        if not entry.subject_hash:
            return None
        subject = self.subjects[entry.interrupt_id] if entry.interrupt_id else None
        if subject is None:
            return f"its question {entry.interrupt_id!r} no longer exists"
        key = (entry.interrupt_id, not entry.canonical_text)
        if key not in self.hashes:
            self.hashes[key] = subject_hash(**subject, legacy=key[1])
        if self.hashes[key] != entry.subject_hash:
            return (
                f"its question {entry.interrupt_id!r} no longer matches its subject_hash "
                "(the question's message, payload or schema was changed)"
            )
        return None


class _Walk:
    """One pass over the entries in chain order, checking as it goes."""

    def __init__(self, heads: dict[str | None, str], checkpoint: Mapping[str, Any] | None):
        self.heads = heads
        self.report = Report()
        self.subjects = _Subjects()
        self.seen: set[str | None] = set()
        self.wanted: dict[str | None, Mapping[str, Any]] = {}
        self.checkpoint_time = ""
        if checkpoint is not None:
            self.checkpoint_time = checkpoint.get("created_at", "")
            self.wanted = {chain["invocation"]: chain for chain in checkpoint["chains"]}

    def flag(self, entry: AuditEntry, chain: str | None, reason: str) -> None:
        self.report.problems.append(Problem(entry.id, entry.entry_hash, chain, reason))

    def chain(self, chain: str | None, entries: Iterator[AuditEntry]) -> None:
        self.report.chains += 1
        self.seen.add(chain)
        wanted = self.wanted.get(chain)
        expected, last, position, texts = GENESIS, None, 0, False
        for entry in entries:
            position += 1
            reason = edited(entry)
            if reason:
                self.flag(entry, chain, reason)
            elif texts and not entry.canonical_text:
                self.flag(entry, chain, LEGACY_AFTER_TEXT)
            texts = texts or bool(entry.canonical_text)
            if entry.prev_hash != expected:
                before = f"entry {last.id}" if last else "the start of the chain"
                self.flag(
                    entry,
                    chain,
                    f"its prev_hash does not follow {before}: an entry was deleted, inserted "
                    "or moved before it",
                )
            problem = self.subjects.problem(entry)
            if problem:
                self.flag(entry, chain, problem)
            if wanted and position == wanted["length"] and entry.entry_hash != wanted["head"]:
                self.flag(
                    entry,
                    chain,
                    f"stands where the checkpoint of {self.checkpoint_time} saw entry "
                    f"{wanted['last_id']} (entry_hash {wanted['head']})",
                )
            expected, last = entry.entry_hash, entry
        self.report.entries += position
        head = self.heads.get(chain, "")
        if last is not None and head != last.entry_hash:
            self.flag(
                last,
                chain,
                f"is the chain's last entry, but its head is {head or 'empty'}: newer entries "
                "were deleted, or the head was rewritten",
            )
        if wanted and position < wanted["length"]:
            self.missing(chain, wanted, position)

    def missing(self, chain: str | None, wanted: Mapping[str, Any], position: int) -> None:
        reason = (
            f"is missing: the checkpoint of {self.checkpoint_time} saw it as entry "
            f"{wanted['length']} of the chain, which now has {position}"
        )
        self.report.problems.append(Problem(wanted["last_id"], wanted["head"], chain, reason))

    def finish(self, scope: Iterable[str | None]) -> Report:
        """Heads whose chain has no entry left, checkpoint chains not seen at all."""
        for chain in scope:
            if chain in self.seen:
                continue
            if self.heads.get(chain):
                reason = "is the chain's head, but none of its entries is left"
                self.report.problems.append(Problem(None, self.heads[chain], chain, reason))
            if chain in self.wanted:
                self.missing(chain, self.wanted[chain], 0)
        return self.report


def _heads(invocation: str | None) -> dict[str | None, str]:
    invocations = Invocation.objects.exclude(audit_head="")
    if invocation is not None:
        return dict(
            (str(pk), head)
            for pk, head in invocations.filter(pk=invocation).values_list("pk", "audit_head")
        )
    heads: dict[str | None, str] = {
        str(pk): head for pk, head in invocations.values_list("pk", "audit_head").iterator()
    }
    system = AuditChainHead.objects.values_list("entry_hash", flat=True).first()
    if system and system != GENESIS:
        heads[None] = system
    return heads


def _batched(entries: QuerySet, walk: _Walk) -> Iterator[AuditEntry]:
    """The entries, the questions of each batch read before it is checked."""
    rows = entries.iterator(chunk_size=BATCH)
    while batch := list(itertools.islice(rows, BATCH)):
        walk.subjects.load(batch)
        yield from batch


def verify(invocation: Any = None, checkpoint: Mapping[str, Any] | None = None) -> Report:
    """Check every chain (or only `invocation`'s); against `checkpoint` too, when given
    (its signature is checked apart: check_checkpoint)."""
    chain_id = str(Invocation._meta.pk.to_python(invocation)) if invocation is not None else None
    entries = AuditEntry.objects.order_by("invocation_id", "id")
    if chain_id is not None:
        entries = entries.filter(invocation_id=chain_id)
        if checkpoint is not None:
            chains = [c for c in checkpoint["chains"] if c["invocation"] == chain_id]
            checkpoint = {**checkpoint, "chains": chains}
    heads = _heads(chain_id)
    walk = _Walk(heads, checkpoint)

    def chain_of(entry: AuditEntry) -> str | None:
        return str(entry.invocation_id) if entry.invocation_id is not None else None

    for chain, chain_entries in itertools.groupby(_batched(entries, walk), key=chain_of):
        walk.chain(chain, chain_entries)
    scope = set(heads) | set(walk.wanted)
    if chain_id is not None:
        scope = {chain_id}
    report = walk.finish(scope)
    report.problems.extend(check_rows(chain_id))
    return report
