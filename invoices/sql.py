"""The invoices app's hand-written SQL: issuing documents, and numbering them after commit.

`ISSUE` runs inside the transaction that wrote the ledger rows and writes the documents
without a number, with that transaction's id (`xact`): it locks no shared row, so bookings
never wait on one another for a number. `NUMBER` numbers them afterwards (a worker, cued
after each commit and every few seconds), under the per-series counter row:

- only documents whose transaction committed (a rolled-back booking's are gone: no gap) and
  for which no transaction with a smaller id is still open in this database (the snapshot's
  open transactions, `pg_snapshot_xip`): so a slower, earlier booking is never skipped by a
  later one and numbered after it;
- in the order of their transactions' ids (xid8, assigned at a transaction's first write),
  then their own ids; every number of a run is above every number of the runs before it;
- dated when numbered (issue time and day, the series' year, the due day moved with them), so
  numbers and issue dates rise together.

For the ledger rows named in `%(entries)s` it issues:
- an invoice for each charge, with the charged quote's lines, treatment and rate;
- a credit note for each invoice a refund gives back (every charge of the allocation: its
  booking and each extension), mirroring the corrected invoice's lines negated;
- a credit note for an impairment credit, one line for the credited time, correcting the
  booking's invoice (the cluster's, for a node of a cluster).
Numbers run per series (invoices, credit notes) and year (the numbering day's, in the
seller's time zone); the counter grows by how many documents of its series a run numbers.

Enum words are parameters (`%(charge)s`, `%(invoice)s` …), as everywhere.
"""

from psycopg.sql import SQL

# Which lines a document gets: the quote's, the corrected invoice's negated, or one line
# for an impairment credit.
FROM_QUOTE, MIRRORED, CREDITED = 1, 2, 3

_BUYER = SQL(
    """jsonb_build_object('team', t.name, 'name', t.legal_name, 'address', t.address,
        'country', t.country, 'vat_id', t.vat_id)"""
)


