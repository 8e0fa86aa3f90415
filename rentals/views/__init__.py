"""Pages of the rentals layer: catalog and booking, allocations, statement."""

from typing import TYPE_CHECKING

from django.contrib import messages
from django.shortcuts import redirect
from django.utils.translation import gettext as _

from accounts.roles import Acting, acting_for_session
from core.money import money_text
from rentals.errors import KeyInFlight

if TYPE_CHECKING:
    from django_stubs_ext import StrOrPromise


def key_refused(*, back: str, in_flight: "StrOrPromise", in_flight_to: str | None = None):
    """How a purchase page answers the idempotency layer's own refusals (a bad key, the same
    purchase still in flight): a message and a way back (`back` takes the object's pk),
    never a stored response."""

    def refused(request, exc, pk):
        if isinstance(exc, KeyInFlight):
            messages.info(request, in_flight)
            return redirect(in_flight_to) if in_flight_to else redirect(back, pk=pk)
        messages.error(request, exc.detail)
        if exc.extra.get("complete_url"):  # a card asks for 3-D Secure: complete it there
            return redirect(exc.extra["complete_url"])
        return redirect(back, pk=pk)

    return refused


def requoted(request, *, expired, fresh):
    """Say that an expired quote booked nothing and show its old and new totals."""
    messages.warning(
        request,
        _("Your quote expired, so nothing was booked. Here is a new quote: %(old)s → %(new)s.")
        % {
            "old": money_text(expired.total, expired.currency),
            "new": money_text(fresh.total, fresh.currency),
        },
    )
    return redirect("quote", pk=fresh.pk)


def other_team(request, acting: Acting):
    """The team a page reads a rental as when it is not the one the person acts for (the
    rental is another of their teams'): the page says so and offers to switch to it rather
    than act for it unasked. None when it is the team they act for."""
    return acting.team if acting.team.pk != acting_for_session(request).team.pk else None
