"""Plain text: byte decoding shared by every text-based format, and the text extractors."""

from __future__ import annotations

import codecs
import platform
import re

import charset_normalizer

from .base import (
    ExtractionError,
    ExtractionResult,
    Limits,
    TextBuilder,
    dist_version,
    paragraphs,
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


# A rule line: one punctuation mark repeated, as reStructuredText and Markdown underline
# (and reStructuredText may overline) a title in plain text.
_RULE = re.compile(r"""([=\-~^*+#"'`:.])\1{2,}""")
# A Markdown title in a plain text file: "## Install", alone in its paragraph (a "#" line
# among others is more often a comment of a shell or a configuration file).
_HASHED = re.compile(r"(#{1,6})[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*")
TITLE_MAX_WORDS = 12
_NOT_TITLE_END = (".", ",", ";", ":")  # a sentence or a lead-in over a rule, not a title


def _is_rule(line: str) -> bool:
    return _RULE.fullmatch(line.strip()) is not None


def _opening_title(lines: list[str]) -> tuple[str, str, int] | None:
    """The title that opens a paragraph's `lines` (title, its style, lines it takes), or
    None. An underline is at least as long as the title, as reStructuredText requires: a
    short rule under a line of prose is a separator, not an underline."""
    hashed = _HASHED.fullmatch(lines[0]) if len(lines) == 1 else None
    if hashed is not None:
        title, rule, taken, style = hashed.group(2), "", 1, f"hash{len(hashed.group(1))}"
    elif len(lines) >= 3 and _is_rule(lines[0]) and lines[0].strip() == lines[2].strip():
        title, rule, taken, style = lines[1].strip(), lines[2].strip(), 3, "over"
    elif len(lines) >= 2 and _is_rule(lines[1]) and lines[0][:4].strip():
        title, rule, taken, style = lines[0].strip(), lines[1].strip(), 2, "under"
    else:
        return None
    if (
        not title
        or _is_rule(title)
        or len(title.split()) > TITLE_MAX_WORDS
        or title.endswith(_NOT_TITLE_END)
        or (hashed is None and len(rule) < len(title))
    ):
        return None
    return title, style + rule[:1], taken


def add_titled_paragraphs(builder: TextBuilder, text: str) -> None:
    """Plain text one piece per paragraph, with the heading path of each.

    Plain text marks a heading by a rule under it (and, in reStructuredText, over it),
    or by Markdown's "#" marks on a line of its own: that title is a piece of its own,
    without its rules or marks, and the paragraphs after it carry it in their heading
    path, so that a quote under "defusedxml 0.7.1" is read as that release's
    (quote_context) and is never glued to the title. Levels follow the order in which the
    styles first appear, as in reStructuredText. Text before the first title has no
    heading path.
    """
    styles: list[str] = []
    path: list[tuple[int, str]] = []
    for paragraph in paragraphs(text):
        lines = paragraph.strip("\n").split("\n")
        while lines and (found := _opening_title(lines)) is not None:
            title, style, taken = found
            if style not in styles:
                styles.append(style)
            level = styles.index(style)
            path = [*(entry for entry in path if entry[0] < level), (level, title)]
            builder.add(title, {"headings": [heading for _, heading in path]})
            lines = lines[taken:]
        located = {"headings": [heading for _, heading in path]} if path else None
        builder.add("\n".join(lines), located)


def extract_primary(data: bytes, limits: Limits) -> ExtractionResult:
    builder = TextBuilder(limits)
    add_titled_paragraphs(builder, decode_or_raise(data))
    return builder.result("python-codecs", platform.python_version())


def extract_secondary(data: bytes, limits: Limits) -> ExtractionResult:
    if not data.strip():
        raise ExtractionError("no_text")
    text = _charset_normalizer_decode(data)
    if text is None or "\x00" in text:
        raise ExtractionError("corrupt")
    builder = TextBuilder(limits)
    add_titled_paragraphs(builder, text)
    return builder.result("charset-normalizer", dist_version("charset-normalizer"))
