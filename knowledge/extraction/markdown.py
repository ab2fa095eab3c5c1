"""Markdown: markdown-it-py tokens as primary, the mistune AST as the second reading.

Both render to plain text without markup characters: one piece per heading,
paragraph, list item paragraph, table cell or code block. Raw HTML blocks are
dropped in both, since their tags are markup and their text is rarely prose.
"""

from __future__ import annotations

import html

import mistune
from markdown_it import MarkdownIt
from markdown_it.token import Token

from .base import ExtractionResult, Limits, TextBuilder, dist_version
from .text import decode_or_raise

_INLINE_BLOCKS = frozenset({"paragraph", "block_text", "table_cell"})


class _HeadingPath:
    """The heading path of each piece, and the structure it stands in (knowledge.structure):
    a list item ("block": "item") or a table cell ("block": "cell" with its table, row and
    whether it is a header cell)."""

    def __init__(self, builder: TextBuilder) -> None:
        self._builder = builder
        self._path: list[tuple[int, str]] = []
        self.items = 0  # list items open around the piece
        self.tables = 0  # tables seen so far: the current one's number
        self.row = 0
        self.cell: bool | None = None  # None outside a cell, else whether a header cell

    def heading(self, level: int, title: str) -> None:
        title = " ".join(title.split())
        if title:
            self._path = [entry for entry in self._path if entry[0] < level]
            self._path.append((level, title))
        self.block(title)

    def block(self, text: str) -> None:
        locator: dict = {"headings": [title for _, title in self._path]}
        if self.cell is not None:
            locator |= {"block": "cell", "table": self.tables, "row": self.row}
            locator["header"] = self.cell
        elif self.items:
            locator["block"] = "item"
        self._builder.add(text, locator)

    def table_start(self) -> None:
        self.tables += 1
        self.row = 0


def _render_it_inline(children: list[Token]) -> str:
    parts: list[str] = []
    for token in children:
        if token.type in ("text", "text_special", "code_inline"):
            parts.append(token.content)
        elif token.type in ("softbreak", "hardbreak"):
            parts.append("\n")
        elif token.type == "image":
            parts.append(_render_it_inline(token.children or []))
    return "".join(parts)


def extract_primary(data: bytes, limits: Limits) -> ExtractionResult:
    parser = MarkdownIt("commonmark").enable(["table", "strikethrough"])
    tokens = parser.parse(decode_or_raise(data))
    builder = TextBuilder(limits)
    path = _HeadingPath(builder)
    for index, token in enumerate(tokens):
        if token.type == "list_item_open":
            path.items += 1
        elif token.type == "list_item_close":
            path.items -= 1
        elif token.type == "table_open":
            path.table_start()
        elif token.type == "tr_open":
            path.row += 1
        elif token.type in ("th_open", "td_open"):
            path.cell = token.type == "th_open"
        elif token.type in ("th_close", "td_close"):
            path.cell = None
        elif token.type == "inline":
            opener = tokens[index - 1] if index else None
            text = _render_it_inline(token.children or [])
            if opener is not None and opener.type == "heading_open":
                path.heading(int(opener.tag[1]), text)
            else:
                path.block(text)
        elif token.type in ("fence", "code_block"):
            path.block(token.content)
    return builder.result("markdown-it-py", dist_version("markdown-it-py"))


def _render_mistune_inline(children: list[dict]) -> str:
    parts: list[str] = []
    for node in children:
        kind = node.get("type")
        if kind == "text":
            # mistune's AST keeps character references undecoded; markdown-it decodes them.
            parts.append(html.unescape(node.get("raw", "")))
        elif kind == "codespan":
            parts.append(node.get("raw", ""))
        elif kind in ("softbreak", "linebreak"):
            parts.append("\n")
        elif kind != "inline_html":
            parts.append(_render_mistune_inline(node.get("children") or []))
    return "".join(parts)


def _walk_mistune(nodes: list[dict], path: _HeadingPath) -> None:
    for node in nodes:
        kind = node.get("type")
        if kind == "heading":
            path.heading(node["attrs"]["level"], _render_mistune_inline(node.get("children") or []))
        elif kind == "table_cell":
            path.cell = bool((node.get("attrs") or {}).get("head"))
            path.block(_render_mistune_inline(node.get("children") or []))
            path.cell = None
        elif kind in _INLINE_BLOCKS:
            path.block(_render_mistune_inline(node.get("children") or []))
        elif kind == "block_code":
            path.block(node.get("raw", ""))
        elif kind != "block_html":
            if kind == "table":
                path.table_start()
            elif kind in ("table_head", "table_row"):
                path.row += 1
            path.items += kind == "list_item"
            _walk_mistune(node.get("children") or [], path)
            path.items -= kind == "list_item"


def extract_secondary(data: bytes, limits: Limits) -> ExtractionResult:
    parser = mistune.create_markdown(renderer=None, plugins=["table", "strikethrough"])
    nodes = parser(decode_or_raise(data))
    builder = TextBuilder(limits)
    _walk_mistune(nodes if isinstance(nodes, list) else [], _HeadingPath(builder))
    return builder.result("mistune", dist_version("mistune"))
