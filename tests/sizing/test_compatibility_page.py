"""The "Will it run?" page: the answer with its reasons, the booking link with the matching
minimum, and the booking form and calendar taking it from there; in both languages."""

import pytest
from django.utils import timezone

from catalog.services import node_software_record

pytestmark = pytest.mark.django_db


def _stacks(catalog):
    node_software_record(node_id=catalog.nodes[0].pk, at=timezone.now(),
                         report={"vendor": "nvidia", "driver": "580.65.06", "cuda": "13.0"})  # fmt: skip
    node_software_record(node_id=catalog.nodes[1].pk, at=timezone.now(),
                         report={"vendor": "nvidia", "driver": "550.127.05", "cuda": "12.4"})  # fmt: skip


def test_the_answer_with_reasons_and_one_click_to_book_with_the_minimum(catalog, client, alice):
    _stacks(catalog)
    page = client.get("/compatibility/?framework=pytorch&version=2.9&build=cu130&features=bf16")
    html = page.content.decode()
    assert page.status_code == 200 and "cuda-compat-13-0" in html
    assert "/book/h100/?requires_cuda=13.0" in html and 'data-runs="no"' in html
    assert "/glossary/cuda/" in html and "guarantee" in html
    client.force_login(alice)
    booking = client.get("/book/h100/?requires_cuda=13.0").content.decode()
    assert 'name="requires_cuda"' in booking and 'value="13.0"' in booking


def test_a_field_error_in_polish(catalog, client):
    page = client.get(
        "/compatibility/?framework=pytorch&version=2.7&build=cu124", HTTP_ACCEPT_LANGUAGE="pl"
    )
    assert page.status_code == 200 and "nie ma kompilacji" in page.content.decode()
    jax = client.get("/compatibility/?framework=cuda&version=12.x").content.decode()
    assert "is not a version" in jax


def test_the_catalog_shows_each_models_software_and_unknown_gpus(catalog, client):
    _stacks(catalog)
    html = client.get("/").content.decode()
    assert "CUDA 13.0" in html and "CUDA 12.4" in html and "GPUs: unknown" in html
    assert "580.65.06" in html and "/compatibility/" in html
