"""Quote units that follow a document's structure (issue 47), as exact spans of its text.

A sentence is not always a quote on its own: "Complaints can be sent to the following
address:" says nothing without the address under it, and "Sets the largest file a person
may upload." answers "which setting?" only with the setting's name above it. Each shape
below is one candidate unit, one contiguous span of the extraction text (so both quote
checks and one citation hold), never crossing a heading:

- `lead_in`: a sentence ending in ":" or "the following …" and what it introduces: the
  rest of its block (lines, "- " items) or, when it ends its block, the list items that
  follow (or, unmarked, the one short block that follows);
- `term`: a definition-list term (<dt>) and its description (<dd>);
- `label`: a one-line label block and the one short sentence under it, in a block of its
  own (plain text, Markdown bold lines: formats that do not mark a definition list);
- `row`: a table row's cells, with the header row when it stands just above (a header
  further up is not contiguous with the row: the row alone, whose cells name it).

Each unit names the part (`alone`) that is not an answer without the rest: the lead-in,
the description, the value, the row's cells. A selector quotes that part only inside
the unit. The structure comes from the segment locators the extractors write ("block":
item, term, description, cell with table, row and header); plain text and PDF have none,
and their line layout already keeps a label line and the line under it in one sentence
(knowledge.sentences: a single line break does not end one).

Nothing here imports Django.
"""

import re
from dataclasses import dataclass

from knowledge.normalise import normalised_key
from knowledge.sentences import is_label, sentence_spans

MAX_UNIT_CHARS = 600  # a unit stays a quotation, not a section
MAX_PIECES = 8  # lines or items a lead-in takes at most
LEAD_IN_MIN_WORDS = 3  # "Address:" is a label, "Send complaints to:" a lead-in
LABEL_MAX_WORDS = 12
SHORT_VALUE_WORDS = 6  # a value this short under a title-like line makes it a label
# What only a label line has, not a heading: a colon, code-like names (snake_case, dotted,
# --flags, paths, camelCase, CAPITALS), digits.
_LABEL_LIKE = re.compile(r"[:_/`=]|--|\w\.\w|\d|\b[A-Z]{2,}\b|[a-z][A-Z]")
VALUE_MAX_CHARS = 300

_LEAD_IN = re.compile(r"(?::|\bthe following(?:\s+\w+){0,3})\s*$", re.IGNORECASE)
_DIGIT = re.compile(r"\d")


@dataclass(frozen=True)
class Block:
    """A located piece of one extraction, in reading order (a passage, or the merged
    passages of one segment)."""

    start: int
    end: int
    locator: dict

    @property
    def kind(self) -> str:
        return str(self.locator.get("block", ""))

    @property
    def headings(self) -> tuple[str, ...]:
        return tuple(self.locator.get("headings") or ())


@dataclass(frozen=True)
class Unit:
    kind: str  # lead_in | term | label | row
    start: int
    end: int
    alone_start: int  # the part never quoted without the rest of the unit
    alone_end: int


def structured_units(text: str, blocks: list[Block], *, title: str = "") -> list[Unit]:
    """The structured units of `text` that the given blocks (passages of one extraction,
    any order) hold, in order of their start."""
    merged = _segments(blocks)
    units: list[Unit] = []
    for index in range(len(merged)):
        units += _lead_ins(text, merged, index, title)
        unit = _term(text, merged, index) or _label(text, merged, index, title)
        if unit is not None:
            units.append(unit)
    units += _rows(merged)
    return sorted(set(units), key=lambda u: (u.start, u.end))


def _segments(blocks: list[Block]) -> list[Block]:
    """Passages of one segment overlap or abut (knowledge.chunking): back to one block."""
    merged: list[Block] = []
    for block in sorted(blocks, key=lambda b: (b.start, b.end)):
        if merged and block.start <= merged[-1].end and block.locator == merged[-1].locator:
            last = merged[-1]
            merged[-1] = Block(last.start, max(last.end, block.end), last.locator)
        elif not merged or block.start >= merged[-1].end:
            merged.append(block)
    return merged


def _is_heading(text: str, headings: tuple[str, ...], title: str) -> bool:
    key = normalised_key(text)
    return not key or any(key == normalised_key(h) for h in (*headings, title) if h)


def _follows(text: str, first: Block, block: Block, title: str) -> bool:
    """May `block` be joined to a unit that `first` begins? Same section, not a heading."""
    return block.headings == first.headings and not _is_heading(
        text[block.start : block.end], block.headings, title
    )