# The documents each kind of ledger row calls for, and their lines.
_CHARGED = SQL(
    """
    SELECT e.id AS entry_id, %(invoice)s::varchar AS kind, NULL::bigint AS corrects_id,
           %(from_quote)s AS src, e.team_id, q.tax_treatment, q.vat_rate, e.currency,
           e.net, e.vat, e.amount AS gross, e.reason,
           (e.at AT TIME ZONE %(tz)s)::date AS sold_on,
           x.rate AS pln_rate, x.effective_on AS pln_rate_on, coalesce(x.table_no, '') AS pln_table,
           -- Held: Polish VAT in a foreign currency needs the rate of a day before the sale.
           (%(needs_rate)s AND e.currency <> %(pln)s AND e.vat <> 0 AND x.rate IS NULL) AS held
    FROM entry e
    JOIN rentals_quote q ON q.id = e.quote_id
    LEFT JOIN LATERAL (
        SELECT r.rate, r.effective_on, r.table_no FROM invoices_exchangerate r
        WHERE r.currency = e.currency AND e.currency <> %(pln)s AND e.vat <> 0
          AND r.effective_on < (e.at AT TIME ZONE %(tz)s)::date
          AND r.effective_on >= (e.at AT TIME ZONE %(tz)s)::date - %(rate_days)s
        ORDER BY r.effective_on DESC LIMIT 1
    ) x ON true
    WHERE e.kind = %(charge)s
      AND NOT EXISTS (SELECT 1 FROM invoices_invoice k
                      WHERE k.ledger_entry_id = e.id AND k.kind = %(invoice)s)
"""
)
_REFUNDED_DOCS = SQL(
    """
    SELECT e.id, %(credit_note)s, i.id, %(mirrored)s, e.team_id, i.tax_treatment, i.vat_rate,
           i.currency, -i.net, -i.vat, -i.gross, e.reason, i.sold_on,
           i.pln_rate, i.pln_rate_on, i.pln_rate_table
    FROM entry e
    JOIN rentals_ledgerentry c ON c.allocation_id = e.allocation_id AND c.kind = %(charge)s
    JOIN invoices_invoice i ON i.ledger_entry_id = c.id AND i.kind = %(invoice)s
    WHERE e.kind = %(refund)s
      AND NOT EXISTS (SELECT 1 FROM invoices_invoice k
                      WHERE k.ledger_entry_id = e.id AND k.corrects_id = i.id)
"""
)
_CREDITED_DOCS = SQL(
    """
    SELECT e.id, %(credit_note)s, i.id, %(credited)s, e.team_id, i.tax_treatment, i.vat_rate,
           i.currency, -e.net, -e.vat, -e.amount, e.reason, i.sold_on,
           i.pln_rate, i.pln_rate_on, i.pln_rate_table
    FROM entry e
    CROSS JOIN LATERAL (
        -- The invoice of the charge that paid for the time the span starts in: an
        -- extension's where it starts inside one's window, else the booking's (a cluster's,
        -- for a node of a cluster). That charge's invoice held for its exchange rate holds
        -- the credit note too (no other invoice is corrected instead).
        SELECT i.* FROM rentals_allocation a
        JOIN rentals_allocation ca
          ON ca.id = a.id OR (a.cluster_id IS NOT NULL AND ca.cluster_id = a.cluster_id)
        JOIN rentals_ledgerentry c ON c.allocation_id = ca.id AND c.kind = %(charge)s
        JOIN rentals_quote q ON q.id = c.quote_id
        LEFT JOIN invoices_invoice i ON i.ledger_entry_id = c.id AND i.kind = %(invoice)s
        LEFT JOIN rentals_impairedspan s ON s.id = e.impaired_span_id
        WHERE a.id = e.allocation_id
        ORDER BY (c.reason = %(extension)s AND s.started_at >= q.paid_from
                  AND s.started_at < q.paid_until) DESC,
                 (c.reason = %(booking)s) DESC, (ca.id = a.id) DESC, c.id
        LIMIT 1
    ) i
    WHERE e.kind = %(credit)s AND i.id IS NOT NULL
      AND NOT EXISTS (SELECT 1 FROM invoices_invoice k WHERE k.ledger_entry_id = e.id)
"""
)
_QUOTE_LINES = SQL(
    """
    SELECT v.id, l.position,
           jsonb_build_object('line', l.kind, 'count', l.count, 'periods', l.periods,
               'model', m.name, 'nodes', q.node_count, 'reason', e.reason,
               'option_en', o.name_en, 'option_pl', o.name_pl,
               'unit_en', o.unit_en, 'unit_pl', o.unit_pl, 'period_slug', p.slug,
               'period_en', p.name_en, 'period_pl', p.name_pl),
           l.quantity, l.unit_price, l.amount, v.vat_rate, l.vat, l.amount + l.vat
    FROM invoice v
    JOIN rentals_ledgerentry e ON e.id = v.ledger_entry_id AND v.corrects_id IS NULL
    JOIN rentals_quote q ON q.id = e.quote_id
    JOIN rentals_quoteline l ON l.quote_id = q.id
    JOIN catalog_gpumodel m ON m.id = q.gpu_model_id
    JOIN catalog_rentalperiod p ON p.id = q.period_id
    LEFT JOIN catalog_option o ON o.id = l.option_id
"""
)
_MIRRORED_LINES = SQL(
    """
    SELECT v.id, l.position, l.facts, -l.quantity, l.unit_price, -l.net, l.vat_rate, -l.vat,
           -l.gross
    FROM invoice v
    JOIN numbered d ON d.entry_id = v.ledger_entry_id AND d.corrects_id = v.corrects_id
                   AND d.src = %(mirrored)s
    JOIN invoices_invoiceline l ON l.invoice_id = v.corrects_id
"""
)
_CREDITED_LINES = SQL(
    """
    SELECT v.id, 1,
           jsonb_build_object('line', %(impaired)s::text, 'reason', e.reason,
               'model', m.name, 'count', a.gpu_count, 'started_at', s.started_at,
               'ended_at', s.ended_at),
           -1, e.net, -e.net, v.vat_rate, -e.vat, -e.amount
    FROM invoice v
    JOIN numbered d ON d.entry_id = v.ledger_entry_id AND d.corrects_id = v.corrects_id
                   AND d.src = %(credited)s
    JOIN rentals_ledgerentry e ON e.id = v.ledger_entry_id
    JOIN rentals_allocation a ON a.id = e.allocation_id
    JOIN catalog_gpumodel m ON m.id = a.gpu_model_id
    JOIN rentals_impairedspan s ON s.id = e.impaired_span_id
"""
)

