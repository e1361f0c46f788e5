"""What may be stored: every value the engine keeps (inputs, outputs, answers, payloads)
is encoded here once, the same way for every store, so a value one store accepts is never
refused by another after a node has already run.

Encoding follows Django's DjangoJSONEncoder (datetimes, dates, times, durations, Decimal,
UUID); anything else JSON cannot hold is refused with a clear message, and so are the
values PostgreSQL refuses in JSON (NaN and Infinity, lone surrogates, NUL characters).
With a depth limit, a value nested deeper is refused before anything walks it recursively
(encoders, copies and pages would otherwise fail with RecursionError).
"""

from __future__ import annotations

import datetime
import decimal
import json
import re
import uuid
from typing import Any

from .errors import ValueEncodingError

# A NUL character as JSON escapes it (an escaped backslash before `u0000` is not one).
_NUL = re.compile(r"(?<!\\)(?:\\\\)*\\u0000")

# Column widths of the stores (the Django models use the same): over-long values are
# refused alike everywhere rather than cut by one database and kept by another.
MAX_INTERRUPT_ID_LENGTH = 255
MAX_ROUTE_LENGTH = 200

_CONTAINERS = (dict, list, tuple)


def _duration_iso(value: datetime.timedelta) -> str:
    """ISO 8601 duration, as django.utils.duration.duration_iso_string writes it."""
    sign = "-" if value.days < 0 else ""
    if value.days < 0:
        value = -value
    days = value.days
    minutes, seconds = divmod(value.seconds, 60)
    hours, minutes = divmod(minutes, 60)
    micro = f".{value.microseconds:06d}" if value.microseconds else ""
    return f"{sign}P{days}DT{hours:02d}H{minutes:02d}M{seconds:02d}{micro}S"


def _default(value: Any) -> Any:
    """DjangoJSONEncoder's conversions (ECMA-262 times: milliseconds, "Z" for UTC)."""
    if isinstance(value, datetime.datetime):
        text = value.isoformat()
        if value.microsecond:
            text = text[:23] + text[26:]
        return text[:-6] + "Z" if text.endswith("+00:00") else text
    if isinstance(value, datetime.date):
        return value.isoformat()
    if isinstance(value, datetime.time):
        if value.utcoffset() is not None:
            raise TypeError("a time with a timezone has no unambiguous JSON form")
        text = value.isoformat()
        return text[:12] if value.microsecond else text
    if isinstance(value, datetime.timedelta):
        return _duration_iso(value)
    if isinstance(value, decimal.Decimal | uuid.UUID):
        return str(value)
    raise TypeError(f"a value of type {type(value).__name__} cannot be stored as JSON")


def nesting_depth(value: Any, limit: int) -> int:
    """How many levels of lists and dicts `value` has (a scalar: 0), counted level by level
    without recursion; counting stops once past `limit` (so a cycle ends too)."""
    depth = 0
    level = [value] if isinstance(value, _CONTAINERS) else []
    while level and depth <= limit:
        depth += 1
        below: list[Any] = []
        add = below.append
        for item in level:
            for child in item.values() if isinstance(item, dict) else item:
                if isinstance(child, _CONTAINERS):
                    add(child)
        level = below
    return depth


def _too_deep(max_depth: int | None) -> str:
    if max_depth is None:
        return "it is nested too deeply"
    return f"it is nested more than {max_depth} levels deep"


def encode(
    value: Any, what: str, max_bytes: int | None = None, max_depth: int | None = None
) -> str:
    """`value` as JSON text, or ValueEncodingError saying what is wrong with it."""
    try:
        text = json.dumps(value, default=_default, allow_nan=False, ensure_ascii=False)
        size = len(text.encode("utf-8"))
    except RecursionError:
        raise ValueEncodingError(what, _too_deep(max_depth)) from None
    except UnicodeEncodeError:
        raise ValueEncodingError(what, "it contains a lone surrogate character") from None
    except ValueError as exc:  # NaN, Infinity, a circular reference
        reason = "NaN and Infinity are not JSON" if "Out of range" in str(exc) else str(exc)
        raise ValueEncodingError(what, reason) from None
    except TypeError as exc:
        raise ValueEncodingError(what, str(exc)) from None
    if _NUL.search(text):
        raise ValueEncodingError(what, "it contains a NUL character (\\u0000)")
    if max_bytes is not None and size > max_bytes:
        raise ValueEncodingError(
            what, f"it is {size} bytes encoded, over the limit of {max_bytes}", too_large=True
        )
    # Fewer brackets than the limit cannot nest deeper: most values are not walked.
    if (
        max_depth is not None
        and text.count("[") + text.count("{") > max_depth
        and nesting_depth(value, max_depth) > max_depth
    ):
        raise ValueEncodingError(what, _too_deep(max_depth))
    return text


