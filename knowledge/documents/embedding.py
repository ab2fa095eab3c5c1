"""Documents, third step: the passages of an admitted extraction embedded, in turns, and
embedded again when the embedding model changes.

The provider is knowledge.embeddings' (read through the module, so that it can be swapped); the
work is queued as the worker's tasks (knowledge.tasks) by name, through core.queue.
"""

import logging
import time
from datetime import datetime
from typing import Literal

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from core.queue import QueueUnavailable, task_enqueue, task_named
from core.worker import redis_client
from knowledge import embeddings
from knowledge.documents.progress import extraction_set
from knowledge.models import EmbeddingStatus, Extraction, Passage
from knowledge.selectors import (
    embeddings_of_another_model_exist,
    extractions_embedding_stalled,
    passages_embedded_by_another_model,
)

logger = logging.getLogger(__name__)

EMBED_BATCH = 64
# Extractions the sweeper queues for embedding again in one sweep.
EMBED_RESUME_AT_ONCE = 100

EmbedOutcome = Literal["done", "more", "unavailable"]


def passages_embed(*, extraction: Extraction, seconds: float | None = None) -> EmbedOutcome:
    """Embed the extraction's waiting passages a batch at a time, for up to `seconds`.

    Waiting = not embedded yet: pending, or left `embedding_unavailable` by an earlier
    try. Each batch is committed on its own, so a time limit or a dead worker loses one
    batch at most, and the extraction's heartbeat and progress move with every batch
    (`extractions_embedding_stalled` reads them). Rows another worker is embedding are
    skipped (locked until its batch commits). Returns "done" when nothing is left that
    no one is embedding, "more" when `seconds` ran out first (None: no limit), and
    "unavailable" when the provider failed: what was waiting is then marked
    `embedding_unavailable` (keyword search still finds it) and the sweeper
    (embeddings_resume) tries again later.
    """
    deadline = None if seconds is None else time.monotonic() + seconds
    waiting = extraction.passages.exclude(embedding_status=EmbeddingStatus.EMBEDDED)
    total = extraction.passages.count()
    try:
        provider = embeddings.get_embedding_provider()
        while True:
            with transaction.atomic():
                batch = list(
                    waiting.select_for_update(skip_locked=True)
                    .only("pk", "text")
                    .order_by("ordinal")[:EMBED_BATCH]
                )
                if not batch:
                    return "done"
                vectors = provider.embed([passage.text for passage in batch])
                for passage, vector in zip(batch, vectors, strict=True):
                    passage.embedding = vector
                    passage.embedding_model = provider.model_id
                    passage.embedding_dimension = provider.dimension
                    passage.embedding_status = EmbeddingStatus.EMBEDDED
                Passage.objects.bulk_update(
                    batch,
                    ["embedding", "embedding_model", "embedding_dimension", "embedding_status"],
                )
            left = waiting.count()
            extraction_set(extraction, progress=30 + int(69 * (total - left) / max(total, 1)))
            if not left:
                return "done"
            if deadline is not None and time.monotonic() >= deadline:
                return "more"
    except embeddings.EmbeddingError as error:
        logger.warning("embedding unavailable for extraction %s: %s", extraction.pk, error.code)
        waiting.filter(embedding_status=EmbeddingStatus.PENDING).update(
            embedding_status=EmbeddingStatus.UNAVAILABLE
        )
        return "unavailable"


def extraction_embed(*, extraction: Extraction) -> EmbedOutcome:
    """One turn of embedding an admitted extraction: KOINON_EMBED_SECONDS at most.

    Work left when the time is up goes back to the queue as a task of its own, behind
    whatever arrived meanwhile, so a file of 100k passages neither holds a worker
    process for minutes nor meets the task's time limit. Finished (or the provider
    away: keyword-only until the sweeper's next try) ends the progress at 100.
    """
    outcome = passages_embed(extraction=extraction, seconds=settings.KOINON_EMBED_SECONDS)
    if outcome != "more":
        extraction_set(extraction, progress=100)
        return outcome
    try:
        task_enqueue(task_named("knowledge.embed_extraction"), extraction.pk)
    except QueueUnavailable:
        logger.warning("extraction %s: embedding not queued again; the sweeper will", extraction.pk)
    return outcome


