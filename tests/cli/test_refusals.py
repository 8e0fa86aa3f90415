"""Bad input and refusals, through the installed `agpu` against a live server: each gives a
clear message in words (English or Polish, with the field that was wrong), the documented
exit code, and changes nothing."""

import json

import pytest
from django.utils import timezone

from accounts.models import ApiToken
from accounts.roles import acting_as
from core.errors import DomainError
from rentals.models import Allocation, LedgerEntry, Quote
from rentals.services import allocation_book, quote_create

pytestmark = pytest.mark.django_db(transaction=True)

USAGE, NOT_FOUND, CONFLICT, PAYMENT, AUTHENTICATION = 2, 3, 4, 5, 6


def _nothing_changed():
    assert not Quote.objects.exists()
    assert not Allocation.objects.exists()
    assert not LedgerEntry.objects.exists()


def test_an_unknown_model_is_refused_naming_the_field(agpu, alice, catalog):
    agpu.login()
    ran = agpu("book", "nosuch", "--gpus", "1", "--period", "day", "--yes")
    assert ran.code == USAGE, ran
    assert ran.stderr == (
        "Error: Invalid input\n  gpu_model: Unknown or unavailable GPU model: nosuch.\n"
    )
    _nothing_changed()
    assert agpu.pending == []


def test_a_period_that_does_not_exist_is_refused_in_polish_too(agpu, alice, catalog):
    agpu.login()
    ran = agpu("--lang", "pl", "book", "l4", "--gpus", "1", "--period", "year", "--yes")
    assert ran.code == USAGE, ran
    assert ran.stderr == (
        "Błąd: Nieprawidłowe dane\n"
        "  period: Nieznany lub niedostępny element (okres wynajmu): year.\n"
    )
    _nothing_changed()
    availability = agpu("availability", "l4", "--gpus", "1", "--period", "year")
    assert availability.code == USAGE and "period:" in availability.stderr


def test_without_a_token_nothing_is_sent_and_the_answer_says_how_to_sign_in(agpu, catalog):
    ran = agpu("book", "l4", "--gpus", "1", "--period", "day", "--yes")
    assert ran.code == AUTHENTICATION, ran
    assert "Not signed in to http://" in ran.stderr and "agpu login" in ran.stderr
    _nothing_changed()
    polish = agpu("ls", env={"LANG": "pl_PL.UTF-8"})
    assert polish.code == AUTHENTICATION and polish.stderr.startswith("Błąd: Nie zalogowano")


def test_an_expired_token_is_refused_in_words(agpu, alice, catalog):
    agpu.login()
    ApiToken.objects.update(expires_at=timezone.now())
    ran = agpu("book", "l4", "--gpus", "1", "--period", "day", "--yes")
    assert ran.code == AUTHENTICATION, ran
    assert ran.stderr.startswith("Error: Invalid, expired or revoked token.\n")
    assert "agpu login" in ran.stderr
    _nothing_changed()
    assert agpu("ls", env={"AGPU_LANG": "pl"}).stderr.startswith(
        "Błąd: Nieprawidłowy, wygasły lub unieważniony token."
    )


def test_capacity_gone_between_the_quote_and_the_booking_is_a_conflict(agpu, alice, bob, catalog):
    agpu.login()
    quoted = agpu("quote", "l4", "--gpus", "4", "--period", "day", "--json")
    assert quoted.code == 0, quoted
    quote_id = json.loads(quoted.stdout)["id"]
    allocation_book(  # bob takes the node's four L4s first
        acting=acting_as(bob),
        quote=quote_create(
            acting=acting_as(bob), gpu_model="l4", gpu_count=4, period="day", period_count=1
        ),
    )
    ran = agpu("book", "--quote", quote_id, "--yes")
    assert ran.code == CONFLICT, ran
    assert ran.stderr.startswith("Error: Not enough free L4 GPUs for that period.\n")
    assert "The earliest start that fits: " in ran.stderr
    assert not Allocation.objects.filter(team__personal_for=alice).exists()
    assert not LedgerEntry.objects.filter(user=alice).exists()
    again = agpu("quote", "l4", "--gpus", "1", "--period", "day")
    assert again.code == CONFLICT and "earliest start that fits" in again.stderr


class PaymentDeclined(DomainError):
    """What the payments issue's refusal answers (402 `payment_declined`)."""

    status = 402
    code = "payment_declined"
    title = "The payment was declined"


def test_a_payment_refusal_exits_5_and_books_nothing(agpu, alice, catalog, monkeypatch):
    """Payments are not built yet: the booking service refuses as a declined card would, so
    the live server answers its real 402 problem details; agpu says so in words."""

    def declined(**kwargs):
        raise PaymentDeclined("Your card was declined: try another card.")

    monkeypatch.setattr("rentals.services.allocation_book", declined)
    agpu.login()
    ran = agpu("book", "l4", "--gpus", "1", "--period", "day", "--yes")
    assert ran.code == PAYMENT, ran
    assert ran.stderr == (
        "Error: Your card was declined: try another card.\n"
        "  The payment was refused: nothing was booked or charged.\n"
    )
    assert not Allocation.objects.exists() and not LedgerEntry.objects.exists()
    assert agpu.pending == []  # a refusal is an answer: the next run is a new purchase


def test_usage_errors_exit_2_in_the_users_language(agpu, alice, catalog):
    agpu.login()
    ran = agpu("book", "l4", "--period", "day", "--yes")
    assert ran.code == USAGE and "Error: Give either --gpus or --nodes." in ran.stderr
    polish = agpu("--lang", "pl", "book", "l4", "--gpus", "many", "--period", "day")
    assert polish.code == USAGE, polish
    assert "Błąd: Nieprawidłowa wartość dla '--gpus'" in polish.stderr
    assert agpu("show", "ffffffff").code == NOT_FOUND
    _nothing_changed()
