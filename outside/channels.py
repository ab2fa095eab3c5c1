"""The outside channels of one answer run (issue 50): each enabled channel of an allowed kind
is called within its bounds, what it returns is stored as the asker's snapshots
(outside.snapshots), and the snapshots' passages are ranked against each search by the same
keyword ranking as the library's (knowledge.retrieval.keyword_search, over the snapshots
only). Candidates come back as the library's `Candidate`s, so the run records, selects,
verifies and judges them as it does any passage; each carries the snapshot it came from.

A channel reaches an asker only through a space that enables it among the spaces of the
run's scope (outside.selectors.channels_usable_by); none: `not_configured`, as before. A
failure is an outcome with its code (SPEC §5), never the provider's words."""

import logging
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial

from django.utils import timezone

from core.outcomes import ToolOutcome
from core.types import User
from knowledge.retrieval import Candidate, keyword_search
from knowledge.scope import AccessScope
from outside import federated, mcp_search, searxng, vector_store
from outside.credentials import CredentialUnreadable, credential_open
from outside.errors import OutsideError, outcome_code
from outside.fetch import FetchLimits, fetch
from outside.hits import Bounds, RemoteHit
from outside.models import Channel, ChannelKind, McpTransport, Snapshot
from outside.selectors import channels_usable_by
from outside.snapshots import RemoteIdentity, snapshot_store

logger = logging.getLogger(__name__)

OUTSIDE_TOOLS: tuple[str, ...] = tuple(ChannelKind.values)


@dataclass
class OutsideFound:
    """What the outside channels gave one round: per search, ranked candidates and the
    snapshot each came from; the outcomes (several per channel where several calls failed)."""

    candidates: list[tuple[int, Candidate, Snapshot]] = field(default_factory=list)
    outcomes: list[ToolOutcome] = field(default_factory=list)


def outside_gather(
    *,
    user: User,
    scope: AccessScope,
    tools: Sequence[str],
    searches: Sequence[str],
    limit: int,
    urls: Sequence[str] = (),
) -> OutsideFound:
    """Every allowed outside tool for the run's searches (index, text). `urls`: pages the
    asker chose, read by the first `fetch_url` channel enabled for them (its bounds and
    the address rules apply), besides the pages each channel lists."""
    found = OutsideFound()
    for tool in (t for t in tools if t in OUTSIDE_TOOLS):
        channels = list(
            channels_usable_by(user=user, space_ids=sorted(scope.space_ids)).filter(kind=tool)
        )
        if not channels:
            found.outcomes.append(ToolOutcome(tool, "failed", "not_configured"))
            continue
        for number, channel in enumerate(channels):
            chosen = urls if tool == ChannelKind.FETCH_URL and number == 0 else ()
            _channel_gather(
                found, user=user, channel=channel, searches=searches, limit=limit, urls=chosen
            )
    return found


def _channel_gather(
    found: OutsideFound,
    *,
    user: User,
    channel: Channel,
    searches: Sequence[str],
    limit: int,
    urls: Sequence[str] = (),
) -> None:
    tool = channel.kind
    try:
        credential = credential_open(channel.credential) if channel.credential else None
    except CredentialUnreadable:
        logger.warning("outside channel %s: its credential cannot be opened", channel.pk)
        found.outcomes.append(ToolOutcome(tool, "failed", "not_configured"))
        return
    snapshots, failures = _snapshots(user, channel, credential, searches, urls)
    found.outcomes += [
        ToolOutcome(tool, "failed", outcome_code(error), retryable=error.retryable)
        for error in failures
    ]
    if not snapshots:
        if not failures:
            found.outcomes.append(ToolOutcome(tool, "succeeded", "no_relevant_hit"))
        return
    by_document = {snapshot.document_id: snapshot for snapshot in snapshots}
    # The keyword channel's ranking, over these snapshots' passages only.
    scope = AccessScope(
        user_id=user.pk,
        space_ids=frozenset(),
        file_ids=frozenset(by_document),
        every_space=False,
    )
    count = 0
    for index, search in enumerate(searches):
        scored, _ = keyword_search(search, limit, scope=scope)
        for rank, (candidate, score) in enumerate(scored, start=1):
            candidate.contributions[tool] = {"rank": rank, "score": round(float(score), 6)}
            candidate.score = float(score)
            found.candidates.append((index, candidate, by_document[candidate.document_id]))
            count += 1
    code = "matched" if count else "no_relevant_hit"
    found.outcomes.append(ToolOutcome(tool, "succeeded", code, count))


