from celery import shared_task
from django.db import OperationalError

from audit.log import log_integrate_all


@shared_task(
    name="audit.log_integrate",
    autoretry_for=(OperationalError,),
    retry_backoff=True,
    max_retries=3,
    ignore_result=True,
)
def log_integrate_task() -> None:
    """Integrate the releases not yet in the answer log (audit.log.log_integrate_all): many
    queued at once integrate one after another, the later ones finding nothing to do."""
    log_integrate_all()
