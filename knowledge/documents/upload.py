"""Documents, first step: an upload stored as a revision, its extraction queued.

Every way in (API, chat, admin, `ingest`) comes through `document_upload`, and every change of a
document's revisions through the one role check, `document_change_check`.
"""

import hashlib
from dataclasses import dataclass
from pathlib import PurePath

from django.conf import settings
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.db import transaction
from django.utils.translation import gettext as _

from core.errors import (
    ConflictError,
    ForbiddenError,
    NotFoundError,
    PayloadTooLargeError,
    UnprocessableError,
    writing,
)
from core.types import User
from knowledge.display import title_clean
from knowledge.documents.extraction import revision_queue_extraction
from knowledge.extraction import ExtractionError, detect_format
from knowledge.models import (
    Document,
    DocumentOrigin,
    DocumentRevision,
    Erasure,
    Extraction,
    ExtractionRole,
    Space,
)
from knowledge.selectors import space_can_manage, spaces_visible_to


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
    origin: str = DocumentOrigin.UPLOAD,
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
    supported format. `origin` `outside`: an outside channel's snapshot, a private document
    of the asker kept apart from their files (the same bytes uploaded as a file are another
    document). The database lost before the commit: WriteNotSaved naming the file,
    nothing written, and the bytes already stored for it deleted again (a retry stores
    them anew; no copy is left that an erasure would not find).
    """
    stored: list[str] = []
    finished = False
    try:
        with (
            writing(_("the upload of “%(name)s”") % {"name": PurePath(filename).name}),
            transaction.atomic(),
        ):
            result = _upload(
                user=user,
                filename=filename,
                data=data,
                space=space,
                private=private,
                title=title,
                document=document,
                origin=origin,
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
    origin: str,
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
            .filter(sha256=sha256, document__space=space, document__origin=origin)
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
            origin=origin,
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
