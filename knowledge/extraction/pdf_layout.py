"""A PDF's page texts without the page's furniture, before anything is segmented (issue 51).

Both PDF readings (pdfplumber and pypdf) give each page's text line by line, with what the
typesetter put around the prose: running headers and footers, page numbers, a section
number on a line of its own, words hyphenated at a line end, and headings that a single
line break joins to the sentence under them (knowledge.sentences reads a single line break
as a wrapped line). Quotes cut from that text read "1 Introduction This document …" or
"man- agement". `pages_clean` removes or repairs these, by the same rules in both
readings, so that a quote cut from one is still found in the other (the quote checks of
answers.pipeline.validation compare words, not white space).

The rules, deterministic and pure (no Django, no dictionary):

- Running furniture: the first and last EDGE_LINES lines of each page are compared across
  pages with their digits masked ("Page 3 of 12" is "Page # of #"). A line whose masked
  form stands at a page edge on at least half the pages (and two at least) is removed from
  every page edge it stands at; so is a line that begins or ends with its page number
  ("Chapter 2: Syntax 7") on two pages at least, since it runs over one chapter's pages
  only; and so is a page number ("7", "- 7 -", "Page 7", "7 / 12", "iv") at any page edge.
  Lines are removed from the edges inwards only: a line repeated mid-page stays, and a page
  that would be left with nothing but page numbers keeps its other lines.
- A bare section number on a line of its own ("2", "2.1", "IV", "A.3") before a line that
  starts with a capital is the heading's number set apart: removed.
- A hyphen at a line end, after a letter, joins the first word of the next line (or of
  the next page) onto the line: "man-" / "agement of" becomes "management" / "of". The
  hyphen is dropped when the next line starts in lower case and the part before it is a
  word fragment: letters only, with no hyphen of its own. It is kept ("end-to-end",
  "Jean-Pierre", "COVID-19") when that part already holds a hyphen, when the next line
  starts with a capital or a digit, or when the document's own words say it is a compound:
  it never writes the two parts joined, and either writes them hyphenated inside a line
  ("well-known") or uses both as words on their own ("customer-" / "facing" where
  "customer" and "facing" stand alone elsewhere). So "man-agement", "configu-ration" and
  "test-ed" join; "some-thing" stays hyphenated unless "something" occurs elsewhere. A
  dictionary would know more words; this reads only the document, the same way in both
  readings, and a kept hyphen is still joined to its word, with no line break inside.
- A heading is a line on its own paragraph: a line of at most HEADING_MAX_WORDS words,
  shorter than HEADING_SHARE of the document's usual line, that starts with a capital or a
  number, ends without punctuation, follows the start of the page, a blank line, a sentence
  end or another short line, and stands over a line that starts with a capital (or with a
  numbered heading, or a list item); a numbered one ("3.1 Invoking the parser") may stand
  over any line. It gets a blank line either side, which ends the sentence there, and so
  does an entry of a table of contents ("2.1 Syntax . . . . 7").
"""

from __future__ import annotations

import itertools
import math
import re
import statistics

EDGE_LINES = 3  # lines at the top and at the bottom of a page where furniture stands
REPEAT_SHARE = 0.5  # running headers alternate between even and odd pages
HEADING_MAX_WORDS = 10
HEADING_SHARE = 0.7
LEADER_DOTS = 4  # dots before a page number that make a line a contents entry
SHORT_LINE = 40  # page and section numbers are short: longer lines are not matched at all

