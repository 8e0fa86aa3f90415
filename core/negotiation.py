"""Content negotiation that never answers 406: an Accept header we cannot satisfy (or an
empty one) gets our default representation, as RFC 9110 §12.5.1 allows. Clients always
get JSON or problem details they can read, and no status they were not told about."""

from collections.abc import Iterable

from rest_framework.exceptions import NotAcceptable
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.renderers import BaseRenderer
from rest_framework.request import Request


class LenientNegotiation(DefaultContentNegotiation):
    def select_renderer(
        self, request: Request, renderers: Iterable[BaseRenderer], format_suffix: str | None = None
    ) -> tuple[BaseRenderer, str]:
        try:
            chosen: tuple[BaseRenderer, str] = super().select_renderer(
                request, renderers, format_suffix
            )
            return chosen
        except NotAcceptable:
            first = next(iter(renderers))
            return first, first.media_type
