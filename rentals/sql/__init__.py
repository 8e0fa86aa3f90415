"""Rentals' hand-written SQL, one module per domain: `holdings` (the overlap rule and what is
held now), `capacity` (availability, placement, the calendar, start windows), `booking`
(the booking's write and enforcement), `idempotency`, `agent` (the node agent's poll),
`faults` (maintenance, impairments, spares). The staff's fleet report has its own
statements, in `reports.sql`.

A statement with a variable part is composed with `psycopg.sql` (`SQL(...).format(...)`,
`Identifier` for a table's name) and rendered to plain text once, at import or in a cached
function, so Django's query log and `CaptureQueriesContext` see the text that runs. Enum
words are parameters (`%(active)s`, `= ANY(%(states)s)`), never quoted in the text: the
callers pass `NodeState.ACTIVE`, `AllocationState.RUNNING`, `LedgerKind.CHARGE`.

"Does this holding take its GPU in this window" is one clause, `holding_overlaps`; a GPU's
`gpu_held` and `gpu_free`, the count `gpus_held_per_node` and the availability calendar
are written with it, and `rentals.selectors.holdings.holdings_overlapping` is the same rule for the ORM.
`FITTING_SPANS` alone states it the other way round, as the gaps between a GPU's holdings
(a sweep cannot ask it per instant); tests/rentals/test_clusters.py holds it to FITTING_AT.
"""
