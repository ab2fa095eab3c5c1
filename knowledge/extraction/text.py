"""Plain text: byte decoding shared by every text-based format, and the text extractors."""

from __future__ import annotations

import codecs
import platform

import charset_normalizer

from .base import (
    ExtractionError,
    ExtractionResult,
    Limits,
    TextBuilder,
    add_paragraphs,
    dist_version,
)

_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)


def _charset_normalizer_decode(data: bytes) -> str | None:
    """charset_normalizer's reading: UTF-8 when its own check accepts the bytes as UTF-8,
    else its best guess among every encoding. Asked for its best guess alone, it read a
    valid UTF-8 paragraph holding one left-to-right mark ("Urdu: \u200e") as Mac Icelandic,
    and every quote with that mark failed the second quote check."""
    best = charset_normalizer.from_bytes(data, cp_isolation=["utf_8"]).best()
    if best is None:
        best = charset_normalizer.from_bytes(data).best()
    return None if best is None else str(best)


def decode_bytes(data: bytes) -> str | None:
    """Text from bytes, or None when the bytes are not text.

    UTF-8 first because it is by far the most common and a false positive is
    practically impossible; a guess only for the rest. NUL characters mean binary
    data, except inside BOM-marked UTF-16/32 where they are ordinary.
    """
    text: str | None = None
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            try:
                text = data.decode(encoding)
            except UnicodeDecodeError:
                return None
            break
    else:
        if b"\x00" in data:
            return None
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            text = _charset_normalizer_decode(data)
    if text is None or "\x00" in text:
        return None
    return text.removeprefix("\ufeff")


def decode_or_raise(data: bytes) -> str:
    """Decoded text for an extractor: bytes that fail to decode here are corrupt."""
    text = decode_bytes(data)
    if text is None:
        raise ExtractionError("corrupt")
    return text


def extract_primary(data: bytes, limits: Limits) -> ExtractionResult:
    builder = TextBuilder(limits)
    add_paragraphs(builder, decode_or_raise(data))
    return builder.result("python-codecs", platform.python_version())


def extract_secondary(data: bytes, limits: Limits) -> ExtractionResult:
    if not data.strip():
        raise ExtractionError("no_text")
    text = _charset_normalizer_decode(data)
    if text is None or "\x00" in text:
        raise ExtractionError("corrupt")
    builder = TextBuilder(limits)
    add_paragraphs(builder, text)
    return builder.result("charset-normalizer", dist_version("charset-normalizer"))
