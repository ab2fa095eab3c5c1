"""Documents: upload, revisions, extraction and passages (services)."""

import hashlib
import logging
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import PurePath
from typing import Literal

from django.conf import settings
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from core.errors import (
    ConflictError,
    ForbiddenError,
    NotFoundError,
    PayloadTooLargeError,
    ServiceUnavailableError,
    UnprocessableError,
    writing,
)
from core.queue import QueueUnavailable, task_enqueue
from core.types import User
from knowledge.chunking import chunk
from knowledge.display import title_clean
from knowledge.extraction import ExtractionError, ExtractionResult, Limits, detect_format
from knowledge.extraction.damage import extraction_damage, serving_role
from knowledge.extraction.isolated import extract_isolated
from knowledge.frequencies import lexeme_frequencies_shift
from knowledge.models import (
    Document,
    DocumentRevision,
    EmbeddingStatus,
    Erasure,
    Extraction,
    ExtractionRole,
    ExtractionStatus,
    Passage,
    Space,
)
from knowledge.normalise import normalised_key
from knowledge.selectors import (
    embeddings_of_another_model_exist,
    extractions_embedding_stalled,
    extractions_stale,
    passages_embedded_by_another_model,
    space_can_manage,
    spaces_visible_to,
)

logger = logging.getLogger(__name__)

EMBED_BATCH = 64
# Extractions the sweeper queues for embedding again in one sweep.
EMBED_RESUME_AT_ONCE = 100


@dataclass(frozen=True)
class UploadResult:
    document: Document
    revision: DocumentRevision
    created: bool  # False when identical bytes already were a revision


def _title_from(filename: str) -> str:
    return title_clean(PurePath(filename).stem.replace("_", " ")) or "Untitled"


def document_change_check(
    *,
    user: User,
    space: Space | None,
    private: bool = False,
    document: Document | None = None,
) -> None:
    """The one role check for adding, revising, withdrawing and restoring documents.

    Shared documents: the space must be visible to user (else NotFoundError, as if it did
    not exist) and user one of its curators or a superuser (else ForbiddenError); a
    document named must be in that space. Private files: only their owner.
    """
    if private:
        if space is not None:
            raise UnprocessableError("A private file belongs to no space.", code="invalid")
        if document is not None and (document.space_id or document.owner_id != user.pk):
            raise NotFoundError("Document not found.")
        return
    if space is None:
        raise UnprocessableError(
            "Give a space, or upload a private file.", code="invalid", fields={"space": "Required."}
        )
    if not spaces_visible_to(user=user).filter(pk=space.pk).exists():
        raise NotFoundError("Space not found.")
    if not space_can_manage(user=user, space=space):
        raise ForbiddenError("Only curators of this space add or change its documents.")
    if document is not None and document.space_id != space.pk:
        raise NotFoundError("Document not found.")


def document_upload(
    *,
    user: User,
    filename: str,
    data: bytes,
    space: Space | None = None,
    private: bool = False,
    title: str = "",
    document: Document | None = None,
) -> UploadResult:
    """Store the bytes as a revision and queue its extraction.

    Every way in (API, chat, admin, `ingest`) comes here, and here the acting user's
    role is checked (`document_change_check`): a space's documents are added and revised
    by its curators (and superusers), a private file by its owner.
    Identical bytes for the same document return the existing revision unchanged (a
    ConflictError `revision_erased` when that revision's text was erased).
    Raises NotFoundError (the space or document is not visible to user), ForbiddenError
    (visible, not theirs to change), PayloadTooLargeError (nothing stored) and
    UnprocessableError with code `unsupported_type` when the name or content is not a
    supported format. The database lost before the commit: WriteNotSaved naming the file,
    nothing written, and the bytes already stored for it deleted again (a retry stores
    them anew; no copy is left that an erasure would not find).
    """
    stored: list[str] = []
    finished = False
    try:
        with writing(f"the upload of “{PurePath(filename).name}”"), transaction.atomic():
            result = _upload(
                user=user,
                filename=filename,
                data=data,
                space=space,
                private=private,
                title=title,
                document=document,
                stored=stored,
            )
            # Past this point a lost connection may have lost the COMMIT or not; the file
            # stays, as the revision may exist (the retry then finds it by its bytes).
            finished = True
    except BaseException:
        if not finished:
            for name in stored:
                default_storage.delete(name)
        raise
    return result


