"""Comparisons (SPEC §5) and general-knowledge answers: the steps only a generative provider
can take.

A comparison: the plan's tools run once; the analyst (`provider.analyse`) returns 3–6 claims,
each with sources' stances and a quote span; every quote is verified twice (§1.5: in code,
then all of them in one SQL statement against the secondary extraction) and judged against
its claim. A claim with any quote that fails is dropped whole; with fewer than three claims
left the request gets the unsupported-prerequisite text. What is released: the fixed
introduction with the verbatim quotes (citations), and a `comparison` card whose claims are
labelled as the model's analysis. The claims are recorded in the asker's world model in the
publication transaction.
"""

import time
from dataclasses import dataclass, replace

from answers.judge.lexical import TermWeights
from answers.judge.model import JudgeUnavailable
from answers.models import CandidateFact
from answers.pipeline.candidates import candidate_views
from answers.pipeline.contracts import Decision, Gathered, RunContext, Trace
from answers.pipeline.endings import abstention, answered, gathered_decision, unsupported
from answers.pipeline.gathering import tools_step
from answers.pipeline.hooks import WorldClaimRecord
from answers.pipeline.judgement import _quote_parts, judge_item, operating_point
from answers.pipeline.planner import COMPARISON
from answers.pipeline.policy import policy_judge
from answers.pipeline.providers.base import AnalysedClaim, Analysis, ModelProvider
from answers.pipeline.providers.llm import ProviderError
from answers.pipeline.selection import select_step, term_weights
from answers.pipeline.validation import (
    SelectedFact,
    SelectionRejected,
    quotes_secondary_failures,
    quotes_verify_primary,
)
from answers.pipeline.vocabulary import (
    SOURCE_STANCES,
    Citation,
    ComparisonCard,
    Plan,
    SourceStance,
)

MIN_CLAIMS = 3
MAX_CLAIMS = 6


@dataclass(frozen=True)
class VerifiedClaim:
    claim: str
    stances: tuple[tuple[SelectedFact, SourceStance], ...]  # (the quote, the source's stance)


@dataclass(frozen=True)
class Comparison:
    claims: tuple[VerifiedClaim, ...]
    dropped: int  # claims with a quote that failed a check


def _stances(
    claim: "AnalysedClaim", facts: dict[str, CandidateFact]
) -> list[tuple[SelectedFact, SourceStance]]:
    """The claim's stances as selected quotes; SelectionRejected for one that cannot be."""
    stances = []
    for stance in claim["stances"]:
        fact = facts.get(stance["fact_id"])
        start, end = stance["start"], stance["end"]
        if fact is None or fact.kind != "quote":
            raise SelectionRejected("selection_unknown_fact")
        if not 0 <= start < end <= len(fact.text):
            raise SelectionRejected("selection_span_outside_candidate")
        if stance["stance"] not in SOURCE_STANCES:
            raise SelectionRejected("selection_unexpected_content")
        stances.append((SelectedFact(fact, start, end), stance["stance"]))
    return stances


def comparison_verify(
    *,
    provider: "ModelProvider",
    plan: Plan,
    analysis: "Analysis",
    found: list[CandidateFact],
    weights: "TermWeights",
    threshold: float,
) -> Comparison:
    """Keep the claims whose every quote passes both checks and the judge at `threshold`
    (the run's operating point).

    Raises JudgeUnavailable (from the provider) when there is no judge."""
    facts = {fact.fact_id: fact for fact in found}
    candidates: list[tuple[str, list[tuple[SelectedFact, SourceStance]]]] = []
    dropped = 0
    for claim in analysis["claims"][:MAX_CLAIMS]:
        try:
            stances = _stances(claim, facts)
            quotes_verify_primary([item for item, _ in stances])
        except SelectionRejected:
            dropped += 1
            continue
        candidates.append((claim["claim"].strip(), stances))
    # (b) every remaining quote of the comparison in one statement.
    flat = [item for _, stances in candidates for item, _ in stances]
    failing = quotes_secondary_failures(flat)
    items, owners, position = [], [], 0
    kept: list[tuple[str, list[tuple[SelectedFact, SourceStance]]]] = []
    parts = max(1, len(plan.searches))
    texts_of_parts = plan.searches or [plan.standalone]
    for text, stances in candidates:
        indexes = range(position, position + len(stances))
        position += len(stances)
        if failing & set(indexes):
            dropped += 1
            continue
        kept.append((text, stances))
        for stance, (item, _) in enumerate(stances):
            for part in _quote_parts(item, parts):
                items.append(judge_item(texts_of_parts[part], item))
                owners.append((len(kept) - 1, stance))
    # A stance's quote must answer a part of the question, as any released quote; the
    # claim's wording is the model's and is labelled so, not judged as evidence.
    scores = provider.judge(items=items, weights=weights) if items else []
    best: dict[tuple[int, int], float] = {}
    for owner, score in zip(owners, scores, strict=True):
        best[owner] = max(best.get(owner, 0.0), float(score))
    rejected = {claim for (claim, _), score in best.items() if score < threshold}
    claims = tuple(
        VerifiedClaim(text, tuple(stances))
        for index, (text, stances) in enumerate(kept)
        if index not in rejected
    )
    return Comparison(claims, dropped + len(rejected))


