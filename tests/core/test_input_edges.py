"""Bad input gets a clear 4xx and changes nothing: each case here was a 500 once."""

from urllib.parse import urlencode

import pytest

from accounts.models import ApiToken
from rentals.models import Quote
from tests.support.booking import book

pytestmark = pytest.mark.django_db

DEEP = "[" * 20_000 + "]" * 20_000


def test_json_nested_twenty_thousand_deep_is_a_400_even_anonymously(api):
    response = api.generic("POST", "/api/v1/auth/token/", DEEP, content_type="application/json")
    assert response.status_code == 400
    assert response["Content-Type"] == "application/problem+json"


def test_deep_json_on_a_signed_in_endpoint_is_a_400(catalog, alice_api):
    response = alice_api.generic("POST", "/api/v1/quotes/", DEEP, content_type="application/json")
    assert response.status_code == 400 and Quote.objects.count() == 0


@pytest.mark.parametrize("url", ["/api/v1/allocations/?state=run%00ning", "/%00"])
def test_a_nul_byte_is_refused_before_any_query(alice, client, url):
    client.force_login(alice)
    assert client.get(url).status_code == 400


def test_a_page_takes_a_search_without_its_nul_and_answers_in_words(glossary, client):
    page = client.get("/glossary/?q=zz%00qq")
    assert page.status_code == 200
    assert 'value="zzqq"' in page.content.decode() and "No term matches" in page.content.decode()


@pytest.mark.parametrize("encoding", ["urlencoded", "multipart"])
def test_a_nul_in_the_sign_in_name_gets_the_form_again(alice, client, encoding):
    data = {"login": "ali\x00ce", "password": "not-her-password"}
    if encoding == "urlencoded":
        page = client.post(
            "/account/login/", urlencode(data), content_type="application/x-www-form-urlencoded"
        )
    else:
        page = client.post("/account/login/", data)
    assert page.status_code == 200 and "_auth_user_id" not in client.session
    assert "username and/or password you specified are not correct" in page.content.decode()


def test_a_five_thousand_character_token_name_is_a_field_error(alice, client):
    client.force_login(alice)
    page = client.post("/account/tokens/", {"name": "x" * 5000})
    assert page.status_code == 400
    assert "Ensure this value has at most 80 characters (it has 5000)." in page.content.decode()
    assert 'id="id_name"' in page.content.decode() and not ApiToken.objects.exists()


def test_a_nul_inside_json_text_is_refused(catalog, alice_api):
    body = '{"gpu_model": "h100\\u0000", "gpu_count": 1, "period": "day", "period_count": 1}'
    response = alice_api.generic("POST", "/api/v1/quotes/", body, content_type="application/json")
    assert response.status_code == 400 and Quote.objects.count() == 0


def test_an_escaped_backslash_before_u0000_is_ordinary_text(catalog, alice_api):
    body = '{"gpu_model": "h100\\\\u0000", "gpu_count": 1, "period": "day", "period_count": 1}'
    response = alice_api.generic("POST", "/api/v1/quotes/", body, content_type="application/json")
    assert response.status_code == 400  # an unknown model slug, said as a field error
    assert "gpu_model" in response.json()["errors"]


def test_an_unknown_allocation_state_filter_is_a_field_error(alice_api):
    response = alice_api.get("/api/v1/allocations/?state=sleeping")
    assert response.status_code == 400 and "state" in response.json()["errors"]


def test_telemetry_from_year_one_is_a_400(catalog, alice, alice_api):
    allocation = book(alice, model="l4", count=1, period="day")
    response = alice_api.get(
        f"/api/v1/allocations/{allocation.pk}/telemetry/?to=0001-01-01T00:00:00Z"
    )
    assert response.status_code == 400


def test_a_start_in_year_9999_is_a_field_error(catalog, alice_api):
    response = alice_api.post(
        "/api/v1/quotes/",
        {"gpu_model": "h100", "gpu_count": 1, "period": "day", "period_count": 1,
         "starts_at": "9999-12-31T23:59:59Z"},
    )  # fmt: skip
    assert response.status_code == 400 and "starts_at" in response.json()["errors"]


def test_staff_usage_days_in_superscript_digits_falls_back_to_a_week(staff, client):
    client.force_login(staff)
    response = client.get("/usage/?days=²")
    assert response.status_code == 200 and response.context["days"] == 7


