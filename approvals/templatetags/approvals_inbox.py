"""`{% inbox_view_links request.user as links %}`: the inbox views with how many questions
wait for this user in each (None when they may not answer any), counted in one query."""

from typing import Any

from django import template

from approvals.inbox_views import ViewLink, view_links
from workflows.policy import ANSWER_PERMISSION

register = template.Library()


@register.simple_tag
def inbox_view_links(user: Any) -> list[ViewLink] | None:
    if not user.has_perm(ANSWER_PERMISSION):
        return None
    return view_links(user, counted=True)
