"""What staff pages say of invoices: the ones held for an exchange rate (the staff dashboard
and the admin's front page show them)."""

from django.utils.functional import SimpleLazyObject

from invoices.selectors import invoices_held


def held_invoices(request):
    """`held_invoices` for staff, read only where a page shows it."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated or not user.is_staff:
        return {}
    return {"held_invoices": SimpleLazyObject(invoices_held)}
