"""Response schemas: normalisation to JSON Schema, payload unwrap, validation."""

import json
from typing import Any

import jsonschema

from .errors import ResponseValidationError, ValueEncodingError
from .values import decimals_as_numbers

_BUILTIN_SCHEMAS: dict[type, dict[str, str]] = {
    bool: {"type": "boolean"},
    int: {"type": "integer"},
    float: {"type": "number"},
    str: {"type": "string"},
    dict: {"type": "object"},
    list: {"type": "array"},
}


def to_json_schema(schema: Any) -> dict[str, Any] | None:
    """Return `schema` as a JSON Schema dict (accepts a dict, a pydantic model or a type)."""
    if schema is None or isinstance(schema, dict):
        return schema
    if isinstance(schema, type) and hasattr(schema, "model_json_schema"):
        model_schema: dict[str, Any] = schema.model_json_schema()
        return model_schema
    if schema in _BUILTIN_SCHEMAS:
        return dict(_BUILTIN_SCHEMAS[schema])
    try:
        from pydantic import TypeAdapter
    except ImportError:  # pragma: no cover - pydantic is optional
        raise TypeError(
            f"response_schema {schema!r} needs pydantic; pass a JSON Schema dict instead"
        ) from None
    adapted: dict[str, Any] = TypeAdapter(schema).json_schema()
    return adapted


def check_schema(schema: dict[str, Any] | None) -> None:
    """Raise jsonschema.SchemaError when `schema` is not itself a valid JSON Schema."""
    if schema is not None:
        jsonschema.validators.validator_for(schema).check_schema(schema)


def unwrap_response(response: Any) -> Any:
    """The answer a response stands for: `{"result": x}` stands for x, a JSON string there
    is parsed; a Decimal is the number it is. Nothing else is coerced ("3.5" stays text).
    A string nested deeper than the parser can go raises ValueEncodingError."""
    if isinstance(response, dict) and set(response) == {"result"}:
        response = response["result"]
        if isinstance(response, str):
            try:
                return json.loads(response)
            except RecursionError:
                raise ValueEncodingError("response", "it is nested too deeply") from None
            except ValueError:
                return response
    return decimals_as_numbers(response)


def _missing(error: jsonschema.ValidationError) -> list[str]:
    """The property a `required` error is about (one error per missing property; its
    message names it: "'amount' is a required property")."""
    if error.validator != "required" or not isinstance(error.instance, dict):
        return []
    missing = [name for name in error.validator_value if name not in error.instance]
    named = [name for name in missing if error.message.startswith(f"{name!r} ")]
    return (named or missing)[:1]


def _field(error: jsonschema.ValidationError) -> str:
    """The JSON path of what an error is about (a missing property names itself)."""
    path = [*error.absolute_path, *_missing(error)]
    return ".".join(str(p) for p in path) or "response"


def schema_problems(schema: dict[str, Any] | None, value: Any) -> list[tuple[str, str]]:
    """(JSON path, message) of every way `value` fails `schema`, the most relevant first,
    with the formats the schema names checked (`format: email` and the like)."""
    if not schema:
        return []
    validator_cls = jsonschema.validators.validator_for(schema)
    validator = validator_cls(schema, format_checker=validator_cls.FORMAT_CHECKER)
    errors = sorted(validator.iter_errors(value), key=jsonschema.exceptions.relevance)
    return [(_field(e), e.message) for e in reversed(errors)]


def validate_response(interrupt_id: str, schema: dict[str, Any] | None, value: Any) -> None:
    """Raise ResponseValidationError listing every problem, each with its JSON path (the
    most relevant first: its field and message are the error's `field` and `message`)."""
    problems = schema_problems(schema, value)
    if problems:
        raise ResponseValidationError(interrupt_id, *problems[0], problems=problems)
