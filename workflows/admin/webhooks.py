"""Webhooks: endpoints are configuration, edited here; deliveries and their attempts are a
read-only log, and "resend" goes through workflows.webhooks."""

from __future__ import annotations

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from .. import webhooks
from ..models import WebhookAttempt, WebhookDelivery, WebhookEndpoint
from .base import ReadOnlyAdmin


class WebhookEndpointForm(forms.ModelForm):
    url = forms.URLField(max_length=2000, assume_scheme="https")

    class Meta:
        model = WebhookEndpoint
        fields = ["url", "secret", "events", "is_active", "description"]


@admin.register(WebhookEndpoint)
class WebhookEndpointAdmin(admin.ModelAdmin):
    form = WebhookEndpointForm
    list_display = ["url", "description", "events", "is_active", "created_at"]
    list_filter = ["is_active"]
    search_fields = ["url", "description"]


class WebhookAttemptInline(admin.TabularInline):
    model = WebhookAttempt
    fields = ["attempted_at", "status_code", "duration_ms", "error"]
    readonly_fields = fields
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