# A line whose only word moved up to the line before: gone, not a blank line (which would
# end the sentence there).
_EMPTIED = "\x00"
_DIGITS = re.compile(r"\d+")
_NUMBERED_EDGE = re.compile(r"^#\s|\s#$")
_PAGE_NUMBER = re.compile(
    r"(?:page|p\.|seite|pag\.?|página)?\s*[-–—(\[]?\s*\d{1,5}\s*[-–—)\]]?"
    r"(?:\s*(?:/|of|von|de|sur)\s*\d{1,5})?"
    r"|(?-i:[ivxlc]{1,7})",  # front matter's lower-case Roman numerals
    re.IGNORECASE,
)
_SECTION_NUMBER = re.compile(r"(?:\d{1,3}(?:\.\d{1,3})*|[IVXLC]{1,6}|[A-Z](?:\.\d{1,3})+)\.?")
_NUMBERED_HEADING = re.compile(r"\d{1,3}(?:(?:\.\d{1,3})+\.?)?\s+[A-Z]")
_LIST_ITEM = re.compile(r"[-*•‣▪–]\s*\S|\d{1,3}[.)]\s+\S")
_FIRST_WORD = re.compile(r"(\S+)\s*")
_LEADING_LETTERS = re.compile(r"[^\W\d_]+")
_WORDS = re.compile(r"[^\W\d_]+(?:-[^\W\d_]+)*")
# Starts only where a run of letters starts: one pass over a long run, not one per letter.
_LINE_BREAK_HYPHEN = re.compile(r"(?<![^\W\d_])[^\W\d_]+-\s*\n\s*[^\W\d_]+")
_ENDS_SENTENCE = re.compile(r"[.!?:;…][\"'”’»)\]]*$")
_NO_HEADING_END = re.compile(r"[.!?:;,…\-–—]$")


def pages_clean(pages: list[str]) -> list[str]:
    """The pages' texts without running headers, footers, page and bare section numbers,
    with hyphenated line breaks joined and headings set apart as their own paragraphs.

    Each page's text is its lines separated by "\\n"; the result has one text per page, in
    the same order (a page left with nothing is ""), so page locators stay as they were.
    """
    lines = [[line.strip() for line in page.split("\n")] for page in pages]
    lines = _without_furniture(lines)
    lines = [_without_section_numbers(page) for page in lines]
    lines = _hyphens_joined(lines)
    width = _usual_width(lines)
    return ["\n".join(_headings_apart(page, width)).strip("\n") for page in lines]


def _is_page_number(line: str) -> bool:
    return len(line) <= SHORT_LINE and bool(_PAGE_NUMBER.fullmatch(line))


def _masked(line: str) -> str:
    return _DIGITS.sub("#", " ".join(line.split())).casefold()


def _edges(page: list[str]) -> tuple[list[int], list[int]]:
    """The indexes of a page's first and last EDGE_LINES lines with text, outermost first."""
    filled = [index for index, line in enumerate(page) if line]
    return filled[:EDGE_LINES], filled[::-1][:EDGE_LINES]


def _without_furniture(pages: list[list[str]]) -> list[list[str]]:
    counts: dict[str, int] = {}
    for page in pages:
        top, bottom = _edges(page)
        for key in {_masked(page[index]) for index in top + bottom}:
            counts[key] = counts.get(key, 0) + 1
    with_text = sum(1 for page in pages if any(page))
    needed = max(2, math.ceil(with_text * REPEAT_SHARE))
    # A line that carries the page number at its start or end ("Chapter 2: Syntax 7") runs
    # over a chapter's pages only: two of them are enough.
    running = {
        key
        for key, count in counts.items()
        if count >= needed or (count >= 2 and _NUMBERED_EDGE.search(key))
    }

    def furniture(line: str) -> bool:
        return _masked(line) in running or _is_page_number(line)

    cleaned = []
    for page in pages:
        top, bottom = _edges(page)
        removed: set[int] = set()
        for edge in (top, bottom):
            for index in edge:
                if index in removed:
                    continue
                if not furniture(page[index]):
                    break
                removed.add(index)
        kept = [line for index, line in enumerate(page) if index not in removed]
        if not any(kept):
            # Every line "runs" ("Ticket 1", "Ticket 2" …, one a page): it is the content.
            kept = [line for line in page if not _is_page_number(line)]
        cleaned.append(kept)
    return cleaned


def _without_section_numbers(page: list[str]) -> list[str]:
    kept = []
    for index, line in enumerate(page):
        if len(line) <= SHORT_LINE and _SECTION_NUMBER.fullmatch(line):
            following = next((page[j] for j in range(index + 1, len(page)) if page[j]), "")
            if following[:1].isupper():
                continue
        kept.append(line)
    return kept


