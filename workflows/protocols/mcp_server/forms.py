"""A question as an MCP elicitation form, when its response schema fits MCP's restricted
subset (a flat object of strings, numbers, integers, booleans, enums and string formats);
otherwise as text with the decision page's link."""

from __future__ import annotations

from typing import Any

from mcp_types import ElicitRequest, ElicitRequestFormParams

# What MCP's PrimitiveSchemaDefinition allows for each type (2026-07-28).
COMMON = {"type", "title", "description", "default"}
ALLOWED_KEYS = {
    "string": COMMON | {"minLength", "maxLength", "format", "enum", "enumNames", "oneOf"},
    "number": COMMON | {"minimum", "maximum"},
    "integer": COMMON | {"minimum", "maximum"},
    "boolean": COMMON,
    "array": COMMON | {"items", "minItems", "maxItems"},  # a multi-select of string enums
}
STRING_FORMATS = {"email", "uri", "date", "date-time"}
OBJECT_KEYS = {"type", "properties", "required", "title", "description", "additionalProperties"}
# Added by the approval service to a quorum's answer; a voter leaves it out.
SERVICE_FIELDS = {"decisions"}


def _fits_property(schema: Any) -> bool:
    if not isinstance(schema, dict):
        return False
    kind = schema.get("type")
    if not isinstance(kind, str) or kind not in ALLOWED_KEYS or set(schema) - ALLOWED_KEYS[kind]:
        return False
    if kind == "string" and "format" in schema and schema["format"] not in STRING_FORMATS:
        return False
    if kind == "array":
        items = schema.get("items")
        if not isinstance(items, dict):
            return False
        listed = items.get("type") == "string" and isinstance(items.get("enum"), list)
        titled = isinstance(items.get("anyOf"), list)
        return listed or titled
    return True


def form_schema(response_schema: Any) -> dict[str, Any] | None:
    """The elicitation form's requestedSchema for a question, None when it does not fit."""
    if not isinstance(response_schema, dict) or response_schema.get("type") != "object":
        return None
    if set(response_schema) - OBJECT_KEYS:
        return None
    properties = response_schema.get("properties")
    if not isinstance(properties, dict):
        return None
    shown = {k: v for k, v in properties.items() if k not in SERVICE_FIELDS}
    if not shown or not all(_fits_property(p) for p in shown.values()):
        return None
    required = [r for r in response_schema.get("required", []) if r in shown]
    form: dict[str, Any] = {"type": "object", "properties": shown}
    if required:
        form["required"] = required
    return form


def question_text(shown: dict[str, Any]) -> str:
    """The question as one text: its message, what it needs, and where to answer it."""
    lines = [shown["message"] or f"Question {shown['id']}"]
    if shown["payload"] not in (None, {}, ""):
        lines.append(f"Details: {shown['payload']}")
    if "decisions" in shown["needs"]:
        lines.append("It needs the decisions of other approvers as well.")
    if "signature" in shown["needs"]:
        lines.append("It needs a passkey signature: answer it on the decision page.")
    page = shown["links"].get("page")
    if page:
        lines.append(f"Decision page: {page}")
    lines.append(f"Question id: {shown['id']}")
    return "\n".join(lines)


def elicitation(shown: dict[str, Any]) -> ElicitRequest | None:
    """The `elicitation/create` form for an answerable question, None when MCP's forms
    cannot carry it (a schema outside the subset, a signature it needs)."""
    schema = form_schema(shown["response_schema"])
    if schema is None or "signature" in shown["needs"]:
        return None
    return ElicitRequest(
        params=ElicitRequestFormParams(message=question_text(shown), requested_schema=schema)
    )
