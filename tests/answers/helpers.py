"""The answer tests' corpus and how they ask (fixtures stay in conftest modules)."""

import re

from answers.judge.model import weights_load
from knowledge.documents.extraction import revision_extract
from knowledge.documents.upload import document_upload
from tests.answers.providers import ScriptedProvider

OPERATIONS = (
    "# Operations handbook\n\n## Service reviews\n\nThe platform operations team owns service "
    "reviews. Each review covers availability, incidents and open risks.\n\n## Backups\n\n"
    "Production databases are backed up every night at 02:00 UTC.\n"
)
ACCOUNTING = (
    "# Accounting policy\n\n## Currency\n\nAll amounts in the invoice dataset are stated in "
    "euros (EUR), net of VAT.\n\n## Retention\n\nInvoices are retained for ten years.\n"
)
INVOICES = b"invoice,amount\nA-1,1250\nA-2,2750\n"

MIXED_QUESTION = (
    "Who owns service reviews, what currency is the invoice dataset in, "
    "and what is the total amount of the invoices?"
)


def ingest(user, space, filename: str, text: str, **fields):
    result = document_upload(
        user=user, filename=filename, data=text.encode(), space=space, **fields
    )
    revision_extract(revision_id=result.revision.pk)
    return result


def ask(user, query: str, *, provider=None, api_key=None, **fields) -> dict:
    from answers.pipeline.lifecycle import answer_create
    from answers.pipeline.request import answer_request_parse

    request = answer_request_parse({"query": query, **fields})
    return answer_create(user=user, request=request, provider=provider, api_key=api_key)


def whole_passage(candidates) -> dict:
    """A scripted selection: the first quote candidate, whole."""
    quote = next(c for c in candidates if c.kind == "quote")
    return {"facts": [{"fact_id": quote.fact_id, "start": 0, "end": len(quote.text)}]}


# --- a space's question set (issue 47, item 6) ----------------------------------------
PORTS = "The service listens on port 8443."
BACKUPS = "Backups run every night at 02:00 UTC."
CAFETERIA = "The cafeteria opens at noon."
# The pinned judge's operating points: tests derive from them rather than repeat them.
_POINTS = weights_load().operating_points
assert _POINTS is not None
AUTO_POINT, STRICT_POINT = _POINTS.auto, _POINTS.strict
# question, expected text ("" : not answerable), and what the hand count says at AUTO_POINT
SET_ROWS = [
    ("Which port does the service listen on?", "8443", "supported"),
    ("When do the backups run on weekends?", "Sundays at 04:00", "wrong"),
    ("Who is the chief executive?", "", "abstained"),
    ("When does the cafeteria open?", "noon", "supported"),
]


def set_scores(part: str, quote: str) -> float:
    """The judge of the question-set fixture: nothing answers the chief executive; the
    cafeteria's sentence scores 0.55 (released at auto's point, not at 0.56 or strict's);
    everything else 0.9."""
    if "chief executive" in part:
        return 0.1
    return 0.55 if "cafeteria" in quote else 0.9


def _words(text: str) -> set[str]:
    return set(re.findall(r"\w+", text.lower()))


class OverlapProvider(ScriptedProvider):
    """Selects the quote sharing the most words with the question, whole; judged by
    `set_scores` (the plan by rule, as the scripted provider's)."""

    def __init__(self) -> None:
        super().__init__([], scores=set_scores)

    def select(self, *, question, plan, candidates, attempt, rejected=(), weights=None):
        quotes = [c for c in candidates if c.kind == "quote"]
        if not quotes:
            return {"facts": []}
        best = max(quotes, key=lambda c: len(_words(question) & _words(c.text)))
        return {"facts": [{"fact_id": best.fact_id, "start": 0, "end": len(best.text)}]}
