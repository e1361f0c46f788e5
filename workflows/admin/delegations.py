"""Delegations (out of office, DESIGN 4.3) in the admin.

- "Out of office" (`admin:workflows_delegation_out_of_office`): any staff user sets who
  stands in for them, from when until when, in which workflows, and lists and ends their
  own; it also lists whom they stand in for.
- The Delegation list and its "add" page: everyone's delegations, for holders of the
  delegation model permissions; adding one for anyone takes `workflows.add_delegation`.

Every change goes through workflows.services (`delegate`, `end_delegation`), which ask
`policy.DelegationPolicy`; these pages only offer what the rule may allow.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied, ValidationError
from django.db.models import Q, QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils import timezone

from .. import services
from ..engine.errors import UnknownDelegationError
from ..models import Delegation
from ..policy import (
    ADD_DELEGATION_PERMISSION,
    ANSWER_PERMISSION,
    delegation_policy,
)
from ..principals import active_delegations
from ..registry import registry
from .base import ReadOnlyAdmin

MINUTES = "%Y-%m-%dT%H:%M"


def _moment(label: str) -> forms.DateTimeField:
    widget = forms.DateTimeInput(attrs={"type": "datetime-local"}, format=MINUTES)
    return forms.DateTimeField(label=label, widget=widget, input_formats=[MINUTES])


def _may_answer() -> Q:
    app_label, codename = ANSWER_PERMISSION.split(".")
    held = {"content_type__app_label": app_label, "codename": codename}
    return (
        Q(is_superuser=True)
        | Q(**{f"user_permissions__{k}": v for k, v in held.items()})
        | Q(**{f"groups__permissions__{k}": v for k, v in held.items()})
    )


class DelegationForm(forms.Form):
    """Who stands in for whom, when, in which workflows; `delegator` only on the page for
    anyone's delegations (the out-of-office page is always the signed-in user's)."""

    delegator = forms.ModelChoiceField(queryset=get_user_model().objects.none())
    delegate = forms.ModelChoiceField(
        label="to whom", queryset=get_user_model().objects.none(), empty_label="- choose -"
    )
    starts_at = _moment("from")
    ends_at = _moment("until")
    workflows = forms.MultipleChoiceField(
        label="which workflows",
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text="None ticked: every workflow.",
    )

    def __init__(self, *args: Any, delegator: Any = None, **kwargs: Any) -> None:
        now = timezone.localtime().replace(second=0, microsecond=0)
        kwargs.setdefault("initial", {"starts_at": now, "ends_at": now + timedelta(days=7)})
        super().__init__(*args, **kwargs)
        users = (
            get_user_model()
            .objects.filter(is_active=True)
            .order_by(get_user_model().USERNAME_FIELD)
        )
        fields: Any = self.fields
        delegates = users.filter(_may_answer()).distinct()
        if delegator is not None:
            del self.fields["delegator"]
            delegates = delegates.exclude(pk=delegator.pk)
        else:
            fields["delegator"].queryset = users
        fields["delegate"].queryset = delegates
        fields["workflows"].choices = [(d.name, d.name) for d in registry.definitions()]

    def save(self, delegator: Any, actor: Any) -> Delegation | None:
        """The delegation made through the services, or None with the refusal on the form."""
        data = self.cleaned_data
        try:
            return services.delegate(
                data.get("delegator", delegator),
                data["delegate"],
                data["starts_at"],
                data["ends_at"],
                workflows=data["workflows"],
                actor=actor,
            )
        except ValidationError as refused:
            for field, errors in refused.message_dict.items():
                self.add_error(None if field not in self.fields else field, errors)
        except PermissionDenied as refused:
            self.add_error(None, str(refused))
        return None


def _end(request: HttpRequest, delegation_id: Any) -> None:
    try:
        ended = services.end_delegation(delegation_id, actor=request.user)
    except (PermissionDenied, UnknownDelegationError) as refused:
        messages.error(request, str(refused) or "You may not end this delegation.")
    else:
        messages.success(request, f"Ended: {ended.delegate} no longer stands in for you.")


@admin.register(Delegation)
class DelegationAdmin(ReadOnlyAdmin):
    list_display = ["delegator", "delegate", "starts_at", "ends_at", "workflows_shown", "state"]
    list_select_related = ["delegator", "delegate"]
    search_fields = ["delegator__username", "delegate__username"]
    readonly_fields = [*(f.name for f in Delegation._meta.fields), "state"]
    actions = ["end_selected"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Delegation]:
        return delegation_policy().visible(request.user, super().get_queryset(request))

    def has_add_permission(self, request: HttpRequest) -> bool:
        return bool(request.user.has_perm(ADD_DELEGATION_PERMISSION))

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        user = request.user
        return super().has_view_permission(request, obj) or any(
            user.has_perm(f"workflows.{what}_delegation") for what in ("add", "change")
        )

    def has_module_permission(self, request: HttpRequest) -> bool:
        return self.has_view_permission(request)

    @admin.display(description="workflows")
    def workflows_shown(self, delegation: Delegation) -> str:
        return ", ".join(delegation.workflows) or "every workflow"

    @admin.display(description="state")
    def state(self, delegation: Delegation) -> str:
        now = timezone.now()
        if delegation.ended_at is not None:
            return "ended"
        if delegation.ends_at <= now:
            return "over"
        return "upcoming" if delegation.starts_at > now else "active"

    @admin.action(description="End the selected delegations", permissions=["end"])
    def end_selected(self, request: HttpRequest, queryset: QuerySet[Delegation]) -> None:
        for delegation in queryset:
            _end(request, delegation.pk)

    def has_end_permission(self, request: HttpRequest) -> bool:
        # Whoever sees delegations may try; the rule is asked for each selected one.
        return self.has_view_permission(request)

    def get_urls(self) -> list[URLPattern]:
        view = self.admin_site.admin_view
        return [
            path(
                "out-of-office/",
                view(self.out_of_office_view),
                name="workflows_delegation_out_of_office",
            ),
            path("add/", view(self.delegate_view), name="workflows_delegation_add"),
            *super().get_urls(),
        ]

    def out_of_office_view(self, request: HttpRequest) -> HttpResponse:
        """The signed-in staff user's own out of office: set one, list and end theirs."""
        user = request.user
        form = DelegationForm(delegator=user)
        if request.method == "POST":
            if request.POST.get("_action") == "end":
                _end(request, request.POST.get("delegation"))
                return HttpResponseRedirect(request.path)
            form = DelegationForm(request.POST, delegator=user)
            if form.is_valid() and form.save(user, user) is not None:
                messages.success(request, "Your out of office is set.")
                return HttpResponseRedirect(request.path)
        current = Delegation.objects.filter(ended_at__isnull=True, ends_at__gt=timezone.now())
        current = current.select_related("delegator", "delegate").order_by("starts_at")
        context = {
            **self.admin_site.each_context(request),
            "title": "Out of office",
            "opts": self.model._meta,
            "form": form,
            "given": current.filter(delegator=user.pk),
            "received": current.filter(active_delegations(), delegate=user.pk),
        }
        return TemplateResponse(request, "admin/workflows/delegation/out_of_office.html", context)

    def delegate_view(self, request: HttpRequest) -> HttpResponse:
        """A delegation for anyone (`workflows.add_delegation`)."""
        if not self.has_add_permission(request):
            raise PermissionDenied
        form = DelegationForm()
        if request.method == "POST":
            form = DelegationForm(request.POST)
            if form.is_valid() and form.save(None, request.user) is not None:
                messages.success(request, "Delegation made.")
                return HttpResponseRedirect(reverse("admin:workflows_delegation_changelist"))
        context = {
            **self.admin_site.each_context(request),
            "title": "Add a delegation",
            "opts": self.model._meta,
            "form": form,
        }
        return TemplateResponse(request, "admin/workflows/delegation/out_of_office.html", context)
