"""The source view: a quote shown inside its document's admitted text (issue 29).

A citation of a sealed answer links here. The page reads the answer through the sealed-read
boundary (a reader who lost access, a withdrawn or erased source: no citation, so 404, like
a made-up id) and the document through the permission-scoped selector; the text is the
admitted extraction the quote was verified against, around the quote's own offsets.
"""

from dataclasses import dataclass

from django.contrib.auth.models import AbstractBaseUser

from answers.boundary import sealed_answer_read
from answers.models import AnswerRun, CandidateFact
from core.errors import NotFoundError
from knowledge.display import single_line
from knowledge.models import DocumentRevision, Extraction, ExtractionStatus
from knowledge.normalise import normalised_key
from knowledge.selectors import document_get_for_user

# Around the quote: up to this many paragraphs (blank-line separated) on each side, each
# side cut to this many characters.
CONTEXT_PARAGRAPHS = 2
CONTEXT_CHARS = 1500


@dataclass(frozen=True)
class QuoteSource:
    run: AnswerRun
    generation: int
    number: int
    title: str
    revision: DocumentRevision
    current: bool
    locator: dict
    before: str
    quote: str
    after: str
    first_line: int
    last_line: int

    @property
    def headings(self) -> list[str]:
        return [single_line(h) for h in self.locator.get("headings", [])]


def quote_source(
    *, user: AbstractBaseUser, run: AnswerRun, generation: int, number: int
) -> QuoteSource:
    """Citation `number` of the run's sealed `generation`, inside its text, as `user` may
    read it now; NotFoundError for anything they may not see or that is not a quote.

    Precondition: `run` came from a permission-scoped selector (it is the caller's).
    """
    body = sealed_answer_read(user=user, run=run, generation=generation)
    citations = ((body or {}).get("answer") or {}).get("citations") or []
    citation = next(
        (c for c in citations if c.get("number") == number and c.get("kind") == "quote"), None
    )
    if citation is None:
        raise NotFoundError("Citation not found.")
    document = document_get_for_user(user=user, document_id=citation["document_id"])
    fact = CandidateFact.objects.filter(run=run, fact_id=citation["fact_id"]).first()
    source = fact.source if fact is not None else {}
    extraction = (
        Extraction.objects.select_related("revision")
        .filter(
            pk=source.get("extraction_id"),
            revision_id=citation["revision_id"],
            revision__document=document,
            status=ExtractionStatus.ADMITTED,
        )
        .first()
    )
    if extraction is None or not extraction.text:
        raise NotFoundError("Citation not found.")
    text = extraction.text
    start, end = _quote_span(text, citation["quote"], source)
    before_start = _paragraphs_back(text, start)
    after_end = _paragraphs_forward(text, end)
    return QuoteSource(
        run=run,
        generation=generation,
        number=number,
        title=single_line(citation.get("title") or document.title),
        revision=extraction.revision,
        current=document.current_revision_id == extraction.revision_id
        and not document.is_withdrawn,
        locator=citation.get("locator") or {},
        before=text[before_start:start],
        quote=text[start:end],
        after=text[end:after_end],
        first_line=text.count("\n", 0, start) + 1,
        last_line=text.count("\n", 0, max(start, end - 1)) + 1,
    )


def _quote_span(text: str, quote: str, source: dict) -> tuple[int, int]:
    """Where the quote stands in the text: exactly inside its passage when it is there,
    else the passage whose normalised text holds it (the quote was verified that way)."""
    low, high = int(source.get("char_start", 0)), int(source.get("char_end", len(text)))
    found = text.find(quote, low, high + len(quote))
    if found >= 0:
        return found, found + len(quote)
    if normalised_key(quote) and normalised_key(quote) in normalised_key(text[low:high]):
        return low, high
    found = text.find(quote)
    if found >= 0:
        return found, found + len(quote)
    return low, high


def _paragraphs_back(text: str, start: int) -> int:
    at = start
    for _ in range(CONTEXT_PARAGRAPHS + 1):
        previous = text.rfind("\n\n", 0, at)
        if previous < 0:
            at = 0
            break
        at = previous
    at = max(at, start - CONTEXT_CHARS)
    return at + 2 if text.startswith("\n\n", at) else at


def _paragraphs_forward(text: str, end: int) -> int:
    at = end
    for _ in range(CONTEXT_PARAGRAPHS + 1):
        following = text.find("\n\n", at + 1)
        if following < 0:
            at = len(text)
            break
        at = following
    return min(at, end + CONTEXT_CHARS)
