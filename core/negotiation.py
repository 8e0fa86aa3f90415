"""Content negotiation that never answers 406: an Accept header we cannot satisfy (or an
empty one) gets our default representation, as RFC 9110 §12.5.1 allows. Clients always
get JSON or problem details they can read, and no status they were not told about."""

from rest_framework.exceptions import NotAcceptable
from rest_framework.negotiation import DefaultContentNegotiation


class LenientNegotiation(DefaultContentNegotiation):
    def select_renderer(self, request, renderers, format_suffix=None):
        try:
            return super().select_renderer(request, renderers, format_suffix)
        except NotAcceptable:
            return renderers[0], renderers[0].media_type