def _lead_ins(text: str, blocks: list[Block], index: int, title: str) -> list[Unit]:
    block = blocks[index]
    if block.kind == "cell":
        return []
    sentences = sentence_spans(text, block.start, block.end)
    units = []
    for number, (start, end) in enumerate(sentences):
        sentence = text[start:end]
        if not _LEAD_IN.search(sentence) or len(sentence.split()) < LEAD_IN_MIN_WORDS:
            continue
        if number + 1 < len(sentences):
            pieces = sentences[number + 1 :]  # the lines or items of its own block
        else:
            pieces = _introduced_blocks(text, blocks, index, title)
        last = None
        for count, (_, piece_end) in enumerate(pieces, start=1):
            if count > MAX_PIECES or piece_end - start > MAX_UNIT_CHARS:
                break
            last = piece_end
        if last is not None:
            units.append(Unit("lead_in", start, last, start, end))
    return units


def _introduced_blocks(
    text: str, blocks: list[Block], index: int, title: str
) -> list[tuple[int, int]]:
    """What a lead-in ending its block introduces: the list items that follow it, or
    (unmarked) the one block after it."""
    first = blocks[index]
    following = blocks[index + 1 :]
    if not following or not _follows(text, first, following[0], title):
        return []
    if following[0].kind == "item":
        items = []
        for block in following:
            if block.kind != "item" or not _follows(text, first, block, title):
                break
            items.append((block.start, block.end))
        return items
    if following[0].kind in ("", "description"):
        return [(following[0].start, following[0].end)]
    return []


def _first_sentence(text: str, block: Block) -> tuple[int, int]:
    spans = sentence_spans(text, block.start, block.end)
    return spans[0] if spans else (block.start, block.end)


def _with_value(kind: str, text: str, start: int, value: Block) -> Unit | None:
    """A label or term from `start` with its value: the whole value block when the unit
    stays short, else its first sentence; None when even that is too long."""
    first = _first_sentence(text, value)
    for end in (value.end, first[1]):
        if end - start <= MAX_UNIT_CHARS:
            return Unit(kind, start, end, *first)
    return None


def _term(text: str, blocks: list[Block], index: int) -> Unit | None:
    """A description and the term(s) just above it."""
    block = blocks[index]
    if block.kind != "description" or not index:
        return None
    start = None
    for previous in reversed(blocks[:index]):
        if previous.kind != "term" or previous.headings != block.headings:
            break
        start = previous.start
    return None if start is None else _with_value("term", text, start, block)


def _label(text: str, blocks: list[Block], index: int, title: str) -> Unit | None:
    """An unmarked one-line label block and the short value block under it. The value must
    say something (not a label itself, unless it holds a number: "Port" / "8080"), so two
    headings of a plain text never make a unit; and it is one sentence, since a heading
    that plain text cannot mark usually stands over a paragraph of several."""
    block = blocks[index]
    if block.kind or index + 1 >= len(blocks):
        return None
    label = text[block.start : block.end]
    value = blocks[index + 1]
    if (
        "\n" in label
        or len(label.split()) > LABEL_MAX_WORDS
        or _is_heading(label, block.headings, title)
        or not is_label(label, headings=block.headings, title=title)
        or value.kind
        or not _follows(text, block, value, title)
        or value.end - value.start > VALUE_MAX_CHARS
        or len(sentence_spans(text, value.start, value.end)) != 1
    ):
        return None
    said = text[value.start : value.end]
    if is_label(said, headings=value.headings, title=title) and not _DIGIT.search(said):
        return None
    if not _LABEL_LIKE.search(label) and len(said.split()) > SHORT_VALUE_WORDS:
        # A plain title over a sentence of prose ("Shipping guide" / "Parcels leave the
        # warehouse every weekday at noon …"): a heading plain text cannot mark, never
        # glued to the sentence. A label names a thing (`upload_max_mb`, "Port:", "Phone
        # 2") or stands over a short value ("Emergency number" / "0800 123 456").
        return None
    return _with_value("label", text, block.start, value)


def _rows(blocks: list[Block]) -> list[Unit]:
    """Each table row that is not a header row, with the header row when it is just above."""
    rows: dict[tuple[object, object], list[Block]] = {}
    for block in blocks:
        if block.kind == "cell":
            rows.setdefault((block.locator.get("table"), block.locator.get("row")), []).append(
                block
            )
    units = []
    for (table, row), cells in rows.items():
        if all(cell.locator.get("header") for cell in cells):
            continue
        start, end = cells[0].start, cells[-1].end
        above = rows.get((table, row - 1)) if isinstance(row, int) else None
        header_start = start
        if above and all(cell.locator.get("header") for cell in above):
            header_start = above[0].start
        if header_start == start and len(cells) < 2:
            continue  # one cell alone is no row to complete
        if end - header_start <= MAX_UNIT_CHARS:
            units.append(Unit("row", header_start, end, start, end))
        elif end - start <= MAX_UNIT_CHARS and len(cells) > 1:
            units.append(Unit("row", start, end, start, end))
    return units
