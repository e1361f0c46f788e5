"""django-filter filter sets of the API lists."""

from django_filters import rest_framework as filters

from ..models import Interrupt, Invocation


class InvocationFilter(filters.FilterSet):
    workflow = filters.CharFilter(field_name="workflow_name")
    started_by = filters.NumberFilter(field_name="started_by_id")
    created = filters.IsoDateTimeFromToRangeFilter(
        field_name="created_at", label="Created between (created_after, created_before)"
    )

    class Meta:
        model = Invocation
        fields = ["status", "workflow", "started_by", "created"]


class InterruptFilter(filters.FilterSet):
    workflow = filters.CharFilter(field_name="workflow_name")
    invocation = filters.UUIDFilter(field_name="invocation_id")
    claimed_by = filters.NumberFilter(field_name="claimed_by_id")
    created = filters.IsoDateTimeFromToRangeFilter(
        field_name="created_at", label="Created between (created_after, created_before)"
    )

    class Meta:
        model = Interrupt
        fields = ["status", "workflow", "invocation", "claimed_by", "created"]
