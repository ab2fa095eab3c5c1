"""`web_search`: a search service speaking SearxNG's JSON API (`GET /search?q=…&format=json`).

Its results are candidate URLs, never evidence: the caller fetches the best of them as
`fetch_url` snapshots and quotes from there. SearxNG has no keys of its own; a credential is
sent as a bearer token for the proxy that usually guards an instance. An instance whose
settings do not enable the JSON format answers 403, reported as `access_denied`.
"""

import threading

from outside.bounded import as_dict, as_list, bearer, json_request, run_bounded, text_field
from outside.hits import Bounds, CandidateUrl


def search(
    base_url: str,
    query: str,
    *,
    api_key: str | None,
    bounds: Bounds,
    cancel: threading.Event | None = None,
) -> list[CandidateUrl]:
    """The first `bounds.max_results` results with an http(s) URL, in the engine's order; an
    empty list when it found nothing. Raises `OutsideError` (SPEC §5 codes)."""

    async def call() -> object:
        return await json_request(
            "GET",
            base_url.rstrip("/") + "/search",
            bounds=bounds,
            headers={"Accept": "application/json", **bearer(api_key)},
            params={"q": query, "format": "json"},
        )

    body = as_dict(run_bounded(call, timeout_seconds=bounds.timeout_seconds, cancel=cancel))
    candidates = []
    for item in as_list(body.get("results")):
        if not isinstance(item, dict):
            continue
        url = text_field(item, "url")
        if not url.lower().startswith(("http://", "https://")):
            continue  # not a page fetch_url could read
        candidates.append(
            CandidateUrl(
                url=url, title=text_field(item, "title"), snippet=text_field(item, "content")
            )
        )
        if len(candidates) == bounds.max_results:
            break
    return candidates
