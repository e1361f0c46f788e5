"""Reading Server-Sent Events in tests: split a stream's text into events as a browser's
EventSource would (id, event, data; comment lines apart)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from workflows.protocols import stream


@dataclass
class Message:
    event: str
    data: Any
    id: str | None = None


KEEP_ALIVE = "keep-alive"


def parse(chunks: Iterable[str]) -> Iterator[Message | str]:
    """Each event as a Message, each comment as its text, in order, as the text arrives."""
    pending = ""
    for chunk in chunks:
        pending += chunk
        while "\n\n" in pending:
            block, pending = pending.split("\n\n", 1)
            fields: dict[str, str] = {}
            for line in block.split("\n"):
                if line.startswith(":"):
                    yield line[1:].strip()
                    continue
                name, _, value = line.partition(":")
                fields[name] = value[1:] if value.startswith(" ") else value
            if "data" in fields:
                yield Message(
                    fields.get("event", "message"), json.loads(fields["data"]), fields.get("id")
                )


def messages(chunks: Iterable[str]) -> list[Message]:
    """Every event (comments left out) of a stream that ends."""
    return [m for m in parse(chunks) if isinstance(m, Message)]


@pytest.fixture
def own_capacity(monkeypatch: pytest.MonkeyPatch) -> stream.Capacity:
    """A count of live streams for this test alone: a browser test's server may still hold
    a stream whose page has closed (it notices at its next keep-alive)."""
    fresh = stream.Capacity()
    monkeypatch.setattr(stream, "capacity", fresh)
    return fresh
