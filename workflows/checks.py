"""System checks (`manage.py check`, and every runserver/migrate): the set-up mistakes that
otherwise show up later as an invocation stuck PENDING or a question that never resumes."""

from __future__ import annotations

import difflib
import os
from collections.abc import Mapping
from typing import Any

from django.apps import apps
from django.conf import settings
from django.core.checks import CheckMessage, Error, Tags, Warning, register
from django.db import connections
from django.utils.module_loading import import_string

from .audit.documents import SIGNING_KEY_HINT
from .audit.signing import load_private_key
from .conf import CHOICES, DEFAULTS, hitl_settings
from .registry import registry
from .schedule import PERIODIC_JOBS

CELERY_HINT = (
    "Add <project>/celery.py with `app = Celery('<project>')`, "
    "`app.config_from_object('django.conf:settings', namespace='CELERY')` and "
    "`app.autodiscover_tasks()`, and import that app in <project>/__init__.py "
    "(`from .celery import app as celery_app`); see docs/embedding.md."
)


@register(Tags.compatibility)
def check_celery_reads_django_settings(**kwargs: Any) -> list[CheckMessage]:
    """workflows.E001: tasks are sent through Celery's current app; unless it is the
    project's app configured from Django settings, the CELERY_* settings are ignored."""
    from celery import current_app

    conf = current_app.conf
    celery_settings = {
        name: getattr(settings, name) for name in dir(settings) if name.startswith("CELERY_")
    }
    if not celery_settings:
        if conf.get("task_always_eager") or conf.broker_url:
            return []  # configured some other way (lower-case settings, the environment)
        return [
            Error(
                "Celery is not configured: no CELERY_* settings, no broker and not eager, "
                "so started invocations would never run.",
                hint=CELERY_HINT,
                id="workflows.E001",
            )
        ]
    missing = object()
    # An environment variable of the same name (CELERY_BROKER_URL) wins inside Celery.
    ignored = sorted(
        name
        for name, value in celery_settings.items()
        if name not in os.environ
        and conf.get(name.removeprefix("CELERY_").lower(), missing) != value
    )
    if not ignored:
        return []
    shown = ", ".join(ignored[:3]) + (", ..." if len(ignored) > 3 else "")
    return [
        Error(
            f"Celery's current app ({current_app.main or 'the default app'}) does not read "
            f"the Django settings {shown}: invocations would sit PENDING with only a broker "
            "warning.",
            hint=CELERY_HINT,
            id="workflows.E001",
        )
    ]


@register(Tags.compatibility)
def check_workflows_registered(**kwargs: Any) -> list[CheckMessage]:
    """workflows.W001: nothing registered; workflows.E002: one name, several modules."""
    messages: list[CheckMessage] = []
    if not registry.definitions():
        messages.append(
            Warning(
                "No workflow is registered, so services.start() has nothing to start.",
                hint="Call workflows.registry.register(...) in a workflows.py module of an "
                "installed app (imported at start-up), or list other modules in "
                'HITL["WORKFLOW_MODULES"].',
                id="workflows.W001",
            )
        )
    for name, modules in registry.clashes().items():
        messages.append(
            Error(
                f"The workflow name {name!r} is registered by {len(modules)} modules: "
                f"{', '.join(modules)}; which one start() uses depends on import order.",
                hint="Give each workflow its own name (the versions of one workflow belong "
                "in one module).",
                id="workflows.E002",
            )
        )
    return messages


def _accepted_types(default: Any) -> tuple[type, ...] | None:
    """The value types a HITL key accepts, derived from its default (None: any)."""
    if default is None:
        return None
    if isinstance(default, bool):
        return (bool,)
    if isinstance(default, int | float):
        return (int, float)
    if isinstance(default, list | tuple):
        return (list, tuple)
    if isinstance(default, Mapping):
        return (Mapping,)
    return (type(default),)


@register(Tags.compatibility)
def check_hitl_settings(**kwargs: Any) -> list[CheckMessage]:
    """workflows.E003: HITL is not a dict or has an unknown key; workflows.E004: a value of
    the wrong type. Both derive from workflows.conf.DEFAULTS."""
    configured = getattr(settings, "HITL", {})
    if not isinstance(configured, Mapping):
        return [
            Error(
                f"HITL must be a dict, not {type(configured).__name__}.",
                hint="HITL = {} takes every default; docs/reference.md lists the keys.",
                id="workflows.E003",
            )
        ]
    messages: list[CheckMessage] = []
    for key, value in configured.items():
        if key not in DEFAULTS:
            closest = difflib.get_close_matches(str(key), DEFAULTS, n=1)
            messages.append(
                Error(
                    f"HITL has an unknown key {key!r}.",
                    hint=(f"Did you mean {closest[0]!r}? " if closest else "")
                    + f"Known keys: {', '.join(sorted(DEFAULTS))}.",
                    id="workflows.E003",
                )
            )
            continue
        accepted = _accepted_types(DEFAULTS[key])
        if accepted is None:
            continue
        # bool is an int to Python, never a number of seconds to a reader.
        if not isinstance(value, accepted) or (isinstance(value, bool) and bool not in accepted):
            names = " or ".join(t.__name__ for t in accepted)
            messages.append(
                Error(
                    f'HITL["{key}"] is {type(value).__name__} {value!r}; it must be {names}.',
                    hint=f"The default is {DEFAULTS[key]!r}; see docs/reference.md.",
                    id="workflows.E004",
                )
            )
        elif key in CHOICES and value not in CHOICES[key]:
            words = " or ".join(repr(word) for word in CHOICES[key])
            messages.append(
                Error(
                    f'HITL["{key}"] is {value!r}; it must be {words}.',
                    hint=f"The default is {DEFAULTS[key]!r}; see docs/reference.md.",
                    id="workflows.E004",
                )
            )
    return messages


