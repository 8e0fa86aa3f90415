"""Bank statements (placeholder until the parsers land)."""

MAX_BYTES = 10 * 1024 * 1024


def statement_import(*, content: bytes, filename: str, user) -> dict:
    raise NotImplementedError
