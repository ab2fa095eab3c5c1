"""Retrieval tools allowed by the policy, and the candidate facts they yield (recorded)."""

import hashlib
import json
from collections.abc import Mapping
from dataclasses import replace
from types import MappingProxyType
from typing import TypedDict

from django.db.models import QuerySet

from answers.models import AnswerRun, CandidateFact
from answers.pipeline.question_parts import searches_for
from answers.pipeline.restrictions import Restriction, restrictions_named, restrictions_unmet
from answers.pipeline.vocabulary import (
    IMPLEMENTED_TOOLS,
    AnswerRequest,
    DatasetInfo,
    DatasetQuery,
    EvidencePolicy,
    Mode,
    Outcome,
    OutcomeState,
    Plan,
    outcome,
)
from core.errors import ApiError
from core.types import User
from datasets.models import Dataset, DatasetSnapshot
from datasets.selectors import datasets_in_scope, snapshot_in_scope
from datasets.services import governed_query_facts, governed_query_run, snapshot_dictionary
from knowledge.models import Document, Extraction, ExtractionStatus
from knowledge.retrieval import RETRIEVAL_TOOLS, Candidate, retrieve
from knowledge.scope import AccessScope
from knowledge.units import candidates_widen
from outside.channels import OUTSIDE_TOOLS, outside_gather
from outside.models import Snapshot
from outside.selectors import channels_usable_by
from outside.snapshots import snapshot_reference

DATASET_QUERY = "dataset_query"
# How many candidates each search retrieves, per mode (plan: none, it only plans).
DEPTH: Mapping[Mode, int] = MappingProxyType(
    {"quick": 3, "ask": 5, "agent": 5, "pro": 8, "deep": 12, "debug": 5, "raw": 10, "plan": 0}
)


class _Found(TypedDict):
    """A passage the searches found: the best candidate for it, the indexes of the searches
    that found it, and its best score."""

    candidate: Candidate
    searches: list[int]
    score: float


def research_request(request: AnswerRequest, *, user: User, scope: AccessScope) -> AnswerRequest:
    """`deep` without an explicit policy researches beyond the library (SPEC §5, issue 50):
    its tools are the library's and every outside kind with a channel enabled for a space
    of the run's scope (the body's policy says so; `not_configured` is never reported for a
    kind nobody enabled). Under an explicit policy, and in every other mode, the request
    keeps its own tools."""
    if request.mode != "deep" or request.policy.explicit:
        return request
    enabled = set(
        channels_usable_by(user=user, space_ids=sorted(scope.space_ids)).values_list(
            "kind", flat=True
        )
    )
    kinds = tuple(kind for kind in OUTSIDE_TOOLS if kind in enabled)
    if not kinds:
        return request
    policy = replace(request.policy, allowed_tools=(*request.policy.allowed_tools, *kinds))
    return replace(request, policy=policy)


def _queryable_datasets(*, scope: AccessScope) -> QuerySet[Dataset]:
    """Datasets in scope that have a snapshot to query."""
    return datasets_in_scope(scope=scope).filter(current_snapshot__isnull=False)


def visible_datasets(*, scope: AccessScope) -> list[DatasetInfo]:
    datasets = _queryable_datasets(scope=scope).select_related("current_snapshot")
    # Every one has a snapshot (_queryable_datasets); the test narrows the type.
    return [
        dataset_info(d.current_snapshot, name=d.name)
        for d in datasets
        if d.current_snapshot is not None
    ]


def dataset_info(snapshot: DatasetSnapshot, *, name: str = "") -> DatasetInfo:
    """What the planner knows of a snapshot: its table, columns and value dictionary."""
    return DatasetInfo(
        snapshot.dataset_id,
        snapshot.pk,
        name,
        snapshot.table_name,
        snapshot.schema,
        snapshot_dictionary(snapshot),
    )


def _sha(payload: object) -> str:
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()


