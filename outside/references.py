"""What a quote's source and citation say of an outside snapshot: a plain shape, with no
model or service behind it, so the answer vocabulary can name it."""

from typing import TypedDict
from urllib.parse import urlsplit


class SnapshotReference(TypedDict):
    """A snapshot as a quote's source and citation carry it: the channel, the remote
    identity, when it was fetched and the stored bytes' SHA-256 (what a verifier checks the
    quoted text against)."""

    snapshot_id: int
    channel: str
    channel_kind: str
    url: str
    remote_document_id: str
    remote_revision_id: str
    remote_passage_id: str
    remote_text_sha256: str
    tool: str
    sha256: str
    fetched_at: str


def snapshot_origin(reference: SnapshotReference) -> str:
    """What a reader is shown of where the text came from: the host of its URL, else the
    channel's name."""
    host = urlsplit(reference["url"]).hostname if reference["url"] else None
    return host or reference["channel"]
