"""The signed-in person's language and time zone, kept in the session at sign-in and when
they change them, so no request reads the profile.

Language: a `?lang=` parameter (scripts, shared links) wins; then the person's preference;
then Django's LocaleMiddleware has already read the cookie or `Accept-Language`.
Time zone: the person's preference, else UTC. Pages show times in it, with UTC on hover.
"""

import zoneinfo

from django.conf import settings
from django.utils import timezone, translation

SESSION_KEY = "preferred_language"
TIME_ZONE_SESSION_KEY = "preferred_time_zone"
LANGUAGES = frozenset(code for code, _name in settings.LANGUAGES)


def preferences_remember(request, *, language: str | None, time_zone: str | None) -> None:
    for key, value in ((SESSION_KEY, language), (TIME_ZONE_SESSION_KEY, time_zone)):
        if value:
            request.session[key] = value
        else:
            request.session.pop(key, None)


class PreferredLanguage:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        session = getattr(request, "session", {})
        signed_in = request.user.is_authenticated
        language = request.GET.get("lang")
        if language not in LANGUAGES:
            language = session.get(SESSION_KEY) if signed_in else None
        if language:
            translation.activate(language)
            request.LANGUAGE_CODE = language
        zone = session.get(TIME_ZONE_SESSION_KEY) if signed_in else None
        if zone:
            try:
                timezone.activate(zoneinfo.ZoneInfo(zone))
            except (zoneinfo.ZoneInfoNotFoundError, ValueError):
                timezone.deactivate()
        else:
            timezone.deactivate()
        return self.get_response(request)
