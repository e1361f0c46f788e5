"""The audit trail for operators and auditors: verify the chains, export the entries,
print a signed checkpoint of the chain heads, a receipt of one entry, or the public key
receipts and checkpoints verify with. Exit status 1 when the trail does not verify."""

from __future__ import annotations

import json
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from django.core.exceptions import ImproperlyConfigured, ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from workflows.audit import documents
from workflows.audit.canonical import canonical_json, legacy_canonical_json
from workflows.audit.receipts import LEGACY_RECEIPT_FORMAT
from workflows.audit.signing import public_key_pem
from workflows.audit.verify import check_checkpoint, verify
from workflows.datetimes import read_datetime
from workflows.models import AuditEntry

SHOWN_PROBLEMS = 20


def _since(value: str) -> datetime:
    try:
        return read_datetime(value)
    except ValueError as exc:
        raise CommandError(f"--since: {exc}") from None


class Command(BaseCommand):
    help = (
        "The tamper-evident audit trail: verify [--invocation ID] [--checkpoint FILE], "
        "export [--since ISO8601] [--format jsonl|csv], checkpoint, receipt ENTRY_ID, "
        "public-key. See docs/audit.md."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        commands = parser.add_subparsers(dest="command", required=True, metavar="command")
        check = commands.add_parser(
            "verify", help="recompute the chains; exit 1 naming the first bad entry"
        )
        check.add_argument("--invocation", help="only this invocation's chain")
        check.add_argument(
            "--checkpoint",
            type=Path,
            help="a checkpoint kept earlier: entries deleted since it was taken are found too",
        )
        check.add_argument(
            "--public-key",
            type=Path,
            help='PEM file the checkpoint was signed for (default: HITL["AUDIT_SIGNING_KEY"])',
        )
        export = commands.add_parser("export", help="write the entries to standard output")
        export.add_argument("--since", type=_since, help="entries from this ISO 8601 date-time")
        export.add_argument("--format", choices=["jsonl", "csv"], default="jsonl")
        commands.add_parser("checkpoint", help="print a signed list of the chain heads")
        receipt = commands.add_parser("receipt", help="print the signed receipt of an entry")
        receipt.add_argument("entry_id", type=int)
        commands.add_parser("public-key", help="print the public key receipts verify with")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            handler = getattr(self, options["command"].replace("-", "_"))
            handler(**options)
        except ImproperlyConfigured as exc:
            raise CommandError(str(exc)) from None

    def verify(self, *, invocation: str | None, checkpoint: Path | None, **options: Any) -> None:
        kept = self._checkpoint(checkpoint, options["public_key"]) if checkpoint else None
        started = time.perf_counter()
        try:
            report = verify(invocation, kept)
        except ValidationError:
            raise CommandError(f"--invocation {invocation!r} is not an invocation id") from None
        seconds = time.perf_counter() - started
        summary = f"{report.entries} entries in {report.chains} chain(s), {seconds:.2f} s"
        if report.ok:
            against = f", against the checkpoint of {kept['created_at']}" if kept else ""
            self.stdout.write(self.style.SUCCESS(f"OK: verified {summary}{against}"))
            return
        for problem in report.problems[:SHOWN_PROBLEMS]:
            self.stdout.write(self.style.ERROR(str(problem)))
        if len(report.problems) > SHOWN_PROBLEMS:
            self.stdout.write(f"... and {len(report.problems) - SHOWN_PROBLEMS} more")
        raise CommandError(
            f"the audit trail does not verify ({summary}, {len(report.problems)} problem(s)); "
            f"the first: {report.problems[0]}",
            returncode=1,
        )

    def _checkpoint(self, path: Path, key_path: Path | None) -> dict[str, Any]:
        try:
            kept = json.loads(path.read_text(encoding="utf-8"))
            key = key_path.read_text(encoding="ascii") if key_path else documents.signing_key()
            check_checkpoint(kept, key)
        except OSError as exc:
            raise CommandError(f"cannot read {exc.filename}: {exc.strerror}") from None
        except (ValueError, AttributeError) as exc:  # InvalidDocument, bad JSON, bad key
            raise CommandError(f"{path} is not a checkpoint this key signed: {exc}") from None
        return kept

    def export(self, *, since: datetime | None, **options: Any) -> None:
        documents.export(self.stdout, since=since, fmt=options["format"])

    def checkpoint(self, **options: Any) -> None:
        self._print(documents.checkpoint())

    def receipt(self, *, entry_id: int, **options: Any) -> None:
        entry = AuditEntry.objects.filter(pk=entry_id).first()
        if entry is None:
            raise CommandError(f"no audit entry {entry_id}")
        try:
            self._print(documents.entry_receipt(entry))
        except ValueError as exc:
            raise CommandError(f"no receipt: {exc}") from None

    def public_key(self, **options: Any) -> None:
        self.stdout.write(public_key_pem(documents.signing_key()), ending="")

    def _print(self, document: dict[str, Any]) -> None:
        """In the canonical form it was signed in (RFC 8785; a legacy receipt in its own)."""
        legacy = document.get("format") == LEGACY_RECEIPT_FORMAT
        text = (legacy_canonical_json if legacy else canonical_json)(document)
        self.stdout.write(text.decode("utf-8"))
