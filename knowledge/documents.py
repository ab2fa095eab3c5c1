"""Documents: upload, revisions, extraction and passages (services)."""

import hashlib
import logging
from dataclasses import dataclass
from pathlib import PurePath

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.core.files.base import ContentFile
from django.db import transaction
from django.utils import timezone

from core.errors import NotFoundError, PayloadTooLargeError, UnprocessableError
from knowledge.chunking import chunk
from knowledge.display import title_clean
from knowledge.extraction import ExtractionError, detect_format, extract
from knowledge.models import (
    Document,
    DocumentRevision,
    EmbeddingStatus,
    Extraction,
    ExtractionRole,
    ExtractionStatus,
    Passage,
    Space,
)
from knowledge.normalise import normalised_key

logger = logging.getLogger(__name__)

EMBED_BATCH = 64


@dataclass(frozen=True)
class UploadResult:
    document: Document
    revision: DocumentRevision
    created: bool  # False when identical bytes already were a revision


def _title_from(filename: str) -> str:
    return title_clean(PurePath(filename).stem.replace("_", " ")) or "Untitled"


@transaction.atomic
def document_upload(
    *,
    user: AbstractBaseUser,
    filename: str,
    data: bytes,
    space: Space | None = None,
    private: bool = False,
    title: str = "",
    document: Document | None = None,
) -> UploadResult:
    """Store the bytes as a revision and queue its extraction.

    Preconditions: the caller has checked that user may add to `space` / `document`.
    Identical bytes for the same document return the existing revision unchanged.
    Raises PayloadTooLargeError (nothing stored) and UnprocessableError with code
    `unsupported_type` when the name or content is not a supported format.
    """
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
    revision.save()
    Extraction.objects.bulk_create(
        [Extraction(revision=revision, role=role) for role in ExtractionRole.values]
    )
    revision_queue_extraction(revision=revision)
    return UploadResult(document, revision, created=True)


def revision_queue_extraction(*, revision: DocumentRevision) -> None:
    from knowledge.tasks import extract_revision

    transaction.on_commit(lambda: extract_revision.delay(revision.pk))


@transaction.atomic
def revision_retry_extraction(*, revision: DocumentRevision) -> None:
    """Reset failed extractions of a revision to pending and queue them again."""
    failed = revision.extractions.filter(status=ExtractionStatus.FAILED)
    if not failed.exists():
        raise UnprocessableError("Nothing to retry: no extraction failed.", code="not_failed")
    failed.update(status=ExtractionStatus.PENDING, error_code="", progress=0)
    revision_queue_extraction(revision=revision)


def _set(extraction: Extraction, **fields: object) -> None:
    for name, value in fields.items():
        setattr(extraction, name, value)
    extraction.save(update_fields=list(fields))


def revision_extract(*, revision_id: int) -> None:
    """Run both extractions of a revision, then passages and embeddings of the primary.

    Idempotent: admitted extractions are left alone, so a retry redoes only what failed.
    """
    try:
        revision = DocumentRevision.objects.select_related("document").get(pk=revision_id)
    except DocumentRevision.DoesNotExist:
        raise NotFoundError("Revision not found.") from None
    with revision.file.open("rb") as handle:
        data = handle.read()
    for extraction in revision.extractions.order_by("role"):
        if extraction.status == ExtractionStatus.ADMITTED:
            continue
        _set(
            extraction,
            status=ExtractionStatus.RUNNING,
            attempts=extraction.attempts + 1,
            progress=5,
        )
        try:
            result = extract(
                revision.document.kind,
                data,
                role=extraction.role,
                max_chars=settings.KOINON_EXTRACT_MAX_CHARS,
                max_pages=settings.KOINON_EXTRACT_MAX_PAGES,
            )
        except ExtractionError as error:
            _set(
                extraction,
                status=ExtractionStatus.FAILED,
                error_code=error.code,
                progress=100,
                finished_at=timezone.now(),
            )
            continue
        with transaction.atomic():
            _set(
                extraction,
                extractor=result.extractor,
                extractor_version=result.extractor_version[:32],
                text=result.text,
                text_sha256=hashlib.sha256(result.text.encode()).hexdigest(),
                norm_text=normalised_key(result.text),
                progress=30,
            )
            if extraction.role == ExtractionRole.PRIMARY:
                passages_create(extraction=extraction, revision=revision, segments=result.segments)
            _set(extraction, status=ExtractionStatus.ADMITTED, finished_at=timezone.now())
        if extraction.role == ExtractionRole.PRIMARY:
            document_point_to(revision=revision)
            passages_embed(extraction=extraction)
        _set(extraction, progress=100)


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
    """Point the document at revision; only its passages stay marked current.

    Precondition: the caller holds the document's row lock. The flag duplicates
    `document.current_revision` so that retrieval filters on one column of the
    passage table, which lets PostgreSQL use the HNSW index for filtered queries.
    """
    Passage.objects.filter(document=document, is_current=True).exclude(revision=revision).update(
        is_current=False
    )
    Passage.objects.filter(revision=revision).update(is_current=True)
    document.current_revision = revision
    document.save(update_fields=["current_revision"])


def passages_embed(*, extraction: Extraction) -> None:
    """Embed the extraction's passages in batches; an unavailable provider marks them so."""
    from knowledge.embeddings import EmbeddingError, get_embedding_provider

    pending = list(
        extraction.passages.exclude(embedding_status=EmbeddingStatus.EMBEDDED).order_by("ordinal")
    )
    try:
        provider = get_embedding_provider()
        for offset in range(0, len(pending), EMBED_BATCH):
            batch = pending[offset : offset + EMBED_BATCH]
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
            done = min(offset + EMBED_BATCH, len(pending))
            _set(extraction, progress=30 + int(69 * done / max(len(pending), 1)))
    except EmbeddingError as error:
        logger.warning("embedding unavailable for extraction %s: %s", extraction.pk, error.code)
        extraction.passages.exclude(embedding_status=EmbeddingStatus.EMBEDDED).update(
            embedding_status=EmbeddingStatus.UNAVAILABLE
        )
