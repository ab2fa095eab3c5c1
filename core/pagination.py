from rest_framework.pagination import CursorPagination


class Pagination(CursorPagination):
    """`{"results": [...], "next": url|null, "previous": url|null}`, newest first."""

    page_size = 50
    max_page_size = 200
    page_size_query_param = "page_size"
    ordering = "-id"
