"""Validating answers against their schema: each problem named by the field it is about,
and a Decimal (a form's DecimalField) is the number it stands for, never a string."""

import decimal
import math

import pytest

from workflows.engine.errors import ResponseValidationError
from workflows.engine.schema import unwrap_response, validate_response
from workflows.engine.values import decimals_as_numbers

EXPENSE = {
    "type": "object",
    "properties": {
        "category": {"type": "string"},
        "amount": {"type": "number", "minimum": 0},
        "currency": {"type": "string"},
        "vendor": {
            "type": "object",
            "properties": {"name": {"type": "string"}, "vat_id": {"type": "string"}},
            "required": ["name", "vat_id"],
        },
    },
    "required": ["category", "amount", "currency", "vendor"],
}


def test_each_missing_field_is_named_itself():
    with pytest.raises(ResponseValidationError) as excinfo:
        validate_response("q", EXPENSE, {"category": "travel", "vendor": {}})
    problems = dict(excinfo.value.problems)
    assert problems == {
        "amount": "'amount' is a required property",
        "currency": "'currency' is a required property",
        "vendor.name": "'name' is a required property",
        "vendor.vat_id": "'vat_id' is a required property",
    }
    assert "field 'currency': 'currency' is a required property" in str(excinfo.value)


def test_a_decimal_answer_is_a_number_and_a_string_is_not():
    answer = {"category": "travel", "amount": decimal.Decimal("3.5"), "currency": "EUR"}
    answer["vendor"] = {"name": "Globex", "vat_id": "X1"}
    value = unwrap_response(answer)
    assert value["amount"] == 3.5 and type(value["amount"]) is float
    assert type(answer["amount"]) is decimal.Decimal, "the caller's value is left as it is"
    validate_response("q", EXPENSE, value)
    with pytest.raises(ResponseValidationError, match=r"'3\.5' is not of type 'number'"):
        validate_response("q", EXPENSE, unwrap_response({**answer, "amount": "3.5"}))
    assert unwrap_response({"result": decimal.Decimal("12")}) == 12


def test_decimals_become_ints_floats_or_what_encoding_refuses():
    nested = [(decimal.Decimal("2.50"), {"n": [decimal.Decimal("1E+3")]})]
    assert decimals_as_numbers(nested) == [[2.5, {"n": [1000]}]]
    assert type(decimals_as_numbers(decimal.Decimal("7.000"))) is int
    assert math.isnan(decimals_as_numbers(decimal.Decimal("NaN")))
    assert decimals_as_numbers(decimal.Decimal("-Infinity")) == -math.inf
    circular: list = []
    circular.append(circular)
    copy = decimals_as_numbers(circular)
    assert copy[0] is copy and copy is not circular
    deep: list = [decimal.Decimal("1")]
    for _ in range(5000):
        deep = [deep]
    assert decimals_as_numbers(deep) is not deep  # no RecursionError
