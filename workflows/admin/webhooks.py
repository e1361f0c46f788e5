"""Webhooks: endpoints are configuration, edited here (their secrets masked and write-only);
deliveries and their attempts are a read-only log. "Rotate the secret" and "resend" go
through workflows.webhooks."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from .. import webhooks
from ..models import WebhookAttempt, WebhookDelivery, WebhookEndpoint
from .base import GuardedAdmin, ReadOnlyAdmin


class WebhookEndpointForm(forms.ModelForm):
    url = forms.URLField(max_length=2000, assume_scheme="https")
    # Write-only: never drawn with its value, the current one kept when left blank.
    secret = forms.CharField(
        max_length=200,
        required=False,
        strip=True,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
        help_text="Standard Webhooks secret (whsec_ and base64) the receiver verifies with. "
        "Leave blank to keep the current one (a new endpoint gets a generated one, shown once).",
    )

    generated_secret = False  # set by clean_secret: left blank on a new endpoint

    class Meta:
        model = WebhookEndpoint
        fields = ["url", "secret", "events", "is_active", "description"]

    def clean_secret(self) -> str:
        typed = self.cleaned_data["secret"]
        self.generated_secret = not typed and self.instance._state.adding
        if not typed:
            return self.instance.secret  # a new instance's is its generated default
        problem = webhooks.secret_problem(typed)
        if problem:
            raise forms.ValidationError(problem)
        return typed


@admin.register(WebhookEndpoint)
class WebhookEndpointAdmin(GuardedAdmin):
    form = WebhookEndpointForm
    list_display = ["url", "description", "events", "is_active", "created_at"]
    list_filter = ["is_active"]
    search_fields = ["url", "description"]
    readonly_fields = ["current_secret"]
    actions = ["rotate_secret"]

    def get_fields(self, request: HttpRequest, obj: WebhookEndpoint | None = None) -> list[Any]:
        fields = ["url", "secret", "events", "is_active", "description"]
        if obj is None:
            return fields
        if not self.has_change_permission(request, obj):
            fields.remove("secret")  # a read-only page draws each field's value
        return ["url", "current_secret", *fields[1:]]

    @admin.display(description="secret")
    def current_secret(self, obj: WebhookEndpoint) -> str:
        return webhooks.masked_secret(obj.secret)

    def save_model(
        self, request: HttpRequest, obj: WebhookEndpoint, form: WebhookEndpointForm, change: bool
    ) -> None:
        super().save_model(request, obj, form, change)
        if form.generated_secret:
            self._show_once(request, obj, "generated")

    @admin.action(description="Rotate the secret of the selected endpoints", permissions=["change"])
    def rotate_secret(self, request: HttpRequest, queryset: QuerySet) -> None:
        for endpoint in queryset:
            webhooks.rotate_webhook_secret(endpoint, actor=request.user)
            self._show_once(request, endpoint, "rotated")

    def _show_once(self, request: HttpRequest, endpoint: WebhookEndpoint, what: str) -> None:
        self.message_user(
            request,
            f"New secret of {endpoint} ({what}), shown only this once: {endpoint.secret}",
            messages.WARNING,
        )


class WebhookAttemptInline(admin.TabularInline):
    model = WebhookAttempt
    fields = readonly_fields = ("attempted_at", "status_code", "duration_ms", "error")
    extra = 0
    can_delete = False

    def has_add_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


@admin.register(WebhookDelivery)
class WebhookDeliveryAdmin(ReadOnlyAdmin):
    list_display = ["id", "event_type", "endpoint", "status", "attempts", "created_at"]
    list_filter = ["status", "event_type", "endpoint"]
    readonly_fields = [f.name for f in WebhookDelivery._meta.fields]
    inlines = [WebhookAttemptInline]
    actions = ["resend"]

    @admin.action(description="Resend the selected deliveries", permissions=["resend"])
    def resend(self, request: HttpRequest, queryset: QuerySet) -> None:
        count = webhooks.resend(queryset)
        self.message_user(
            request,
            f"Queued {count} deliver{'y' if count == 1 else 'ies'} for a fresh round of attempts.",
            messages.SUCCESS,
        )

    def has_resend_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("workflows.change_webhookdelivery")
