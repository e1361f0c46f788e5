"""Django forms built from an interrupt's `response_schema` (JSON Schema).

Each property becomes the field a person expects: boolean, enum as choices, string (a date,
date-time or e-mail by its `format`), number and integer with their bounds, nested objects
as prefixed sub-fields, arrays of enums as multiple choice; `title` is the label and
`description` the help text. Whatever that mapping does not cover gets django-jsonform's
editor driven by the property's own schema. `response()` assembles the JSON answer;
`services.decide` validates it against the schema, and `add_validation_error` puts a
schema error back on the field it names.

A schema with a boolean `approved` property is a yes/no question: `ApprovalForm` leaves
`approved` out (the page shows Approve and Reject buttons) and always has a comment box.
"""

from __future__ import annotations

import json
from collections.abc import Collection
from datetime import date, datetime
from typing import Any

from django import forms
from django.core.exceptions import ValidationError
from django.forms.fields import InvalidJSONInput
from django_jsonform.widgets import JSONFormWidget

from workflows.engine.errors import ResponseValidationError

SEPARATOR = "__"  # nested property "address" > "city" is the field named "address__city"
ROOT = "response"  # the one field of a schema whose answer is not an object
# What the JSON editor edits when the interrupt gave no schema: an object of any keys
# (django-jsonform's "dict"; its values are text in the editor).
ANY_OBJECT = {"type": "dict"}
# Properties the approval service owns; no person fills them in.
SERVICE_OWNED = {"decisions"}


def _choices(values: list[Any]) -> list[tuple[str, str]]:
    # Submitted as JSON text and decoded back, so 1, "1" and true stay distinct values.
    return [(json.dumps(v), str(v)) for v in values]


def _label(name: str, schema: dict[str, Any]) -> str:
    return schema.get("title") or name.replace("_", " ").capitalize()


def _string_field(schema: dict[str, Any], common: dict[str, Any]) -> forms.Field:
    fmt = schema.get("format")
    if fmt == "date":
        return forms.DateField(widget=forms.DateInput(attrs={"type": "date"}), **common)
    if fmt == "date-time":
        picker = forms.DateTimeInput(attrs={"type": "datetime-local"}, format="%Y-%m-%dT%H:%M")
        return forms.DateTimeField(widget=picker, **common)
    if fmt == "email":
        return forms.EmailField(**common)
    max_length = schema.get("maxLength")
    widget = (
        forms.TextInput if max_length and max_length <= 200 else forms.Textarea(attrs={"rows": 3})
    )
    return forms.CharField(
        max_length=max_length,
        min_length=schema.get("minLength"),
        widget=widget,
        strip=False,
        **common,
    )


def field_for(name: str, schema: dict[str, Any], required: bool) -> forms.Field:
    """The form field for one property that is not a nested object."""
    common = {
        "label": _label(name, schema),
        "help_text": schema.get("description", ""),
        "required": required,
    }
    kind = schema.get("type")
    if "enum" in schema:
        # A blank first option, required or not: a select shows its first option as chosen,
        # so without it a person who submits without choosing would answer with that value.
        choices = [("", "---------"), *_choices(schema["enum"])]
        return forms.TypedChoiceField(choices=choices, coerce=json.loads, **common)
    if kind == "boolean":
        if required:  # unchecked is an answer too: false
            return forms.BooleanField(**{**common, "required": False})
        return forms.NullBooleanField(**common)
    if kind == "string":
        return _string_field(schema, common)
    if kind in ("integer", "number"):
        field_class = forms.IntegerField if kind == "integer" else forms.FloatField
        return field_class(
            min_value=schema.get("minimum"), max_value=schema.get("maximum"), **common
        )
    items = schema.get("items")
    if kind == "array" and isinstance(items, dict) and "enum" in items:
        return forms.TypedMultipleChoiceField(
            choices=_choices(items["enum"]),
            coerce=json.loads,
            widget=forms.CheckboxSelectMultiple,
            **common,
        )
    # The editor is django-jsonform's; the answer is validated against the real schema by
    # services.decide (jsonschema), not by django-jsonform's narrower schema dialect.
    return JSONAnswerField(widget=JSONFormWidget(schema=schema or ANY_OBJECT), **common)


class JSONAnswerField(forms.JSONField):
    """Django's JSON field; text nested deeper than Python's parser goes is invalid input
    (shown back as typed), not a server error."""

    def to_python(self, value: Any) -> Any:
        try:
            return super().to_python(value)
        except RecursionError:
            raise ValidationError("it is nested too deeply", code="invalid") from None

    def bound_data(self, data: Any, initial: Any) -> Any:
        try:
            return super().bound_data(data, initial)
        except RecursionError:
            return InvalidJSONInput(data)


def _is_nested_object(schema: dict[str, Any]) -> bool:
    return schema.get("type") == "object" and isinstance(schema.get("properties"), dict)