def run_tools(
    *,
    run: AnswerRun,
    scope: AccessScope,
    plan: Plan,
    policy: EvidencePolicy,
    mode: Mode,
    urls: tuple[str, ...] = (),
) -> tuple[list[CandidateFact], list[Outcome]]:
    """Run every allowed tool for the plan; record candidates with stable fact ids.

    Returns (candidates, outcomes). Several outcomes per tool are kept (one per search):
    a later success never erases an earlier failure.
    """
    outcomes: list[Outcome] = []
    retrieval_tools = tuple(t for t in RETRIEVAL_TOOLS if t in policy.allowed_tools)
    passages: dict[int, _Found] = {}
    if retrieval_tools:
        for index, search, _ in plan.queries():
            result = retrieve(scope=scope, query=search, tools=retrieval_tools, limit=DEPTH[mode])
            outcomes += [o.as_dict() for o in result.outcomes]
            for candidate in result.candidates:
                _found_add(passages, candidate, index)

    passages = _widened(scope, passages)
    snapshots, outside_outcomes = _outside_step(run, scope, plan, policy, mode, urls, passages)
    outcomes += outside_outcomes
    facts: list[CandidateFact] = []
    admitted = set(
        Extraction.objects.filter(
            pk__in=[e["candidate"].extraction_id for e in passages.values()],
            serves_passages=True,
            status=ExtractionStatus.ADMITTED,
        ).values_list("pk", flat=True)
    )
    titles = dict(
        Document.objects.filter(
            pk__in={e["candidate"].document_id for e in passages.values()}
        ).values_list("pk", "title")
    )
    # Fact ids stay unique across agent rounds: continue after the run's earlier candidates.
    recorded = CandidateFact.objects.filter(run=run).count()
    for number, entry in enumerate(passages.values(), start=recorded + 1):
        candidate = entry["candidate"]
        if candidate.extraction_id not in admitted:
            continue  # pre-check: only admitted text of a recorded revision is evidence
        source = {
            "type": "passage",
            "passage_id": candidate.passage_id,
            "document_id": candidate.document_id,
            "title": titles.get(candidate.document_id, ""),
            "revision_id": candidate.revision_id,
            "extraction_id": candidate.extraction_id,
            "char_start": candidate.char_start,
            "char_end": candidate.char_end,
            "locator": candidate.locator,
            "searches": entry["searches"],
            "score": entry["score"],
            "units": candidate.units,
        }
        if candidate.passage_id in snapshots:
            source["outside"] = snapshot_reference(snapshots[candidate.passage_id])
        facts.append(
            CandidateFact(
                run=run,
                fact_id=f"q{number}",
                kind="quote",
                source=source,
                text=candidate.text,
                contributions=candidate.contributions,
                sha256=_sha([source, candidate.text]),
            )
        )

    if "dataset_query" in policy.allowed_tools:
        value_facts, dataset_outcomes = _dataset_tool(
            run=run, scope=scope, plan=plan, first_number=recorded + len(facts) + 1
        )
        facts += value_facts
        outcomes += dataset_outcomes
    for tool in policy.allowed_tools:
        if tool not in IMPLEMENTED_TOOLS and tool not in OUTSIDE_TOOLS:
            outcomes.append(outcome(tool, "failed", "not_configured"))
    CandidateFact.objects.bulk_create(facts)
    return facts, outcomes


def _outside_step(
    run: AnswerRun,
    scope: AccessScope,
    plan: Plan,
    policy: EvidencePolicy,
    mode: Mode,
    urls: tuple[str, ...],
    passages: dict[int, _Found],
) -> tuple[dict[int, Snapshot], list[Outcome]]:
    """The outside channels the policy allows (outside.channels): their candidates are
    passages of the asker's snapshots, added to `passages` to be recorded like the
    library's; returns the snapshot of each (by passage) and the channels' outcomes."""
    tools = [tool for tool in policy.allowed_tools if tool in OUTSIDE_TOOLS]
    if not tools:
        return {}, []
    queries = plan.queries()
    gathered = outside_gather(
        user=run.user,
        scope=scope,
        tools=tools,
        searches=[search for _, search, _ in queries],
        limit=DEPTH[mode],
        urls=urls,
    )
    snapshots: dict[int, Snapshot] = {}
    for index, candidate, snapshot in gathered.candidates:
        _found_add(passages, candidate, queries[index][0])
        snapshots[candidate.passage_id] = snapshot
    return snapshots, [o.as_dict() for o in gathered.outcomes]


def _found_add(passages: dict[int, _Found], candidate: Candidate, part: int) -> None:
    """A candidate a search of `part` found: one entry per passage, found by every search
    that found it, with its best score and every tool's contribution."""
    entry = passages.setdefault(
        candidate.passage_id, {"candidate": candidate, "searches": [], "score": 0.0}
    )
    if part not in entry["searches"]:
        entry["searches"].append(part)
    entry["score"] = max(entry["score"], candidate.score)
    for tool, contribution in candidate.contributions.items():
        entry["candidate"].contributions.setdefault(tool, contribution)


