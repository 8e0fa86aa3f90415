"""GPU model list and quote creation over HTTP (gunicorn, concurrent clients) vs /healthz."""

import pytest

from accounts.services.tokens import api_token_create
from catalog.demo import seed_catalog
from tests.perf.conftest import gunicorn, load, report, target

pytestmark = pytest.mark.django_db(transaction=True)


def test_catalog_and_quotes_over_http(django_user_model):
    seed_catalog()
    user = django_user_model.objects.create_user("bench")
    token = api_token_create(user=user, name="bench")
    auth = {"Authorization": f"Bearer {token}"}
    body = {"gpu_model": "h100-sxm", "gpu_count": 1, "period": "week", "period_count": 1}
    with gunicorn() as url:
        load(url, lambda c, i: c.get("/healthz"), seconds=1)  # warm up
        health = load(url, lambda c, i: c.get("/healthz"))
        models = load(url, lambda c, i: c.get("/api/v1/gpu-models/"))
        quotes = load(url, lambda c, i: c.post("/api/v1/quotes/", json=body), headers=auth)
    for figures in (models, quotes):
        figures["ratio_to_healthz"] = figures["rps"] / health["rps"]
    report(
        "catalog over HTTP (gunicorn 2 workers × 4 threads, 8 clients, 5 s each)",
        {"GET /healthz": health, "GET /api/v1/gpu-models/": models, "POST /api/v1/quotes/": quotes},
    )
    assert health["errors"] == models["errors"] == quotes["errors"] == 0
    target(
        "gpu_models_to_healthz",
        models["ratio_to_healthz"],
        baseline="healthz rps",
        at_least=0.5,
        unit="×",
    )
    target("quotes_to_healthz", quotes["ratio_to_healthz"], baseline="healthz rps",
           at_least=0.12, unit="×")  # fmt: skip
