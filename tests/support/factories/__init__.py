"""Rows built for tests, one module per app: exact, chosen facts where a test checks sums."""
