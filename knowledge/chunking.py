"""Sentence-aware passages of bounded size with a small overlap.

Passages never cross a segment (page, cue, block) so each keeps one exact locator,
and every passage is a plain slice of the extraction text.
"""

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


def _split_long(start: int, end: int, limit: int) -> list[tuple[int, int]]:
    """A sentence longer than the limit is cut at fixed widths (rare: tables, code)."""
    return [(position, min(position + limit, end)) for position in range(start, end, limit)]


def chunk(
    text: str, segments: list[Segment], max_chars: int = MAX_PASSAGE_CHARS
) -> list[PassageSpan]:
    passages: list[PassageSpan] = []
    for segment in segments:
        sentences: list[tuple[int, int]] = []
        for start, end in sentence_spans(text, segment.char_start, segment.char_end):
            if end - start > max_chars:
                sentences.extend(
                    trim_span(text, a, b) for a, b in _split_long(start, end, max_chars)
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
