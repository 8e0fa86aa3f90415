"""The payments app's hand-written SQL."""

# An invoiced team's terms for a purchase, in one statement (`purchase_check`): its credit
# limit in the purchase's currency (NULL: none) and whether any of its invoices is overdue,
# that is due before `%(cutoff)s` (today less the team's grace days) with money still owed.
# "Owed" is `invoices.selectors.invoice_owed` over `with_payment_facts`: the gross, plus its
# credit notes' (negative) gross, less what was applied; the ORM's list of those invoices is
# read only when this says there is one (the refusal names them). Written by hand because a
# purchase runs it every time: compiling the ORM's three subqueries cost more CPU than the
# rest of the check.
INVOICED_TERMS = """
SELECT
    (SELECT l.amount FROM accounts_teamcreditlimit l
     WHERE l.team_id = %(team)s AND l.currency = %(currency)s) AS credit_limit,
    EXISTS (
        SELECT FROM invoices_invoice i
        WHERE i.team_id = %(team)s AND i.kind = %(invoice)s AND i.due_on < %(cutoff)s
          AND i.gross
              + coalesce((SELECT sum(c.gross) FROM invoices_invoice c
                          WHERE c.corrects_id = i.id AND c.kind = %(credit_note)s), 0)
              - coalesce((SELECT sum(p.amount) FROM invoices_invoicepayment p
                          WHERE p.invoice_id = i.id), 0)
              > 0
    ) AS overdue
"""
