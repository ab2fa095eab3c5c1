"""Documents, second step: a revision's two readings extracted, one of them chunked into
passages that the document then serves.

Queued by the upload (`revision_queue_extraction`), run by the worker's task
(knowledge.tasks.extract_revision → `revision_extract`), given back to the queue by the sweeper
(`extractions_recover`). The serving reading's passages go on to be embedded
(knowledge.documents.embedding).
"""

import hashlib
import logging
from datetime import datetime

from django.conf import settings
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from core.errors import NotFoundError, ServiceUnavailableError, UnprocessableError
from core.queue import QueueUnavailable, task_enqueue, task_named
from knowledge.chunking import chunk
from knowledge.documents.embedding import extraction_embed
from knowledge.documents.progress import extraction_set, revision_heartbeat
from knowledge.extraction import ExtractionError, ExtractionResult, Limits
from knowledge.extraction.damage import extraction_damage, serving_role
from knowledge.extraction.isolated import extract_isolated
from knowledge.frequencies import lexeme_frequencies_shift
from knowledge.models import (
    Document,
    DocumentRevision,
    Extraction,
    ExtractionRole,
    ExtractionStatus,
    Passage,
)
from knowledge.normalise import normalised_key
from knowledge.selectors import extractions_stale

logger = logging.getLogger(__name__)


def revision_queue_extraction(*, revision: DocumentRevision) -> None:
    """Queue the revision's pending extractions once the current transaction commits.

    Raises ServiceUnavailableError (503, `extraction_delayed`) *after* the commit
    when the broker does not take the message within KOINON_ENQUEUE_TIMEOUT: the
    revision is stored, and the worker's sweeper queues it again later.
    """
    revision.extractions.filter(status=ExtractionStatus.PENDING).update(queued_at=timezone.now())
    revision_id, document_id = revision.pk, revision.document_id
    transaction.on_commit(lambda: _enqueue_extraction(revision_id, document_id))


def _enqueue_extraction(revision_id: int, document_id: int) -> None:
    try:
        task_enqueue(task_named("knowledge.extract_revision"), revision_id)
    except QueueUnavailable:
        raise ServiceUnavailableError(
            "The document was stored. Its text will be extracted automatically once the "
            "task queue is reachable again; nothing needs to be uploaded again.",
            code="extraction_delayed",
            fields={"document": str(document_id), "revision": str(revision_id)},
        ) from None


@transaction.atomic
def revision_retry_extraction(*, revision: DocumentRevision) -> None:
    """Reset failed and stuck (see extractions_stale) extractions to pending, queue again.

    While no extraction of the revision serves passages, an admitted one is read again
    too: which reading serves is chosen among readings at hand (revision_extract), so a
    clean secondary admitted next to a failed primary can still serve.
    Raises UnprocessableError `not_failed` when every extraction is admitted or
    still making progress.
    """
    stuck = extractions_stale().filter(revision=revision).values("pk")
    retry = revision.extractions.filter(Q(status=ExtractionStatus.FAILED) | Q(pk__in=stuck))
    if not retry.exists():
        raise UnprocessableError(
            "Nothing to retry: no extraction failed or is stuck.", code="not_failed"
        )
    if not revision.extractions.filter(serves_passages=True).exists():
        retry = revision.extractions.filter(
            Q(status=ExtractionStatus.FAILED)
            | Q(pk__in=stuck)
            | Q(status=ExtractionStatus.ADMITTED)
        )
    retry.update(status=ExtractionStatus.PENDING, error_code="", progress=0, heartbeat_at=None)
    revision_queue_extraction(revision=revision)


