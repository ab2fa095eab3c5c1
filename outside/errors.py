"""How an outside call fails (SPEC §5): one exception with a code of koinon's own vocabulary,
and the map from those codes onto the outcome codes an answer reports.

Shared by every outside channel (fetch_url, web_search, retrieval_endpoint, federated_rag,
mcp_search). A provider's words never travel in it: an error page, a response body or the
text of a network exception may hold a secret or an injection aimed at the model, so `detail`
is written by koinon (which limit, which status) and the outcome carries only the code.
"""

OUTSIDE_CODES = frozenset(
    {
        "timeout",
        "provider_unavailable",
        "access_denied",
        "no_relevant_hit",
        "too_large",
        "refused_address",
        "cancelled",
    }
)

# The codes of OUTSIDE_CODES that SPEC §5 does not list, and the outcome each is reported as
# (docs/decisions.md, "Outside evidence: outcomes of an outside call").
_REPORTED_AS = {
    "too_large": "provider_unavailable",
    "refused_address": "access_denied",
}


class OutsideError(Exception):
    """An outside call that did not give evidence; `code` is a SPEC §5 outcome code, `retryable`
    whether a later try may succeed. The message is for logs of koinon's own making, never
    provider text."""

    code: str  # one of OUTSIDE_CODES
    retryable: bool
    detail: str

    def __init__(self, code: str, detail: str = "", *, retryable: bool = False) -> None:
        if code not in OUTSIDE_CODES:
            raise ValueError(f"unknown outside error code: {code!r}")
        super().__init__(f"{code}: {detail}" if detail else code)
        self.code = code
        self.detail = detail
        self.retryable = retryable


def outcome_code(error: OutsideError) -> str:
    """The SPEC §5 outcome code an answer reports for `error`."""
    return _REPORTED_AS.get(error.code, error.code)
