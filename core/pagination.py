from rest_framework.exceptions import NotFound
from rest_framework.pagination import Cursor, CursorPagination
from rest_framework.request import Request

from core.errors import UnprocessableError
from core.inputs import object_id_parse


class Pagination(CursorPagination):
    """`{"results": [...], "next": url|null, "previous": url|null}`, newest first."""

    page_size = 50
    max_page_size = 200
    page_size_query_param = "page_size"
    ordering = "-id"

    def get_page_size(self, request: Request) -> int:
        """`page_size` as documented: absent means 50; a positive integer in ASCII digits,
        more than 200 served as 200; anything else (`null`, `0`, `-1`, `1.5`) is a 422
        instead of DRF's silent fallback to the default."""
        raw = request.query_params.get(self.page_size_query_param)
        if raw is None:
            return self.page_size
        digits = raw.lstrip("0")
        if not (raw.isascii() and raw.isdigit() and digits):
            raise UnprocessableError(
                "page_size must be a positive integer.",
                fields={"page_size": "A positive integer (at most 200 rows are served)."},
            )
        # A 5000-digit number is just "many": int() would refuse to read it.
        if len(digits) > 3:
            return self.max_page_size
        return min(int(digits), self.max_page_size)

    def decode_cursor(self, request: Request) -> Cursor | None:
        """DRF's decoding, plus a position that must be an id: it goes into `id < position`."""
        cursor = super().decode_cursor(request)
        position = cursor.position if cursor is not None else None
        if position is not None and object_id_parse(position) is None:
            raise NotFound(self.invalid_cursor_message)
        return cursor
