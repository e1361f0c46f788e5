"""The audit trail's tables: the hash-chained entries and the head of the chain of actions
outside any invocation."""

from django.conf import settings
from django.db import models

from .invocations import Invocation


class AuditEntry(models.Model):
    """One action on a question or an invocation, appended in the change's transaction and
    hash-chained (docs/audit.md). Written only by workflows.audit.trail.record; never
    updated or deleted (on PostgreSQL a trigger refuses both, whatever the session sets)."""

    # PROTECT: deleting an invocation, or a user, must not delete (or rewrite) its trail.
    invocation = models.ForeignKey(
        Invocation,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="audit_entries",
        db_index=False,  # the (invocation, id) index serves it
    )
    # null, not "": the entry concerns no question (actions on the invocation, outside one).
    interrupt_id = models.CharField(max_length=255, null=True, blank=True)  # noqa: DJ001
    # No choices: the actions grow without a migration (workflows.audit.actions lists them).
    action = models.CharField(max_length=64)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
        help_text="null: the system (a node, a command, a periodic sweep)",
    )
    actor_name = models.CharField(max_length=255, blank=True, help_text="the username then")
    on_behalf_of = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    data = models.JSONField(default=dict, blank=True)
    subject_hash = models.CharField(
        max_length=64, blank=True, help_text="SHA-256 of what the question asked"
    )
    prev_hash = models.CharField(max_length=64)
    entry_hash = models.CharField(max_length=64)
    created_at = models.DateTimeField(db_index=True)
    # The RFC 8785 text entry_hash covers ("": an entry from before, see docs/audit.md).
    canonical_text = models.TextField(blank=True, default="", editable=False)

    class Meta:
        ordering = ["id"]
        verbose_name_plural = "audit entries"
        # interrupt_id and entry_hash are looked up by equality only: an index or a
        # constraint of Meta, not db_index or unique=True, whose second varchar_pattern_ops
        # index on PostgreSQL (for LIKE) every entry wrote for nothing (docs/performance.md).
        indexes = [
            models.Index(fields=["invocation", "id"], name="hitl_audit_chain"),
            models.Index(fields=["interrupt_id"], name="hitl_audit_interrupt"),
        ]
        constraints = [models.UniqueConstraint(fields=["entry_hash"], name="hitl_audit_entry_hash")]

    def __str__(self) -> str:
        return f"{self.action} by {self.actor_name or 'the system'}"


class AuditChainHead(models.Model):
    """The head of the chain of actions outside any invocation: one row, locked by each
    such action while it appends."""

    id = models.PositiveSmallIntegerField(primary_key=True, default=1, editable=False)
    entry_hash = models.CharField(max_length=64)

    def __str__(self) -> str:
        return self.entry_hash