def _upload(
    *,
    user: User,
    filename: str,
    data: bytes,
    space: Space | None,
    private: bool,
    title: str,
    document: Document | None,
    stored: list[str],
) -> UploadResult:
    document_change_check(user=user, space=space, private=private, document=document)
    if len(data) > settings.KOINON_UPLOAD_MAX_BYTES:
        raise PayloadTooLargeError(
            f"The file is larger than {settings.KOINON_UPLOAD_MAX_BYTES} bytes.", code="too_large"
        )
    if not data:
        raise UnprocessableError("The file is empty.", code="no_text", fields={"file": "Empty."})
    try:
        kind = detect_format(filename, data)
    except ExtractionError as error:
        raise UnprocessableError(str(error), code=error.code, fields={"file": str(error)}) from None
    sha256 = hashlib.sha256(data).hexdigest()

    if document is None:
        # The same bytes already uploaded to the same place are the same document.
        existing = (
            DocumentRevision.objects.select_related("document")
            .filter(sha256=sha256, document__space=space)
            .filter(document__owner=user if private else None)
            .first()
        )
        if existing is not None:
            _refuse_erased(existing)
            return UploadResult(existing.document, existing, created=False)
        document = Document.objects.create(
            space=None if private else space,
            owner=user if private else None,
            title=title_clean(title) or _title_from(filename),
            kind=kind,
            created_by=user,
        )
    else:
        document = Document.objects.select_for_update().get(pk=document.pk)
        existing = document.revisions.filter(sha256=sha256).first()
        if existing is not None:
            _refuse_erased(existing)
            return UploadResult(document, existing, created=False)
        if title_clean(title):
            document.title = title_clean(title)
        document.kind = kind
        document.save(update_fields=["title", "kind"])

    number = (
        document.revisions.order_by("-number").values_list("number", flat=True).first() or 0
    ) + 1
    revision = DocumentRevision(
        document=document,
        number=number,
        sha256=sha256,
        filename=PurePath(filename).name[:255],
        size=len(data),
        uploaded_by=user,
    )
    revision.file.save(
        f"{sha256}{PurePath(filename).suffix.lower()[:10]}", ContentFile(data), save=False
    )
    stored.append(str(revision.file.name))
    revision.save()
    Extraction.objects.bulk_create(
        [Extraction(revision=revision, role=role) for role in ExtractionRole.values]
    )
    revision_queue_extraction(revision=revision)
    return UploadResult(document, revision, created=True)


def _refuse_erased(revision: DocumentRevision) -> None:
    """The same bytes as an erased revision are not taken again: an erasure stays."""
    erasure = Erasure.objects.filter(revision=revision).first()
    if erasure is not None:
        raise ConflictError(
            f"These bytes were erased from this document on {erasure.erased_at:%Y-%m-%d}; "
            "they are not taken again.",
            code="revision_erased",
        )


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
    from knowledge.tasks import extract_revision

    try:
        task_enqueue(extract_revision, revision_id)
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
    from knowledge.tasks import extract_revision

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
            task_enqueue(extract_revision, revision_id)
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


def _set(extraction: Extraction, **fields: object) -> None:
    fields["heartbeat_at"] = timezone.now()
    for name, value in fields.items():
        setattr(extraction, name, value)
    extraction.save(update_fields=list(fields))


def _heartbeat(revision_id: int) -> None:
    """A sign of life for every unfinished extraction of the revision being worked on."""
    Extraction.objects.filter(
        revision_id=revision_id,
        status__in=[ExtractionStatus.PENDING, ExtractionStatus.RUNNING],
    ).update(heartbeat_at=timezone.now())


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
        on_wait=lambda: _heartbeat(revision_id),
        wait_interval=settings.KOINON_WORKER_HEARTBEAT_INTERVAL,
    )
    admitted: dict[str, tuple[Extraction, ExtractionResult, float]] = {}
    for extraction in claimed:
        result = outcomes[extraction.role]
        if isinstance(result, ExtractionError):
            _set(
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
            _set(
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
    from knowledge.embeddings import EmbeddingError, get_embedding_provider

    deadline = None if seconds is None else time.monotonic() + seconds
    waiting = extraction.passages.exclude(embedding_status=EmbeddingStatus.EMBEDDED)
    total = extraction.passages.count()
    try:
        provider = get_embedding_provider()
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
            _set(extraction, progress=30 + int(69 * (total - left) / max(total, 1)))
            if not left:
                return "done"
            if deadline is not None and time.monotonic() >= deadline:
                return "more"
    except EmbeddingError as error:
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
    from knowledge.tasks import embed_extraction

    outcome = passages_embed(extraction=extraction, seconds=settings.KOINON_EMBED_SECONDS)
    if outcome != "more":
        _set(extraction, progress=100)
        return outcome
    try:
        task_enqueue(embed_extraction, extraction.pk)
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
    from knowledge.tasks import embed_extraction

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
            task_enqueue(embed_extraction, extraction_id)
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
    from knowledge.embeddings import get_embedding_provider

    provider = get_embedding_provider()
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
    from core.worker import redis_client
    from knowledge.embeddings import get_embedding_provider
    from knowledge.tasks import refresh_embeddings

    model_id = get_embedding_provider().model_id
    if not embeddings_of_another_model_exist(model_id=model_id):
        return False
    client = redis_client()
    expiry = int(settings.KOINON_EMBEDDINGS_REFRESH_SECONDS + 2 * settings.KOINON_SWEEP_INTERVAL)
    if not client.set(EMBEDDINGS_REFRESH_KEY, model_id, nx=True, ex=max(expiry, 60)):
        return False
    try:
        task_enqueue(refresh_embeddings)
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
    from core.worker import redis_client
    from knowledge.embeddings import EmbeddingError

    deadline = time.monotonic() + settings.KOINON_EMBEDDINGS_REFRESH_SECONDS
    done, left = 0, True
    try:
        while time.monotonic() < deadline:
            count = passages_embed_stale()
            done += count
            if not count:
                left = False
                break
    except EmbeddingError as error:
        logger.warning("embeddings refresh stopped: %s", error.code)
        left = False  # the next sweep tries again
    finally:
        redis_client().delete(EMBEDDINGS_REFRESH_KEY)
    if done:
        logger.info("embeddings refresh: %d passage(s) embedded with the current model", done)
    if left:
        embeddings_refresh_schedule()
    return done
