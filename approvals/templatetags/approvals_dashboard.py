"""`{% approvals_dashboard_url request.user as url %}`: the dashboard's address, or None
when this user may not see it."""

from typing import Any

from django import template
from django.urls import reverse

from workflows.policy import may_view_dashboard

register = template.Library()


@register.simple_tag
def approvals_dashboard_url(user: Any) -> str | None:
    return reverse("admin:approvals_dashboard") if may_view_dashboard(user) else None
