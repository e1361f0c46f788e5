"""A date and time given as text (an API filter, an admin list's query string, a command's
option), read the same way at every door before it reaches a query.

Python reads UTC offsets up to ±23:59 ("2026-01-01T00:00:00+16:00"); PostgreSQL refuses
any past ±15:59 ("time zone displacement out of range"), so a value Python accepted failed
the query later, as a server error. No real time zone is that far from UTC: such an
offset is refused here, with a message, on every database alike.
"""

from __future__ import annotations

import datetime

from django.utils import timezone
from django.utils.dateparse import parse_datetime

UTC_OFFSET_LIMIT = datetime.timedelta(hours=16)  # PostgreSQL takes offsets below it
EARLIEST = datetime.datetime.min.replace(tzinfo=datetime.UTC)
LATEST = datetime.datetime.max.replace(tzinfo=datetime.UTC)
EXAMPLE = "2026-01-31T09:00:00+01:00"


def read_datetime(text: str) -> datetime.datetime:
    """`text`, an ISO 8601 date and time (a date alone: its midnight; no UTC offset: in the
    current time zone), as an aware datetime in UTC. ValueError saying what is wrong when
    it is not one, or its offset is past ±15:59.

    One whose UTC time falls outside the years 1 to 9999 ("0001-01-01T00:00+14:00" is in
    the year 0), which no database can compare, is the earliest or latest instant one can:
    no row is earlier or later, so a filter on it selects the same rows."""
    try:
        parsed = parse_datetime(text.strip())
    except ValueError:  # well formed, but no such date ("2026-02-30")
        parsed = None
    if parsed is None:
        raise ValueError(f"{text!r} is not an ISO 8601 date-time (e.g. {EXAMPLE})")
    if timezone.is_naive(parsed):
        parsed = timezone.make_aware(parsed)
    offset = parsed.utcoffset() or datetime.timedelta()
    if abs(offset) >= UTC_OFFSET_LIMIT:
        hours, minutes = divmod(int(abs(offset).total_seconds()) // 60, 60)
        sign = "-" if offset < datetime.timedelta() else "+"
        raise ValueError(
            f"{text!r} has the UTC offset {sign}{hours:02d}:{minutes:02d}: an offset is at "
            f"most ±15:59 (e.g. {EXAMPLE})"
        )
    try:
        return parsed.astimezone(datetime.UTC)
    except OverflowError:
        return EARLIEST if parsed.year == 1 else LATEST
