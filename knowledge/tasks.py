import logging

from celery import shared_task
from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import OperationalError, connection

from knowledge.documents.embedding import embeddings_refresh, extraction_embed
from knowledge.documents.extraction import revision_extract, revision_fail_unfinished
from knowledge.models import DocumentRevision, Extraction, ExtractionStatus, Space
from knowledge.turns import extraction_turn

logger = logging.getLogger(__name__)


@shared_task(name="knowledge.worker_probe")
def worker_probe(token: str) -> dict:
    """Echo a token with what the worker sees of the database (and as whom): the round trip."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_database(), current_user")
        database, role = cursor.fetchone()
    return {"token": token, "database": database, "role": role, "spaces": Space.objects.count()}


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
    """Extract a revision when its uploader has a free slot (knowledge.turns); else
    queue it again a little later (it stays pending; the sweeper also requeues it)."""
    uploader = (
        DocumentRevision.objects.filter(pk=revision_id)
        .values_list("uploaded_by_id", flat=True)
        .first()
    )
    with extraction_turn(uploader) as turn:
        if not turn:
            _defer(revision_id)
            return
        try:
            revision_extract(revision_id=revision_id)
        except SoftTimeLimitExceeded:
            revision_fail_unfinished(revision_id=revision_id, code="timeout")


def _defer(revision_id: int) -> None:
    try:
        extract_revision.apply_async((revision_id,), countdown=settings.KOINON_EXTRACT_DEFER)
    except Exception:  # a broker away: the sweeper queues the pending rows again
        logger.warning("revision %s: not queued again; the sweeper will", revision_id)


@shared_task(
    name="knowledge.embed_extraction",
    autoretry_for=(OperationalError,),
    max_retries=3,
    # A turn lasts KOINON_EMBED_SECONDS plus one batch; the limit only catches a stuck one.
    soft_time_limit=240,
    time_limit=300,
    ignore_result=True,
)
def embed_extraction(extraction_id: int) -> None:
    """One turn of embedding an admitted extraction
    (knowledge.documents.embedding.extraction_embed)."""
    extraction = Extraction.objects.filter(
        pk=extraction_id, status=ExtractionStatus.ADMITTED
    ).first()
    if extraction is None:
        return
    try:
        extraction_embed(extraction=extraction)
    except SoftTimeLimitExceeded:
        # The batch under way rolled back; what is left waits, and the sweeper
        # (embeddings_resume) queues it again once the heartbeat is stale.
        logger.warning("extraction %s: embedding turn over its time limit", extraction_id)


@shared_task(
    name="knowledge.refresh_embeddings",
    autoretry_for=(OperationalError,),
    max_retries=3,
    ignore_result=True,
)
def refresh_embeddings() -> None:
    embeddings_refresh()
