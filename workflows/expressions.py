"""Query expressions the JSON columns need and Django does not ship."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, NoReturn

from django.db import NotSupportedError
from django.db.models import BooleanField, Expression, F


class HasAnyElement(Expression):
    """True when the JSON array in `field` holds any of `values` (strings), e.g.
    `Interrupt.objects.filter(HasAnyElement("assignees", ["user:ada", "group:ops"]))`.

    PostgreSQL: jsonb `?|`; SQLite: `json_each`. Django's `has_any_keys` matches array
    elements on PostgreSQL only (on SQLite it looks for object keys), and `contains` with a
    list is PostgreSQL-only.
    """

    conditional = True
    output_field = BooleanField()

    def __init__(self, field: str, values: Iterable[str]) -> None:
        super().__init__()
        self.column = F(field)
        self.values = [str(v) for v in values]

    def get_source_expressions(self) -> list[Any]:
        return [self.column]

    def set_source_expressions(self, exprs: Sequence[Any]) -> None:
        (self.column,) = exprs

    def as_postgresql(self, compiler: Any, connection: Any) -> tuple[str, list[Any]]:
        sql, params = compiler.compile(self.column)
        return f"({sql} ?| %s::text[])", [*params, self.values]

    def as_sqlite(self, compiler: Any, connection: Any) -> tuple[str, list[Any]]:
        sql, params = compiler.compile(self.column)
        marks = ", ".join(["%s"] * len(self.values)) or "NULL"
        return (
            f"EXISTS (SELECT 1 FROM json_each({sql}) WHERE json_each.value IN ({marks}))",
            [*params, *self.values],
        )

    def as_sql(self, compiler: Any, connection: Any) -> NoReturn:
        raise NotSupportedError(
            f"HasAnyElement supports PostgreSQL and SQLite, not {connection.vendor}"
        )
