"""The server writes the answer: fixed introduction + verbatim quotes + verified values."""

from dataclasses import dataclass
from typing import Any

from django.utils import formats, translation

from answers.pipeline import texts
from answers.pipeline.validation import SelectedFact
from answers.pipeline.vocabulary import Card, Citation, QuoteCitation, RevisionSource, SourceRef
from datasets.models import DatasetSnapshot
from knowledge.display import quote_display, title_cited
from knowledge.models import Document, DocumentRevision
from outside.references import SnapshotReference, snapshot_origin


@dataclass
class Rendered:
    text: str
    citations: list[Citation]
    cards: list[Card]
    sources: list[SourceRef]


def _locator(locator: dict[str, Any]) -> str:
    if "page" in locator:
        return f"p. {locator['page']}"
    if "start" in locator:
        return f"{locator['start']}–{locator.get('end', '')}"
    if locator.get("headings"):
        return " › ".join(locator["headings"])
    return ""


def _number(value: object, language: str) -> str:
    if isinstance(value, int | float) and not isinstance(value, bool):
        with translation.override(language):
            return formats.number_format(value, use_l10n=True, force_grouping=True)
    return str(value)


def render_answer(*, selected: list[SelectedFact], language: str) -> Rendered:
    revisions = DocumentRevision.objects.in_bulk(
        [s.fact.source["revision_id"] for s in selected if s.fact.kind == "quote"]
    )
    documents = Document.objects.in_bulk([r.document_id for r in revisions.values()])
    snapshots = DatasetSnapshot.objects.select_related("dataset").in_bulk(
        [s.fact.source["snapshot_id"] for s in selected if s.fact.kind == "value"]
    )
    from_outside = any(s.fact.kind == "quote" and s.fact.source.get("outside") for s in selected)
    lines = [texts.introduction(language, outside=from_outside)]
    citations: list[Citation] = []
    cards: list[Card] = []
    sources: dict[tuple[str, int], SourceRef] = {}
    for number, item in enumerate(selected, start=1):
        fact = item.fact
        if fact.kind == "quote":
            revision = revisions[fact.source["revision_id"]]
            document = documents[revision.document_id]
            date = revision.created_at.date().isoformat()
            outside: SnapshotReference | None = fact.source.get("outside")
            label = (
                texts.fetched_label(language, snapshot_origin(outside), outside["fetched_at"][:10])
                if outside
                else texts.revision_label(language, revision.number, date)
            )
            where = ", ".join(
                part
                for part in (
                    title_cited(document.title),
                    label,
                    _locator(fact.source.get("locator") or {}),
                )
                if part
            )
            lines.append(f"[{number}] “{quote_display(item.quote)}” — {where}")
            quoted: QuoteCitation = {
                "number": number,
                "fact_id": fact.fact_id,
                "kind": "quote",
                "document_id": document.pk,
                "title": document.title,
                "revision_id": revision.pk,
                "revision_number": revision.number,
                "revision_date": date,
                "locator": fact.source.get("locator") or {},
                "availability": "current"
                if document.current_revision_id == revision.pk
                else "superseded",
                "quote": item.quote,
            }
            source: RevisionSource = {
                "type": "revision",
                "id": revision.pk,
                "document_id": document.pk,
            }
            if outside:
                quoted["outside"] = outside
                source["snapshot_id"] = outside["snapshot_id"]
                source["snapshot_sha256"] = outside["sha256"]
            citation: Citation = quoted
            sources[("revision", revision.pk)] = source
        else:
            snapshot = snapshots[fact.source["snapshot_id"]]
            label = texts.snapshot_label(language, snapshot.dataset.name, snapshot.version)
            lines.append(f"[{number}] {fact.label} = {_number(fact.value, language)} ({label})")
            citation = {
                "number": number,
                "fact_id": fact.fact_id,
                "kind": "value",
                "dataset_id": snapshot.dataset_id,
                "dataset": snapshot.dataset.name,
                "snapshot_id": snapshot.pk,
                "snapshot_version": snapshot.version,
                "snapshot_sha256": snapshot.sha256,
                "query_id": fact.source["query_id"],
                "result_sha256": fact.source["result_sha256"],
                "label": fact.label,
                "value": fact.value,
            }
            cards.append(
                {
                    "kind": "value",
                    "label": fact.label,
                    "value": fact.value,
                    "lineage": fact.lineage,
                    "snapshot_id": snapshot.pk,
                    "snapshot_sha256": snapshot.sha256,
                }
            )
            sources[("snapshot", snapshot.pk)] = {
                "type": "snapshot",
                "id": snapshot.pk,
                "dataset_id": snapshot.dataset_id,
            }
        citations.append(citation)
    _check_structure(lines, citations)
    return Rendered("\n".join(lines), citations, cards, list(sources.values()))


def _check_structure(lines: list[str], citations: list[Citation]) -> None:
    """The invariant that document text cannot break: the introduction, then exactly one
    line per citation, numbered in order. A violation is a bug here, never published."""
    numbered = [line for line in lines[1:] if line.startswith("[")]
    if len(lines) != len(citations) + 1 or len(numbered) != len(citations):
        raise RuntimeError("rendered answer does not have one line per citation")
    for number, line in enumerate(lines[1:], start=1):
        if "\n" in line or not line.startswith(f"[{number}] "):
            raise RuntimeError("rendered answer line is not its citation's")
