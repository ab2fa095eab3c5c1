"""Sentences of extracted text, as exact (start, end) spans, and which of them are labels.

One segmenter serves passage chunking, the extractive selector and the judge's training
data, so that what is indexed, what is quoted and what the judge learned on are the same
units. It is rule-based and deterministic:

- `.`, `!` or `?` end a sentence only before white space (or the end) and, for `.`, only
  when the next word could start a sentence: "user's .netrc file", "diff.relative",
  "3.5 kg", "v1.2.3" and "e.g. this" stay whole;
- a `.` after a known abbreviation ("Dr.", "approx.", "No. 5") or an initial ("J. R. R.
  Tolkien", "U.S. Army") does not end the sentence;
- closing quotes and brackets after the mark belong to the sentence that ends;
- a single line break is a wrapped line inside a sentence; a blank line ends it, and so
  does a line break before a list item ("- ", "* ", "• ", "1. ", "a) ").

Nothing here imports Django.
"""

import re
import unicodedata

# Lower-cased, without the final dot. Words that often end a sentence ("etc", "Inc")
# are kept out: after them a capitalised word is taken as a new sentence.
ABBREVIATIONS = frozenset(
    [
        "mr",
        "mrs",
        "ms",
        "dr",
        "prof",
        "sr",
        "jr",
        "st",
        "mt",
        "ft",
        "vs",
        "cf",
        "approx",
        "ca",
        "dept",
        "est",
        "eqs",
        "vols",
        "op",
        "ed",
        "eds",
        "rev",
        "gen",
        "col",
        "capt",
        "lt",
        "sgt",
        "cmdr",
        "adm",
        "gov",
        "pres",
        "sen",
        "rep",
        "hon",
        "jan",
        "feb",
        "mar",
        "apr",
        "jun",
        "jul",
        "aug",
        "sep",
        "sept",
        "oct",
        "nov",
        "dec",
        "mon",
        "tue",
        "tues",
        "wed",
        "thu",
        "thur",
        "thurs",
        "fri",
        "sat",
        "sun",
        "e.g",
        "i.e",
        "a.m",
        "p.m",
        "u.s",
        "u.k",
        "u.n",
        "et",
        "al",
        "viz",
        "resp",
        "approx",
        "incl",
        "excl",
        "max",
        "min",
    ]
)
# Abbreviations that are also words: only before a number are they abbreviations.
_BEFORE_NUMBERS = frozenset({"no", "nos", "pp", "vol", "fig", "figs", "eq", "art", "sec"})
_CLOSERS = "\"'”’»)]}"
_OPENERS = "\"'“‘«([{"
_LIST_ITEM = re.compile(r"[ \t]*(?:[-*•‣▪–]|\d{1,3}[.)]|[a-zA-Z][.)])[ \t]+\S")
_TERMINAL = re.compile(r"[.!?…][\"'”’»)\]}]*$")
_WORD = re.compile(r"\w+")
# A section number and a capitalised word: a numbered heading, when it ends without a mark.
# "2." or "2)" alone starts a list item instead.
_NUMBERED_HEADING = re.compile(r"\d{1,3}(?:(?:\.\d{1,3})+\.?)?\s+[A-Z]")
NUMBERED_HEADING_MAX_WORDS = 12
LEADER_DOTS = 4  # "...." and more before a page number: a contents entry, not an ellipsis


def _previous_token(text: str, position: int, floor: int) -> str:
    """The run of non-space characters that ends at `position` (the mark's index)."""
    start = position
    while start > floor and not text[start - 1].isspace():
        start -= 1
    return text[start:position]


def _ends_sentence(text: str, mark: int, after: int, end: int, floor: int) -> bool:
    """Whether the mark at `mark` (with closers up to `after`) ends a sentence."""
    if after < end and not text[after].isspace():
        return False  # "diff.relative", ".netrc", "3.5", "v1.2"
    if text[mark] in "!?…":
        return True
    token = _previous_token(text, mark, floor).lstrip(_OPENERS)
    if not token:
        return False  # " . " inside a sentence ("a user's .")
    bare = token.casefold()
    if bare in _BEFORE_NUMBERS:
        return not _next_word(text, after, end)[:1].isdigit()  # "No. 5", but "said no."
    if bare in ABBREVIATIONS:
        return False
    if len(token) == 1 and token.isalpha() and token.isupper():
        return False  # an initial: "J. R. R. Tolkien"
    if re.fullmatch(r"(?:[A-Za-z]\.)+[A-Za-z]", token):
        return False  # "U.S", "e.g" written without the last dot counted
    following = _next_word(text, after, end)
    if not following:
        return True
    first = following[0]
    # A sentence starts with a capital, a digit, a quote or bracket, or a symbol.
    return not (first.isalpha() and first.islower())