ANSWER_BACKEND = "workflows.backends.AnswerPermissionBackend"
POLICY_METHODS = ("can_answer", "answerable")


@register()
def check_answer_rule(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """workflows.E101: the backend that serves the answer, cancel and retry rules to
    `user.has_perm` is missing; workflows.E102: HITL["ANSWER_POLICY"] cannot be imported
    or is no policy."""
    errors: list[CheckMessage] = []
    if ANSWER_BACKEND not in settings.AUTHENTICATION_BACKENDS:
        errors.append(
            Error(
                f'user.has_perm("workflows.answer_interrupt", interrupt) (and cancel_invocation, '
                f"retry_invocation with an invocation) is False for every non-superuser: "
                f"{ANSWER_BACKEND} is not in AUTHENTICATION_BACKENDS",
                hint=f'add "{ANSWER_BACKEND}" after Django\'s ModelBackend',
                id="workflows.E101",
            )
        )
    try:
        policy = hitl_settings.ANSWER_POLICY
    except ImportError as exc:
        errors.append(Error(str(exc), id="workflows.E102"))
    else:
        missing = [m for m in POLICY_METHODS if not callable(getattr(policy, m, None))]
        if missing:
            errors.append(
                Error(
                    f'HITL["ANSWER_POLICY"] {policy.__module__}.{policy.__qualname__} '
                    f"lacks {missing}",
                    hint="subclass workflows.policy.AssigneePolicy",
                    id="workflows.E102",
                )
            )
    return errors


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


@register()
def check_notifiers(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """workflows.E103: a path in HITL["NOTIFIERS"] cannot be imported or names no notifier
    (nothing with a `notify` method): that event's notifications would all fail."""
    paths = getattr(settings, "HITL", {}).get("NOTIFIERS", DEFAULTS["NOTIFIERS"])
    if not isinstance(paths, list | tuple):
        return []  # workflows.E004 says so
    errors: list[CheckMessage] = []
    for path in paths:
        try:
            notifier = import_string(path) if isinstance(path, str) else path
        except ImportError as exc:
            errors.append(
                Error(
                    f'HITL["NOTIFIERS"] names {path!r}, which cannot be imported: {exc}',
                    hint="a dotted path to a class, e.g. approvals.notifiers.slack.SlackNotifier",
                    id="workflows.E103",
                )
            )
            continue
        if not callable(getattr(notifier, "notify", None)):
            errors.append(
                Error(
                    f'HITL["NOTIFIERS"] names {path!r}, which has no notify(event, interrupt, '
                    "**context) method",
                    hint="a notifier is a class with that method; see docs/people.md",
                    id="workflows.E103",
                )
            )
    return errors


@register(Tags.compatibility)
def check_beat_schedule(**kwargs: Any) -> list[CheckMessage]:
    """workflows.W003: the project runs celery beat from a schedule (CELERY_BEAT_SCHEDULE,
    or the Celery app's beat_schedule) that misses a periodic job of workflows.schedule.
    No schedule at all: beat is not in use here (`hitl_periodic` runs the jobs)."""
    from celery import current_app

    configured = getattr(settings, "CELERY_BEAT_SCHEDULE", None)
    if configured is None:
        configured = current_app.conf.beat_schedule
    if not configured or not isinstance(configured, Mapping):
        return []
    scheduled = {entry.get("task") for entry in configured.values() if isinstance(entry, Mapping)}
    missing = [job for job in PERIODIC_JOBS if job.task not in scheduled]
    if not missing:
        return []
    return [
        Warning(
            f"The beat schedule misses {len(missing)} periodic job(s): "
            + "; ".join(f"{job.task}, which {job.does}" for job in missing)
            + ".",
            hint="Start it from every job: CELERY_BEAT_SCHEDULE = {**beat_schedule(), ...} "
            "with `from workflows.schedule import beat_schedule` (docs/embedding.md).",
            id="workflows.W003",
        )
    ]
