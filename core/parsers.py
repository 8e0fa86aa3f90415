"""The API's only request parser: JSON, where any failure to parse is the client's (400)."""

from collections.abc import Mapping
from typing import IO, Any

from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser as DrfJSONParser


class JSONParser(DrfJSONParser):
    """DRF's parser lets a RecursionError (JSON nested thousands deep) escape as a 500."""

    def parse(
        self,
        stream: IO[Any],
        media_type: str | None = None,
        parser_context: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        try:
            return super().parse(stream, media_type, parser_context)
        except (RecursionError, UnicodeError) as exc:
            raise ParseError(f"JSON parse error - {type(exc).__name__}") from exc
