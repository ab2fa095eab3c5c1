"""Publishing Celery tasks from request threads without ever waiting unboundedly."""

import logging

from celery import Task, current_app
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from kombu.exceptions import KombuError, LimitExceeded, OperationalError
from redis.exceptions import RedisError

logger = logging.getLogger(__name__)


class QueueUnavailable(Exception):
    """The task could not be handed to the broker within KOINON_ENQUEUE_TIMEOUT."""


def task_named(name: str) -> Task[..., object]:
    """The Celery task registered as `name` (its `@shared_task(name=...)`): how a service
    queues its own app's task without importing the tasks module, which imports the service
    (tasks call services, never the reverse). Every app's `AppConfig.ready()` imports its
    tasks, so each process (web or worker) has them registered; a name nobody registered is
    a wiring mistake and fails loudly."""
    try:
        return current_app.tasks[name]
    except KeyError:
        raise ImproperlyConfigured(
            f"No installed app registers the Celery task {name!r}."
        ) from None


def task_enqueue(task: Task[..., object], *args: object, countdown: float | None = None) -> None:
    """Publish task(*args) on a connection of the app's shared broker pool.

    Waits at most KOINON_ENQUEUE_TIMEOUT for a pooled connection and retries the
    publication once, so a busy pool or a broker that is down costs seconds, not a
    hung request. (Celery's own producer pool waits for its connection without any
    bound.) `countdown`: run it no sooner than that many seconds from now. Raises
    QueueUnavailable; the caller decides what it tells the user.
    """
    timeout = settings.KOINON_ENQUEUE_TIMEOUT
    try:
        with task.app.pool.acquire(block=True, timeout=timeout) as connection:
            # Celery's **options take `connection`; celery-types lists only the named options
            # (and types countdown without its None, which Celery reads as "now").
            task.apply_async(  # type: ignore[call-arg]
                args=args,
                countdown=countdown,  # type: ignore[arg-type]  # None: now
                connection=connection,
                retry=True,
                retry_policy={
                    "max_retries": 1,
                    "interval_start": 0,
                    "interval_step": 0.5,
                    "interval_max": 0.5,
                },
            )
    except (LimitExceeded, OperationalError, KombuError, RedisError, OSError) as error:
        logger.warning("could not queue %s%r: %s", task.name, args, type(error).__name__)
        raise QueueUnavailable(task.name) from error
