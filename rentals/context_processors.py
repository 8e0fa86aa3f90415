"""The unread notices count beside the header's bell."""

from rentals.selectors.notices import notices_unread_count


def notices(request):
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {}
    return {"unread_notices": notices_unread_count(user=user)}
