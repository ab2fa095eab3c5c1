"""How a generation can end, as an `Ending`: an answer built from judged quotes and values
(`answered`), a fixed refusal (`abstention`, `unsupported`), or inspection output for the
plan and raw modes (`inspection`); and the `Decision` that what was gathered and judged comes
to under the evidence policy (`gathered_decision`, for the grounded and comparison strategies)."""

import time

from answers.models import CandidateFact
from answers.pipeline import texts
from answers.pipeline.contracts import Decision, Ending, Gathered, Inspected, RunContext, Trace
from answers.pipeline.policy import Judgement, policy_judge
from answers.pipeline.rendering import render_answer
from answers.pipeline.validation import SelectedFact
from answers.pipeline.vocabulary import EvidenceStatus, Outcome, RefusalReason, outcome
from knowledge.retrieval import documents_indexing

# A recheck that failed on these may pass when asked again (a new revision is current, the
# permission rows can be read again).
RETRYABLE_ACCESS_CODES = frozenset(
    {"permission_unavailable", "source_superseded", "source_withdrawn", "source_erased"}
)


def answered(
    ctx: RunContext,
    trace: Trace,
    selected: list[SelectedFact],
    judgement: Judgement,
    issues: tuple[str, ...],
) -> Ending:
    started = time.perf_counter()
    rendered = render_answer(selected=selected, language=ctx.language)
    trace.step("rendering", started)
    return Ending(
        kind="answer",
        text=rendered.text,
        evidence={
            "status": judgement.evidence_status,
            "answer_status": judgement.answer_status,
            "sources": rendered.sources,
            "outcomes": list(trace.outcomes),
        },
        quality={
            "completeness": judgement.completeness,
            "degraded": judgement.completeness != "complete",
            "issues": sorted(set(issues) | set(judgement.issues)),
        },
        citations=tuple(rendered.citations),
        cards=tuple(rendered.cards),
        selected=tuple(selected),
    )


def abstention(
    ctx: RunContext,
    trace: Trace,
    explanation: RefusalReason,
    *,
    judgement: Judgement | None = None,
    evidence_status: EvidenceStatus | None = None,
    issues: tuple[str, ...] = (),
    access_code: str | None = None,
) -> Ending:
    """A fixed text; no prose, citations, verification claims, scores or follow-ups."""
    outcomes = list(trace.outcomes)
    if access_code:
        retryable = access_code in RETRYABLE_ACCESS_CODES
        outcomes.append(outcome("recheck", "failed", access_code, retryable=retryable))
    status: EvidenceStatus = evidence_status or (
        judgement.evidence_status if judgement else "unavailable"
    )
    # While vectors catch up, the refusal says for how many documents (counted only then).
    documents = documents_indexing(ctx.scope.passages()) if explanation == "indexing" else 0
    return Ending(
        kind="refusal",
        text=texts.explanation(explanation, ctx.language, documents=documents),
        evidence={
            "status": status,
            "answer_status": "abstained",
            "sources": [],
            "outcomes": outcomes,
        },
        quality={
            "completeness": "none",
            "degraded": True,
            "issues": sorted(set(issues) | set(judgement.issues if judgement else ())),
        },
    )


def inspection(
    trace: Trace,
    *,
    plan: dict[str, object] | None = None,
    results: list[dict[str, object]] | None = None,
) -> Ending:
    """plan and raw modes: inspection output (the plan, or the candidate facts), labelled
    unverified, no prose."""
    outcomes = list(trace.outcomes)
    return Ending(
        kind=None,
        text="",
        evidence={
            "status": "unknown" if not outcomes else _tool_status(outcomes),
            "answer_status": "unverified",
            "sources": [],
            "outcomes": outcomes,
        },
        quality={"completeness": "none", "degraded": False, "issues": []},
        inspected=Inspected(plan, results),
    )


def unsupported(ctx: RunContext, trace: Trace, prerequisite: str) -> Ending:
    return abstention(
        ctx,
        trace,
        "unsupported",
        evidence_status="not_requested",
        issues=(f"unsupported_prerequisite:{prerequisite}",),
    )


def gathered_decision(ctx: RunContext, trace: Trace, gathered: Gathered) -> Decision:
    """How a generation ends from what the tools found and what was selected from it."""
    found = gathered.candidates
    issues = gathered.issues
    if gathered.judge_unavailable:
        ending = abstention(
            ctx,
            trace,
            "unsupported",
            evidence_status="unavailable",
            issues=(*issues, "judge_unavailable"),
        )
        return Decision(ending, found, gathered.attempts, issues, gathered.plans)

    support = gathered.support
    selected = list(support.kept) if support is not None else []
    judgement = policy_judge(
        policy=ctx.request.policy,
        outcomes=trace.outcomes,
        selected_tools=[set(s.fact.contributions) for s in selected],
        unanswered_parts=len(support.unanswered) if support is not None and selected else 0,
    )
    if not judgement.publish:
        ending = abstention(ctx, trace, judgement.refusal, judgement=judgement, issues=issues)
    else:
        ending = answered(ctx, trace, selected, judgement, issues)
    return Decision(ending, found, gathered.attempts, issues, gathered.plans)


def _tool_status(outcomes: list[Outcome]) -> EvidenceStatus:
    return "available" if any(o["code"] == "matched" for o in outcomes) else "absent"


def raw_fact(fact: CandidateFact) -> dict[str, object]:
    return {
        "fact_id": fact.fact_id,
        "kind": fact.kind,
        "text": fact.text,
        "value": fact.value,
        "label": fact.label,
        "source": fact.source,
        "contributions": fact.contributions,
    }
