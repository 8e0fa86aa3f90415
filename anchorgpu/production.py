"""What production serving refuses to start with: debug on, a short secret key, plain HTTP.

`anchorgpu.wsgi` and `anchorgpu.asgi` call this before they serve a request. A local,
non-public run (`make run`, the benchmarks) says so with DJANGO_ALLOW_INSECURE=true.
"""

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

MIN_SECRET_KEY_LENGTH = 50


def refuse_unsafe_settings() -> None:
    if settings.ALLOW_INSECURE:
        return
    problems = []
    if settings.DEBUG:
        problems.append("DJANGO_DEBUG is on")
    if len(settings.SECRET_KEY) < MIN_SECRET_KEY_LENGTH or len(set(settings.SECRET_KEY)) < 5:
        problems.append(f"DJANGO_SECRET_KEY is shorter than {MIN_SECRET_KEY_LENGTH} characters")
    if not settings.SECURE:
        problems.append("DJANGO_SECURE is off (HTTPS only, secure cookies, HSTS)")
    if problems:
        raise ImproperlyConfigured(
            "Refusing to serve: "
            + "; ".join(problems)
            + ". Set DJANGO_ALLOW_INSECURE=true only for a local, non-public run."
        )
