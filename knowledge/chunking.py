"""Sentence-aware passages of bounded size with a small overlap.

Passages never cross a segment (page, cue, block) so each keeps one exact locator,
and every passage is a plain slice of the extraction text.
"""

import re
from dataclasses import dataclass

from knowledge.extraction import Segment
from knowledge.sentences import sentence_spans, trim_span

MAX_PASSAGE_CHARS = 900
OVERLAP_SENTENCES = 1


@dataclass(frozen=True)
class PassageSpan:
    char_start: int
    char_end: int
    locator: dict


# A mark that ends a sentence where the segmenter saw none: a paper's "[10] . In Asia",
# a run of "; " clauses.
_SOFT_END = re.compile(r"[.!?;:]\s+")
_SPACE = re.compile(r"\s+")


def _split_long(text: str, start: int, end: int, limit: int) -> list[tuple[int, int]]:
    """A sentence longer than the limit (run-on text: tables, code, a paper whose "[10] ."
    citations the segmenter does not end a sentence at) in pieces of at most `limit`
    characters, never cut inside a word: each piece ends after the window's last
    sentence-like mark in its second half, else at its last space; only a window with no
    space at all (one very long token) is cut at the limit. Before, a fixed-width cut made
    passages end in "squirre" and begin with "ls": a quote touching the cut was in neither
    reading of the document, and the answer abstained."""
    pieces, position = [], start
    while end - position > limit:
        window = position + limit
        cut = None
        for mark in _SOFT_END.finditer(text, position + limit // 2, window):
            cut = mark.end()
        if cut is None:
            for space in _SPACE.finditer(text, position + 1, window + 1):
                cut = space.end()
        if cut is None:  # both searches start past `position`: a cut always moves on
            cut = window
        pieces.append((position, cut))
        position = cut
    pieces.append((position, end))
    return pieces


def chunk(
    text: str, segments: list[Segment], max_chars: int = MAX_PASSAGE_CHARS
) -> list[PassageSpan]:
    passages: list[PassageSpan] = []
    for segment in segments:
        sentences: list[tuple[int, int]] = []
        for start, end in sentence_spans(text, segment.char_start, segment.char_end):
            if end - start > max_chars:
                sentences.extend(
                    trim_span(text, a, b) for a, b in _split_long(text, start, end, max_chars)
                )
            else:
                sentences.append((start, end))
        sentences = [(a, b) for a, b in sentences if b > a]
        index = 0
        while index < len(sentences):
            first = index
            last = index
            while (
                last + 1 < len(sentences)
                and sentences[last + 1][1] - sentences[first][0] <= max_chars
            ):
                last += 1
            passages.append(
                PassageSpan(sentences[first][0], sentences[last][1], dict(segment.locator))
            )
            if last + 1 >= len(sentences):
                break
            # Start the next passage a sentence early so that a fact split across a
            # boundary is whole in one of them; always move forward.
            index = max(last + 1 - OVERLAP_SENTENCES, first + 1)
    return passages
