"""Each JSON Schema construct becomes the form field a person expects, and the form's
answer is the JSON the schema describes."""

import json
from datetime import date, datetime

import pytest
from django import forms
from django_jsonform.widgets import JSONFormWidget

from approvals.forms import ApprovalForm, SchemaForm, form_for
from workflows.engine.errors import ResponseValidationError
from workflows.engine.schema import validate_response

SCHEMA = {
    "type": "object",
    "properties": {
        "ok": {"type": "boolean", "title": "Looks right", "description": "Tick when it does"},
        "maybe": {"type": "boolean"},
        "size": {"enum": ["S", "M", 3]},
        "when": {"type": "string", "format": "date"},
        "at": {"type": "string", "format": "date-time"},
        "email": {"type": "string", "format": "email"},
        "note": {"type": "string", "maxLength": 40},
        "essay": {"type": "string"},
        "count": {"type": "integer", "minimum": 1, "maximum": 9},
        "ratio": {"type": "number", "minimum": 0, "maximum": 1},
        "address": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "zip": {"type": "integer"}},
            "required": ["city"],
        },
        "tags": {"type": "array", "items": {"enum": ["red", "blue", "green"]}},
        "lines": {"type": "array", "items": {"type": "object", "properties": {}}},
        "either": {"oneOf": [{"type": "string"}, {"type": "integer"}]},
    },
    "required": ["ok", "size", "count", "address"],
}


def test_each_schema_construct_gets_its_field():
    fields = SchemaForm(SCHEMA).fields
    assert isinstance(fields["ok"], forms.BooleanField)
    assert (fields["ok"].label, fields["ok"].help_text) == ("Looks right", "Tick when it does")
    assert isinstance(fields["maybe"], forms.NullBooleanField)
    assert isinstance(fields["size"], forms.TypedChoiceField)
    assert [label for _, label in fields["size"].choices] == ["---------", "S", "M", "3"]
    assert isinstance(fields["when"], forms.DateField)
    assert isinstance(fields["at"], forms.DateTimeField)
    assert isinstance(fields["email"], forms.EmailField)
    assert isinstance(fields["note"].widget, forms.TextInput) and fields["note"].max_length == 40
    assert isinstance(fields["essay"].widget, forms.Textarea)
    assert isinstance(fields["count"], forms.IntegerField)
    assert (fields["count"].min_value, fields["count"].max_value) == (1, 9)
    assert isinstance(fields["ratio"], forms.FloatField) and fields["ratio"].max_value == 1
    assert isinstance(fields["address__city"], forms.CharField)
    assert fields["address__city"].required and not fields["address__zip"].required
    assert isinstance(fields["tags"], forms.TypedMultipleChoiceField)
    assert isinstance(fields["tags"].widget, forms.CheckboxSelectMultiple)
    for fallback in ("lines", "either"):
        assert isinstance(fields[fallback], forms.JSONField), fallback
        assert isinstance(fields[fallback].widget, JSONFormWidget)
        assert fields[fallback].widget.schema == SCHEMA["properties"][fallback]
    assert [name for name, f in fields.items() if f.required] == [
        "size",
        "count",
        "address__city",
    ]


@pytest.mark.parametrize("schema", [{"enum": ["publish", "remove"]}, SCHEMA])
def test_a_required_choice_starts_unchosen_and_must_be_chosen(schema):
    form = form_for(schema, {})
    field = "response" if "enum" in schema else "size"
    assert form.fields[field].choices[0] == ("", "---------")
    assert "selected>---------" in str(form[field])
    assert not form.is_valid()
    assert form.errors[field] == ["This field is required."]


def test_the_answer_is_the_json_the_schema_describes():
    data = {
        "ok": "on",
        "maybe": "",
        "size": json.dumps(3),
        "when": "2026-12-24",
        "at": "2026-12-24T09:30",
        "email": "ops@example.com",
        "note": "fine",
        "essay": "",
        "count": "4",
        "ratio": "0.5",
        "address__city": "Oslo",
        "address__zip": "",
        "tags": [json.dumps("red"), json.dumps("green")],
        "lines": json.dumps([{"sku": "A1"}]),
        "either": json.dumps("x"),
    }
    form = SchemaForm(SCHEMA, data)
    assert form.is_valid(), form.errors
    answer = form.response()
    assert answer == {
        "ok": True,
        "size": 3,
        "when": date(2026, 12, 24).isoformat(),
        "at": answer["at"],
        "email": "ops@example.com",
        "note": "fine",
        "count": 4,
        "ratio": 0.5,
        "address": {"city": "Oslo"},
        "tags": ["red", "green"],
        "lines": [{"sku": "A1"}],
        "either": "x",
    }
    assert datetime.fromisoformat(answer["at"]).hour == 9
    validate_response("q", SCHEMA, answer)


