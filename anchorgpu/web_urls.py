from django.urls import path

from anchorgpu import views as accounts
from catalog import views as catalog
from glossary import views as glossary
from rentals import views as rentals

urlpatterns = [
    path("", catalog.catalog_page, name="home"),
    path("book/<slug:slug>/", catalog.book_page, name="book"),
    path("quotes/<uuid:pk>/", catalog.quote_page, name="quote"),
    path("quotes/<uuid:pk>/book/", catalog.quote_book, name="quote-book"),
    path("allocations/", rentals.allocation_list_page, name="allocation-list"),
    path("allocations/<uuid:pk>/", rentals.allocation_detail_page, name="allocation-detail"),
    path("allocations/<uuid:pk>/live/", rentals.allocation_live_part, name="allocation-live"),
    path(
        "allocations/<uuid:pk>/telemetry.json",
        rentals.allocation_telemetry_json,
        name="allocation-telemetry",
    ),
    path(
        "allocations/<uuid:pk>/<str:action>/", rentals.allocation_action, name="allocation-action"
    ),
    path("statement/", rentals.statement_page, name="statement"),
    path("statement.csv", rentals.statement_csv, name="statement-csv"),
    path("usage/", rentals.usage_page, name="usage"),
    path("glossary/", glossary.glossary_page, name="glossary"),
    path("glossary/<slug:slug>/", glossary.term_page, name="glossary-term"),
    path("account/tokens/", accounts.tokens_page, name="tokens"),
    path("account/login/", accounts.LoginView.as_view(), name="login"),
    path("account/logout/", accounts.LogoutView.as_view(), name="logout"),
]