def _next_word(text: str, position: int, end: int) -> str:
    while position < end and text[position].isspace():
        position += 1
    stop = position
    while stop < end and not text[stop].isspace():
        stop += 1
    return text[position:stop]


def sentence_spans(text: str, start: int = 0, end: int | None = None) -> list[tuple[int, int]]:
    """The sentences of `text[start:end]` as trimmed, non-empty (start, end) spans."""
    end = len(text) if end is None else end
    spans: list[tuple[int, int]] = []
    cursor = start
    position = start
    while position < end:
        char = text[position]
        if char == "\n":
            line_end = position
            following = position + 1
            blank = False
            while following < end and text[following] in " \t\n":
                if text[following] == "\n":
                    blank = True
                following += 1
            if blank or _LIST_ITEM.match(text, position + 1, end):
                spans.append((cursor, line_end))
                cursor = following
            position = following
            continue
        if char in ".!?…":
            mark = position
            after = position + 1
            while after < end and text[after] in ".!?…":
                after += 1
            while after < end and text[after] in _CLOSERS:
                after += 1
            if _ends_sentence(text, mark, after, end, cursor):
                spans.append((cursor, after))
                cursor = after
            position = after
            continue
        position += 1
    spans.append((cursor, end))
    return [span for span in (trim_span(text, a, b) for a, b in spans) if span[1] > span[0]]


def trim_span(text: str, start: int, end: int) -> tuple[int, int]:
    """(start, end) without white space at either end."""
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


def _folded(text: str) -> str:
    return " ".join(_WORD.findall(unicodedata.normalize("NFKC", text).casefold()))


def without_leaders(text: str) -> str:
    """The text without the dot leaders and page number that end a contents entry ("2.1
    Syntax . . . . 7"); unchanged when it has none. Linear: no pattern scans a long run of
    dots from each of its positions."""
    body = text.rstrip("0123456789 \t")
    bare = body.rstrip(". \t")
    return bare if body.count(".", len(bare)) >= LEADER_DOTS else text


_QUESTION_END = re.compile(r"[?？][\"'”’»)\]}]*$")


def is_question(sentence: str) -> bool:
    """A sentence that asks ("Who is collecting my information?", an FAQ's question): it
    answers nothing, whatever it shares with the question asked. Quoted after the sentence
    before it, or before its answer, it may be part of a quote; never its end."""
    return bool(_QUESTION_END.search(sentence.strip()))


def is_label(sentence: str, *, headings: list[str] | tuple[str, ...] = (), title: str = "") -> bool:
    """A heading, title, table header or other label: never a quote on its own.

    It is one if it repeats a heading of its path or the document title, or if it has no
    sentence-final mark and is either very short, numbered like a section ("2.1 Follow-up
    work") or written like a title ("First Battle of Bull Run", "Retention", "Travel policy").
    """
    folded = _folded(sentence)
    if not folded:
        return True
    if any(folded == _folded(heading) for heading in headings if heading):
        return True
    if title and folded == _folded(title):
        return True
    # An entry of a table of contents: its dot leaders (and page number) say nothing.
    stripped = without_leaders(sentence.strip())
    if _TERMINAL.search(stripped):
        return False
    words = _WORD.findall(stripped)
    if len(words) <= 4:
        return True
    if _NUMBERED_HEADING.match(stripped) and len(words) <= NUMBERED_HEADING_MAX_WORDS:
        return True  # "2.1 Follow-up work", "3 Invoking the parser" (issue 51)
    significant = [word for word in words if len(word) > 3]
    return bool(significant) and all(word[:1].isupper() or word.isdigit() for word in significant)


# Names a reader types as the text writes them, which stemming would blur into common
# words ("--pages" into "page"): a command-line option, a snake_case or dotted name, a
# camelCase name ("e.g." and "U.S." are none: each part of a dotted name has two letters).
_CODE_NAME = re.compile(
    r"(?<![\w-])(?:--?[A-Za-z][\w-]*|\w*[A-Za-z]\w+(?:[._]\w{2,})+|[a-z]+[A-Z]\w*)"
)


def code_names(text: str) -> list[str]:
    """The names `text` writes as code, each once, in order: a passage holds one only if
    it holds it verbatim (case aside), whatever words stemming would match it with."""
    return list(dict.fromkeys(match.group() for match in _CODE_NAME.finditer(text)))
