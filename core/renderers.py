"""What the API answers in: JSON, problem details, and CSV where CSV is documented."""

from collections.abc import Mapping
from typing import Any

from rest_framework.renderers import BaseRenderer, JSONRenderer


class ProblemJSONRenderer(JSONRenderer):
    """For clients that ask for `application/problem+json`; the body is JSON either way."""

    media_type = "application/problem+json"


class CSVRenderer(BaseRenderer):
    """Views that offer CSV build the text themselves (core.csv); errors stay JSON."""

    media_type = "text/csv"
    format = "csv"
    charset = "utf-8"

    def render(
        self,
        data: Any,
        accepted_media_type: str | None = None,
        renderer_context: Mapping[str, Any] | None = None,
    ) -> bytes | str:
        if isinstance(data, bytes | str):
            return data
        rendered: bytes = JSONRenderer().render(data)
        return rendered
