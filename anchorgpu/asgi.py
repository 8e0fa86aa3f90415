import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "anchorgpu.settings")
application = get_asgi_application()

from anchorgpu.production import refuse_unsafe_settings  # noqa: E402  (needs the settings)

refuse_unsafe_settings()
