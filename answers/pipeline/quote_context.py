"""What the judge reads of a quote besides the quote itself: the title and heading path it
stands under (`context_line`) and the sentence just before it (`sentence_before`). Pure, and
shared by the support judgement and the extractive provider, so both read a quote alike."""

from knowledge.sentences import sentence_spans


def context_line(title: str, headings: "list[str] | tuple[str, ...]") -> str:
    """A quote's title and heading path, as the judge reads them: what it is about."""
    return " › ".join([title, *headings]).strip(" ›")


def sentence_before(text: str, start: int | None) -> str:
    """The sentence just before offset `start` of a candidate's text ("" at its start): the
    subject of "It is kept for twelve years." is often there."""
    if not start:
        return ""
    spans = sentence_spans(text, 0, start)
    return text[slice(*spans[-1])].strip() if spans else ""
