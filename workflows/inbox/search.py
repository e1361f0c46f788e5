"""The inbox's search: each word (or quoted phrase) in an interrupt's question, workflow
name or payload, compared in one expression, `SearchText`, on which PostgreSQL has a
trigram index (workflows/inbox/statements.py, migration 0010)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NoReturn

from django.db import NotSupportedError
from django.db.models import Expression, F, QuerySet, TextField
from django.utils.text import smart_split, unescape_string_literal

from .statements import SEARCH_TEXT


class SearchText(Expression):
    """The text the inbox searches, one string per interrupt: its question, workflow name
    and payload. On PostgreSQL the trigram index `hitl_interrupt_search` is on this
    expression, so `icontains` on it reads the index."""

    output_field = TextField()

    def __init__(self) -> None:
        super().__init__()
        self.columns = [F("message"), F("workflow_name"), F("payload")]

    def get_source_expressions(self) -> list[Any]:
        return self.columns

    def set_source_expressions(self, exprs: Sequence[Any]) -> None:
        self.columns = list(exprs)

    def as_postgresql(self, compiler: Any, connection: Any) -> tuple[str, list[Any]]:
        return self._text(compiler, "postgresql")

    def as_sqlite(self, compiler: Any, connection: Any) -> tuple[str, list[Any]]:
        return self._text(compiler, "sqlite")

    def as_sql(self, compiler: Any, connection: Any) -> NoReturn:
        raise NotSupportedError(
            f"SearchText supports PostgreSQL and SQLite, not {connection.vendor}"
        )

    def _text(self, compiler: Any, vendor: str) -> tuple[str, list[Any]]:
        compiled = [compiler.compile(column) for column in self.columns]
        (message, _), (workflow, _), (payload, _) = compiled
        params = [param for _, column_params in compiled for param in column_params]
        sql = SEARCH_TEXT[vendor].format(message=message, workflow=workflow, payload=payload)
        return sql, params


def search(queryset: QuerySet[Any], text: str) -> QuerySet[Any]:
    """`queryset` narrowed to the rows whose question, workflow name or payload holds each
    word of `text` (quoted phrases kept whole), as the admin's search splits it."""
    searched = queryset.alias(search_text=SearchText())
    for word in smart_split(text):
        if word[0] in "\"'" and word[0] == word[-1] and len(word) > 1:
            word = unescape_string_literal(word)
        searched = searched.filter(search_text__icontains=word)
    return searched