def test_bounds_and_formats_are_checked_on_the_fields():
    form = SchemaForm(
        SCHEMA,
        {"size": json.dumps("XL"), "count": "12", "email": "nope", "address__city": ""},
    )
    assert not form.is_valid()
    assert set(form.errors) >= {"size", "count", "email", "address__city"}
    assert "less than or equal to 9" in form.errors["count"][0]


def test_a_schema_error_lands_on_the_field_it_names():
    form = SchemaForm(SCHEMA, {"size": json.dumps("S"), "count": "2", "address__city": "x"})
    assert form.is_valid(), form.errors
    form.add_validation_error(ResponseValidationError("q", "address.city", "too short"))
    form.add_validation_error(ResponseValidationError("q", "tags.1", "not allowed"))
    form.add_validation_error(ResponseValidationError("q", "elsewhere", "odd"))
    assert form.errors["address__city"] == ["too short"]
    assert form.errors["tags"] == ["not allowed"]
    assert form.non_field_errors() == ["elsewhere: odd"]


@pytest.mark.parametrize(
    ("schema", "posted", "answer"),
    [
        ({"type": "boolean"}, {"response": "on"}, True),
        ({"enum": ["a", "b"]}, {"response": json.dumps("b")}, "b"),
        ({"type": "integer", "minimum": 0}, {"response": "7"}, 7),
        (None, {"response": json.dumps({"any": [1, 2]})}, {"any": [1, 2]}),
    ],
)
def test_a_schema_that_is_not_an_object_is_one_field(schema, posted, answer):
    form = form_for(schema, posted)
    assert list(form.fields) == ["response"]
    assert form.is_valid(), form.errors
    assert form.response() == answer


def test_a_schema_without_properties_gets_the_json_editor_not_a_textarea():
    form = form_for(None)
    assert isinstance(form.fields["response"].widget, JSONFormWidget)
    html = str(form["response"])
    assert "data-django-jsonform" in html
    assert "django_jsonform/react-json-form.js" in str(form.media)


APPROVAL = {
    "type": "object",
    "properties": {
        "approved": {"type": "boolean"},
        "comment": {"type": "string"},
        "amount_ok": {"type": "boolean"},
        "decisions": {"type": "array"},
    },
    "required": ["approved"],
}


def test_an_approved_schema_is_approve_and_reject_with_a_comment():
    form = form_for(APPROVAL)
    assert isinstance(form, ApprovalForm)
    assert "approved" not in form.fields and "decisions" not in form.fields
    assert isinstance(form.fields["comment"].widget, forms.Textarea)
    assert "decision" in form.fields
    form = form_for(APPROVAL, {"decision": "reject", "comment": "no receipt"})
    assert form.is_valid(), form.errors
    # amount_ok is an optional boolean: left unanswered, it is left out.
    assert form.response() == {"approved": False, "comment": "no receipt"}
    assert form.comment == "no receipt"


def test_a_comment_the_schema_does_not_hold_stays_on_the_decision_only():
    schema = {"type": "object", "properties": {"approved": {"type": "boolean"}}}
    form = form_for(schema, {"decision": "approve", "comment": "looks fine"})
    assert form.is_valid()
    assert form.response() == {"approved": True}
    assert form.comment == "looks fine"


def test_a_required_comment_is_required():
    schema = {**APPROVAL, "required": ["approved", "comment"]}
    form = form_for(schema, {"decision": "reject", "comment": ""})
    assert not form.is_valid()
    assert "comment" in form.errors


def test_a_decision_without_a_button_is_refused():
    form = form_for(APPROVAL, {"comment": "?"})
    assert not form.is_valid()
    assert "decision" in form.errors


def test_a_property_named_with_the_separator_stays_one_property():
    schema = {
        "type": "object",
        "properties": {
            "cost__center": {"type": "string"},
            "cost": {"type": "object", "properties": {"center": {"type": "string"}}},
            "a.b": {"type": "integer"},
        },
        "required": ["cost__center"],
    }
    form = SchemaForm(schema, {"cost__center": "R&D", "cost__center_2": "Ops", "a.b": "4"})
    assert form.paths == {
        "cost__center": ("cost__center",),
        "cost__center_2": ("cost", "center"),
        "a.b": ("a.b",),
    }
    assert form.is_valid(), form.errors
    answer = form.response()
    assert answer == {"cost__center": "R&D", "cost": {"center": "Ops"}, "a.b": 4}
    validate_response("q", schema, answer)
    form.add_validation_error(ResponseValidationError("q", "cost.center", "unknown centre"))
    form.add_validation_error(ResponseValidationError("q", "a.b", "too small"))
    assert form.errors["cost__center_2"] == ["unknown centre"]
    assert form.errors["a.b"] == ["too small"]


def test_an_approval_property_named_decision_is_not_the_button():
    schema = {
        "type": "object",
        "properties": {"approved": {"type": "boolean"}, "decision": {"type": "string"}},
    }
    form = form_for(schema, {"decision": "approve", "decision_2": "ship it"})
    assert form.is_valid(), form.errors
    assert form.response() == {"approved": True, "decision": "ship it"}