def embeddings_resume(*, now: datetime | None = None) -> list[int]:
    """The sweeper: queue again the embedding of extractions no worker is moving.

    An admitted extraction with passages still waiting for a vector and no heartbeat for
    KOINON_EXTRACT_STALE_AFTER seconds lost its task (a time limit, a dead worker, a
    broker restart) or met an unavailable provider. Its heartbeat is renewed as it is
    queued, so a provider that is still away is tried once per that interval. Rows
    another sweeper holds are skipped. Returns the extraction ids queued.
    """
    now = now or timezone.now()
    with transaction.atomic():
        stalled = list(
            extractions_embedding_stalled(now=now)
            .select_for_update(skip_locked=True)
            .order_by("pk")
            .values_list("pk", flat=True)[:EMBED_RESUME_AT_ONCE]
        )
        Extraction.objects.filter(pk__in=stalled).update(heartbeat_at=now)
    queued = []
    for extraction_id in stalled:
        try:
            task_enqueue(task_named("knowledge.embed_extraction"), extraction_id)
        except QueueUnavailable:
            break
        queued.append(extraction_id)
    if stalled:
        logger.warning("sweeper: embedding of extraction(s) %s queued again", queued)
    return queued


def passages_embed_stale(*, limit: int = EMBED_BATCH) -> int:
    """Embed again up to `limit` passages whose vector came from another model.

    Returns how many were embedded. Rows that another worker is embedding are skipped
    (locked until its transaction ends), so several workers share the work. An
    unavailable provider raises EmbeddingError and changes nothing: the old vectors stay.
    """
    provider = embeddings.get_embedding_provider()
    with transaction.atomic():
        batch = list(
            passages_embedded_by_another_model(model_id=provider.model_id)
            .select_for_update(skip_locked=True)
            .only("pk", "text")
            .order_by("pk")[:limit]
        )
        if not batch:
            return 0
        vectors = provider.embed([passage.text for passage in batch])
        for passage, vector in zip(batch, vectors, strict=True):
            passage.embedding = vector
            passage.embedding_model = provider.model_id
            passage.embedding_dimension = provider.dimension
        Passage.objects.bulk_update(batch, ["embedding", "embedding_model", "embedding_dimension"])
    return len(batch)


EMBEDDINGS_REFRESH_KEY = "koinon:embeddings-refresh"


def embeddings_refresh_schedule() -> bool:
    """Queue one refresh of stale vectors, unless none are stale or one is queued or running.

    Called by every worker's sweeper. A Redis key (set if absent, with an expiry that
    outlives a refresh) keeps it to one at a time; a worker that dies mid-refresh leaves
    the key to expire and a later sweep queues the refresh again. Returns whether it queued.
    """
    model_id = embeddings.get_embedding_provider().model_id
    if not embeddings_of_another_model_exist(model_id=model_id):
        return False
    client = redis_client()
    expiry = int(settings.KOINON_EMBEDDINGS_REFRESH_SECONDS + 2 * settings.KOINON_SWEEP_INTERVAL)
    if not client.set(EMBEDDINGS_REFRESH_KEY, model_id, nx=True, ex=max(expiry, 60)):
        return False
    try:
        task_enqueue(task_named("knowledge.refresh_embeddings"))
    except QueueUnavailable:
        client.delete(EMBEDDINGS_REFRESH_KEY)
        return False
    return True


def embeddings_refresh() -> int:
    """Embed stale passages for up to KOINON_EMBEDDINGS_REFRESH_SECONDS, then make way.

    When time runs out with work left, the refresh queues itself again behind the tasks
    that arrived meanwhile (uploads are not held up for hours by a model change).
    Returns how many passages were embedded.
    """
    deadline = time.monotonic() + settings.KOINON_EMBEDDINGS_REFRESH_SECONDS
    done, left = 0, True
    try:
        while time.monotonic() < deadline:
            count = passages_embed_stale()
            done += count
            if not count:
                left = False
                break
    except embeddings.EmbeddingError as error:
        logger.warning("embeddings refresh stopped: %s", error.code)
        left = False  # the next sweep tries again
    finally:
        redis_client().delete(EMBEDDINGS_REFRESH_KEY)
    if done:
        logger.info("embeddings refresh: %d passage(s) embedded with the current model", done)
    if left:
        embeddings_refresh_schedule()
    return done
