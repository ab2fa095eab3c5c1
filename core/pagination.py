from rest_framework.exceptions import NotFound
from rest_framework.pagination import Cursor, CursorPagination
from rest_framework.request import Request

from core.inputs import object_id_parse


class Pagination(CursorPagination):
    """`{"results": [...], "next": url|null, "previous": url|null}`, newest first."""

    page_size = 50
    max_page_size = 200
    page_size_query_param = "page_size"
    ordering = "-id"

    def decode_cursor(self, request: Request) -> Cursor | None:
        """DRF's decoding, plus a position that must be an id: it goes into `id < position`."""
        cursor = super().decode_cursor(request)
        position = cursor.position if cursor is not None else None
        if position is not None and object_id_parse(position) is None:
            raise NotFound(self.invalid_cursor_message)
        return cursor
