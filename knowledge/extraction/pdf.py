"""PDF: pdfplumber (pdfminer.six underneath) as primary, pypdf as an independent second reading.

Both readings collect their pages' texts, then clean them with the same rules
(knowledge.extraction.pdf_layout: running headers and footers, page and section numbers,
hyphenated line breaks, headings) before the text is built; `clean=False` keeps the raw
page texts (the bench's "before": bench/pdf_quotes.py).

A PDF counts as "encrypted" when it cannot be opened with the empty password:
owner-password-only files (printing/copying restrictions) open for both
libraries and are extracted normally.
"""

from __future__ import annotations

import io
import re
import zlib

import pdfplumber
from pdfminer.pdfdocument import PDFEncryptionError, PDFPasswordIncorrect
from pypdf import PasswordType, PdfReader
from pypdf.errors import LimitReachedError

from .base import ExtractionError, ExtractionResult, Limits, TextBuilder, dist_version
from .pdf_layout import pages_clean

_STREAM_START = re.compile(rb"(?<!end)stream\r?\n")
_INFLATE_CHUNK = 1024 * 1024


def check_streams(data: bytes, limits: Limits) -> None:
    """`too_large` when the file's Flate streams inflate past limits.max_decompressed.

    Both libraries inflate a stream whole before looking at it (pdfminer without
    any bound), so a 300 KB file can hold a 300 MB stream. Every `stream` keyword
    is tried as the start of a zlib stream, inflated in bounded steps and
    discarded; whatever is not zlib data stops at its first bytes.
    """
    budget = limits.max_decompressed
    for match in _STREAM_START.finditer(data):
        inflater = zlib.decompressobj()
        position = match.end()
        try:
            while not inflater.eof and position < len(data):
                pending = data[position : position + _INFLATE_CHUNK]
                position += len(pending)
                while pending and not inflater.eof:
                    budget -= len(inflater.decompress(pending, _INFLATE_CHUNK))
                    if budget < 0:
                        raise ExtractionError("too_large")
                    pending = inflater.unconsumed_tail
        except zlib.error:
            continue


def _is_password_error(exc: BaseException) -> bool:
    seen: set[int] = set()
    pending: list[BaseException] = [exc]
    # pdfplumber wraps pdfminer's error as an argument, not as __cause__, so both are followed.
    while pending:
        current = pending.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, PDFPasswordIncorrect | PDFEncryptionError):
            return True
        pending.extend(arg for arg in current.args if isinstance(arg, BaseException))
        pending.extend(e for e in (current.__cause__, current.__context__) if e is not None)
    return False


def _check_pages(count: int, limits: Limits) -> None:
    if count == 0:
        raise ExtractionError("corrupt")
    if count > limits.max_pages:
        raise ExtractionError("too_large")


def _built(pages: list[str], limits: Limits, *, clean: bool, extractor: str) -> ExtractionResult:
    builder = TextBuilder(limits)
    for number, text in enumerate(pages_clean(pages) if clean else pages, start=1):
        builder.add(text, {"page": number})
    return builder.result(extractor, dist_version(extractor))


class _PageTexts(list[str]):
    """Page texts collected before they are cleaned, bounded as the builder would be."""

    def __init__(self, limits: Limits) -> None:
        super().__init__()
        self._left = limits.max_chars

    def add(self, text: str) -> None:
        self._left -= len(text)
        if self._left < 0:
            raise ExtractionError("too_large")
        self.append(text)


def extract_primary(data: bytes, limits: Limits, *, clean: bool = True) -> ExtractionResult:
    check_streams(data, limits)
    pages = _PageTexts(limits)
    try:
        pdf = pdfplumber.open(io.BytesIO(data))
    except Exception as exc:
        raise ExtractionError("encrypted" if _is_password_error(exc) else "corrupt") from exc
    with pdf:
        _check_pages(len(pdf.pages), limits)
        for page in pdf.pages:
            pages.add(page.extract_text() or "")
            # Cached layout objects of every page would otherwise stay in memory.
            page.close()
    return _built(pages, limits, clean=clean, extractor="pdfplumber")


def extract_secondary(data: bytes, limits: Limits, *, clean: bool = True) -> ExtractionResult:
    check_streams(data, limits)
    try:
        return _built(_read_with_pypdf(data, limits), limits, clean=clean, extractor="pypdf")
    except LimitReachedError as exc:
        # pypdf's own inflation bounds: the file is too large for it, not damaged.
        raise ExtractionError("too_large") from exc


def _read_with_pypdf(data: bytes, limits: Limits) -> list[str]:
    pages = _PageTexts(limits)
    reader = PdfReader(io.BytesIO(data))
    if reader.is_encrypted:
        try:
            opened = reader.decrypt("") != PasswordType.NOT_DECRYPTED
        except Exception as exc:
            raise ExtractionError("encrypted") from exc
        if not opened:
            raise ExtractionError("encrypted")
    _check_pages(len(reader.pages), limits)
    for page in reader.pages:
        pages.add(page.extract_text() or "")
    return pages
