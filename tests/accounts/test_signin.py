"""Sign-in cannot be worn down: every attempt counted before the check, per (username,
address) and per address, and only Django's authenticate() lets anyone in."""

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.contrib.auth.backends import ModelBackend
from django.db import connection
from django.test import RequestFactory

from accounts.errors import LockedOut
from accounts.signin import ADDRESS_THRESHOLD, LOCKOUT_THRESHOLD, sign_in

WRONG = {"login": "alice", "password": "not-her-password"}
RIGHT = {"login": "alice", "password": "pw-alice-123456"}


class CountingBackend(ModelBackend):
    """Django's own backend, counting how often a password is actually checked."""

    checks = 0
    lock = threading.Lock()

    def authenticate(self, request, username=None, password=None, **kwargs):
        with CountingBackend.lock:
            CountingBackend.checks += 1
        return super().authenticate(request, username=username, password=password, **kwargs)


def _web_login(client, data, address="10.0.0.1"):
    return client.post("/account/login/", data, REMOTE_ADDR=address)


def _api(data):
    return {"username": data["login"], "password": data["password"]}


@pytest.mark.django_db
def test_an_empty_password_does_not_clear_the_web_lockout(alice, client):
    for _ in range(LOCKOUT_THRESHOLD):
        assert _web_login(client, WRONG).status_code == 200
    assert _web_login(client, {"login": "alice", "password": ""}).status_code == 200
    response = _web_login(client, RIGHT)
    assert response.status_code == 200  # still the form: locked out, not signed in
    assert "Too many failed attempts" in response.content.decode()
    assert "_auth_user_id" not in client.session


@pytest.mark.django_db
def test_an_empty_password_does_not_clear_the_api_lockout(alice, api):
    for _ in range(LOCKOUT_THRESHOLD):
        assert api.post("/api/v1/auth/token/", _api(WRONG)).status_code == 401
    assert api.post("/api/v1/auth/token/", {"username": "alice", "password": ""}).status_code == 400
    assert api.post("/api/v1/auth/token/", _api(RIGHT)).status_code == 429


@pytest.mark.django_db
def test_the_lockout_is_per_address_so_nobody_locks_out_someone_else(alice, client):
    for _ in range(LOCKOUT_THRESHOLD + 2):
        _web_login(client, WRONG, address="203.0.113.9")
    assert "Too many failed" in _web_login(client, RIGHT, "203.0.113.9").content.decode()
    assert _web_login(client, RIGHT, address="198.51.100.7").status_code == 302


@pytest.mark.django_db
def test_one_address_cannot_guess_through_many_usernames(alice, client):
    for n in range(ADDRESS_THRESHOLD):
        _web_login(client, {"login": f"user{n}", "password": "guess"})
    assert "Too many failed" in _web_login(client, RIGHT).content.decode()
    assert _web_login(client, RIGHT, address="10.9.9.9").status_code == 302


@pytest.mark.django_db
def test_a_forged_forwarded_for_does_not_escape_the_api_throttle(alice, api, settings):
    statuses = [
        api.post(
            "/api/v1/auth/token/",
            _api(WRONG) | {"username": f"u{n}"},
            HTTP_X_FORWARDED_FOR=f"10.1.{n}.1",
        ).status_code
        for n in range(12)
    ]
    assert statuses.count(429) >= 2  # AUTH_THROTTLE_RATE is 10/min for one real address


@pytest.mark.django_db(transaction=True)
def test_parallel_wrong_passwords_get_at_most_the_threshold_of_checks(alice, settings):
    settings.AUTHENTICATION_BACKENDS = [f"{__name__}.CountingBackend"]
    CountingBackend.checks = 0
    barrier = threading.Barrier(10)

    def attempt(_):
        request = RequestFactory().post("/account/login/", REMOTE_ADDR="10.0.0.2")
        barrier.wait()
        try:
            sign_in(request, **_api(WRONG))
        except LockedOut:
            return "locked"
        except Exception:
            return "refused"
        finally:
            connection.close()
        return "in"

    with ThreadPoolExecutor(10) as pool:
        outcomes = list(pool.map(attempt, range(10)))
    assert CountingBackend.checks == LOCKOUT_THRESHOLD
    assert outcomes.count("locked") == 10 - LOCKOUT_THRESHOLD
    assert "in" not in outcomes


@pytest.mark.django_db
def test_a_signed_in_user_sent_to_the_sign_in_page_is_not_looped(alice, client):
    client.force_login(alice)
    response = client.get("/account/login/?next=/account/login/")
    assert response.status_code == 302 and response["Location"] == "/"