def extractions_recover(*, now: datetime | None = None) -> list[int]:
    """The sweeper: give lost extraction work back to the queue.

    Stale pending rows are queued again. Stale running rows (their worker died) go
    back to pending, unless they already had KOINON_EXTRACT_MAX_ATTEMPTS attempts:
    a file that keeps killing workers ends `failed` with `timeout`. Rows locked by
    another sweeper are skipped. Returns the ids of the revisions queued again;
    a broker that is down leaves them pending for the next sweep.
    """
    now = now or timezone.now()
    with transaction.atomic():
        stale = list(
            extractions_stale(now=now)
            .select_for_update(skip_locked=True)
            .only("pk", "revision_id", "status", "attempts")
        )
        exhausted = {
            e.pk
            for e in stale
            if e.status == ExtractionStatus.RUNNING
            and e.attempts >= settings.KOINON_EXTRACT_MAX_ATTEMPTS
        }
        Extraction.objects.filter(pk__in=exhausted).update(
            status=ExtractionStatus.FAILED, error_code="timeout", progress=100, finished_at=now
        )
        revived = [e for e in stale if e.pk not in exhausted]
        Extraction.objects.filter(pk__in=[e.pk for e in revived]).update(
            status=ExtractionStatus.PENDING, progress=0, queued_at=now, heartbeat_at=None
        )
    revision_ids = sorted({e.revision_id for e in revived})
    for revision_id in revision_ids:
        try:
            task_enqueue(task_named("knowledge.extract_revision"), revision_id)
        except QueueUnavailable:
            break
    if stale:
        logger.warning(
            "sweeper: %d stale extraction(s), %d failed, revisions %s queued again",
            len(stale),
            len(exhausted),
            revision_ids,
        )
    return revision_ids


def revision_fail_unfinished(*, revision_id: int, code: str) -> int:
    """End every pending or running extraction of a revision `failed` with `code`.

    For the task's time limit: nothing of the revision may be left looking busy.
    """
    return Extraction.objects.filter(
        revision_id=revision_id,
        status__in=[ExtractionStatus.PENDING, ExtractionStatus.RUNNING],
    ).update(
        status=ExtractionStatus.FAILED, error_code=code, progress=100, finished_at=timezone.now()
    )


def _claim(extraction: Extraction) -> bool:
    """Take a pending extraction for this worker; False when another one has it."""
    claimed = Extraction.objects.filter(pk=extraction.pk, status=ExtractionStatus.PENDING).update(
        status=ExtractionStatus.RUNNING,
        attempts=F("attempts") + 1,
        progress=5,
        heartbeat_at=timezone.now(),
    )
    if claimed:
        # What the UPDATE wrote, without reading the row back: `attempts` is not read here.
        extraction.status, extraction.progress = ExtractionStatus.RUNNING, 5
    return bool(claimed)


def _limits() -> Limits:
    return Limits(
        max_chars=settings.KOINON_EXTRACT_MAX_CHARS,
        max_pages=settings.KOINON_EXTRACT_MAX_PAGES,
        max_decompressed=settings.KOINON_EXTRACT_MAX_DECOMPRESSED,
        max_elements=settings.KOINON_EXTRACT_MAX_ELEMENTS,
    )


def revision_extract(*, revision_id: int) -> None:
    """Run both extractions of a revision, then passages and embeddings of the serving one.

    Only pending extractions are claimed (atomically), so a duplicate message for
    the same revision does nothing twice. The claimed roles are read from one payload,
    each in its own child process bounded by KOINON_EXTRACT_TIMEOUT and
    KOINON_EXTRACT_MEMORY_BYTES (knowledge.extraction.isolated, the way chosen by
    KOINON_EXTRACT_ISOLATION); while they run, the rows get heartbeats. Each role's
    failure is recorded on its own row.

    Every admitted text gets its damage measured (knowledge.extraction.damage), and the
    readings are admitted together in one transaction, with the passages of the one that
    serves them (see `_serving_choose`). Both rows are finished before those passages are
    embedded, so the other reading never waits on the embedding.
    """
    try:
        revision = DocumentRevision.objects.select_related("document").get(pk=revision_id)
    except DocumentRevision.DoesNotExist:
        raise NotFoundError("Revision not found.") from None
    claimed = [e for e in revision.extractions.order_by("role") if _claim(e)]
    if not claimed:
        return
    with revision.file.open("rb") as handle:
        data = handle.read()
    outcomes = extract_isolated(
        revision.document.kind,
        data,
        roles=[extraction.role for extraction in claimed],
        limits=_limits(),
        timeout=settings.KOINON_EXTRACT_TIMEOUT,
        memory_bytes=settings.KOINON_EXTRACT_MEMORY_BYTES,
        isolation=settings.KOINON_EXTRACT_ISOLATION,
        on_wait=lambda: revision_heartbeat(revision_id),
        wait_interval=settings.KOINON_WORKER_HEARTBEAT_INTERVAL,
    )
    admitted: dict[str, tuple[Extraction, ExtractionResult, float]] = {}
    for extraction in claimed:
        result = outcomes[extraction.role]
        if isinstance(result, ExtractionError):
            extraction_set(
                extraction,
                status=ExtractionStatus.FAILED,
                error_code=result.code,
                progress=100,
                finished_at=timezone.now(),
            )
            continue
        admitted[extraction.role] = (extraction, result, extraction_damage(result.text))
    if not admitted:
        return
    serving = None
    with transaction.atomic():
        serving_role = _serving_choose(
            revision=revision,
            damages={role: damage for role, (_, _, damage) in admitted.items()},
        )
        # One UPDATE per row: inside the transaction no one sees a step in between. The
        # other reading is done; the serving one's passages still have to be embedded.
        for role, (extraction, result, damage) in admitted.items():
            serves = role == serving_role
            if serves:
                extraction.text = result.text  # saved below, with the rest
                passages_create(extraction=extraction, revision=revision, segments=result.segments)
                serving = extraction
            extraction_set(
                extraction,
                extractor=result.extractor,
                extractor_version=result.extractor_version[:32],
                text=result.text,
                text_sha256=hashlib.sha256(result.text.encode()).hexdigest(),
                norm_text=normalised_key(result.text),
                damage=damage,
                serves_passages=serves,
                status=ExtractionStatus.ADMITTED,
                finished_at=timezone.now(),
                progress=30 if serves else 100,
            )
    if serving is not None:
        document_point_to(revision=revision)
        extraction_embed(extraction=serving)


