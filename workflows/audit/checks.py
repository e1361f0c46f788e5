"""System checks of the audit trail's set-up."""

from __future__ import annotations

from typing import Any

from django.apps import apps
from django.conf import settings
from django.core.checks import CheckMessage, Error, Tags, Warning, register
from django.db import connections

from ..conf import hitl_settings
from .documents import SIGNING_KEY_HINT
from .signing import load_private_key


@register(Tags.security)
def check_audit_signing_key(**kwargs: Any) -> list[CheckMessage]:
    """workflows.E005: AUDIT_SIGNING_KEY is not an Ed25519 private key in PEM;
    workflows.W002: checkpoints are written (AUDIT_CHECKPOINT_PATH) but cannot be signed."""
    pem = hitl_settings.AUDIT_SIGNING_KEY
    if pem:
        try:
            load_private_key(pem)
        except (ValueError, TypeError) as exc:
            return [
                Error(
                    f'HITL["AUDIT_SIGNING_KEY"] is {exc}: receipts and checkpoints cannot be '
                    "signed.",
                    hint=SIGNING_KEY_HINT,
                    id="workflows.E005",
                )
            ]
        return []
    if hitl_settings.AUDIT_CHECKPOINT_PATH:
        return [
            Warning(
                'HITL["AUDIT_CHECKPOINT_PATH"] is set but HITL["AUDIT_SIGNING_KEY"] is not: '
                "no checkpoint (and no receipt) can be signed, so none is written.",
                hint=SIGNING_KEY_HINT,
                id="workflows.W002",
            )
        ]
    return []


@register(Tags.compatibility)
def check_append_only_trigger(**kwargs: Any) -> list[CheckMessage]:
    """workflows.E006: on PostgreSQL, pgtrigger keeps the trigger that refuses UPDATE and
    DELETE on the audit entries; it must be an installed app."""
    if apps.is_installed("pgtrigger"):
        return []
    if not any(connections[alias].vendor == "postgresql" for alias in settings.DATABASES):
        return []
    return [
        Error(
            '"pgtrigger" is not in INSTALLED_APPS: on PostgreSQL it keeps the trigger that '
            "makes the audit trail append-only.",
            hint='Add "pgtrigger" (the django-pgtrigger package) to INSTALLED_APPS; see '
            "docs/embedding.md.",
            id="workflows.E006",
        )
    ]
