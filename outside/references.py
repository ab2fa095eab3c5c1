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


URL_MAX = 2000


def url_is_fetchable(value: object) -> bool:
    """Whether `value` is an http(s) URL koinon may try to fetch: a host, no user or
    password, at most URL_MAX characters. Where it points is checked when it is fetched
    (outside.addresses: resolved once, every redirect again)."""
    if not isinstance(value, str) or len(value) > URL_MAX or not value.isprintable():
        return False
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 (a bad port raises here)
    except ValueError:
        return False
    return parts.scheme in {"http", "https"} and bool(parts.hostname) and not parts.username
