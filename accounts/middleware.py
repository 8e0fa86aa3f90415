"""Pages in the signed-in person's preferred language (kept in the session at sign-in and by
the language switch), whatever the browser asks for."""

from django.utils import translation

SESSION_KEY = "preferred_language"


class PreferredLanguage:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        language = getattr(request, "session", {}).get(SESSION_KEY)
        if language and request.user.is_authenticated:
            translation.activate(language)
            request.LANGUAGE_CODE = language
        return self.get_response(request)