def test_the_api_never_answers_html(catalog, alice_api):
    response = alice_api.get("/api/v1/allocations/?state=nope", HTTP_ACCEPT="text/html")
    assert response.status_code in (400, 406)
    assert response["Content-Type"] == "application/problem+json"
    assert not response.content.lstrip().startswith(b"<")


def test_the_ledger_csv_answers_accept_text_csv(alice_api):
    response = alice_api.get("/api/v1/ledger/csv/", HTTP_ACCEPT="text/csv")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/csv")
    assert b"".join(response.streaming_content).decode().startswith("date_utc,kind,description")


def test_form_bodies_are_refused_for_the_api(api):
    response = api.post(
        "/api/v1/auth/token/", "username=a&password=b",
        content_type="application/x-www-form-urlencoded",
    )  # fmt: skip
    assert response.status_code == 415


@pytest.mark.parametrize("path", ["/", "/glossary/", "/account/login/", "/api/docs/", "/healthz"])
def test_every_page_carries_the_security_headers(catalog, client, path):
    response = client.get(path)
    csp = response["Content-Security-Policy"]
    assert "script-src 'self'" in csp and "frame-ancestors 'none'" in csp
    assert "unsafe-inline" not in csp.split("script-src")[1].split(";")[0]
    assert response["X-Frame-Options"] == "DENY"
    assert response["X-Content-Type-Options"] == "nosniff"
    assert response["Referrer-Policy"] == "same-origin"


def test_readyz_names_what_is_down_but_not_why(client, settings):
    settings.CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": "redis://secret-host.internal:1/0",
        }
    }
    body = client.get("/readyz").content.decode()
    assert "redis" in body and "secret-host" not in body and "Error" not in body


@pytest.mark.parametrize("accept", ["", "application/xml", "text/plain;q=1, image/png"])
def test_an_accept_header_we_cannot_satisfy_gets_json_not_406(catalog, alice_api, accept):
    response = alice_api.get("/api/v1/gpu-models/", HTTP_ACCEPT=accept)
    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"


TEN_MB = 10 * 1024 * 1024


@pytest.mark.parametrize(
    ("url", "content_type"),
    [
        ("/api/v1/quotes/", "application/json"),
        ("/api/v1/auth/token/", "application/x-www-form-urlencoded"),
        ("/api/v1/sizing/", "text/plain"),
    ],
)
def test_a_ten_megabyte_api_body_is_a_413_problem(catalog, alice_api, url, content_type):
    response = alice_api.generic("POST", url, "x" * TEN_MB, content_type=content_type)
    assert response.status_code == 413 and response["Content-Type"] == "application/problem+json"
    assert response.json()["code"] == "too_large" and "bytes" in response.json()["detail"]
    assert Quote.objects.count() == 0


def test_a_ten_megabyte_multipart_body_is_a_413_problem(alice_api):
    from django.test.client import MULTIPART_CONTENT, encode_multipart

    body = encode_multipart("BoUnDaRy", {"name": "x" * TEN_MB})
    response = alice_api.generic(
        "POST",
        "/api/v1/quotes/",
        body,
        content_type=MULTIPART_CONTENT.replace("BoUnDaRy", "BoUnDaRy"),
    )
    assert response.status_code == 413 and response.json()["code"] == "too_large"


def test_a_ten_megabyte_form_on_a_page_is_a_413_in_words(alice, client):
    client.force_login(alice)
    response = client.generic(
        "POST", "/teams/", "name=" + "x" * TEN_MB, content_type="application/x-www-form-urlencoded"
    )
    assert response.status_code == 413 and "bytes" in response.content.decode()


def test_unparsable_json_is_a_400_problem(alice_api):
    response = alice_api.generic(
        "POST", "/api/v1/quotes/", "{not json", content_type="application/json"
    )
    assert response.status_code == 400 and response["Content-Type"] == "application/problem+json"
    assert response.json()["detail"]


def test_an_unsupported_body_type_is_a_415_whose_title_is_words(api):
    response = api.generic(
        "POST", "/api/v1/auth/token/", "username=a&password=b",
        content_type="application/x-www-form-urlencoded",
    )  # fmt: skip
    assert response.status_code == 415
    assert response.json()["title"] == "Unsupported Media Type"
    assert "{" not in response.json()["title"] + response.json()["detail"]
