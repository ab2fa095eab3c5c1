from celery import shared_task
from celery.exceptions import SoftTimeLimitExceeded
from django.db import OperationalError

from knowledge.models import Extraction


@shared_task(
    name="knowledge.extract_revision",
    autoretry_for=(OperationalError,),
    retry_backoff=True,
    max_retries=3,
    soft_time_limit=300,
    time_limit=360,
    # Nobody reads the result; storing it would make enqueueing wait on the backend too.
    ignore_result=True,
)
def extract_revision(revision_id: int) -> None:
    from knowledge.documents import revision_extract, revision_fail_unfinished

    try:
        revision_extract(revision_id=revision_id)
    except SoftTimeLimitExceeded:
        revision_fail_unfinished(revision_id=revision_id, code="timeout")


@shared_task(name="knowledge.embed_extraction", autoretry_for=(OperationalError,), max_retries=3)
def embed_extraction(extraction_id: int) -> None:
    from knowledge.documents import passages_embed

    extraction = Extraction.objects.filter(pk=extraction_id).first()
    if extraction is not None:
        passages_embed(extraction=extraction)
        Extraction.objects.filter(pk=extraction_id).update(progress=100)


@shared_task(
    name="knowledge.refresh_embeddings",
    autoretry_for=(OperationalError,),
    max_retries=3,
    ignore_result=True,
)
def refresh_embeddings() -> None:
    from knowledge.documents import embeddings_refresh

    embeddings_refresh()
