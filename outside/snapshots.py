"""Outside text made checkable (issue 50, item 1): what a channel returned is stored as the
bytes of a private document of the asker (`origin` outside) and extracted at once, in the
answer worker, by the same extractors with the same damage checks as an upload; a
`Snapshot` records the channel, the remote identity, when and the bytes' SHA-256. A quote
from it is then checked against the stored text exactly as one from an uploaded document.

Snapshots belong to their asker: never one of their files, never searched as one, never
shown to another user (a curator who wants a source in a space uploads it there). The
document's erasure path erases a snapshot's text; the row stays, holding no text."""

from dataclasses import dataclass
from datetime import datetime
from urllib.parse import urlsplit

from django.db import transaction
from django.db.models import QuerySet
from django.utils.translation import gettext as _

from core.errors import NotFoundError, PayloadTooLargeError, UnprocessableError, writing
from core.types import User, UserOrAnonymous
from knowledge.documents.extraction import revision_extract
from knowledge.documents.upload import document_upload
from knowledge.erasure import revision_erase
from knowledge.models import DocumentOrigin, Erasure, Passage
from outside.errors import OutsideError
from outside.models import Channel, Snapshot
from outside.references import SnapshotReference

# The stored file's name tells the extractors the format (knowledge.extraction.formats).
_SUFFIXES = {
    "application/pdf": ".pdf",
    "text/html": ".html",
    "application/xhtml+xml": ".html",
    "text/markdown": ".md",
    "text/plain": ".txt",
}
TITLE_MAX = 300


@dataclass(frozen=True)
class RemoteIdentity:
    """Where outside text came from, as far as the remote says: the URL after redirects,
    its document, revision and passage ids, the hash of the text it reported, the MCP tool,
    and a title to show."""

    url: str = ""
    document_id: str = ""
    revision_id: str = ""
    passage_id: str = ""
    text_sha256: str = ""
    tool: str = ""
    title: str = ""


def snapshot_filename(content_type: str, url: str = "") -> str:
    """A name whose suffix is the format the content type says (plain text otherwise)."""
    media = content_type.split(";", 1)[0].strip().lower()
    suffix = _SUFFIXES.get(media, ".txt")
    stem = urlsplit(url).path.rsplit("/", 1)[-1].rsplit(".", 1)[0] if url else ""
    return f"{stem[:80] or 'snapshot'}{suffix}"


def snapshot_store(
    *,
    user: User,
    channel: Channel,
    data: bytes,
    content_type: str,
    identity: RemoteIdentity,
    fetched_at: datetime,
) -> Snapshot:
    """Store `data` for `user` as `channel`'s snapshot, extracted before this returns.

    Raises OutsideError `too_large` (above the upload limit) or `provider_unavailable`
    (empty, or a format koinon does not read): nothing is stored then."""
    title = (identity.title or identity.url or channel.name)[:TITLE_MAX]
    try:
        upload = document_upload(
            user=user,
            filename=snapshot_filename(content_type, identity.url),
            data=data,
            private=True,
            title=title,
            origin=DocumentOrigin.OUTSIDE,
        )
    except PayloadTooLargeError:
        raise OutsideError("too_large", "the snapshot is above the upload limit") from None
    except UnprocessableError as error:
        raise OutsideError("provider_unavailable", f"not storable ({error.error_code})") from None
    # In this worker, now: the run quotes from it next (a queued duplicate finds it done).
    revision_extract(revision_id=upload.revision.pk)
    with writing(_("the snapshot of “%(title)s”") % {"title": title}), transaction.atomic():
        return Snapshot.objects.create(
            owner=user,
            document=upload.document,
            revision=upload.revision,
            channel=channel,
            channel_kind=channel.kind,
            channel_name=channel.name,
            url=identity.url[:2000],
            remote_document_id=identity.document_id[:200],
            remote_revision_id=identity.revision_id[:200],
            remote_passage_id=identity.passage_id[:200],
            remote_text_sha256=identity.text_sha256[:64],
            tool=identity.tool[:200],
            content_type=content_type[:200],
            sha256=upload.revision.sha256,
            size=upload.revision.size,
            fetched_at=fetched_at,
        )


def snapshot_reference(snapshot: Snapshot) -> SnapshotReference:
    return {
        "snapshot_id": snapshot.pk,
        "channel": snapshot.channel_name,
        "channel_kind": snapshot.channel_kind,
        "url": snapshot.url,
        "remote_document_id": snapshot.remote_document_id,
        "remote_revision_id": snapshot.remote_revision_id,
        "remote_passage_id": snapshot.remote_passage_id,
        "remote_text_sha256": snapshot.remote_text_sha256,
        "tool": snapshot.tool,
        "sha256": snapshot.sha256,
        "fetched_at": snapshot.fetched_at.isoformat(),
    }


def snapshots_of(*, user: UserOrAnonymous) -> QuerySet[Snapshot]:
    """The user's own snapshots, newest first (nobody else's, superusers included)."""
    if not user.is_authenticated or not user.is_active:
        return Snapshot.objects.none()
    return Snapshot.objects.filter(owner=user).select_related("document", "revision")


def snapshot_get_for_user(*, user: UserOrAnonymous, snapshot_id: int) -> Snapshot:
    """The user's snapshot; NotFoundError whether missing or another's."""
    snapshot = snapshots_of(user=user).filter(pk=snapshot_id).first()
    if snapshot is None:
        raise NotFoundError("Snapshot not found.", code="snapshot_not_found")
    return snapshot


def snapshot_passages(*, snapshot: Snapshot) -> QuerySet[Passage]:
    """The passages the snapshot's stored text was cut into (none once erased)."""
    return Passage.objects.filter(revision=snapshot.revision, is_current=True).order_by("ordinal")


def snapshot_erase(*, user: User, snapshot: Snapshot, reason: str) -> Erasure:
    """Erase the snapshot's text for good, by the document's erasure path (its owner)."""
    return revision_erase(
        user=user, document=snapshot.document, revision=snapshot.revision, reason=reason
    )
