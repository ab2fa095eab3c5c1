"""WebVTT and SRT transcripts: webvtt-py as primary, a small own cue parser as the second reading.

The text is the cue texts joined by newlines, one segment per cue located by its
start and end time (always HH:MM:SS.mmm, whatever the source wrote).
"""

from __future__ import annotations

import html
import io
import re
from collections.abc import Iterator

import webvtt

from .base import ExtractionError, ExtractionResult, Limits, TextBuilder, dist_version
from .formats import has_vtt_header
from .text import decode_or_raise

CUE_PARSER_NAME = "koinon-cue-parser"
CUE_PARSER_VERSION = "1"

_TIMESTAMP = re.compile(r"(?:(\d{1,10}):)?(\d{1,2}):(\d{1,2})[.,](\d{1,3})")
_TIMING = re.compile(r"^\s*(\S+)\s*-->\s*(\S+)")
_TAG = re.compile(r"<[^>\n]*>")
_NON_CUE_BLOCKS = ("NOTE", "STYLE", "REGION")


def _cue_text(lines: list[str]) -> str:
    # Cue payloads are HTML-like: tags are markup, character references are text.
    return html.unescape("\n".join(_TAG.sub("", line) for line in lines))


def _add_cue(builder: TextBuilder, text: str, start: str, end: str) -> None:
    builder.add(text, {"start": start, "end": end})


def extract_webvtt(data: bytes, limits: Limits, *, srt: bool) -> ExtractionResult:
    text = decode_or_raise(data)
    if not text.strip():
        raise ExtractionError("no_text")
    # webvtt-py insists that an SRT file starts with its first cue index.
    source = io.StringIO(text.lstrip() if srt else text)
    captions = webvtt.from_buffer(source, format="srt" if srt else "vtt").captions
    builder = TextBuilder(limits, separator="\n")
    for caption in captions:
        _add_cue(builder, html.unescape(caption.text), str(caption.start), str(caption.end))
    return builder.result("webvtt-py", dist_version("webvtt-py"))


def _timestamp(value: str) -> str:
    match = _TIMESTAMP.fullmatch(value)
    if match is None:
        raise ExtractionError("corrupt")
    hours, minutes, seconds = (int(group or 0) for group in match.groups()[:3])
    if minutes > 59 or seconds > 59:
        raise ExtractionError("corrupt")
    milliseconds = int(match.group(4).ljust(3, "0"))
    return f"{hours:02d}:{minutes:02d}:{seconds:02d}.{milliseconds:03d}"


def _blocks(text: str) -> Iterator[list[str]]:
    block: list[str] = []
    for line in text.splitlines():
        if line.strip():
            block.append(line)
        elif block:
            yield block
            block = []
    if block:
        yield block


def parse_cues(text: str, *, srt: bool) -> list[tuple[str, str, str]]:
    """(start, end, text) per cue; header, NOTE and STYLE blocks have no timing and are skipped."""
    cues: list[tuple[str, str, str]] = []
    for index, block in enumerate(_blocks(text)):
        if not srt and (index == 0 or block[0].startswith(_NON_CUE_BLOCKS)):
            continue  # the WEBVTT header block, comments, style and region definitions
        # The timing line is the first line, or the second after a cue identifier/index.
        position = next((i for i, line in enumerate(block[:2]) if "-->" in line), None)
        if position is None:
            continue
        timing = _TIMING.match(block[position])
        if timing is None:
            raise ExtractionError("corrupt")
        start, end = _timestamp(timing.group(1)), _timestamp(timing.group(2))
        cues.append((start, end, _cue_text(block[position + 1 :])))
    return cues


def extract_cue_parser(data: bytes, limits: Limits, *, srt: bool) -> ExtractionResult:
    text = decode_or_raise(data).replace("\r\n", "\n").replace("\r", "\n")
    if not text.strip():
        raise ExtractionError("no_text")
    if not srt and not has_vtt_header(text):
        raise ExtractionError("corrupt")
    cues = parse_cues(text, srt=srt)
    if srt and not cues:
        raise ExtractionError("corrupt")  # as webvtt-py: without a cue it is not SRT at all
    builder = TextBuilder(limits, separator="\n")
    for start, end, cue in cues:
        _add_cue(builder, cue, start, end)
    return builder.result(CUE_PARSER_NAME, CUE_PARSER_VERSION)
