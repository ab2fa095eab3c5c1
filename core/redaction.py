"""What admin shows of records that carry people's answers: their shape, codes, ids and
hashes, never the text. Receipts, stream events and answer audits can quote a private
file or a space the viewer has no role in; a superuser needs to see that a run happened
and how it went, not what it said (issue 27, item 8)."""

import json

from django.utils.html import format_html

# Keys whose values are codes, states, ids or hashes, never text from a document or a
# person; every other string is replaced by its length.
KEPT_KEYS = frozenset(
    {
        "event",
        "code",
        "state",
        "tool",
        "kind",
        "status",
        "answer_status",
        "mode",
        "language",
        "type",
        "completeness",
        "availability",
        "origin",
        "label",
        "stance",
        "retryable",
        "created_at",
        "revision_date",
        "policy_version",
        "number",
        "generation",
        "id",
    }
)


def redacted(value: object, key: str | None = None) -> object:
    """`value` with every string that could carry text replaced by "‹n characters›"."""
    if isinstance(value, dict):
        return {k: redacted(v, str(k)) for k, v in value.items()}
    if isinstance(value, list):
        return [redacted(item, key) for item in value]
    if isinstance(value, str) and not _kept(key):
        return f"‹{len(value)} characters›"
    return value


def _kept(key: str | None) -> bool:
    return key is not None and (key in KEPT_KEYS or key.endswith(("_id", "_sha256", "_ids", "_at")))


def redacted_html(value: object) -> str:
    """The redacted value as an escaped, indented block for a read-only admin field."""
    return format_html("<pre>{}</pre>", json.dumps(redacted(value), indent=2, ensure_ascii=False))
