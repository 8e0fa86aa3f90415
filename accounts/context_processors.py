"""The team switcher in the header: the signed-in person's teams and the one they act for."""

from accounts.roles import acting_for_session
from accounts.services.teams import teams_of


def teams(request):
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {}
    return {
        "acting": acting_for_session(request),
        "my_teams": list(teams_of(user=user)),
    }
