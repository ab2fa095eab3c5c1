"""Text from documents, made safe to show inside text that koinon writes.

Document text is data: it must not be able to add a line, a citation or a closing
quotation mark to an answer, nor hide or reorder what a reader sees. So, for display:
line and paragraph breaks (including U+2028/2029 and NEL) and other control characters
become spaces, runs of white space fold to one, and bidirectional overrides, isolates and
zero-width characters are removed. The stored text and the verbatim quote in a citation
are never changed: verification compares normalised words, which this keeps.
"""

import re
import unicodedata

# Bidi embeddings/overrides/isolates/marks, zero-width space/joiners, word joiner and
# invisible operators, the BOM, and the Arabic letter mark.
INVISIBLE = re.compile("[\u061c\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff]")
_BREAKS = frozenset("\u2028\u2029\u0085")


def single_line(text: str) -> str:
    """One line with no control or invisible characters, white space folded."""
    text = INVISIBLE.sub("", text)
    text = "".join(
        " " if char in _BREAKS or unicodedata.category(char) in ("Cc", "Zl", "Zp") else char
        for char in text
    )
    return " ".join(text.split())


def quote_display(quote: str) -> str:
    """A quotation as it stands between koinon's own “ and ”: one line, and the document's
    double quotation marks shown as single ones, so that only koinon's marks open and
    close a quotation on the line."""
    return single_line(quote).replace("“", "‘").replace("”", "’")


_CITATION_MARK = re.compile(r"\[\s*\d+\s*\]")


def title_clean(title: str, limit: int = 300) -> str:
    """A title as stored: one line, no invisible characters."""
    return single_line(title)[:limit].strip()


def title_cited(title: str) -> str:
    """A document title as a citation line names it: `title_display`, set apart in « »
    like a file name (any « » of its own shown as ‹ ›), so words inside a title ("revision
    9", "approved by the board") cannot read as the citation's own text."""
    shown = title_display(title).translate(str.maketrans("«»", "‹›"))
    return f"«{shown}»"


def title_display(title: str) -> str:
    """A document title as it stands in text koinon writes: one line, its double
    quotation marks shown as single ones (as in `quote_display`) and no `[n]`, so a title
    can neither close a quotation nor forge a citation line."""
    return " ".join(_CITATION_MARK.sub(" ", quote_display(title)).split())