def _bounds(channel: Channel) -> Bounds:
    return Bounds(
        timeout_seconds=channel.timeout_seconds,
        max_results=channel.max_results,
        max_bytes=channel.max_bytes,
    )


def _snapshots(
    user: User,
    channel: Channel,
    credential: str | None,
    searches: Sequence[str],
    urls: Sequence[str] = (),
) -> tuple[list[Snapshot], list[OutsideError]]:
    """The channel's calls for the searches, each result stored; the calls that failed."""
    calls: list[Callable[[], list[Snapshot]]]
    if channel.kind == ChannelKind.FETCH_URL:
        pages = list(dict.fromkeys([*urls, *_configured_urls(channel)]))
        calls = [partial(_fetched_one, user, channel, url) for url in pages]
    elif channel.kind == ChannelKind.WEB_SEARCH:
        calls = [partial(_web_search, user, channel, credential, s) for s in searches]
    else:
        calls = [partial(_hits, user, channel, credential, s) for s in searches]
    snapshots: list[Snapshot] = []
    failures: list[OutsideError] = []
    for call in calls:
        try:
            snapshots.extend(call())
        except OutsideError as error:
            logger.info("outside channel %s: %s", channel.pk, error.code)
            failures.append(error)
    return snapshots, failures


def _configured_urls(channel: Channel) -> list[str]:
    urls = channel.options.get("urls", []) if isinstance(channel.options, dict) else []
    return [str(url) for url in urls][: channel.max_results]


def _fetched_one(user: User, channel: Channel, url: str) -> list[Snapshot]:
    return [_fetched(user, channel, url)]


def _fetched(user: User, channel: Channel, url: str) -> Snapshot:
    """One URL fetched within the channel's bounds (outside.fetch: the address rules on every
    hop) and stored."""
    page = fetch(
        url,
        limits=FetchLimits(max_bytes=channel.max_bytes, timeout_seconds=channel.timeout_seconds),
    )
    return snapshot_store(
        user=user,
        channel=channel,
        data=page.content,
        content_type=page.content_type,
        identity=RemoteIdentity(url=page.final_url),
        fetched_at=page.fetched_at,
    )


def _web_search(
    user: User, channel: Channel, credential: str | None, search: str
) -> list[Snapshot]:
    """The search service's results are candidate URLs, never evidence: each is fetched
    (as `fetch_url`, its address checked) and stored; one that fails is skipped."""
    results = searxng.search(channel.endpoint, search, api_key=credential, bounds=_bounds(channel))
    stored = []
    for result in results[: channel.max_results]:
        try:
            stored.append(_fetched(user, channel, result.url))
        except OutsideError as error:
            logger.info("outside channel %s: a result's page: %s", channel.pk, error.code)
    return stored


def _hits(user: User, channel: Channel, credential: str | None, search: str) -> list[Snapshot]:
    bounds = _bounds(channel)
    hits: list[RemoteHit]
    if channel.kind == ChannelKind.RETRIEVAL_ENDPOINT:
        store_id = str(channel.options.get("store_id", ""))
        hits = vector_store.search(
            channel.endpoint, store_id, search, api_key=credential, bounds=bounds
        )
    elif channel.kind == ChannelKind.FEDERATED_RAG:
        hits = federated.search(channel.endpoint, search, api_key=credential, bounds=bounds)
    else:
        hits = mcp_search.search(_mcp_server(channel, credential), search, bounds=bounds)
    return [_hit_stored(user, channel, hit) for hit in hits[: channel.max_results] if hit.text]


def _mcp_server(channel: Channel, credential: str | None) -> mcp_search.McpServer:
    tool = str(channel.options.get("tool", "search") or "search")
    if channel.transport == McpTransport.STDIO:
        command, *args = shlex.split(channel.endpoint)
        return mcp_search.McpStdioServer(command=command, args=tuple(args), tool=tool)
    return mcp_search.McpHttpServer(url=channel.endpoint, credential=credential, tool=tool)


def _hit_stored(user: User, channel: Channel, hit: RemoteHit) -> Snapshot:
    return snapshot_store(
        user=user,
        channel=channel,
        data=hit.text.encode(),
        content_type="text/plain",
        identity=RemoteIdentity(
            url=hit.url,
            document_id=hit.document_id,
            revision_id=hit.revision_id,
            passage_id=hit.passage_id,
            text_sha256=hit.text_sha256,
            tool=str(channel.options.get("tool", "")) if channel.kind == "mcp_search" else "",
            title=hit.title,
        ),
        fetched_at=timezone.now(),
    )