def _serving_choose(*, revision: DocumentRevision, damages: dict[str, float]) -> str | None:
    """Which of the readings admitted now (role → damage) serves passages, if any.

    Precondition: inside the admitting transaction; the revision's extraction rows are
    locked here, so two workers finishing one role each cannot both pick theirs. Nothing
    new serves once a reading of the revision serves (passages are never moved). A reading
    admitted in an earlier run informs the choice, but only one at hand can serve: its
    segments (page locators) are not kept. The retry re-reads an admitted reading too
    while none serves (revision_retry_extraction), so the choice normally sees both.
    """
    rows = Extraction.objects.select_for_update().filter(revision=revision).order_by("role")
    earlier = [e for e in rows if e.status == ExtractionStatus.ADMITTED and e.role not in damages]
    if any(e.serves_passages for e in earlier):
        return None
    known = {e.role: e.damage for e in earlier} | dict(damages)
    choice = serving_role(known, threshold=settings.KOINON_EXTRACTION_DAMAGE_THRESHOLD)
    if choice is None or choice in damages:
        return choice
    logger.warning(
        "revision %s: the clean %s reading was admitted earlier; the damaged primary serves",
        revision.pk,
        choice,
    )
    return ExtractionRole.PRIMARY if ExtractionRole.PRIMARY in damages else None


def passages_create(*, extraction: Extraction, revision: DocumentRevision, segments: list) -> None:
    """Chunk an admitted text into passages (not yet embedded)."""
    document = revision.document
    spans = chunk(extraction.text, segments)
    Passage.objects.bulk_create(
        [
            Passage(
                extraction=extraction,
                revision=revision,
                document=document,
                space_id=document.space_id,
                owner_id=document.owner_id,
                ordinal=ordinal,
                char_start=span.char_start,
                char_end=span.char_end,
                text=extraction.text[span.char_start : span.char_end],
                locator=span.locator,
            )
            for ordinal, span in enumerate(spans)
        ],
        batch_size=500,
    )


def document_point_to(*, revision: DocumentRevision) -> None:
    """The newest admitted revision becomes the one retrieval reads."""
    with transaction.atomic():
        document = Document.objects.select_for_update().get(pk=revision.document_id)
        current = document.current_revision
        if current is None or current.number < revision.number:
            document_set_current(document=document, revision=revision)


def document_set_current(*, document: Document, revision: DocumentRevision) -> None:
    """Point the document at revision; only its passages stay marked current (none while
    the document is withdrawn: knowledge.lifecycle).

    Precondition: the caller holds the document's row lock. The flag duplicates
    `document.current_revision` so that retrieval filters on one column of the
    passage table, which lets PostgreSQL use the HNSW index for filtered queries.
    The space's lexeme counts (knowledge.frequencies) move with it.
    """
    document.current_revision = revision
    document.save(update_fields=["current_revision"])
    if document.withdrawn_at is not None:
        return  # a new revision of a withdrawn document waits, unsearched, for a restore
    lexeme_frequencies_shift(document=document, revision=revision)
    Passage.objects.filter(document=document, is_current=True).exclude(revision=revision).update(
        is_current=False
    )
    Passage.objects.filter(revision=revision).update(is_current=True)