def comparison_card(comparison: Comparison, citations: list[Citation]) -> ComparisonCard:
    number = {(c["fact_id"], c["quote"]): c["number"] for c in citations if c["kind"] == "quote"}
    return {
        "kind": "comparison",
        "label": "model_analysis",  # the claims are the model's words; the quotes verbatim
        "claims": [
            {
                "claim": claim.claim,
                "stances": [
                    {
                        "stance": stance,
                        "citation": number[(item.fact.fact_id, item.quote)],
                        "document_id": item.fact.source["document_id"],
                    }
                    for item, stance in claim.stances
                ],
            }
            for claim in comparison.claims
        ],
    }


def decide(ctx: RunContext, trace: Trace, plan: Plan) -> Decision:
    """The whole comparison path; returns its Decision."""

    found = tools_step(ctx, trace, plan, 0)
    policy = ctx.request.policy
    if not found:
        judgement = policy_judge(
            policy=policy, outcomes=trace.outcomes, selected_tools=[], unanswered_parts=0
        )
        return Decision(abstention(ctx, trace, judgement.refusal, judgement=judgement))
    try:
        analysis = ctx.provider.analyse(
            question=ctx.request.query, plan=plan, candidates=candidate_views(found)
        )
    except ProviderError as error:
        if not COMPARISON.search(ctx.request.query):
            return answer_instead(ctx, trace, plan, found, (error.code, "comparison_not_made"))
        ending = unsupported(ctx, trace, "comparison")
        ending = replace(
            ending,
            quality={**ending.quality, "issues": sorted({*ending.quality["issues"], error.code})},
        )
        return Decision(ending, tuple(found), 1, (error.code,))
    started = time.perf_counter()
    try:
        threshold = operating_point(
            rule=ctx.request.policy.rule, space_point=ctx.scope.operating_point
        )
        trace.operating_point = threshold
        comparison = comparison_verify(
            provider=ctx.provider,
            plan=plan,
            analysis=analysis,
            found=found,
            weights=term_weights(ctx, plan),
            threshold=threshold,
        )
    except JudgeUnavailable:
        ending = abstention(
            ctx, trace, "unsupported", evidence_status="unavailable", issues=("judge_unavailable",)
        )
        return Decision(ending, tuple(found), 1)
    trace.step("comparison", started, claims=len(comparison.claims), dropped=comparison.dropped)
    issues = ("comparison_claim_dropped",) if comparison.dropped else ()
    if len(comparison.claims) < MIN_CLAIMS and not COMPARISON.search(ctx.request.query):
        # Only the model called this a comparison, and none came of it: answer the question
        # from the same candidates as any other.
        return answer_instead(ctx, trace, plan, found, (*issues, "comparison_not_made"))
    if len(comparison.claims) < MIN_CLAIMS:
        ending = unsupported(ctx, trace, "comparison")
        ending = replace(
            ending,
            quality={
                **ending.quality,
                "issues": sorted({*ending.quality["issues"], *issues, "comparison_too_few_claims"}),
            },
        )
        return Decision(ending, tuple(found), 1, issues)
    selected = list(dict.fromkeys(item for claim in comparison.claims for item, _ in claim.stances))
    judgement = policy_judge(
        policy=policy,
        outcomes=trace.outcomes,
        selected_tools=[set(s.fact.contributions) for s in selected],
        unanswered_parts=0,
    )
    if not judgement.publish:
        ending = abstention(ctx, trace, judgement.refusal, judgement=judgement, issues=issues)
        return Decision(ending, tuple(found), 1, issues)
    ending = answered(ctx, trace, selected, judgement, issues)
    card = comparison_card(comparison, list(ending.citations))
    claims: tuple[WorldClaimRecord, ...] = tuple(
        {
            "claim": claim.claim,
            "stances": [
                {"fact": item.fact, "stance": stance, "quote": item.quote}
                for item, stance in claim.stances
            ],
        }
        for claim in comparison.claims
    )
    ending = replace(ending, cards=(*ending.cards, card), world_claims=claims)
    return Decision(ending, tuple(found), 1, issues)


def answer_instead(
    ctx: RunContext,
    trace: Trace,
    plan: Plan,
    found: list[CandidateFact],
    issues: tuple[str, ...],
) -> Decision:
    """The ordinary selection over the comparison's candidates (the tools are not run again)."""
    plan = replace(plan, comparison=False)
    selection = select_step(ctx, trace, plan, found)
    gathered = Gathered(
        plan,
        tuple(found),
        selection.support,
        (*issues, *selection.issues),
        selection.attempts + 1,
        selection.judge_unavailable,
    )
    return gathered_decision(ctx, trace, gathered)