def _widened(scope: AccessScope, passages: dict[int, _Found]) -> dict[int, _Found]:
    """Each found passage widened to the structured units it is part of (knowledge.units);
    passages widened to the same span are one candidate, found by all their searches."""
    widened = candidates_widen(scope=scope, candidates=[e["candidate"] for e in passages.values()])
    merged: dict[tuple[int, int, int], _Found] = {}
    result: dict[int, _Found] = {}
    for (passage_id, entry), candidate in zip(passages.items(), widened, strict=True):
        key = (candidate.extraction_id, candidate.char_start, candidate.char_end)
        first = merged.get(key)
        if first is None:
            merged[key] = result[passage_id] = {**entry, "candidate": candidate}
            continue
        first["searches"] += [s for s in entry["searches"] if s not in first["searches"]]
        first["score"] = max(first["score"], entry["score"])
        for tool, contribution in candidate.contributions.items():
            first["candidate"].contributions.setdefault(tool, contribution)
    return result


def _dataset_tool(
    *, run: AnswerRun, scope: AccessScope, plan: Plan, first_number: int
) -> tuple[list[CandidateFact], list[Outcome]]:
    if not plan.dataset_queries:
        queryable = _queryable_datasets(scope=scope).exists()
        code = "no_relevant_hit" if queryable else "empty_corpus"
        return [], [outcome(DATASET_QUERY, "succeeded", code)]
    facts: list[CandidateFact] = []
    outcomes: list[Outcome] = []
    for planned in plan.dataset_queries:
        # The plan is a provider's output: its snapshot id is read within the scope
        # (missing and hidden alike: nothing found).
        snapshot = snapshot_in_scope(scope=scope, snapshot_id=planned.get("snapshot_id"))
        if snapshot is None:
            outcomes.append(outcome(DATASET_QUERY, "succeeded", "no_relevant_hit"))
            continue
        unmet = [r.as_dict() for r in restrictions_missing(plan, planned, dataset_info(snapshot))]
        try:
            query = governed_query_run(scope=scope, snapshot=snapshot, sql=planned["sql"])
        except ApiError as error:
            code = "timeout" if error.error_code == "timeout" else "no_relevant_hit"
            timed_out = code == "timeout"
            state: OutcomeState = "failed" if timed_out else "succeeded"
            outcomes.append(outcome(DATASET_QUERY, state, code, retryable=timed_out))
            continue
        cells = governed_query_facts(query)
        code = "matched" if cells else "no_relevant_hit"
        outcomes.append(outcome(DATASET_QUERY, "succeeded", code, len(cells)))
        for cell in cells:
            number = first_number + len(facts)
            source = {
                "type": "dataset_cell",
                **cell,
                "dataset_id": snapshot.dataset_id,
                "part": planned.get("part"),
                # What the part asks for that this value was not computed with: such a
                # value is recorded, never shown to selection, never released.
                "unmet": unmet,
            }
            facts.append(
                CandidateFact(
                    run=run,
                    fact_id=f"v{number}",
                    kind="value",
                    source=source,
                    value=cell["value"],
                    label=cell["label"],
                    lineage=cell["lineage"],
                    contributions={"dataset_query": {"rank": 1, "query_id": query.pk}},
                    sha256=_sha([source, cell["value"]]),
                )
            )
    return facts, outcomes


def restrictions_missing(
    plan: Plan, planned: DatasetQuery, dataset: DatasetInfo
) -> list[Restriction]:
    """The restrictions the question names for this query's part that its SQL lacks.

    Read again from the question (whoever planned the SQL): the part's own words, and the
    whole question when it is one part by rule (a model may split "total amount for
    customer zeta" into "total amount" and "customer zeta") or the query answers no single
    part."""
    part = planned.get("part")
    texts = [plan.searches[part]] if part is not None and part < len(plan.searches) else []
    if part is None or len(searches_for(plan.standalone)) == 1:
        texts.append(plan.standalone)
    named: list[Restriction] = []
    for text in texts:
        named += [r for r in restrictions_named(text, dataset) if r not in named]
    return restrictions_unmet(planned["sql"], named)
