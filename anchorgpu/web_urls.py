from django.urls import include, path

from accounts import team_views as teams
from accounts import views as accounts
from audit import views as audit
from glossary import views as glossary
from invoices import views as invoices
from payments import views as payments
from rentals.views import allocations, booking, impaired, statement
from reports import views as reports
from sizing import compat_views
from sizing import views as sizing
from telemetry import views as flags
from webhooks import views as webhooks

urlpatterns = [
    path("", booking.catalog_page, name="home"),
    path("book/<slug:slug>/", booking.book_page, name="book"),
    path("book/<slug:slug>/estimate/", booking.book_estimate_part, name="book-estimate"),
    path("quotes/<uuid:pk>/", booking.quote_page, name="quote"),
    path("quotes/<uuid:pk>/book/", booking.quote_book, name="quote-book"),
    path("quotes/<uuid:pk>/requote/", booking.quote_requote, name="quote-requote"),
    path("allocations/", allocations.allocation_list_page, name="allocation-list"),
    path("allocations/<uuid:pk>/", allocations.allocation_detail_page, name="allocation-detail"),
    path("allocations/<uuid:pk>/live/", allocations.allocation_live_part, name="allocation-live"),
    path(
        "allocations/<uuid:pk>/telemetry.json",
        allocations.allocation_telemetry_json,
        name="allocation-telemetry",
    ),
    path(
        "allocations/<uuid:pk>/extension-quote/",
        allocations.extension_quote_page,
        name="allocation-extension-quote",
    ),
    path(
        "allocations/<uuid:pk>/extend/",
        allocations.allocation_extend_page,
        name="allocation-extend",
    ),
    path(
        "allocations/<uuid:pk>/ssh-keys/",
        allocations.allocation_keys_page,
        name="allocation-keys",
    ),
    path(
        "allocations/<uuid:pk>/<str:action>/",
        allocations.allocation_action,
        name="allocation-action",
    ),
    path("clusters/<uuid:pk>/", allocations.cluster_detail_page, name="cluster-detail"),
    path("clusters/<uuid:pk>/<str:action>/", allocations.cluster_action, name="cluster-action"),
    path("notices/", allocations.notices_page, name="notices"),
    path("statement/", statement.statement_page, name="statement"),
    path("statement.csv", statement.statement_csv, name="statement-csv"),
    path("statement/exports/", statement.statement_export_create, name="statement-export-create"),
    path(
        "statement/exports/<uuid:pk>/",
        statement.statement_export_download,
        name="statement-export",
    ),
    path("invoices/", invoices.invoices_page, name="invoices"),
    path("invoices/zip/", invoices.invoices_zip_page, name="invoices-zip"),
    path("invoices/<int:pk>/pdf/", invoices.invoice_pdf_page, name="invoice-pdf"),
    path("invoices/<int:pk>/xml/", invoices.invoice_xml_page, name="invoice-xml"),
    path("usage/", reports.fleet_report_page, name="usage"),
    path("impaired/", impaired.impaired_page, name="impaired"),
    path("impaired/<uuid:pk>/replace/", impaired.impaired_replace, name="impaired-replace"),
    path("impaired/<uuid:pk>/credit/", impaired.impaired_credit, name="impaired-credit"),
    path("sizing/", sizing.sizing_page, name="sizing"),
    path("compatibility/", compat_views.compatibility_page, name="compatibility"),
    path("flags/", flags.flags_page, name="flags"),
    path("flags/<int:pk>/acknowledge/", flags.flag_acknowledge_page, name="flag-acknowledge"),
    path("glossary/", glossary.glossary_page, name="glossary"),
    path("glossary/<slug:slug>/", glossary.term_page, name="glossary-term"),
    path("account/tokens/", accounts.tokens_page, name="tokens"),
    path("account/ssh-keys/", accounts.ssh_keys_page, name="ssh-keys"),
    path("account/webhooks/", webhooks.webhooks_page, name="webhooks"),
    path("account/profile/", accounts.account_page, name="account"),
    path(
        "account/confirm-email-again/",
        accounts.confirmation_resend_page,
        name="confirmation-resend",
    ),  # fmt: skip
    path("teams/", teams.team_list_page, name="teams"),
    path("teams/switch/", teams.team_switch, name="team-switch"),
    path("teams/<int:pk>/", teams.team_page, name="team"),
    path("teams/<int:pk>/audit/", audit.team_audit_page, name="team-audit"),
    path("teams/<int:pk>/billing/", payments.team_billing_page, name="team-billing"),
    path(
        "payments/<int:pk>/authenticate/",
        payments.payment_authenticate_page,
        name="payment-authenticate",
    ),
    path("payments/", payments.staff_payments_page, name="staff-payments"),
    path("audit/", audit.staff_audit_page, name="audit"),
    path("invitations/<str:secret>/", teams.invitation_page, name="invitation"),
    path("account/", include("allauth.urls")),
]
