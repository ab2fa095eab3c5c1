"""Loaded by the suite's Celery worker (CELERY_IMPORTS in koinon.settings_test).

The same reason as tests/middleware.py: transactional tests re-create content types with
new ids, and a long-lived worker would keep the old ones cached, so its object-permission
checks would see no space at all."""

from celery.signals import task_prerun
from django.contrib.contenttypes.models import ContentType
from guardian.shortcuts import clear_ct_cache


@task_prerun.connect
def fresh_content_types(**kwargs: object) -> None:
    ContentType.objects.clear_cache()
    clear_ct_cache()