# Charges that can be invoiced now (not held for an exchange rate), as documents.
_CHARGED_DOCS = SQL(
    """
    SELECT entry_id, kind, corrects_id, src, team_id, tax_treatment, vat_rate, currency, net,
           vat, gross, reason, sold_on, pln_rate, pln_rate_on, pln_table
    FROM charged WHERE NOT held
"""
)

_ISSUE = SQL(
    """
WITH clock AS (
    SELECT statement_timestamp() AS at,
           (statement_timestamp() AT TIME ZONE %(tz)s)::date AS day
), entry AS (
    SELECT e.* FROM rentals_ledgerentry e WHERE e.id = ANY(%(entries)s)
), charged AS (
{charged}
), held AS (
    -- Charges whose invoice waits for its exchange rate: staff are told (invoices.services).
    INSERT INTO invoices_heldinvoice (ledger_entry_id, currency, sold_on, held_at)
    SELECT c.entry_id, c.currency, c.sold_on, clock.at FROM charged c CROSS JOIN clock
    WHERE c.held
    ON CONFLICT (ledger_entry_id) DO NOTHING
), docs AS (
{docs}
), numbered AS (
    -- Not numbered yet: that is NUMBER's, after this transaction commits.
    SELECT d.*,
           CASE WHEN d.kind = %(invoice)s THEN %(series)s ELSE %(credit_series)s END AS series,
           extract(year FROM clock.day)::int AS year
    FROM docs d, clock
), invoice AS (
    INSERT INTO invoices_invoice (kind, series, year, number, display_number, xact, team_id,
        ledger_entry_id, corrects_id, issued_at, issued_on, sold_on, seller, buyer,
        tax_treatment, vat_rate, currency, net, vat, gross, pln_rate, pln_rate_on,
        pln_rate_table, reason, legal_note, due_on)
    SELECT d.kind, d.series, d.year, NULL, '', pg_current_xact_id()::text::bigint,
           d.team_id, d.entry_id, d.corrects_id, clock.at, clock.day, d.sold_on,
           %(seller)s::jsonb, {buyer}, d.tax_treatment, d.vat_rate, d.currency,
           d.net, d.vat, d.gross, d.pln_rate, d.pln_rate_on, d.pln_table,
           d.reason,
           coalesce(%(notes)s::jsonb ->> d.tax_treatment, ''),
           -- An invoiced team's invoice is due after its payment terms; a card team's is
           -- paid by the capture that follows the booking's commit.
           CASE WHEN d.kind = %(invoice)s AND t.billing_mode = %(invoiced_mode)s
                THEN clock.day + t.payment_terms_days END
    FROM numbered d
    JOIN accounts_team t ON t.id = d.team_id
    CROSS JOIN clock
    ORDER BY d.entry_id, d.corrects_id  -- ids in this order: a transaction's are numbered by them
    RETURNING id, ledger_entry_id, corrects_id, vat_rate
), released AS (
    DELETE FROM invoices_heldinvoice h USING invoice v WHERE h.ledger_entry_id = v.ledger_entry_id
), lines AS (
    INSERT INTO invoices_invoiceline (invoice_id, position, facts, quantity, unit_price, net,
        vat_rate, vat, gross)
{lines}
)
SELECT id FROM invoice ORDER BY id
"""
)

_UNION = SQL("\n    UNION ALL\n")
ISSUE = _ISSUE.format(
    charged=_CHARGED,
    docs=_UNION.join([_CHARGED_DOCS, _REFUNDED_DOCS, _CREDITED_DOCS]),
    lines=_UNION.join([_QUOTE_LINES, _MIRRORED_LINES, _CREDITED_LINES]),
    buyer=_BUYER,
).as_string()
# The booking path's: charges only. The same statement less the refund and credit branches,
# which PostgreSQL would still plan on every booking (planning the whole took 5.5 ms of its
# 6.9).
ISSUE_CHARGES = _ISSUE.format(
    charged=_CHARGED, docs=_CHARGED_DOCS, lines=_QUOTE_LINES, buyer=_BUYER
).as_string()

