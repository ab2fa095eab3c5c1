"""Shared types and text plumbing for the extractors.

Nothing here imports Django: extraction runs in workers and tests without settings.
"""

from __future__ import annotations

import functools
import importlib.metadata
import re
import unicodedata
from dataclasses import dataclass, field

ERROR_CODES = frozenset(
    {"corrupt", "encrypted", "no_text", "too_large", "unsupported_type", "timeout"}
)

# Fixed wording per code: messages reach end users, so they must never carry
# library exception text or paths.
_MESSAGES = {
    "corrupt": "The file could not be read; it may be damaged.",
    "encrypted": "The file is password-protected.",
    "no_text": "The file contains no extractable text.",
    "too_large": "The file is too large to process.",
    "unsupported_type": "This file type is not supported. Supported: PDF (.pdf), Word (.docx), "
    "HTML (.html, .htm, .xhtml), Markdown (.md, .markdown), plain text (.txt, .text), "
    "WebVTT (.vtt) and SubRip (.srt).",
    "timeout": "Reading the file took too long.",
}


def error_message(code: str) -> str:
    """The fixed, user-safe sentence for an extraction error code ("" for none or unknown)."""
    return _MESSAGES.get(code, "")


class ExtractionError(Exception):
    """A document could not be turned into text; `code` says why, `message` is user-safe."""

    def __init__(self, code: str, message: str | None = None) -> None:
        if code not in ERROR_CODES:
            raise ValueError(f"unknown extraction error code: {code!r}")
        self.code = code
        self.message = message or _MESSAGES[code]
        super().__init__(self.message)

    def __reduce__(self) -> tuple[type[ExtractionError], tuple[str, str]]:
        # The default would re-create the error from its message alone, which is no code.
        return (type(self), (self.code, self.message))


@dataclass(frozen=True)
class Segment:
    """A located piece of the extracted text: `text[char_start:char_end]`."""

    char_start: int
    char_end: int
    locator: dict = field(default_factory=dict)


@dataclass(frozen=True)
class ExtractionResult:
    text: str
    segments: list[Segment]
    extractor: str
    extractor_version: str


@dataclass(frozen=True)
class Limits:
    max_chars: int
    max_pages: int
    # Bytes a file may inflate to (zip members, PDF streams): beyond, `too_large`.
    max_decompressed: int = 256 * 1024 * 1024
    # XML elements a DOCX body may hold: parsers spend ~300 bytes on each.
    max_elements: int = 2_000_000


_TRAILING_SPACE = re.compile(r"[^\S\n]+\n")
_MANY_BLANK_LINES = re.compile(r"\n{4,}")


def _normalise_lines(text: str) -> str:
    text = unicodedata.normalize("NFC", text)
    # NUL cannot be stored in PostgreSQL text columns and never carries meaning.
    text = text.replace("\x00", "").replace("\ufeff", "")
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = _TRAILING_SPACE.sub("\n", text + "\n")[:-1]
    return _MANY_BLANK_LINES.sub("\n\n\n", text)


def normalise_text(text: str) -> str:
    """NFC, "\\n" line ends, no trailing spaces, at most 2 blank lines in a row, stripped."""
    return _normalise_lines(text).strip()


class TextBuilder:
    """Builds the final text piece by piece, recording each piece's offsets.

    Each piece is normalised on its own and pieces are joined by a separator made
    of newlines only, so the concatenation is already in normal form and the
    recorded offsets slice the final text exactly.
    """

    def __init__(self, limits: Limits, separator: str = "\n\n") -> None:
        self._limits = limits
        self._separator = separator
        self._parts: list[str] = []
        self._length = 0
        self._segments: list[Segment] = []

    def add(self, piece: str, locator: dict | None = None) -> None:
        piece = _normalise_lines(piece).rstrip().strip("\n")
        if not self._parts:
            # Leading spaces are kept elsewhere (code indentation) but not at the very start.
            piece = piece.lstrip()
        if not piece.strip():
            return
        if self._parts:
            self._parts.append(self._separator)
            self._length += len(self._separator)
        start = self._length
        self._parts.append(piece)
        self._length += len(piece)
        if self._length > self._limits.max_chars:
            raise ExtractionError("too_large")
        self._segments.append(Segment(start, self._length, dict(locator or {})))

    def result(self, extractor: str, extractor_version: str) -> ExtractionResult:
        text = "".join(self._parts)
        if not text.strip():
            raise ExtractionError("no_text")
        return ExtractionResult(text, list(self._segments), extractor, extractor_version)


@functools.cache
def dist_version(distribution: str) -> str:
    """A distribution's installed version from package metadata: docx2txt has no __version__.

    Cached: the fork server looks the versions up once, before it forks any child.
    """
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def paragraphs(text: str) -> list[str]:
    """The blank-line-separated paragraphs of text, line ends normalised."""
    return re.split(r"\n[^\S\n]*\n", _normalise_lines(text))


def add_paragraphs(builder: TextBuilder, text: str, locator: dict | None = None) -> None:
    """Adds text as one piece per blank-line-separated paragraph."""
    for paragraph in paragraphs(text):
        builder.add(paragraph, locator)
