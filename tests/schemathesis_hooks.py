"""Schemathesis hooks (loaded through SCHEMATHESIS_HOOKS by tests/test_openapi.py).

Random ids almost never name a real object, so half of the generated path parameters are
replaced by the ids of objects the test created: the bodies of real objects are checked
against the schema too, not only 404s.
"""

import json
import os

import schemathesis
from hypothesis import strategies as st

REAL_IDS: dict[str, object] = json.loads(os.environ.get("KOINON_SCHEMATHESIS_IDS", "{}"))


@schemathesis.hook
def flatmap_path_parameters(context: object, path_parameters: dict) -> st.SearchStrategy:
    real = {name: REAL_IDS[name] for name in path_parameters or {} if name in REAL_IDS}
    if not real:
        return st.just(path_parameters)
    return st.sampled_from([path_parameters, {**path_parameters, **real}])


@schemathesis.hook
def filter_case(context: object, case: schemathesis.Case) -> bool:
    """Skip a multipart body with no parts: Daphne's HTTP layer (Twisted) answers it with a
    bare 400 before Django sees the request, so no view of ours can shape that answer."""
    media_type = (case.media_type or "").lower()
    return not (media_type.startswith("multipart/") and not case.body)
