"""`retrieval_endpoint`: a retrieval service speaking OpenAI's vector store search API.

`POST {base_url}/vector_stores/{store_id}/search` with `{"query", "max_num_results"}` and a
bearer key; `base_url` is written as for OpenAI's own clients, version included
(`https://api.openai.com/v1`). Each result is one file's chunk: `file_id`, `filename`,
`score`, `attributes` and `content[]` of `{"type": "text", "text"}`; every text part becomes
one hit, kept exactly as sent.
"""

import threading
from urllib.parse import quote

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
from outside.hits import Bounds, RemoteHit, text_hash

# The API's own ceiling on `max_num_results`.
MAX_NUM_RESULTS = 50


def search(
    base_url: str,
    store_id: str,
    query: str,
    *,
    api_key: str | None,
    bounds: Bounds,
    cancel: threading.Event | None = None,
) -> list[RemoteHit]:
    """At most `bounds.max_results` hits in the service's order (the file id as
    `document_id`, the file name as `title`); an empty list when nothing matched. Raises
    `OutsideError` (SPEC §5 codes)."""
    url = f"{base_url.rstrip('/')}/vector_stores/{quote(store_id, safe='')}/search"

    async def call() -> object:
        return await json_request(
            "POST",
            url,
            bounds=bounds,
            headers={"Accept": "application/json", **bearer(api_key)},
            body={"query": query, "max_num_results": min(bounds.max_results, MAX_NUM_RESULTS)},
        )

    body = as_dict(run_bounded(call, timeout_seconds=bounds.timeout_seconds, cancel=cancel))
    hits: list[RemoteHit] = []
    for item in as_list(body.get("data")):
        if not isinstance(item, dict):
            continue
        for part in as_list(item.get("content")):
            if not isinstance(part, dict) or part.get("type") != "text":
                continue
            text = text_field(part, "text")
            if not text:
                continue
            hits.append(
                RemoteHit(
                    channel="retrieval_endpoint",
                    text=text,
                    title=text_field(item, "filename"),
                    document_id=id_field(item, "file_id"),
                    text_sha256=text_hash(text),
                    score=score_field(item, "score"),
                )
            )
            if len(hits) == bounds.max_results:
                return hits
    return hits
