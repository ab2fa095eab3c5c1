"""The source view: a quote shown inside its document's admitted text (issue 29).

A citation of a sealed answer links here. The page reads the answer through the sealed-read
boundary (a reader who lost access, a withdrawn or erased source: no citation, so 404, like
a made-up id) and the document through the permission-scoped selector; the text is the
admitted extraction the quote was verified against, around the quote's own offsets.
"""

import re
from dataclasses import dataclass

from answers.boundary import sealed_answer_read
from answers.models import AnswerRun, CandidateFact
from chat.page_image import PageUnavailable, page_png
from core.errors import NotFoundError
from core.types import User
from knowledge.display import INVISIBLE, single_line
from knowledge.models import DocumentKind, DocumentRevision, Extraction, ExtractionStatus
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
    kind: str = ""  # the document's kind: a PDF's page is shown as an image too
    # The context was cut inside a paragraph (CONTEXT_CHARS), at a word boundary: the page
    # shows an ellipsis there.
    cut_before: bool = False
    cut_after: bool = False

    @property
    def headings(self) -> list[str]:
        return [single_line(h) for h in self.locator.get("headings", [])]

    @property
    def page(self) -> int | None:
        page = self.locator.get("page")
        return page if isinstance(page, int) and page > 0 else None

    @property
    def has_page_image(self) -> bool:
        return self.kind == DocumentKind.PDF and self.page is not None

    @property
    def shown(self) -> tuple[str, str, str]:
        """Before, quote, after for display: a line break inside a paragraph is shown as a
        space (the file's hard wrapping), paragraphs and list items keep theirs, and
        invisible and bidi control characters are removed. The text, its offsets and the
        line-range locator stay those of the admitted extraction."""
        joined = reflow(self.before + self.quote + self.after)
        first, second = len(self.before), len(self.before) + len(self.quote)
        before, quote, after = (joined[:first], joined[first:second], joined[second:])
        return INVISIBLE.sub("", before), INVISIBLE.sub("", quote), INVISIBLE.sub("", after)


def quote_source(*, user: User, run: AnswerRun, generation: int, number: int) -> QuoteSource:
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
    extraction_id = source.get("extraction_id")
    extraction = (
        Extraction.objects.select_related("revision")
        .filter(
            pk=extraction_id,
            revision_id=citation["revision_id"],
            revision__document=document,
            status=ExtractionStatus.ADMITTED,
        )
        .first()
        if extraction_id is not None
        else None
    )
    if extraction is None or not extraction.text:
        raise NotFoundError("Citation not found.")
    text = extraction.text
    start, end = _quote_span(text, citation["quote"], source)
    before_start, cut_before = _paragraphs_back(text, start)
    after_end, cut_after = _paragraphs_forward(text, end)
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
        kind=document.kind,
        cut_before=cut_before,
        cut_after=cut_after,
    )


def quote_page_image(*, user: User, run: AnswerRun, generation: int, number: int) -> bytes:
    """The PDF page of citation `number`, its quote's lines marked, read through the same
    checks as `quote_source`; NotFoundError when there is no page to show (not a PDF, no
    page in the locator, or the page cannot be rendered)."""
    found = quote_source(user=user, run=run, generation=generation, number=number)
    if not found.has_page_image or found.page is None or not found.revision.file:
        raise NotFoundError("Page not found.")
    try:
        with found.revision.file.open("rb") as stored:
            data = stored.read()
        return page_png(data=data, page=found.page, quote=found.quote)
    except (OSError, PageUnavailable):
        raise NotFoundError("Page not found.") from None


# A line break that is not a paragraph break, and whose next line does not start a list
# item, a heading or a table row: the file's hard wrapping.
_WRAPPED = re.compile(r"(?<=[^\n])\n(?=[^\n\s#>|*\-+\d•])")


def reflow(text: str) -> str:
    """Hard-wrapped lines joined with spaces, character for character (the same length,
    so offsets into the text stay valid)."""
    return _WRAPPED.sub(" ", text)


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


_SPACE = re.compile(r"\s+")


def _paragraphs_back(text: str, start: int) -> tuple[int, bool]:
    """Where the context before the quote starts, and whether it was cut inside a
    paragraph: then after a white space, so that it starts on a whole word (text with no
    space in the window, as Japanese, is cut at the limit)."""
    at = start
    for _ in range(CONTEXT_PARAGRAPHS + 1):
        previous = text.rfind("\n\n", 0, at)
        if previous < 0:
            at = 0
            break
        at = previous
    limit = start - CONTEXT_CHARS
    if at >= limit:
        return (at + 2 if text.startswith("\n\n", at) else at), False
    if text[limit - 1].isspace():
        return limit, True
    space = _SPACE.search(text, limit, start)
    return (space.end() if space else limit), True


def _paragraphs_forward(text: str, end: int) -> tuple[int, bool]:
    """Where the context after the quote ends, and whether it was cut inside a paragraph:
    then before a white space, so that it ends on a whole word."""
    at = end
    for _ in range(CONTEXT_PARAGRAPHS + 1):
        following = text.find("\n\n", at + 1)
        if following < 0:
            at = len(text)
            break
        at = following
    limit = end + CONTEXT_CHARS
    if at <= limit:
        return at, False
    if text[limit].isspace():
        return limit, True
    spaces = [m.start() for m in _SPACE.finditer(text, end, limit)]
    return (spaces[-1] if spaces else limit), True
