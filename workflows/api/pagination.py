"""Pagination of the API lists: pages with a count for the lists, a cursor for events
(an append-only history a client follows). A page_size outside 1..max_page_size is a
400, not silently the default."""

import re
from typing import Any, cast

from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.pagination import Cursor, CursorPagination, PageNumberPagination
from rest_framework.request import Request
from rest_framework.response import Response

from ..inbox import CappedPaginator

PAGE_SIZE = "page_size"  # the query parameter
_SMALL_NUMBER = re.compile(r"[0-9]{1,9}")
_EVENT_ID = re.compile(r"[0-9]{1,18}")  # within a 64-bit id column


class StrictPageSize:
    page_size_query_param: str | None = PAGE_SIZE
    max_page_size: int

    def get_page_size(self, request: Request) -> Any:
        given = request.query_params.get(PAGE_SIZE)
        # ASCII digits only, and few of them: int() takes "²" for a digit, and refuses
        # thousands of digits with a ValueError of its own.
        if given is not None and not (
            _SMALL_NUMBER.fullmatch(given) and 1 <= int(given) <= self.max_page_size
        ):
            raise ValidationError({PAGE_SIZE: [f"an integer from 1 to {self.max_page_size}"]})
        return super().get_page_size(request)  # type: ignore[misc]

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        parameters = super().get_schema_operation_parameters(view)  # type: ignore[misc]
        for parameter in parameters:
            if parameter["name"] == PAGE_SIZE:
                parameter["schema"].update(minimum=1, maximum=self.max_page_size)
        return parameters


class PagePagination(StrictPageSize, PageNumberPagination):
    page_size = 50
    max_page_size = 500


class InboxPagination(PagePagination):
    """The interrupts: counted up to HITL["INBOX_COUNT_LIMIT"] + 1 rows, so a page costs
    the same on a million pending questions as on a thousand. `count_capped` says when the
    count stopped there (there are more; filter to narrow them)."""

    django_paginator_class = CappedPaginator

    def get_paginated_response(self, data: Any) -> Response:
        response = super().get_paginated_response(data)
        assert self.page is not None  # a page is answered after paginating
        paginator = cast(CappedPaginator, self.page.paginator)
        response.data["count_capped"] = paginator.capped
        return response

    def get_paginated_response_schema(self, schema: dict[str, Any]) -> dict[str, Any]:
        paginated = super().get_paginated_response_schema(schema)
        paginated["properties"]["count_capped"] = {
            "type": "boolean",
            "description": "True when the count stopped at HITL['INBOX_COUNT_LIMIT'] + 1 rows",
        }
        return paginated


class EventCursorPagination(StrictPageSize, CursorPagination):
    ordering = "id"
    page_size = 100
    max_page_size = 1000

    def decode_cursor(self, request: Request) -> Cursor | None:
        """DRF's cursor, whose position must be an event id: any other is an invalid
        cursor (404), not a query the database fails on."""
        cursor = super().decode_cursor(request)
        position = cursor.position if cursor is not None else None
        if position is not None and not _EVENT_ID.fullmatch(str(position)):
            raise NotFound(self.invalid_cursor_message)
        return cursor
