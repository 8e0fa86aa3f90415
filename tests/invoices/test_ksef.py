"""Sending to KSeF, against a local stand-in HTTP server this test starts (nothing here can
reach the real KSeF): off by default; on, the KSeF number and status are stored; the
stand-in failing is recorded, tried again, and never a 500."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.conf import settings
from lxml import etree

from invoices import fa3
from invoices.models import KsefStatus, KsefSubmission
from invoices.services import ksef_enabled
from invoices.tasks import ksef_submit_task
from tests.support.booking import book
from tests.support.factories.invoices import document

pytestmark = pytest.mark.django_db


class StandIn(ThreadingHTTPServer):
    """KSeF as far as our sending step knows it: POST /invoices with the XML and a bearer
    token; 201 {"ksefNumber": …}, or 503 while `failing`."""

    def __init__(self):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.failing = False
        self.received = []


class _Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.server.received.append((self.path, self.headers["Authorization"], body))
        if self.server.failing:
            self.send_response(503)
            self.end_headers()
            self.wfile.write(b"try later")
            return
        number = f"5260250274-20261130-{len(self.server.received):06d}-AB"
        payload = json.dumps({"ksefNumber": number}).encode()
        self.send_response(201)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args):
        pass


@pytest.fixture
def stand_in(settings):
    server = StandIn()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    settings.INVOICES = {
        **settings.INVOICES,
        "KSEF_ENABLED": True,
        "KSEF_URL": f"http://127.0.0.1:{server.server_address[1]}",
        "KSEF_TOKEN": "stand-in-token",
        "KSEF_TIMEOUT": 5.0,
    }
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture
def invoice(catalog, alice):
    return document(book(alice, model="h100", count=1, period="week"))


def test_sending_is_off_by_default():
    assert settings.INVOICES["KSEF_ENABLED"] is False
    assert ksef_enabled() is False


def test_an_accepted_invoice_keeps_its_ksef_number(stand_in, invoice):
    ksef_submit_task(invoice.pk)
    submission = KsefSubmission.objects.get(invoice=invoice)
    assert submission.status == KsefStatus.ACCEPTED
    assert submission.ksef_number == "5260250274-20261130-000001-AB"
    assert submission.sent_at is not None and submission.attempts == 1
    path, auth, body = stand_in.received[0]
    assert (path, auth) == ("/invoices", "Bearer stand-in-token")
    fa3.validate(body)  # what was sent is the schema-valid FA(3) document
    assert etree.fromstring(body).findtext(".//{*}P_2") == invoice.display_number
    ksef_submit_task(invoice.pk)  # accepted once: never sent again
    assert len(stand_in.received) == 1


def test_a_failing_ksef_is_recorded_and_tried_again(stand_in, invoice):
    stand_in.failing = True
    ksef_submit_task(invoice.pk)  # no exception reaches the worker: a retry is queued
    submission = KsefSubmission.objects.get(invoice=invoice)
    assert submission.status == KsefStatus.FAILED
    assert "HTTP 503" in submission.error and submission.ksef_number == ""
    stand_in.failing = False
    ksef_submit_task(invoice.pk)  # the retry
    submission.refresh_from_db()
    assert submission.status == KsefStatus.ACCEPTED and submission.attempts == 2
    assert submission.error == ""


def test_the_page_shows_the_ksef_status_without_a_500(stand_in, invoice, client, alice):
    stand_in.failing = True
    ksef_submit_task(invoice.pk)
    client.force_login(alice)
    response = client.get("/invoices/")
    assert response.status_code == 200
    assert "sending failed" in response.content.decode()
