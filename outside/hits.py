"""What an outside channel's client returns, and the bounds every outside call runs under.

A `RemoteHit` is text as the remote side sent it, with the remote identity needed to trace it
back there; it becomes evidence only once a later step stores it as a snapshot and quotes from
the stored text (SPEC §5). A `CandidateUrl` from a web search is not even that: only a URL to
fetch, with the search engine's own title and snippet for ranking.
"""

import hashlib
from dataclasses import dataclass
from typing import Literal

# The channels whose clients return hits (`fetch_url` returns a fetched page instead).
HitChannel = Literal["retrieval_endpoint", "federated_rag", "mcp_search"]


@dataclass(frozen=True)
class Bounds:
    """The limits of one outside call, all three enforced by every client: the whole call
    (connect, request, every byte of the answer) within `timeout_seconds`; at most `max_bytes`
    of response read (more is `too_large`, not a cut-off answer); at most `max_results`
    asked for and kept."""

    timeout_seconds: float = 10.0
    max_results: int = 10
    max_bytes: int = 2_000_000

    def __post_init__(self) -> None:
        if not self.timeout_seconds > 0:
            raise ValueError("timeout_seconds must be positive")
        if self.max_results < 1:
            raise ValueError("max_results must be at least 1")
        if self.max_bytes < 1:
            raise ValueError("max_bytes must be at least 1")


@dataclass(frozen=True)
class RemoteHit:
    """One passage from outside. The identity fields are the remote side's own, as strings
    (a peer's integer ids included) and empty where the remote has no such thing;
    `text_sha256` is the remote's hash of `text` when it sends one, else ours of the text
    received (`text_hash`)."""

    channel: HitChannel
    text: str
    title: str = ""
    url: str = ""
    document_id: str = ""
    revision_id: str = ""
    passage_id: str = ""
    text_sha256: str = ""
    score: float | None = None


@dataclass(frozen=True)
class CandidateUrl:
    """A web search result: a URL to fetch (as `fetch_url`), never evidence itself."""

    url: str
    title: str = ""
    snippet: str = ""


def text_hash(text: str) -> str:
    """SHA-256 of the text's UTF-8 bytes, hex, as koinon hashes an extraction's text."""
    return hashlib.sha256(text.encode()).hexdigest()
