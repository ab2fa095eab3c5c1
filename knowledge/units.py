"""Retrieved passages widened to the structured units around them (issue 47).

A passage never crosses a segment (knowledge.chunking), and in HTML, Markdown and DOCX
every list item, term, description and table cell is a segment of its own: the address a
lead-in introduces, or the setting's name above its description, is in the next or the
previous passage. Here a retrieved passage becomes the span of the extraction text that
holds it and the structured units it is part of (knowledge.structure), read from the
neighbouring passages of the same extraction. The widened text is a plain slice of the
admitted extraction text, so the quote checks (answers.pipeline.validation) hold as for
any passage.

A hit on a heading alone (its passage is the title, which is never quoted) stands for
the text under it: it becomes the start of its section, the blocks that follow it under
the same heading path up to the next heading, read with that path as their context. A
title is often the only place a section's words meet the question's ("defusedxml 0.7.1"
over "Release date: 08-Mar-2021").
"""

from dataclasses import replace

from django.db.models import Case, Q, TextField, When
from django.db.models.functions import Substr

from knowledge.models import Extraction
from knowledge.normalise import normalised_key
from knowledge.retrieval import Candidate
from knowledge.scope import AccessScope
from knowledge.structure import MAX_PIECES, Block, Unit, structured_units

REACH = MAX_PIECES + 2  # passages read either side of a hit: a lead-in, its items, a header
SECTION_CHARS = 900  # what a heading's hit stands for at most: the start of its section
_STRUCTURE_KEYS = ("block", "table", "row", "header")


def candidates_widen(*, scope: AccessScope, candidates: list[Candidate]) -> list[Candidate]:
    """Each candidate widened to the structured units its passage is part of, with those
    units (offsets into its new text) in `units`; unchanged where it is part of none.
    Reads the scope's database (a replica gives way to the primary: AccessScope.read).
    Four statements, whatever the number of hits and extractions."""
    if not candidates:
        return candidates
    return scope.read(lambda scope: _widen(scope, candidates))


def _widen(scope: AccessScope, candidates: list[Candidate]) -> list[Candidate]:
    passages = scope.passages()
    ordinals = dict(
        passages.filter(pk__in=[c.passage_id for c in candidates]).values_list("pk", "ordinal")
    )
    around = Q(pk__in=[])
    for candidate in candidates:
        ordinal = ordinals.get(candidate.passage_id)
        if ordinal is not None:
            low, high = max(0, ordinal - REACH), ordinal + REACH
            around |= Q(extraction_id=candidate.extraction_id, ordinal__range=(low, high))
    blocks: dict[int, list[Block]] = {}
    for extraction_id, start, end, locator in (
        passages.filter(around)
        .order_by("char_start", "char_end")
        .values_list("extraction_id", "char_start", "char_end", "locator")
    ):
        blocks.setdefault(extraction_id, []).append(Block(start, end, locator or {}))
    titles = dict(
        scope.documents()
        .filter(pk__in={c.document_id for c in candidates})
        .values_list("pk", "title")
    )
    bounds = {
        extraction_id: (min(b.start for b in found), max(b.end for b in found))
        for extraction_id, found in blocks.items()
    }
    regions = _regions(scope, bounds)
    units: dict[int, tuple[int, str, list[Unit]]] = {}
    for extraction_id, extraction_blocks in blocks.items():
        low = bounds[extraction_id][0]
        region = regions.get(extraction_id)
        if region is None:
            continue
        # The units are found in the region's own offsets, then moved back to the text's.
        title = next(
            (titles.get(c.document_id, "") for c in candidates if c.extraction_id == extraction_id),
            "",
        )
        shifted = [Block(b.start - low, b.end - low, b.locator) for b in extraction_blocks]
        found = structured_units(region, shifted, title=title)
        units[extraction_id] = (low, region, [_moved(u, low) for u in found])
    widened = []
    for candidate in candidates:
        entry = units.get(candidate.extraction_id)
        if entry is not None:
            low, region, _ = entry
            section = _section(candidate, blocks[candidate.extraction_id], low, region)
            widened.append(_widened(section or candidate, *entry))
        else:
            widened.append(candidate)
    return widened


def _is_title(text: str, locator: dict) -> bool:
    """Whether a block is a heading: its text is the last title of its own heading path
    (the extractors give a heading the path it opens)."""
    headings: list[str] = locator.get("headings") or []
    return bool(headings) and normalised_key(text) == normalised_key(headings[-1])


def _section(candidate: Candidate, around: list[Block], low: int, region: str) -> Candidate | None:
    """The start of the section a heading's hit opens: the blocks (`around`, in text order)
    after the heading that share its heading path, up to the next heading and SECTION_CHARS
    (at least the first block); None when the candidate is no heading or nothing is under
    it here."""
    if not _is_title(candidate.text, candidate.locator):
        return None
    path = candidate.locator["headings"]
    span: tuple[int, int] | None = None
    for block in around:  # in text order
        if block.start < candidate.char_end:
            continue
        text = region[block.start - low : block.end - low]
        if block.locator.get("headings") != path or _is_title(text, block.locator):
            break
        if span is None:
            span = (block.start, block.end)
        elif block.end - span[0] > SECTION_CHARS:
            break
        else:
            span = (span[0], max(span[1], block.end))
    if span is None:
        return None
    start, end = span
    return replace(
        candidate,
        char_start=start,
        char_end=end,
        text=region[start - low : end - low],
        locator={"headings": list(path)},
    )


def _regions(scope: AccessScope, bounds: dict[int, tuple[int, int]]) -> dict[int, str]:
    """Each extraction's text between its (low, high) offsets, in one statement."""
    if not bounds:
        return {}
    region = Case(
        *(
            When(pk=extraction_id, then=Substr("text", low + 1, high - low))
            for extraction_id, (low, high) in bounds.items()
        ),
        output_field=TextField(),
    )
    rows = (
        Extraction.objects.using(scope.database)
        .filter(pk__in=bounds)
        .annotate(region=region)
        .values_list("pk", "region")
    )
    return {pk: text for pk, text in rows if text is not None}


def _widened(candidate: Candidate, low: int, region: str, units: list[Unit]) -> Candidate:
    """The candidate over its passage and every unit that shares text with it; the
    structure keys of its locator go, since the span now covers several blocks."""
    hit = [u for u in units if u.start < candidate.char_end and u.end > candidate.char_start]
    if not hit:
        return candidate
    start = min(candidate.char_start, *(u.start for u in hit))
    end = max(candidate.char_end, *(u.end for u in hit))
    inside = [u for u in units if start <= u.start and u.end <= end]
    return replace(
        candidate,
        char_start=start,
        char_end=end,
        text=region[start - low : end - low],
        locator={k: v for k, v in candidate.locator.items() if k not in _STRUCTURE_KEYS},
        units=[
            (u.start - start, u.end - start, u.alone_start - start, u.alone_end - start)
            for u in inside
        ],
    )


def _moved(unit: Unit, by: int) -> Unit:
    return replace(
        unit,
        start=unit.start + by,
        end=unit.end + by,
        alone_start=unit.alone_start + by,
        alone_end=unit.alone_end + by,
    )
