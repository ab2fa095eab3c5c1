import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "koinon.settings")

app = Celery("koinon")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

import core.worker  # noqa: E402, F401 - heartbeat and sweeper signals
