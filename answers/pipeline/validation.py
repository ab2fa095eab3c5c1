"""Selection parsing and validation (SPEC §1.2–1.5). Any failure rejects the whole
selection: a valid half of a mixed selection is never published."""

import json
from dataclasses import dataclass

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
    by_id = {fact.fact_id: fact for fact in candidates}
    selected, seen = [], set()
    for item in items:
        if not isinstance(item, dict) or not set(item) <= {"fact_id", "start", "end"}:
            raise SelectionRejected("selection_unexpected_content")  # e.g. added prose
        fact = by_id.get(item.get("fact_id"))
        if fact is None:
            raise SelectionRejected("selection_unknown_fact")
        start, end = item.get("start"), item.get("end")
        if (start is None) != (end is None):
            raise SelectionRejected("selection_bad_span")
        if start is not None:
            if fact.kind != "quote" or not all(type(v) is int for v in (start, end)):
                raise SelectionRejected("selection_bad_span")
            if not 0 <= start < end <= len(fact.text):
                raise SelectionRejected("selection_span_outside_candidate")
        key = (fact.fact_id, start, end)
        if key in seen:
            raise SelectionRejected("selection_duplicate")
        seen.add(key)
        selected.append(SelectedFact(fact, start, end))
    return selected


def quotes_verify_primary(selected: list[SelectedFact]) -> None:
    """(a) In code: each quote is, word for word, the admitted text at its offsets."""
    quotes = [s for s in selected if s.fact.kind == "quote"]
    extractions = Extraction.objects.in_bulk([s.fact.source["extraction_id"] for s in quotes])
    for item in quotes:
        extraction = extractions.get(item.fact.source["extraction_id"])
        if extraction is None or extraction.status != ExtractionStatus.ADMITTED:
            raise SelectionRejected("quote_source_not_admitted")
        base = item.fact.source["char_start"]
        start = base + (item.start or 0)
        end = base + (item.end if item.end is not None else len(item.fact.text))
        recorded = extraction.text[start:end]
        key = normalised_key(item.quote)
        if not key or key != normalised_key(recorded):
            raise SelectionRejected("quote_not_in_admitted_text")


QUOTES_SECONDARY_SQL = """
SELECT count(*) FROM unnest(%s::bigint[], %s::text[]) AS q(revision_id, qkey)
LEFT JOIN knowledge_extraction e
       ON e.revision_id = q.revision_id AND e.role = 'secondary' AND e.status = 'admitted'
WHERE e.id IS NULL OR position(q.qkey IN e.norm_text) = 0
"""


def quotes_verify_secondary(selected: list[SelectedFact]) -> None:
    """(b) In the database: all quotes of the answer against the independent secondary
    extraction of the same revision, in one SQL statement."""
    quotes = [s for s in selected if s.fact.kind == "quote"]
    if not quotes:
        return
    revisions = [s.fact.source["revision_id"] for s in quotes]
    keys = [normalised_key(s.quote) for s in quotes]
    with connection.cursor() as cursor:
        cursor.execute(QUOTES_SECONDARY_SQL, [revisions, keys])
        (missing,) = cursor.fetchone()
    if missing:
        raise SelectionRejected("quote_not_in_secondary_extraction")


QUOTES_SECONDARY_FAILURES_SQL = """
SELECT q.n FROM unnest(%s::bigint[], %s::text[]) WITH ORDINALITY AS q(revision_id, qkey, n)
LEFT JOIN knowledge_extraction e
       ON e.revision_id = q.revision_id AND e.role = 'secondary' AND e.status = 'admitted'
WHERE e.id IS NULL OR position(q.qkey IN e.norm_text) = 0
"""


def quotes_secondary_failures(selected: list[SelectedFact]) -> set[int]:
    """(b) for items judged one by one (a comparison's stances): the indexes of the quotes
    that are not in the secondary extraction, all found in one SQL statement."""
    if not selected:
        return set()
    revisions = [s.fact.source["revision_id"] for s in selected]
    keys = [normalised_key(s.quote) for s in selected]
    with connection.cursor() as cursor:
        cursor.execute(QUOTES_SECONDARY_FAILURES_SQL, [revisions, keys])
        return {n - 1 for (n,) in cursor.fetchall()}


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
