"""`federated_rag`: another koinon, through its REST search (`GET /v1/search`) with a key
that peer issued (`Authorization: Bearer <key>`).

The peer's own permissions decide what comes back: its key's user sees what that user may
see there, and `space_ids` only narrow it. Each result keeps the peer's document, revision
and passage ids and the text's SHA-256, so a quote can be traced to the peer's own receipt.
The peer's search is labelled `unverified` there too: a hit is evidence here only once stored
as a snapshot and quoted from it.
"""

import threading
from collections.abc import Sequence

from outside.bounded import (
    as_dict,
    as_list,
    bearer,
    id_field,
    json_request,
    run_bounded,
    score_field,
    text_field,
)
from outside.errors import OutsideError
from outside.hits import Bounds, RemoteHit, text_hash

# koinon's search answers 1 to 50 results (knowledge.document_apis.SearchApi).
MAX_LIMIT = 50
SHA256_HEX = frozenset("0123456789abcdef")


def search(
    base_url: str,
    query: str,
    *,
    api_key: str | None,
    bounds: Bounds,
    space_ids: Sequence[int] | None = None,
    cancel: threading.Event | None = None,
) -> list[RemoteHit]:
    """At most `bounds.max_results` of the peer's passages in its order; an empty list when
    nothing visible to the key matched. When the peer found nothing because every one of its
    retrieval tools failed, that is the peer being unavailable (`timeout` when one of them
    timed out), not an empty search. Raises `OutsideError` (SPEC §5 codes)."""
    params: dict[str, str | list[str]] = {
        "q": query,
        "limit": str(min(bounds.max_results, MAX_LIMIT)),
    }
    if space_ids:
        params["space"] = [str(space_id) for space_id in space_ids]

    async def call() -> object:
        return await json_request(
            "GET",
            base_url.rstrip("/") + "/v1/search",
            bounds=bounds,
            headers={"Accept": "application/json", **bearer(api_key)},
            params=params,
        )

    body = as_dict(run_bounded(call, timeout_seconds=bounds.timeout_seconds, cancel=cancel))
    hits = [_hit(item) for item in as_list(body.get("results")) if isinstance(item, dict)]
    hits = [hit for hit in hits if hit.text][: bounds.max_results]
    if not hits:
        koinon_outcomes_check(as_list(body.get("outcomes")))
    return hits


def _hit(item: dict[str, object]) -> RemoteHit:
    text = text_field(item, "text")
    sent = text_field(item, "text_sha256").lower()
    return RemoteHit(
        channel="federated_rag",
        text=text,
        document_id=id_field(item, "document_id"),
        revision_id=id_field(item, "revision_id"),
        passage_id=id_field(item, "passage_id"),
        text_sha256=sent if len(sent) == 64 and set(sent) <= SHA256_HEX else text_hash(text),
        score=score_field(item, "score"),
    )


def koinon_outcomes_check(outcomes: list[object]) -> None:
    """For a koinon search that found nothing (REST or its MCP `search` tool): raise when
    every retrieval tool of the peer failed — `timeout` when one timed out, else
    `provider_unavailable` — for that is no answer, not an empty one."""
    records = [outcome for outcome in outcomes if isinstance(outcome, dict)]
    if not records or any(record.get("state") == "succeeded" for record in records):
        return
    retryable = any(record.get("retryable") is True for record in records)
    if any(record.get("code") == "timeout" for record in records):
        raise OutsideError("timeout", "peer retrieval", retryable=True)
    raise OutsideError("provider_unavailable", "peer retrieval failed", retryable=retryable)
