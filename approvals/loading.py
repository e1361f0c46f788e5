"""Rows for the pages, even when a JSON value in them is nested too deeply to decode:
Python's JSON decoder recurses, so a value about a thousand levels deep cannot be read
back. The page shows a note in its place instead of failing for everyone who opens it."""

from __future__ import annotations

from typing import Any

from django.db.models import JSONField, Model, QuerySet


class TooDeep:
    """Stands for a JSON value that could not be decoded; shows as a note."""

    def __str__(self) -> str:
        return "(nested too deeply to show)"


TOO_DEEP = TooDeep()


def _json_fields(model: type[Model]) -> list[str]:
    return [f.name for f in model._meta.concrete_fields if isinstance(f, JSONField)]


def readable_rows(queryset: QuerySet) -> list[Any]:
    """The rows of `queryset`, and of the relations it selects, with TOO_DEEP for each
    JSON value that cannot be decoded. One query as usual; more only when one cannot."""
    try:
        return list(queryset)
    except RecursionError:
        pass
    selected = queryset.query.select_related
    relations = list(selected) if isinstance(selected, dict) else []
    related_models = [queryset.model._meta.get_field(name).related_model for name in relations]
    deferred = _json_fields(queryset.model) + [
        f"{name}__{field}"
        for name, model in zip(relations, related_models, strict=True)
        for field in _json_fields(model)
    ]
    rows = list(queryset.defer(*deferred))
    for row in rows:
        for instance in (row, *(getattr(row, name) for name in relations)):
            for field in _json_fields(type(instance)) if instance is not None else ():
                try:
                    getattr(instance, field)  # loads the deferred value
                except RecursionError:
                    setattr(instance, field, TOO_DEEP)
    return rows


def readable_row(queryset: QuerySet) -> Any | None:
    """The first of `readable_rows(queryset)`, or None."""
    return next(iter(readable_rows(queryset)), None)
