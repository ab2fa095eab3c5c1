"""Selection parsing and validation (SPEC §1.2–1.5). Any failure rejects the whole
selection: a valid half of a mixed selection is never published."""

import json
from dataclasses import dataclass

from django.conf import settings
from django.db import connection

from answers.models import CandidateFact
from datasets.models import GovernedQuery
from knowledge.models import Extraction, ExtractionStatus
from knowledge.normalise import normalised_key

MAX_ITEMS = 12


class SelectionRejected(Exception):
    """A typed reason; the provider's own text is never kept."""

    def __init__(self, issue: str) -> None:
        super().__init__(issue)
        self.issue = issue


@dataclass(frozen=True)
class SelectedFact:
    fact: CandidateFact
    start: int | None = None  # sub-span inside the candidate text (quotes only)
    end: int | None = None

    @property
    def quote(self) -> str:
        text = self.fact.text
        return text[self.start : self.end] if self.start is not None else text


def selection_parse(raw: object, candidates: list[CandidateFact]) -> list[SelectedFact]:
    """Exactly {"facts": [{"fact_id": str, "start"?: int, "end"?: int}, ...]}, nothing else."""
    by_id = {fact.fact_id: fact for fact in candidates}
    selected, seen = [], set()
    for item in _selection_items(raw):
        chosen = _selected_fact(item, by_id)
        key = (chosen.fact.fact_id, chosen.start, chosen.end)
        if key in seen:
            raise SelectionRejected("selection_duplicate")
        seen.add(key)
        selected.append(chosen)
    return selected


def _selection_items(raw: object) -> list[object]:
    """The list under "facts" (1 to MAX_ITEMS items), from JSON text or a decoded object."""
    if isinstance(raw, str | bytes):
        try:
            raw = json.loads(raw)
        except ValueError:
            raise SelectionRejected("selection_invalid_json") from None
    if not isinstance(raw, dict) or set(raw) != {"facts"} or not isinstance(raw["facts"], list):
        raise SelectionRejected("selection_unexpected_content")
    items = raw["facts"]
    if not items or len(items) > MAX_ITEMS:
        raise SelectionRejected("selection_empty" if not items else "selection_too_long")
    return items


def _selected_fact(item: object, by_id: dict[str, CandidateFact]) -> SelectedFact:
    """One item: a known candidate, and a span only on a quote and inside its text."""
    if not isinstance(item, dict) or not set(item) <= {"fact_id", "start", "end"}:
        raise SelectionRejected("selection_unexpected_content")  # e.g. added prose
    fact_id = item.get("fact_id")
    fact = by_id.get(fact_id) if isinstance(fact_id, str) else None
    if fact is None:
        raise SelectionRejected("selection_unknown_fact")
    start, end = item.get("start"), item.get("end")
    if (start is None) != (end is None):
        raise SelectionRejected("selection_bad_span")
    if start is not None:
        if fact.kind != "quote" or type(start) is not int or type(end) is not int:
            raise SelectionRejected("selection_bad_span")
        if not 0 <= start < end <= len(fact.text):
            raise SelectionRejected("selection_span_outside_candidate")
    return SelectedFact(fact, start, end)


def quotes_verify_primary(selected: list[SelectedFact]) -> None:
    """(a) In code: each quote is, word for word, the admitted text at its offsets, in the
    extraction that serves the revision's passages (the primary, unless it is damaged and
    the secondary clean: knowledge.extraction.damage)."""
    quotes = [s for s in selected if s.fact.kind == "quote"]
    extractions = Extraction.objects.in_bulk([s.fact.source["extraction_id"] for s in quotes])
    for item in quotes:
        extraction = extractions.get(item.fact.source["extraction_id"])
        if (
            extraction is None
            or extraction.status != ExtractionStatus.ADMITTED
            or not extraction.serves_passages
        ):
            raise SelectionRejected("quote_source_not_admitted")
        base = item.fact.source["char_start"]
        start = base + (item.start or 0)
        end = base + (item.end if item.end is not None else len(item.fact.text))
        recorded = extraction.text[start:end]
        key = normalised_key(item.quote)
        if not key or key != normalised_key(recorded):
            raise SelectionRejected("quote_not_in_admitted_text")


# (b) in one statement. The second reading of a quote is the revision's other admitted
# extraction: the secondary when the primary serves passages, the primary when a clean
# secondary serves them. A reading damaged past KOINON_EXTRACTION_DAMAGE_THRESHOLD lost
# spaces between words, so the quote's key is looked for there with every space removed
# from both sides; an undamaged (or unmeasured) reading keeps the whole-word comparison
# of the framed keys. Returns the (1-based) positions of the quotes that fail.
QUOTES_SECONDARY_SQL = """
SELECT q.n
FROM unnest(%s::bigint[], %s::bigint[], %s::text[]) WITH ORDINALITY
     AS q(revision_id, extraction_id, qkey, n)
LEFT JOIN knowledge_extraction e
       ON e.revision_id = q.revision_id AND e.id <> q.extraction_id AND e.status = 'admitted'
WHERE e.id IS NULL OR CASE
    WHEN e.damage > %s
    THEN position(replace(q.qkey, ' ', '') IN replace(e.norm_text, ' ', '')) = 0
    ELSE position(q.qkey IN e.norm_text) = 0
END
"""


def quotes_secondary_failures(selected: list[SelectedFact]) -> set[int]:
    """(b) In the database: the indexes of the quotes that are not in the second,
    independent reading of their revision (the other admitted extraction), all found in
    one SQL statement. A comparison judges its stances one by one with it."""
    if not selected:
        return set()
    parameters: list[list[object] | float] = [
        [s.fact.source["revision_id"] for s in selected],
        [s.fact.source["extraction_id"] for s in selected],
        [normalised_key(s.quote) for s in selected],
        settings.KOINON_EXTRACTION_DAMAGE_THRESHOLD,
    ]
    with connection.cursor() as cursor:
        cursor.execute(QUOTES_SECONDARY_SQL, parameters)
        return {n - 1 for (n,) in cursor.fetchall()}


def quotes_verify_secondary(selected: list[SelectedFact]) -> None:
    """(b) for a whole answer: every quote is in its second reading, or the selection is
    rejected (one SQL statement for all of them)."""
    if quotes_secondary_failures([s for s in selected if s.fact.kind == "quote"]):
        raise SelectionRejected("quote_not_in_secondary_extraction")


def values_verify(selected: list[SelectedFact]) -> None:
    """A value comes from a recorded governed query, with eligible lineage, unchanged."""
    for item in selected:
        if item.fact.kind != "value":
            continue
        source = item.fact.source
        query = GovernedQuery.objects.filter(pk=source.get("query_id")).first()
        if query is None or query.result_sha256 != source.get("result_sha256"):
            raise SelectionRejected("value_without_recorded_query")
        try:
            column = query.columns[source["column"]]
            stored = query.rows[source["row"]][source["column"]]
        except (IndexError, KeyError, TypeError):
            raise SelectionRejected("value_not_in_result") from None
        if not column["eligible"] or column["label"] != item.fact.label:
            raise SelectionRejected("value_ineligible")
        if stored != item.fact.value or column["lineage"] != item.fact.lineage:
            raise SelectionRejected("value_changed")


def selection_validate(selected: list[SelectedFact]) -> None:
    quotes_verify_primary(selected)
    quotes_verify_secondary(selected)
    values_verify(selected)
