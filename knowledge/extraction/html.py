"""HTML: BeautifulSoup (html.parser) as primary, lxml.html (libxml2) as the second reading.

Both readings feed the same block collector, so they differ only in how each
parser repairs and interprets the markup, which is what the comparison is for.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Protocol

import lxml.html
from bs4 import BeautifulSoup
from bs4.element import NavigableString, PreformattedString, Tag

from .base import ExtractionError, ExtractionResult, Limits, TextBuilder, dist_version
from .text import decode_or_raise

if TYPE_CHECKING:
    from lxml.html import HtmlElement

DROPPED_TAGS = frozenset({"script", "style", "template", "noscript"})
HEADING_TAGS = {f"h{level}": level for level in range(1, 7)}
BLOCK_TAGS = frozenset(
    {
        "address",
        "article",
        "aside",
        "blockquote",
        "body",
        "caption",
        "dd",
        "details",
        "dialog",
        "div",
        "dl",
        "dt",
        "fieldset",
        "figcaption",
        "figure",
        "footer",
        "form",
        "head",
        "header",
        "hgroup",
        "hr",
        "html",
        "legend",
        "li",
        "main",
        "menu",
        "nav",
        "ol",
        "option",
        "p",
        "pre",
        "section",
        "summary",
        "table",
        "tbody",
        "td",
        "tfoot",
        "th",
        "thead",
        "title",
        "tr",
        "ul",
    }
)
# The structure a quote unit follows (knowledge.structure): the innermost of these a
# piece stands in is written into its locator as "block".
STRUCTURE_TAGS = {"li": "item", "dt": "term", "dd": "description", "td": "cell", "th": "cell"}
_SPACES = re.compile(r"\s+")
_HIDDEN_STYLE = re.compile(r"(?:^|;)\s*(?:display\s*:\s*none|visibility\s*:\s*hidden)\b", re.I)
_BREAK = "\x01"


class BlockCollector:
    """Turns a stream of text, line breaks, blocks and headings into located pieces."""

    def __init__(self, limits: Limits) -> None:
        self.builder = TextBuilder(limits)
        self._path: list[tuple[int, str]] = []
        self._buffer: list[str] = []
        self._heading_level = 0
        self._preformatted = 0
        self._structure: list[str] = []  # the open li/dt/dd/td/th, innermost last
        # Per open table: [its number, its current row].
        self._tables: list[list[int]] = []
        self._table_count = 0
        self._in_thead = 0

    def text(self, value: str) -> None:
        self._buffer.append(value if self._preformatted else _SPACES.sub(" ", value))

    def line_break(self) -> None:
        # A marker rather than "\n", so whitespace collapsing cannot eat it.
        self._buffer.append(_BREAK)

    def flush(self) -> None:
        if self._heading_level:
            return  # block markup nested inside a heading still belongs to the heading
        raw = "".join(self._buffer)
        self._buffer = []
        if self._preformatted:
            piece = raw.replace(_BREAK, "\n")
        else:
            piece = "\n".join(line.strip() for line in raw.split(_BREAK))
        if piece.strip():
            self.builder.add(piece, self._locator())

    def enter(self, name: str) -> None:
        self.flush()
        if name in HEADING_TAGS and not self._heading_level:
            self._heading_level = HEADING_TAGS[name]
        self._preformatted += name == "pre"
        self._structure_enter(name)

    def leave(self, name: str) -> None:
        if name in HEADING_TAGS and self._heading_level == HEADING_TAGS[name]:
            level, self._heading_level = self._heading_level, 0
            title = _SPACES.sub(" ", "".join(self._buffer).replace(_BREAK, " ")).strip()
            self._buffer = []
            if title:
                self._path = [entry for entry in self._path if entry[0] < level]
                self._path.append((level, title))
                self.builder.add(title, self._locator())
        self.flush()
        self._preformatted -= name == "pre"
        self._structure_leave(name)

    def _structure_enter(self, name: str) -> None:
        if name in STRUCTURE_TAGS:
            self._structure.append(name)
        elif name == "table":
            self._table_count += 1
            self._tables.append([self._table_count, 0])
        elif name == "tr" and self._tables:
            self._tables[-1][1] += 1
        elif name == "thead":
            self._in_thead += 1

    def _structure_leave(self, name: str) -> None:
        if name in STRUCTURE_TAGS and self._structure and self._structure[-1] == name:
            self._structure.pop()
        elif name == "table" and self._tables:
            self._tables.pop()
        elif name == "thead" and self._in_thead:
            self._in_thead -= 1

    def _locator(self) -> dict:
        locator: dict = {"headings": [title for _, title in self._path]}
        if self._structure and not self._heading_level:
            name = self._structure[-1]
            locator["block"] = STRUCTURE_TAGS[name]
            if locator["block"] == "cell" and self._tables:
                table, row = self._tables[-1]
                header = name == "th" or self._in_thead > 0
                locator |= {"table": table, "row": row, "header": header}
        return locator


# A child as the walk sees it: its text, or (tag name, node) for an element.
type _Child[N] = str | tuple[str, N]


def _soup_children(node: Tag) -> Iterator[_Child[Tag]]:
    for child in node.children:
        if isinstance(child, PreformattedString):
            continue  # comments, CDATA, doctype, processing instructions
        if isinstance(child, NavigableString):
            yield str(child)
        elif isinstance(child, Tag):
            yield child.name.lower(), child


def _lxml_children(element: HtmlElement) -> Iterator[_Child[HtmlElement]]:
    if element.text:
        yield element.text
    for child in element.iterchildren():
        # Comments and processing instructions have a non-string tag; their tail is still text.
        if isinstance(child.tag, str):
            yield child.tag.lower(), child
        if child.tail:
            yield child.tail


class _Attributes(Protocol):
    """An element's attributes as both parsers give them (bs4's dict, lxml's attrib)."""

    def __contains__(self, key: object, /) -> bool: ...
    def get(self, key: str, default: str, /) -> object: ...


