"""Who is a person: only None is the system; any user object is a person, and an anonymous
or inactive one may change nothing. Every rule of the other modules asks this first."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied


def person_refusal(user: Any) -> str:
    """Why `user` may change nothing at all ("" for an active, signed-in user)."""
    if not getattr(user, "is_authenticated", False):
        return "an anonymous user may change nothing: sign in first"
    if not user.is_active:
        return f"{user.get_username()} is inactive and may change nothing"
    return ""


def require_person(actor: Any) -> None:
    """Only None is the system; any user object is a person, and an anonymous or inactive
    one may change nothing: PermissionDenied (the services ask before looking anything up)."""
    refused = "" if actor is None else person_refusal(actor)
    if refused:
        raise PermissionDenied(refused)


def holds(user: Any, permission: str) -> bool:
    """The model permission, asking ModelBackend alone (`user.has_perm` with an object
    would come back to these policies)."""
    return user.is_superuser or permission in user.get_all_permissions()
