from django.urls import path

from accounts.api.views import (
    SshKeyDetailApi,
    SshKeyListApi,
    TeamDetailApi,
    TeamInvitationListApi,
    TeamInvitationRevokeApi,
    TeamListApi,
    TeamMemberDetailApi,
    TeamMemberListApi,
    TeamTransferApi,
    TokenCurrentApi,
    TokenExchangeApi,
    TokenListApi,
    TokenObtainApi,
    TokenRevokeApi,
)
from audit.api.views import AuditListApi
from catalog.api import views as catalog
from glossary.api import GlossaryListApi
from invoices.api import views as invoices
from payments.api import views as payments
from rentals.api import (
    agent,
    allocations,
    bookings,
    clusters,
    impairments,
    ledger,
    maintenance,
    quotes,
)
from rentals.api.availability import AvailabilityApi
from rentals.api.catalog import GpuModelListApi
from reports.api import views as reports
from sizing.api import SizingApi
from sizing.compat_api import CompatibilityApi
from telemetry.api import views as telemetry
from webhooks.api import views as webhooks

urlpatterns = [
    path("auth/token/", TokenObtainApi.as_view(), name="api-token"),
    path("auth/token/current/", TokenCurrentApi.as_view(), name="api-token-current"),
    path("auth/token/exchange/", TokenExchangeApi.as_view(), name="api-token-exchange"),
    path("auth/tokens/", TokenListApi.as_view(), name="api-tokens"),
    path("auth/tokens/<int:pk>/", TokenRevokeApi.as_view(), name="api-token-revoke"),
    path("ssh-keys/", SshKeyListApi.as_view(), name="api-ssh-keys"),
    path("ssh-keys/<int:pk>/", SshKeyDetailApi.as_view(), name="api-ssh-key"),
    path("teams/", TeamListApi.as_view(), name="api-teams"),
    path("teams/<int:pk>/", TeamDetailApi.as_view(), name="api-team"),
    path("teams/<int:pk>/billing/", payments.TeamBillingApi.as_view(), name="api-team-billing"),
    path("teams/<int:pk>/cards/", payments.TeamCardListApi.as_view(), name="api-team-cards"),
    path(
        "teams/<int:pk>/cards/setup-intent/",
        payments.TeamSetupIntentApi.as_view(),
        name="api-team-card-setup",
    ),
    path(
        "teams/<int:pk>/cards/<int:card>/",
        payments.TeamCardDetailApi.as_view(),
        name="api-team-card",
    ),
    path(
        "teams/<int:pk>/cards/<int:card>/default/",
        payments.TeamCardDefaultApi.as_view(),
        name="api-team-card-default",
    ),
    path("payments/statements/", payments.StatementUploadApi.as_view(), name="api-statements"),
    path("payments/unmatched/", payments.UnmatchedListApi.as_view(), name="api-unmatched"),
    path("teams/<int:pk>/members/", TeamMemberListApi.as_view(), name="api-team-members"),
    path(
        "teams/<int:pk>/members/<int:member>/",
        TeamMemberDetailApi.as_view(),
        name="api-team-member",
    ),
    path("teams/<int:pk>/transfer/", TeamTransferApi.as_view(), name="api-team-transfer"),
    path(
        "teams/<int:pk>/invitations/",
        TeamInvitationListApi.as_view(),
        name="api-team-invitations",
    ),
    path(
        "teams/<int:pk>/invitations/<int:invitation>/",
        TeamInvitationRevokeApi.as_view(),
        name="api-team-invitation",
    ),
    path("gpu-models/", GpuModelListApi.as_view(), name="api-gpu-models"),
    path(
        "gpu-models/<slug:slug>/prices/",
        catalog.GpuModelPriceHistoryApi.as_view(),
        name="api-gpu-model-prices",
    ),
    path("periods/", catalog.RentalPeriodListApi.as_view(), name="api-periods"),
    path("options/", catalog.OptionListApi.as_view(), name="api-options"),
    path("regions/", catalog.RegionListApi.as_view(), name="api-regions"),
    path("nodes/", telemetry.NodeListApi.as_view(), name="api-nodes"),
    path(
        "nodes/<str:hostname>/agent-credential/",
        telemetry.NodeAgentCredentialApi.as_view(),
        name="api-node-agent-credential",
    ),
    path("agent/state/", agent.AgentStateApi.as_view(), name="api-agent-state"),
    path("agent/report/", agent.AgentReportApi.as_view(), name="api-agent-report"),
    path(
        "prometheus/targets",
        telemetry.PrometheusTargetsApi.as_view(),
        name="api-prometheus-targets",
    ),
    path("flags/", telemetry.FlagListApi.as_view(), name="api-flags"),
    path(
        "flags/<int:pk>/acknowledge/",
        telemetry.FlagAcknowledgeApi.as_view(),
        name="api-flag-acknowledge",
    ),
    path("availability/", AvailabilityApi.as_view(), name="api-availability"),
    path("quotes/", quotes.QuoteCreateApi.as_view(), name="api-quotes"),
    path("quotes/<uuid:pk>/", quotes.QuoteDetailApi.as_view(), name="api-quote"),
    path("bookings/", bookings.BookingCreateApi.as_view(), name="api-bookings"),
    path("allocations/", allocations.AllocationListApi.as_view(), name="api-allocations"),
    path(
        "allocations/<uuid:pk>/", allocations.AllocationDetailApi.as_view(), name="api-allocation"
    ),
    path("allocations/<uuid:pk>/stop/", allocations.AllocationStopApi.as_view(), name="api-stop"),
    path(
        "allocations/<uuid:pk>/start/", allocations.AllocationStartApi.as_view(), name="api-start"
    ),
    path(
        "allocations/<uuid:pk>/cancel/",
        allocations.AllocationCancelApi.as_view(),
        name="api-cancel",
    ),
    path(
        "allocations/<uuid:pk>/extend/",
        allocations.AllocationExtendApi.as_view(),
        name="api-extend",
    ),
    path(
        "allocations/<uuid:pk>/ssh-keys/",
        allocations.AllocationKeysApi.as_view(),
        name="api-allocation-keys",
    ),
    path(
        "allocations/<uuid:pk>/extension-quotes/",
        allocations.AllocationExtensionQuoteApi.as_view(),
        name="api-extension-quotes",
    ),
    path(
        "allocations/<uuid:pk>/telemetry/",
        allocations.AllocationTelemetryApi.as_view(),
        name="api-telemetry",
    ),
    path(
        "allocations/<uuid:pk>/usage/", allocations.AllocationUsageApi.as_view(), name="api-usage"
    ),
    path(
        "allocations/<uuid:pk>/replace/",
        impairments.AllocationReplaceApi.as_view(),
        name="api-allocation-replace",
    ),
    path(
        "allocations/<uuid:pk>/credit-notes/",
        impairments.AllocationCreditNoteApi.as_view(),
        name="api-allocation-credit-notes",
    ),
    path("usage/fleet/", reports.FleetUsageApi.as_view(), name="api-usage-fleet"),
    path("usage/models/", reports.ModelUsageApi.as_view(), name="api-usage-models"),
    path("usage/regions/", reports.RegionUsageApi.as_view(), name="api-usage-regions"),
    path("usage/revenue/", reports.RevenueApi.as_view(), name="api-usage-revenue"),
    path("usage/booked-ahead/", reports.BookedAheadApi.as_view(), name="api-usage-booked-ahead"),
    path("usage/idle/", reports.IdleApi.as_view(), name="api-usage-idle"),
    path("clusters/<uuid:pk>/", clusters.ClusterDetailApi.as_view(), name="api-cluster"),
    path("clusters/<uuid:pk>/stop/", clusters.ClusterStopApi.as_view(), name="api-cluster-stop"),
    path("clusters/<uuid:pk>/start/", clusters.ClusterStartApi.as_view(), name="api-cluster-start"),
    path(
        "clusters/<uuid:pk>/cancel/",
        clusters.ClusterCancelApi.as_view(),
        name="api-cluster-cancel",
    ),
    path(
        "clusters/<uuid:pk>/extend/",
        clusters.ClusterExtendApi.as_view(),
        name="api-cluster-extend",
    ),
    path(
        "clusters/<uuid:pk>/extension-quotes/",
        clusters.ClusterExtensionQuoteApi.as_view(),
        name="api-cluster-extension-quotes",
    ),
    path("maintenance/", maintenance.MaintenanceListApi.as_view(), name="api-maintenance"),
    path("ledger/", ledger.LedgerListApi.as_view(), name="api-ledger"),
    path("ledger/csv/", ledger.LedgerCsvApi.as_view(), name="api-ledger-csv"),
    path("ledger/exports/", ledger.LedgerExportListApi.as_view(), name="api-ledger-exports"),
    path(
        "ledger/exports/<uuid:pk>/",
        ledger.LedgerExportDetailApi.as_view(),
        name="api-ledger-export",
    ),
    path(
        "ledger/exports/<uuid:pk>/csv/",
        ledger.LedgerExportCsvApi.as_view(),
        name="api-ledger-export-csv",
    ),
    path("invoices/", invoices.InvoiceListApi.as_view(), name="api-invoices"),
    path("invoices/zip/", invoices.InvoiceZipApi.as_view(), name="api-invoices-zip"),
    path("invoices/<int:pk>/pdf/", invoices.InvoicePdfApi.as_view(), name="api-invoice-pdf"),
    path("invoices/<int:pk>/xml/", invoices.InvoiceXmlApi.as_view(), name="api-invoice-xml"),
    path("webhooks/endpoints/", webhooks.EndpointListApi.as_view(), name="api-webhooks"),
    path(
        "webhooks/endpoints/<uuid:pk>/",
        webhooks.EndpointDetailApi.as_view(),
        name="api-webhook",
    ),
    path(
        "webhooks/endpoints/<uuid:pk>/test/",
        webhooks.EndpointTestApi.as_view(),
        name="api-webhook-test",
    ),
    path(
        "webhooks/endpoints/<uuid:pk>/deliveries/",
        webhooks.DeliveryListApi.as_view(),
        name="api-webhook-deliveries",
    ),
    path("glossary/", GlossaryListApi.as_view(), name="api-glossary"),
    path("sizing/", SizingApi.as_view(), name="api-sizing"),
    path("compatibility/", CompatibilityApi.as_view(), name="api-compatibility"),
    path("audit/", AuditListApi.as_view(), name="api-audit"),
]