def schema_fields(
    schema: dict[str, Any], parent: tuple[str, ...] = (), skip: Collection[str] = frozenset()
) -> dict[tuple[str, ...], forms.Field]:
    """Form fields for an object schema's properties by property path, nested objects'
    properties flattened into the same dict."""
    fields: dict[tuple[str, ...], forms.Field] = {}
    required = set(schema.get("required") or [])
    for name, prop in (schema.get("properties") or {}).items():
        if name in skip or not isinstance(prop, dict):
            continue
        path = (*parent, name)
        if _is_nested_object(prop):
            fields.update(schema_fields(prop, path))
        else:
            fields[path] = field_for(name, prop, name in required)
    return fields


def _json_value(value: Any) -> Any:
    if isinstance(value, datetime | date):
        return value.isoformat()
    return value


def _is_empty(value: Any) -> bool:
    return value is None or value == "" or value == []


class SchemaForm(forms.Form):
    """A form whose fields come from `schema`; `response()` is the answer it describes.

    `paths` maps each field's name to the property path it answers: names are generated
    (a nested property's joined by SEPARATOR, numbered when two would be the same), so a
    property named "cost__center" stays one property."""

    def __init__(self, schema: dict[str, Any] | None, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.schema = schema or {}
        self.is_object = _is_nested_object(self.schema)
        self.paths: dict[str, tuple[str, ...]] = {}
        if self.is_object:
            fields = schema_fields(self.schema, skip=self.skipped_properties())
            for path, field in fields.items():
                name = self._free_name(SEPARATOR.join(path))
                self.paths[name] = path
                self.fields[name] = field
        else:
            self.fields[ROOT] = field_for(ROOT, self.schema, required=True)
            self.fields[ROOT].label = self.schema.get("title", "Answer")

    def skipped_properties(self) -> set[str]:
        return set(SERVICE_OWNED)

    def reserved_names(self) -> set[str]:
        """Field names the form keeps for fields of its own."""
        return set()

    def _free_name(self, name: str) -> str:
        taken = self.fields.keys() | self.reserved_names()
        candidate, number = name, 2
        while candidate in taken:
            candidate, number = f"{name}_{number}", number + 1
        return candidate

    def response(self) -> Any:
        """The JSON answer from cleaned data; empty optional fields are left out."""
        if not self.is_object:
            return _json_value(self.cleaned_data[ROOT])
        answer: dict[str, Any] = {}
        for name, path in self.paths.items():
            value = self.cleaned_data.get(name)
            if _is_empty(value) and not self.fields[name].required:
                continue
            *parents, leaf = path
            target = answer
            for parent in parents:
                target = target.setdefault(parent, {})
            target[leaf] = _json_value(value)
        return answer

    def add_validation_error(self, error: ResponseValidationError) -> None:
        """Show a schema error on the field it names (its nearest enclosing field), or on
        the form as a whole."""
        by_field = {".".join(path): name for name, path in self.paths.items()}
        where = "" if error.field == ROOT else error.field
        while where:
            if where in by_field:
                self.add_error(by_field[where], error.message)
                return
            where = where.rpartition(".")[0]
        if not self.is_object and ROOT in self.fields:
            self.add_error(ROOT, error.message)
        else:
            self.add_error(None, f"{error.field}: {error.message}")


def is_approval(schema: dict[str, Any] | None) -> bool:
    """A yes/no question: an object schema with a boolean `approved` property."""
    properties = (schema or {}).get("properties") or {}
    return (properties.get("approved") or {}).get("type") == "boolean"


class ApprovalForm(SchemaForm):
    """Approve or Reject (the submit button's `decision`), a comment, and whatever else
    the schema asks. The comment goes into the answer when the schema has a `comment`
    property, and onto the Decision always."""

    APPROVE, REJECT = "approve", "reject"

    def __init__(self, schema: dict[str, Any] | None, *args: Any, **kwargs: Any) -> None:
        super().__init__(schema, *args, **kwargs)
        if "comment" not in self.fields:
            self.fields["comment"] = forms.CharField(required=False)
        self.fields["comment"].widget = forms.Textarea(attrs={"rows": 3})
        self.fields["comment"].help_text = (
            self.fields["comment"].help_text or "Shown to the workflow and your colleagues."
        )
        self.fields["decision"] = forms.ChoiceField(
            choices=[(self.APPROVE, "Approve"), (self.REJECT, "Reject")],
            widget=forms.HiddenInput,
        )

    def skipped_properties(self) -> set[str]:
        return {*SERVICE_OWNED, "approved"}

    def reserved_names(self) -> set[str]:
        return {"decision"}

    @property
    def comment(self) -> str:
        return self.cleaned_data.get("comment") or ""

    def response(self) -> Any:
        # A comment the schema does not hold has no property path: it stays out of it.
        return {"approved": self.cleaned_data["decision"] == self.APPROVE, **super().response()}


def comment_of(form: Any) -> str:
    """The comment that goes onto the Decision: an approval form's comment box, an approval
    gate's reason (approvals.gates.GateForm), else none."""
    comment = getattr(form, "comment", "")
    return comment if isinstance(comment, str) else ""


def form_for(schema: dict[str, Any] | None, *args: Any, **kwargs: Any) -> SchemaForm:
    """The decision form for an interrupt's schema."""
    form_class = ApprovalForm if is_approval(schema) else SchemaForm
    return form_class(schema, *args, **kwargs)