def to_json_value(
    value: Any, what: str, max_bytes: int | None = None, max_depth: int | None = None
) -> Any:
    """`value` as the store will give it back: plain JSON types (a Decimal becomes its
    string, a tuple a list), or ValueEncodingError."""
    if value is None or type(value) in (bool, int, str):
        if type(value) is str and ("\x00" in value or _has_surrogate(value)):
            encode(value, what)  # raises with the reason
        if max_bytes is not None and type(value) is str and len(value) * 4 > max_bytes:
            encode(value, what, max_bytes)
        return value
    text = encode(value, what, max_bytes, max_depth)
    try:
        return json.loads(text)
    except RecursionError:  # the parser gives up a little before the encoder does
        raise ValueEncodingError(what, _too_deep(max_depth)) from None


def _number(value: decimal.Decimal) -> int | float:
    if value.is_finite() and value == value.to_integral_value():
        return int(value)
    return float(value)  # NaN and Infinity stay what they are, and are refused as such


def decimals_as_numbers(value: Any) -> Any:
    """`value` with every Decimal in it made an int or a float: an answer from a form's
    DecimalField is a number (stored, a Decimal would become its string). Containers are
    copied, the caller's value is left as it is, and tuples become lists as they are
    stored. Walked without recursion: a value nested too deeply is refused later, by its
    encoding, with that reason."""
    if isinstance(value, decimal.Decimal):
        return _number(value)
    if not isinstance(value, dict | list | tuple):
        return value
    copies: dict[int, Any] = {}

    def copy(container: Any) -> Any:
        if id(container) not in copies:  # a shared or circular container is copied once
            kind = dict if isinstance(container, dict) else list
            copies[id(container)] = kind(container)
            pending.append(copies[id(container)])
        return copies[id(container)]

    pending: list[Any] = []
    root = copy(value)
    while pending:
        container = pending.pop()
        slots = container.items() if isinstance(container, dict) else enumerate(container)
        for slot, item in list(slots):
            if isinstance(item, decimal.Decimal):
                container[slot] = _number(item)
            elif isinstance(item, dict | list | tuple):
                container[slot] = copy(item)
    return root


def key_order(value: Any) -> list[list[Any]]:
    """The order of the keys of every object in `value` with two keys or more, as
    `[[path, [key, ...]], ...]` (a path lists the keys and indexes leading to the object):
    what a store keeps beside a value where the database re-sorts object keys
    (PostgreSQL's jsonb does; arrays keep their order). Walked without recursion."""
    order: list[list[Any]] = []
    stack: list[tuple[tuple[Any, ...], Any]] = [((), value)]
    while stack:
        path, item = stack.pop()
        if isinstance(item, dict):
            if len(item) > 1:
                order.append([list(path), list(item)])
            children = list(item.items())
        elif isinstance(item, list):
            children = list(enumerate(item))
        else:
            continue
        stack.extend(((*path, slot), child) for slot, child in reversed(children))
    return order


def _holds(container: Any, step: Any) -> bool:
    if isinstance(container, dict):
        return isinstance(step, str) and step in container
    if isinstance(container, list):
        return type(step) is int and 0 <= step < len(container)
    return False


def in_key_order(value: Any, order: list[list[Any]] | None) -> Any:
    """`value` with its objects' keys in the order `order` (from key_order) gives; keys
    it does not name follow, and a path that leads nowhere in `value` is passed over.
    The objects and arrays on the way are copied: `value` itself is left as it is."""
    if not order:
        return value
    root, owned = [value], set()

    def own(parent: Any, slot: Any) -> Any:
        item = parent[slot]
        if id(item) not in owned:
            item = dict(item) if isinstance(item, dict) else list(item)
            parent[slot] = item
            owned.add(id(item))
        return item

    for path, keys in order:
        parent, slot = root, 0
        for step in path:
            if not _holds(parent[slot], step):
                break
            parent, slot = own(parent, slot), step
        else:
            target = parent[slot]
            if isinstance(target, dict):
                ordered = {k: target[k] for k in keys if isinstance(k, str) and k in target}
                ordered.update(target)  # the keys not named, after the others
                parent[slot] = ordered
                owned.add(id(ordered))
    return root[0]


def _has_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def is_possible_id(value: Any) -> bool:
    """Whether a stored row can have `value` as its id: a non-empty string of at most
    MAX_INTERRUPT_ID_LENGTH characters that every database can compare (PostgreSQL refuses
    even to look up a string with a NUL character or a lone surrogate)."""
    return (
        isinstance(value, str)
        and 0 < len(value) <= MAX_INTERRUPT_ID_LENGTH
        and "\x00" not in value
        and not _has_surrogate(value)
    )


def check_text(text: str, what: str, max_length: int | None = None) -> str:
    """A string for a text column: no NUL or lone surrogate, at most `max_length`."""
    if "\x00" in text:
        raise ValueEncodingError(what, "it contains a NUL character (\\u0000)")
    if _has_surrogate(text):
        raise ValueEncodingError(what, "it contains a lone surrogate character")
    if max_length is not None and len(text) > max_length:
        raise ValueEncodingError(what, f"it is {len(text)} characters, over {max_length}")
    return text


def clean_text(text: str) -> str:
    """Text that every store can keep (for messages we did not write: exception text)."""
    text = text.replace("\x00", "\\x00")
    return text.encode("utf-8", "backslashreplace").decode("utf-8")
