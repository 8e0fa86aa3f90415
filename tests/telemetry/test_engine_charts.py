"""Charts with the operator's engine as the telemetry source, where the engine gives nothing:
the stored points are drawn, the answer says why, and nothing fails. (The engine's own points,
against real Prometheus and VictoriaMetrics: tests/telemetry/test_remote_engines.py.)"""

import contextlib
import socket
from datetime import timedelta

import pytest
import time_machine

from anchorgpu.launcher import free_port
from telemetry.models import GpuSample
from tests.support.booking import book

pytestmark = pytest.mark.django_db


@pytest.fixture(params=["refused", "silent"])
def engine_down(request, settings):
    """TELEMETRY_SOURCE=prometheus, at a loopback port nobody listens on (refused), or at one
    that takes the connection and never answers (silent: its timeout, shortened here)."""
    with contextlib.ExitStack() as stack:
        if request.param == "silent":
            server = stack.enter_context(socket.create_server(("127.0.0.1", 0), backlog=16))
            port = server.getsockname()[1]
        else:
            port = free_port()
        settings.ANCHORGPU = {
            **settings.ANCHORGPU,
            "TELEMETRY_SOURCE": "prometheus",
            "PROMETHEUS": {
                **settings.ANCHORGPU["PROMETHEUS"],
                "URL": f"http://127.0.0.1:{port}",
                "TIMEOUT": 0.3,
            },
        }
        yield request.param


def _with_samples(alice):
    """A running allocation of two GPUs, each with a stored sample ten minutes in."""
    allocation = book(alice, model="h100", count=2, period="week")
    seen_at = allocation.paid_from + timedelta(minutes=10)
    for holding in allocation.current_holdings:
        GpuSample.objects.create(gpu=holding.gpu, at=seen_at, utilization=50.0, power_w=300.0)
    return allocation, seen_at


def test_an_engine_that_cannot_be_read_gives_the_stored_points_and_says_why(
    catalog, alice, alice_api, client, engine_down
):
    allocation, seen_at = _with_samples(alice)
    client.force_login(alice)
    # Eight hours in, the last day's chart is longer than raw points are drawn for: minutes,
    # which the engine would give.
    with time_machine.travel(allocation.paid_from + timedelta(hours=8), tick=False):
        page = client.get(f"/allocations/{allocation.pk}/telemetry.json?range=day")
        api = alice_api.get(
            f"/api/v1/allocations/{allocation.pk}/telemetry/",
            {"from": allocation.paid_from.isoformat()},
        )
    for answer in (page, api):
        assert answer.status_code == 200
        body = answer.json()
        assert body["source"] != "engine"
        # Why, in a word: the engine's own error is the operator's (logged), not shown here.
        assert body["engine_fallback"] == {"reason": "unreachable"}
        assert [len(gpu["points"]) for gpu in body["gpus"]] == [1, 1]
        assert {p["util"] for gpu in body["gpus"] for p in gpu["points"]} == {50.0}
    assert page.json()["from"] == allocation.paid_from.isoformat()  # the day, cut at the start
    assert page.json()["to"] == (allocation.paid_from + timedelta(hours=8)).isoformat()


def test_a_short_recent_range_reads_raw_samples_and_never_asks_the_engine(
    catalog, alice, client, engine_down
):
    allocation, seen_at = _with_samples(alice)
    client.force_login(alice)
    with time_machine.travel(allocation.paid_from + timedelta(minutes=30), tick=False):
        body = client.get(f"/allocations/{allocation.pk}/telemetry.json").json()
    assert body["source"] == "raw" and "engine_fallback" not in body
    assert [[p["t"] for p in gpu["points"]] for gpu in body["gpus"]] == [[seen_at.isoformat()]] * 2


def test_the_allocation_page_says_which_source_its_charts_draw_in_english_and_polish(
    catalog, alice, client
):
    allocation = book(alice, model="h100", count=1, period="week")
    client.force_login(alice)
    english = client.get(f"/allocations/{allocation.pk}/", HTTP_ACCEPT_LANGUAGE="en").text
    polish = client.get(f"/allocations/{allocation.pk}/", HTTP_ACCEPT_LANGUAGE="pl").text
    assert 'id="chart-source"' in english and 'id="chart-source"' in polish
    for words in (
        'data-engine="Drawn from per-minute figures read from the telemetry engine."',
        'data-fallback-unreachable="The telemetry engine could not be read; the charts show',
        'data-hour="Drawn from hourly figures."',
    ):
        assert words in english
    for words in (
        'data-engine="Wykresy z wartości minutowych odczytanych z silnika telemetrii."',
        'data-fallback-unreachable="Nie udało się odczytać silnika telemetrii; wykresy',
        'data-hour="Wykresy z wartości godzinowych."',
    ):
        assert words in polish