def _hyphens_joined(pages: list[list[str]]) -> list[list[str]]:
    """Every hyphenated line end joined with the first word after it (see the module
    docstring for when the hyphen stays)."""
    text = "\n".join("\n".join(page) for page in pages).casefold()
    # The document's words inside lines: the parts of words broken at a line end are not.
    words = set(_WORDS.findall(_LINE_BREAK_HYPHEN.sub(" ", text)))
    hyphenated = {word for word in words if "-" in word}
    plain = words - hyphenated
    # Every line with text in reading order: (page, line) positions.
    positions = [(p, i) for p, page in enumerate(pages) for i, line in enumerate(page) if line]
    pages = [list(page) for page in pages]
    for (page, index), (next_page, next_index) in itertools.pairwise(positions):
        line, following = pages[page][index], pages[next_page][next_index]
        if not line.endswith("-") or not following[:1].isalnum():
            continue
        before, fragment = _split_fragment(line)
        word = _FIRST_WORD.match(following)
        if not fragment or word is None:
            continue
        continuation = _LEADING_LETTERS.match(word.group(1))
        keep_hyphen = (
            "-" in before
            or continuation is None
            or not following[:1].islower()
            or _compound(fragment, continuation.group(), hyphenated, plain)
        )
        head = line if keep_hyphen else line[:-1]
        pages[page][index] = head + word.group(1)
        pages[next_page][next_index] = following[word.end() :] or _EMPTIED
    return [[line for line in page if line != _EMPTIED] for page in pages]


def _split_fragment(line: str) -> tuple[str, str]:
    """The last token of a line ending in "-", split into what comes before its last run of
    letters and that run ("end-to-" is "end-", "to"). Read from the end, in linear time."""
    token = line.rsplit(None, 1)[-1][:-1]
    start = len(token)
    while start and token[start - 1].isalpha():
        start -= 1
    return token[:start], token[start:]


def _compound(fragment: str, continuation: str, hyphenated: set[str], plain: set[str]) -> bool:
    """Whether the document's own words say "fragment-continuation" is a compound: it never
    writes them joined, and writes them hyphenated inside a line, or uses both on their own."""
    first, second = fragment.casefold(), continuation.casefold()
    if first + second in plain:
        return False
    return f"{first}-{second}" in hyphenated or (first in plain and second in plain)


def _usual_width(pages: list[list[str]]) -> float:
    widths = [len(line) for page in pages for line in page if line]
    return statistics.median(widths) if widths else 0.0


def _is_heading(line: str, previous: str | None, following: str, width: float) -> bool:
    if not line or not following or len(line.split()) > HEADING_MAX_WORDS:
        return False
    if len(line) > HEADING_SHARE * width or _NO_HEADING_END.search(line):
        return False
    if not (line[:1].isupper() or line[:1].isdigit()):
        return False
    numbered = bool(_NUMBERED_HEADING.match(line))
    if not (
        numbered
        or following[:1].isupper()
        or _NUMBERED_HEADING.match(following)
        or _LIST_ITEM.match(following)
    ):
        return False
    return (
        not previous
        or bool(_ENDS_SENTENCE.search(previous))
        or len(previous) <= HEADING_SHARE * width
    )


def _is_contents_entry(line: str) -> bool:
    """Dot leaders and a page number end the line ("2.1 Syntax . . . . 7"). Read from the
    end, in linear time: a hostile line of dots costs one pass."""
    body = line.rstrip("0123456789")
    if body == line:
        return False
    bare = body.rstrip(". \t")
    return body[len(bare) :].count(".") >= LEADER_DOTS


def _headings_apart(page: list[str], width: float) -> list[str]:
    out: list[str] = []
    previous: str | None = None
    for index, line in enumerate(page):
        if not line:
            out.append(line)
            previous = None
            continue
        following = page[index + 1] if index + 1 < len(page) else ""
        if _is_heading(line, previous, following, width) or _is_contents_entry(line):
            if out and out[-1]:
                out.append("")
            out += [line, ""]
        else:
            out.append(line)
        previous = line
    return out
