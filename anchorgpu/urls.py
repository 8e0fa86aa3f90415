from django.contrib import admin
from django.urls import include, path
from django.utils.translation import gettext_lazy as _
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from accounts import views as accounts
from anchorgpu import health, metrics
from payments.api.views import stripe_webhook

admin.site.site_header = _("AnchorGPU administration")
admin.site.site_title = _("AnchorGPU administration")

urlpatterns = [
    path("healthz", health.healthz, name="healthz"),
    path("readyz", health.readyz, name="readyz"),
    path("metrics", metrics.metrics, name="metrics"),
    path("api/v1/", include("anchorgpu.api_urls")),
    path("webhooks/stripe/", stripe_webhook, name="stripe-webhook"),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerSplitView.as_view(url_name="schema"), name="api-docs"),
    path("i18n/setlang/", accounts.set_language, name="set_language"),
    path("admin/", admin.site.urls),
    path("", include("anchorgpu.web_urls")),
]

handler400 = "core.errors_views.bad_request"
handler403 = "core.errors_views.permission_denied"
handler404 = "core.errors_views.not_found"
handler500 = "core.errors_views.server_error"
