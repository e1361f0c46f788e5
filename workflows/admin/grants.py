"""Grants (remembered approvals of a gate): a read-only list and page with the uses that
passed on each, and a "revoke" action that goes through workflows.services.grants, asking the rule
(`policy.GranterPolicy`) for each selected grant."""

from __future__ import annotations

import json
from typing import Any, cast

from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest
from django.template.response import TemplateResponse
from django.utils import timezone
from django.utils.html import format_html
from django.utils.text import Truncator

from .. import policy
from ..models import Grant, GrantQuerySet, GrantUse
from ..policy import ANSWER_PERMISSION, CHANGE_GRANT_PERMISSION
from ..services import grants
from .base import ReadOnlyAdmin


class LiveFilter(admin.SimpleListFilter):
    title = "state"
    parameter_name = "state"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("live", "Live"), ("ended", "Revoked, expired or used up")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Grant]) -> QuerySet[Grant]:
        grants_listed = cast(GrantQuerySet, queryset)  # the admin's: Grant.objects'
        if self.value() == "live":
            return grants_listed.live()
        if self.value() == "ended":
            return grants_listed.ended()
        return queryset


class GrantUseInline(admin.TabularInline):
    model = GrantUse
    fields = ["used_at", "invocation", "path"]
    readonly_fields = ["used_at", "invocation", "path"]
    extra = 0
    can_delete = False

    def has_add_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


@admin.register(Grant)
class GrantAdmin(ReadOnlyAdmin):
    # Eight columns, the ones a reviewer scans first on the left: a list that fits 1,280 px
    # beside the admin's sidebar with nothing scrolled out of sight.
    list_display = [
        "gate",
        "state",
        "scope_label",
        "limits",
        "expires_at",
        "granted_by",
        "created_at",
    ]
    list_filter = [LiveFilter, "scope", "workflow_name"]
    search_fields = ["workflow_name", "node_name", "scope_id", "granted_by__username"]
    readonly_fields = [*(f.name for f in Grant._meta.fields), "state"]
    list_select_related = ["granted_by"]
    inlines = [GrantUseInline]
    actions = ["revoke"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Grant]:
        return policy.visible_grants(request.user, super().get_queryset(request))

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        """Who may revoke a grant may see it: holders of the model permissions, and the
        approvers, who see the grants they made (the list is scoped to those)."""
        user = request.user
        if super().has_view_permission(request, obj) or user.has_perm(CHANGE_GRANT_PERMISSION):
            return True
        if obj is not None:
            return bool(obj.granted_by_id == user.pk)
        return bool(user.has_perm(ANSWER_PERMISSION))

    def has_module_permission(self, request: HttpRequest) -> bool:
        return self.has_view_permission(request)

    @admin.display(description="gate", ordering="node_name")
    def gate(self, grant: Grant) -> str:
        return format_html(
            '{}<br><small class="quiet">{}</small>', grant.node_name, grant.workflow_name
        )

    @admin.display(description="scope", ordering="scope")
    def scope_label(self, grant: Grant) -> str:
        return f"{grant.scope} {grant.scope_id}" if grant.scope_id else grant.scope

    @admin.display(description="limits")
    def limits(self, grant: Grant) -> str:
        """The pinned arguments (shortened: the grant's page shows them whole) and the
        uses left."""
        uses = "any number of uses" if grant.uses_left is None else f"{grant.uses_left} uses left"
        if not grant.pins:
            return uses
        pins = Truncator(json.dumps(grant.pins, sort_keys=True)).chars(60)
        return format_html("<code>{}</code><br>{}", pins, uses)

    @admin.display(description="state")
    def state(self, grant: Grant) -> str:
        if grant.revoked_at is not None:
            return "revoked"
        if grant.expires_at is not None and grant.expires_at <= timezone.now():
            return "expired"
        if grant.uses_left == 0:
            return "used up"
        return "live"

    @admin.action(description="Revoke the selected grants…", permissions=["revoke"])
    def revoke(self, request: HttpRequest, queryset: QuerySet[Grant]) -> TemplateResponse | None:
        if request.POST.get("post") != "yes":  # asks first: a revoke cannot be undone
            context = {
                **self.admin_site.each_context(request),
                "opts": self.opts,
                "title": "Revoke grants?",
                "grants": list(queryset.select_related("granted_by")),
                "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
            }
            return TemplateResponse(
                request, "admin/workflows/grant/revoke_confirmation.html", context
            )
        revoked, refusals = 0, []
        for grant in queryset:
            try:
                grants.revoke_grant(grant, actor=request.user)
            except PermissionDenied as refused:
                refusals.append(str(refused))
            else:
                revoked += 1
        if revoked:
            self.message_user(request, f"Revoked {revoked} grant(s).", messages.SUCCESS)
        for refusal in refusals:
            self.message_user(request, refusal, messages.ERROR)
        return None

    def has_revoke_permission(self, request: HttpRequest) -> bool:
        # Whoever sees grants may try; the rule is asked for each selected grant.
        return self.has_view_permission(request)
