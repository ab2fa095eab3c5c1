import logging

from celery import shared_task
from django.conf import settings
from django.db import OperationalError

from audit.log import log_checkpoint_pending, log_checkpoint_wait, log_integrate_all
from core.queue import QueueUnavailable, task_enqueue

logger = logging.getLogger(__name__)


@shared_task(
    name="audit.log_integrate",
    autoretry_for=(OperationalError,),
    retry_backoff=True,
    max_retries=3,
    ignore_result=True,
)
def log_integrate_task() -> None:
    """Integrate the releases not yet in the answer log (audit.log.log_integrate_all): many
    queued at once integrate one after another, the later ones finding nothing to do. When
    the checkpoint of what it integrated is deferred (KOINON_LOG_CHECKPOINT_SECONDS), it
    queues itself again for when one is due, so the entries never wait for a next answer."""
    log_integrate_all()
    if not settings.KOINON_LOG_KEY_FILE or not log_checkpoint_pending():
        return
    wait = log_checkpoint_wait()
    try:
        task_enqueue(log_integrate_task, countdown=max(wait, 0.5))
    except QueueUnavailable:
        logger.warning("answer log: deferred checkpoint not queued; the next sweep signs it")
