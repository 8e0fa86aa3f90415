"""The Celery app. Reliability defaults live in settings (CELERY_*); the beat schedule is here."""

import os

from celery import Celery

from anchorgpu.schedule import beat_schedule

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "anchorgpu.settings")

app = Celery("anchorgpu")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@app.on_after_finalize.connect
def _beat_schedule(sender, **kwargs):
    sender.conf.beat_schedule = beat_schedule()
