"""Rebuild node-run state from session events and compare it with the stored checkpoint."""

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from workflows.engine.rebuild import checkpoint_differences
from workflows.models import Invocation
from workflows.store import DjangoStore


class Command(BaseCommand):
    help = (
        "Rebuild each invocation's node runs from its session events and report where "
        "they disagree with the stored checkpoint (NodeRun rows)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("invocation_ids", nargs="*", help="default: every invocation")
        parser.add_argument("--database", default="default")

    def handle(self, *args: Any, **options: Any) -> None:
        store = DjangoStore(using=options["database"])
        invocations = Invocation.objects.using(options["database"]).order_by("created_at")
        if options["invocation_ids"]:
            invocations = invocations.filter(pk__in=options["invocation_ids"])
        checked = disagreeing = 0
        for pk in invocations.values_list("pk", flat=True).iterator():
            invocation_id = str(pk)
            checkpoint = store.load_checkpoint_sync(invocation_id)
            if checkpoint is None:  # deleted since the list was read
                continue
            problems = checkpoint_differences(
                store.load_events_sync(invocation_id),
                checkpoint.node_runs,
                unapplied=checkpoint.answers(),
            )
            checked += 1
            if problems:
                disagreeing += 1
                self.stdout.write(self.style.ERROR(f"{invocation_id}:"))
                for problem in problems:
                    self.stdout.write(f"  {problem}")
        summary = f"{checked} invocation(s) checked, {disagreeing} disagree"
        if disagreeing:
            raise CommandError(summary)
        self.stdout.write(self.style.SUCCESS(summary))
