"""DOCX: python-docx as primary (with heading paths), docx2txt as an independent second reading.

Both read the document body only (word/document.xml): page headers and footers
repeat on every page and would only add noise to retrieval.
"""

from __future__ import annotations

import io
import re
import zipfile
from collections.abc import Iterator
from typing import TYPE_CHECKING, cast

import docx
from docx.oxml.ns import qn
from docx.text.paragraph import Paragraph
from docx2txt.docx2txt import xml2text
from lxml import etree

from .base import (
    ExtractionError,
    ExtractionResult,
    Limits,
    TextBuilder,
    add_paragraphs,
    dist_version,
)

if TYPE_CHECKING:
    from docx.oxml.text.paragraph import CT_P
    from docx.oxml.xmlchemy import BaseOxmlElement
    from docx.types import ProvidesStoryPart

_DOCUMENT_XML = "word/document.xml"
_HEADING_STYLE = re.compile(r"^heading\s+([1-9])$", re.IGNORECASE)


def _check_archive(data: bytes, limits: Limits) -> None:
    """`too_large` before any parser builds a tree it cannot afford.

    A zip's declared sizes bound how much zipfile will inflate, so their sum is a
    cheap first check. Then the body's elements are counted by a streaming parse
    that frees each one: 70 KB of empty paragraphs can declare 8 million of them,
    which python-docx would hold as a 3 GB tree.
    """
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        if sum(info.file_size for info in archive.infolist()) > limits.max_decompressed:
            raise ExtractionError("too_large")
        count = 0
        with archive.open(_DOCUMENT_XML) as body:
            for _, element in etree.iterparse(
                body, events=("end",), resolve_entities=False, no_network=True
            ):
                count += 1
                if count > limits.max_elements:
                    raise ExtractionError("too_large")
                element.clear()
                parent = element.getparent()
                while parent is not None and element.getprevious() is not None:
                    del parent[0]


def _iter_paragraphs(
    container: BaseOxmlElement, parent: ProvidesStoryPart, tables: list[int] | None = None
) -> Iterator[tuple[Paragraph, dict]]:
    """Paragraphs in reading order, descending into tables and content controls, each with
    the structure it stands in (knowledge.structure): a table cell's table, row and whether
    that row is the header (marked as one, or the table's first row).

    python-docx's own iteration skips w:sdt blocks (tables of contents, form
    fields) that docx2txt reads, which would make the two readings disagree.
    """
    tables = [0] if tables is None else tables  # tables seen so far, shared with nested calls
    for child in container.iterchildren():
        if child.tag == qn("w:p"):
            yield Paragraph(cast("CT_P", child), parent), {}  # python-docx parses w:p as CT_P
        elif child.tag == qn("w:tbl"):
            tables[0] += 1
            table = tables[0]
            for number, row in enumerate(child.iterchildren(qn("w:tr")), start=1):
                header = number == 1 or row.find(f"{qn('w:trPr')}/{qn('w:tblHeader')}") is not None
                cell = {"block": "cell", "table": table, "row": number, "header": header}
                for cell_element in row.iterchildren(qn("w:tc")):
                    for paragraph, inner in _iter_paragraphs(cell_element, parent, tables):
                        yield paragraph, inner or cell
        elif child.tag == qn("w:sdt"):
            for content in child.iterchildren(qn("w:sdtContent")):
                yield from _iter_paragraphs(content, parent, tables)


def _is_list_item(paragraph: Paragraph) -> bool:
    """Numbered or bulleted: list numbering on the paragraph, or a "List …" style."""
    properties = paragraph._p.pPr
    if properties is not None and properties.find(qn("w:numPr")) is not None:
        return True
    style = paragraph.style
    return style is not None and (style.name or "").lower().startswith("list")


def _heading_level(paragraph: Paragraph) -> int | None:
    style = paragraph.style
    match = _HEADING_STYLE.match(style.name or "") if style is not None else None
    return int(match.group(1)) if match else None


def extract_primary(data: bytes, limits: Limits) -> ExtractionResult:
    _check_archive(data, limits)
    document = docx.Document(io.BytesIO(data))
    body = document.element.body
    builder = TextBuilder(limits)
    path: list[tuple[int, str]] = []
    for paragraph, structure in _iter_paragraphs(body, document):
        text = paragraph.text
        level = _heading_level(paragraph)
        if level is not None and text.strip():
            path = [entry for entry in path if entry[0] < level]
            path.append((level, " ".join(text.split())))
        locator: dict = {"headings": [title for _, title in path]} if path else {}
        if structure:
            locator |= structure
        elif level is None and _is_list_item(paragraph):
            locator["block"] = "item"
        builder.add(text, locator)
    return builder.result("python-docx", dist_version("python-docx"))


def extract_secondary(data: bytes, limits: Limits) -> ExtractionResult:
    _check_archive(data, limits)
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        xml = archive.read(_DOCUMENT_XML)
    builder = TextBuilder(limits)
    add_paragraphs(builder, xml2text(xml))
    return builder.result("docx2txt", dist_version("docx2txt"))