# Charges, refunds and credits that have no document yet (rows the ledger recorded before
# this app, by a path that sent no signal, or held for an exchange rate), and refunds that
# have not yet corrected every invoice of their allocation (one was held): what
# `invoices_issue_missing` catches up on.
UNDOCUMENTED = """
SELECT e.id FROM rentals_ledgerentry e
WHERE (NOT EXISTS (SELECT 1 FROM invoices_invoice i WHERE i.ledger_entry_id = e.id)
       AND (e.kind <> %(charge)s OR e.quote_id IS NOT NULL))
   OR (e.kind = %(refund)s AND EXISTS (
        SELECT 1 FROM rentals_ledgerentry c
        JOIN invoices_invoice i ON i.ledger_entry_id = c.id AND i.kind = %(invoice)s
        WHERE c.allocation_id = e.allocation_id AND c.kind = %(charge)s
          AND NOT EXISTS (SELECT 1 FROM invoices_invoice k
                          WHERE k.ledger_entry_id = e.id AND k.corrects_id = i.id)))
ORDER BY e.at, e.id
"""

# Numbering, after commit (see the module's docstring). One run at a time: the caller holds
# NUMBERING_LOCK (a transaction-scoped advisory lock) before this statement takes its snapshot.
NUMBERING_LOCK = 0x1A9C_0001
# One numbering run at a time (true where this run took the lock; false: another is going).
NUMBERING_LOCK_TAKE = "SELECT pg_try_advisory_xact_lock(%(lock)s)"
NUMBER = """
WITH clock AS (
    SELECT statement_timestamp() AS at,
           (statement_timestamp() AT TIME ZONE %(tz)s)::date AS day
), horizon AS (
    -- The oldest transaction still open that could yet commit a document: this statement's
    -- snapshot's open ones (xip), less those pg_stat_activity shows in another database
    -- (another app sharing the server never writes ours); with none, the snapshot's xmax
    -- (every transaction below it has ended; those from it on are not in xip).
    -- One ended before pg_stat_activity is read is not seen in it, so it still counts.
    SELECT coalesce(
        (SELECT min(x) FROM pg_snapshot_xip(s.snap) x
         WHERE NOT EXISTS (SELECT 1 FROM pg_stat_activity a
                           WHERE a.datname <> current_database()
                             AND a.backend_xid::text::bigint = x::text::bigint %% 4294967296)),
        pg_snapshot_xmax(s.snap))::text::bigint AS xact
    FROM (SELECT pg_current_snapshot() AS snap) s
), pending AS (
    SELECT v.id, v.series, extract(year FROM clock.day)::int AS year,
           row_number() OVER (PARTITION BY v.series ORDER BY v.xact, v.id) AS k,
           count(*) OVER (PARTITION BY v.series) AS n
    FROM invoices_invoice v CROSS JOIN clock CROSS JOIN horizon h
    WHERE v.number IS NULL
      -- And this transaction's own (one that issues and numbers in one transaction, as a
      -- test does; the task numbers in a transaction of its own, with none).
      AND (v.xact < h.xact OR v.xact = pg_current_xact_id_if_assigned()::text::bigint)
), counter AS (
    INSERT INTO invoices_invoicecounter AS c (series, year, last)
    SELECT series, year, max(n) FROM pending GROUP BY series, year ORDER BY series
    ON CONFLICT (series, year) DO UPDATE SET last = c.last + EXCLUDED.last
    RETURNING series, year, last
)
UPDATE invoices_invoice v
SET number = c.last - p.n + p.k,
    display_number = p.series || '/' || p.year || '/' || lpad((c.last - p.n + p.k)::text, 6, '0'),
    year = p.year, issued_at = clock.at, issued_on = clock.day,
    due_on = v.due_on + (clock.day - v.issued_on)
FROM pending p JOIN counter c USING (series, year) CROSS JOIN clock
WHERE v.id = p.id
RETURNING v.id, v.number
"""

# Everything a KSeF sending step may claim: pending submissions, oldest first.
KSEF_PENDING = """
SELECT s.invoice_id FROM invoices_ksefsubmission s
WHERE s.status = ANY(%(statuses)s) AND s.attempts < %(max_attempts)s
ORDER BY s.invoice_id
"""
