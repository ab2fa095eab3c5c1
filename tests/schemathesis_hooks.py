"""Schemathesis hooks (loaded through SCHEMATHESIS_HOOKS by tests/test_openapi.py).

Random ids almost never name a real object, so half of the generated path parameters are
replaced by the ids of objects the test created: the bodies of real objects are checked
against the schema too, not only 404s.
"""

import json
import os
from urllib.parse import urlencode

import schemathesis
from hypothesis import strategies as st

REAL_IDS: dict[str, object] = json.loads(os.environ.get("KOINON_SCHEMATHESIS_IDS", "{}"))


@schemathesis.hook
def flatmap_path_parameters(context: object, path_parameters: dict) -> st.SearchStrategy:
    real = {name: REAL_IDS[name] for name in path_parameters or {} if name in REAL_IDS}
    if not real:
        return st.just(path_parameters)
    return st.sampled_from([path_parameters, {**path_parameters, **real}])


# Twisted reads at most 16 KiB of request line and headers (HTTPChannel.totalHeadersSize)
# and drops the connection past it; the rest of the budget is for the headers.
MAX_QUERY_BYTES = 12 * 1024


@schemathesis.hook
def filter_case(context: object, case: schemathesis.Case) -> bool:
    """Skip what Daphne's HTTP layer (Twisted) refuses before Django sees the request, so
    that no view of ours can shape the answer: a multipart body with no parts (a bare 400),
    and a query string past its request-line limit (the connection dropped; `q` may be
    2000 characters, which percent-encoded can be 18 KB)."""
    media_type = (case.media_type or "").lower()
    if media_type.startswith("multipart/") and not case.body:
        return False
    return len(urlencode(case.query or {}, doseq=True)) <= MAX_QUERY_BYTES
