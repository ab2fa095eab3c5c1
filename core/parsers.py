from collections.abc import Mapping
from typing import IO, Any

from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser as DrfJSONParser


class JSONParser(DrfJSONParser):
    """DRF's JSON parser; a body nested deeper than Python's recursion limit is a 400, not a 500."""

    def parse(
        self,
        stream: IO[bytes],
        media_type: str | None = None,
        parser_context: Mapping[str, object] | None = None,
    ) -> Any:  # noqa: ANN401 - any JSON value
        try:
            return super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError("JSON parse error - the body is nested too deeply.") from None
