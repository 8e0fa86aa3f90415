"""What the API answers in: JSON, problem details, and CSV where CSV is documented."""

from rest_framework.renderers import BaseRenderer, JSONRenderer


class ProblemJSONRenderer(JSONRenderer):
    """For clients that ask for `application/problem+json`; the body is JSON either way."""

    media_type = "application/problem+json"


class CSVRenderer(BaseRenderer):
    """Views that offer CSV build the text themselves (core.csv); errors stay JSON."""

    media_type = "text/csv"
    format = "csv"
    charset = "utf-8"

    def render(self, data, accepted_media_type=None, renderer_context=None):
        if isinstance(data, bytes | str):
            return data
        return JSONRenderer().render(data)
