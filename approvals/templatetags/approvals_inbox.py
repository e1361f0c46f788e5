"""`{% pending_approvals_count request.user as count %}`: how many questions wait for this
user (None when they may not answer any)."""

from typing import Any

from django import template

from approvals.models import inbox
from workflows.policy import ANSWER_PERMISSION

register = template.Library()


@register.simple_tag
def pending_approvals_count(user: Any) -> int | None:
    if not user.has_perm(ANSWER_PERMISSION):
        return None
    return inbox(user).count()
