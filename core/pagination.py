from rest_framework.pagination import LimitOffsetPagination


class BoundedLimitOffsetPagination(LimitOffsetPagination):
    """limit/offset with ceilings: an unbounded `limit` reached SQL as an out-of-range
    bigint and failed with a 500 (found by schemathesis)."""

    default_limit = 50
    max_limit = 500
    max_offset = 10**9

    def get_offset(self, request):
        return min(super().get_offset(request), self.max_offset)
