"""Format detection: the extension says what a file claims to be, the content must agree."""

from __future__ import annotations

import io
import os
import re
import zipfile

from .base import ExtractionError
from .text import decode_bytes

FORMATS = ("pdf", "docx", "html", "markdown", "text", "vtt", "srt")

_EXTENSIONS = {
    ".pdf": "pdf",
    ".docx": "docx",
    ".html": "html",
    ".htm": "html",
    ".xhtml": "html",
    ".md": "markdown",
    ".markdown": "markdown",
    ".txt": "text",
    ".text": "text",
    ".vtt": "vtt",
    ".srt": "srt",
}

# For people: the upload form's `accept`, and the words every "unsupported" error uses.
UPLOAD_ACCEPT = ",".join(sorted(_EXTENSIONS))
SUPPORTED_TYPES = (
    "PDF (.pdf), Word (.docx), HTML (.html, .htm, .xhtml), Markdown (.md, .markdown), "
    "plain text (.txt, .text), WebVTT (.vtt) and SubRip (.srt)"
)

_IMAGE_MAGIC = (b"\x89PNG\r\n\x1a\n", b"\xff\xd8\xff", b"GIF87a", b"GIF89a")

_VTT_HEADER = re.compile(r"\AWEBVTT(?:[ \t]|\r?\n|\r|\Z)")
SRT_TIMING = re.compile(
    r"^[ \t]*\d{1,2}:\d{2}:\d{2}[,.]\d{1,3}[ \t]*-->[ \t]*\d{1,2}:\d{2}:\d{2}[,.]\d{1,3}",
    re.MULTILINE,
)


def _is_docx(data: bytes) -> bool:
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            return "word/document.xml" in archive.namelist()
    except (zipfile.BadZipFile, OSError, ValueError, EOFError):
        return False


def has_vtt_header(text: str) -> bool:
    return _VTT_HEADER.match(text) is not None


def detect_format(filename: str, data: bytes) -> str:
    """One of FORMATS, or ExtractionError("unsupported_type") when name and content disagree."""
    unsupported = ExtractionError("unsupported_type")
    fmt = _EXTENSIONS.get(os.path.splitext(filename or "")[1].lower())
    # Images are refused under any name: an OCR path does not exist, and a
    # renamed photo would otherwise reach a text decoder.
    if fmt is None or data.startswith(_IMAGE_MAGIC):
        raise unsupported
    if fmt == "pdf":
        if not data.startswith(b"%PDF"):
            raise unsupported
        return fmt
    if fmt == "docx":
        if not _is_docx(data):
            raise unsupported
        return fmt
    text = decode_bytes(data)
    if text is None:
        raise unsupported
    if fmt == "vtt" and not has_vtt_header(text):
        raise unsupported
    if fmt == "srt" and SRT_TIMING.search(text) is None:
        raise unsupported
    return fmt