def _hidden(attributes: _Attributes | None) -> bool:
    """Markup a reader never sees (`hidden`, `aria-hidden="true"`, an inline
    `display:none` or `visibility:hidden`): its text is not the document's visible text,
    so it is never quoted (a hidden instruction or a hidden "fact")."""
    if not attributes:
        return False
    if "hidden" in attributes:
        return True
    if str(attributes.get("aria-hidden", "")).strip().lower() == "true":
        return True
    return bool(_HIDDEN_STYLE.search(str(attributes.get("style", ""))))


def _attributes(node: Tag | HtmlElement) -> _Attributes:
    return node.attrs if isinstance(node, Tag) else node.attrib


def _walk[N: (Tag, HtmlElement)](
    root: N, collector: BlockCollector, children: Callable[[N], Iterator[_Child[N]]]
) -> None:
    """Depth-first walk with an explicit stack: hostile nesting must not hit the recursion limit.

    The children iterators are lazy, so a tail text is only produced after the
    subtree before it has been walked.
    """
    stack: list[tuple[Iterator[_Child[N]], str | None]] = [(children(root), None)]
    while stack:
        item = next(stack[-1][0], None)
        if item is None:
            closing = stack.pop()[1]
            if closing is not None:
                collector.leave(closing)
            continue
        if isinstance(item, str):
            collector.text(item)
            continue
        value, node = item
        if value == "br":
            collector.line_break()
        elif value not in DROPPED_TAGS and not _hidden(_attributes(node)):
            block = value in BLOCK_TAGS or value in HEADING_TAGS
            if block:
                collector.enter(value)
            stack.append((children(node), value if block else None))
    collector.flush()


def extract_primary(data: bytes, limits: Limits) -> ExtractionResult:
    soup = BeautifulSoup(decode_or_raise(data), "html.parser")
    collector = BlockCollector(limits)
    _walk(soup, collector, _soup_children)
    return collector.builder.result("beautifulsoup4", dist_version("beautifulsoup4"))


def extract_secondary(data: bytes, limits: Limits) -> ExtractionResult:
    text = decode_or_raise(data)
    if not text.strip():
        raise ExtractionError("no_text")
    # Handing lxml UTF-8 bytes with an explicit encoding sidesteps its refusal of
    # str input that carries an XML encoding declaration, and any <meta charset>.
    # huge_tree lifts libxml2's nesting limit of 256, past which it silently drops text.
    parser = lxml.html.HTMLParser(encoding="utf-8", huge_tree=True)
    root = lxml.html.document_fromstring(text.encode("utf-8"), parser=parser)
    collector = BlockCollector(limits)
    _walk(root, collector, _lxml_children)
    return collector.builder.result("lxml", dist_version("lxml"))
