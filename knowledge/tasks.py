from celery import shared_task
from celery.exceptions import SoftTimeLimitExceeded
from django.db import OperationalError

from knowledge.models import Extraction, ExtractionStatus


@shared_task(
    name="knowledge.extract_revision",
    autoretry_for=(OperationalError,),
    retry_backoff=True,
    max_retries=3,
    soft_time_limit=300,
    time_limit=360,
)
def extract_revision(revision_id: int) -> None:
    from knowledge.documents import revision_extract

    try:
        revision_extract(revision_id=revision_id)
    except SoftTimeLimitExceeded:
        Extraction.objects.filter(revision_id=revision_id, status=ExtractionStatus.RUNNING).update(
            status=ExtractionStatus.FAILED, error_code="timeout", progress=100
        )


@shared_task(name="knowledge.embed_extraction", autoretry_for=(OperationalError,), max_retries=3)
def embed_extraction(extraction_id: int) -> None:
    from knowledge.documents import passages_embed

    extraction = Extraction.objects.filter(pk=extraction_id).first()
    if extraction is not None:
        passages_embed(extraction=extraction)
        Extraction.objects.filter(pk=extraction_id).update(progress=100)
