"""The steps of one generation, as plain functions returning immutable values:

plan → tools → candidates (recorded) → selection → validation → support judgement
(the decision, an `Ending`) → recheck → rendering → publication (`seal`) → response.

What a step decides is its return value. The one mutable thing a run carries is its
`Trace`: the record of what happened so far (step timings and tool outcomes, sent live to
the event sink as they happen), which the audit keeps and a failed run replays.
`response_body` is the only place a response body is built.
"""

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from django.db import DatabaseError

from answers.judge.features import JudgeItem
from answers.judge.lexical import TermWeights, stem
from answers.judge.lexical import content_words as lexical_words
from answers.judge.model import JudgeUnavailable
from answers.models import AnswerRun, CandidateFact, Generation
from answers.pipeline import hooks, texts
from answers.pipeline.events import EventSink, step_event, tool_event
from answers.pipeline.judgement import VALUE_UNMET, Support, support_judge
from answers.pipeline.planner import Plan, content_words
from answers.pipeline.policy import Judgement, policy_judge
from answers.pipeline.providers import ModelProvider, Rejection
from answers.pipeline.publication import Publication, PublicationDenied, answer_publish
from answers.pipeline.recheck import publication_recheck
from answers.pipeline.rendering import render_answer
from answers.pipeline.request import AnswerRequest
from answers.pipeline.tools import candidate_views, run_tools, value_unmet, visible_datasets
from answers.pipeline.validation import (
    SelectedFact,
    SelectionRejected,
    selection_parse,
    selection_validate,
)
from audit.services import audit_step_append
from core.models import ApiKey
from core.types import User
from knowledge.frequencies import document_frequencies
from knowledge.scope import AccessScope

logger = logging.getLogger(__name__)

SELECTION_ATTEMPTS = 3  # the first selection and at most two retries
AGENT_ROUNDS = 3


class ProviderFailed(Exception):
    """The model provider raised while planning: a typed failure of the run."""


@dataclass(frozen=True)
class RunContext:
    """What one execution reads: the stored run and generation, the request as stored,
    the provider, the conversation's earlier questions, where live events go, and the
    asker's access scope, read once for the whole gathering (the publication's recheck
    reads a fresh one under its locks)."""

    run: AnswerRun
    generation: Generation
    request: AnswerRequest
    provider: ModelProvider
    history: tuple[str, ...]
    events: EventSink
    scope: AccessScope

    @property
    def user(self) -> User:
        return self.run.user

    @property
    def api_key(self) -> ApiKey | None:
        return self.run.api_key

    @property
    def language(self) -> str:
        return self.run.language


@dataclass
class Trace:
    """The record of a generation so far: timed steps and tool outcomes."""

    steps: list[dict[str, Any]] = field(default_factory=list)
    outcomes: list[dict[str, Any]] = field(default_factory=list)
    # The stream events after `started`, in the order they were sent live.
    events: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    _sent_outcomes: set[int] = field(default_factory=set)

    def step(self, name: str, started: float, **details: object) -> None:
        self.steps.append(
            {"step": name, "ms": round((time.perf_counter() - started) * 1000, 2), **details}
        )

    def emit(
        self,
        ctx: "RunContext",
        event: tuple[str, dict[str, Any]],
        outcome: dict[str, Any] | None = None,
    ) -> None:
        """Send one event live, numbered as it will be stored."""
        self.events.append(event)
        if outcome is not None:
            self._sent_outcomes.add(id(outcome))
        name, data = event
        ctx.events.event(
            run_id=ctx.run.pk,
            generation=ctx.generation.number,
            seq=len(self.events) + 1,
            name=name,
            data=data,
        )

    def stream_events(self) -> list[tuple[str, dict[str, Any]]]:
        """What a replay shows after `started`: the events as sent live, then the tool
        outcomes that were never sent (a recheck's, a failure's)."""
        unsent = [o for o in self.outcomes if id(o) not in self._sent_outcomes]
        return [*self.events, *(tool_event(o) for o in unsent)]


@dataclass(frozen=True)
class Selection:
    """The outcome of selection → validation → judgement, over all attempts."""

    support: Support | None  # the judged selection that answers most parts; None: none valid
    issues: tuple[str, ...]
    attempts: int
    judge_unavailable: bool = False


@dataclass(frozen=True)
class Gathered:
    """What the tool rounds found and what was selected from it."""

    plan: Plan
    candidates: tuple[CandidateFact, ...]
    support: Support | None
    issues: tuple[str, ...]
    attempts: int
    judge_unavailable: bool = False


@dataclass(frozen=True)
class Ending:
    """How a generation ends, before it is built into a body and sealed: an answer, a
    fixed refusal, or inspection output (plan and raw modes; no release)."""

    kind: str | None  # "answer" | "refusal" | None
    text: str
    evidence: dict[str, Any]  # status, answer_status, sources, outcomes (the policy is added)
    quality: dict[str, Any]
    citations: tuple[dict[str, Any], ...] = ()
    cards: tuple[dict[str, Any], ...] = ()
    selected: tuple[SelectedFact, ...] = ()
    extra: tuple[tuple[str, object], ...] = ()  # inspection output: ("plan", …) or ("results", …)
    world_claims: tuple[
        dict[str, Any], ...
    ] = ()  # a comparison's claims, for the asker's world model


@dataclass(frozen=True)
class Decision:
    ending: Ending
    candidates: tuple[CandidateFact, ...] = ()
    attempts: int = 0  # selection attempts; a release names the generation when > 0
    issues: tuple[str, ...] = ()  # issues of the selection, kept by a later refusal


# --- the steps -----------------------------------------------------------------------


def plan_step(ctx: RunContext, trace: Trace) -> Plan:
    """The provider's plan, steered by memory, stored on the run. Raises ProviderFailed."""
    started = time.perf_counter()
    datasets = visible_datasets(scope=ctx.scope)
    trace.emit(ctx, step_event("model"))
    try:
        plan = ctx.provider.plan(
            question=ctx.request.query, history=list(ctx.history), datasets=datasets
        )
    except DatabaseError:
        raise
    except Exception as error:
        raise ProviderFailed from error
    # Corrections and remembered answers steer the searches (never an answer by themselves).
    plan = hooks.plan_steer.call(run=ctx.run, plan=plan, scope=ctx.scope)
    ctx.run.plan = plan.as_dict()
    ctx.run.save(update_fields=["plan"])
    trace.step(
        "plan",
        started,
        searches=len(plan.searches),
        memory=len(plan.memory),
        rewritten=plan.rewritten,
    )
    return plan


def plan_broaden(plan: Plan, round_number: int) -> Plan:
    """Agent mode: a further round with the question's content words only."""
    words = content_words(plan.standalone)
    search = " ".join(words if round_number == 1 else words[: max(2, len(words) // 2)])
    return replace(plan, searches=[search] if search else plan.searches, dataset_queries=[])


def tools_step(ctx: RunContext, trace: Trace, plan: Plan, round_number: int) -> list[CandidateFact]:
    """One round of the plan's tools; their outcomes go to the trace and, live, to the
    event sink. Returns the recorded candidate facts."""
    started = time.perf_counter()
    found, outcomes = run_tools(
        run=ctx.run, scope=ctx.scope, plan=plan, policy=ctx.request.policy, mode=ctx.request.mode
    )
    trace.outcomes += outcomes
    for outcome in outcomes:
        trace.emit(ctx, tool_event(outcome), outcome)
    trace.step("retrieval", started, candidates=len(found), round=round_number + 1)
    return found


def term_weights(ctx: RunContext, plan: Plan) -> TermWeights:
    """IDF of the plan's words in the corpus this run may see (SPEC §1.4 scope)."""
    words = [w for search in plan.searches for w in lexical_words(search)]
    frequencies, documents = document_frequencies(scope=ctx.scope, words=words)
    by_stem: dict[str, int] = {}
    for word, count in frequencies.items():
        by_stem[stem(word)] = max(by_stem.get(stem(word), 0), count)
    return TermWeights(by_stem, documents)


def select_step(ctx: RunContext, trace: Trace, plan: Plan, found: list[CandidateFact]) -> Selection:
    """Selection → validation → support judgement, at most SELECTION_ATTEMPTS times.

    A selection failing validation is rejected whole (SPEC §1.3); quotes the judge
    rejects go back to the provider with their reasons. The result keeps the judged
    selection that answers the most parts (the latest among equals)."""
    views = candidate_views(found)
    started = time.perf_counter()
    weights = term_weights(ctx, plan)
    trace.step("term_weights", started, documents=weights.documents)
    rejected: tuple[Rejection, ...] = ()
    best: Support | None = None
    issues: list[str] = []
    judged: dict[JudgeItem, float] = {}
    attempts = 0
    for attempt in range(SELECTION_ATTEMPTS):
        started = time.perf_counter()
        attempts += 1
        trace.emit(ctx, step_event("model"))
        try:
            raw = ctx.provider.select(
                question=ctx.request.query,
                plan=plan,
                candidates=views,
                attempt=attempt,
                rejected=rejected,
                weights=weights,
            )
            selected = selection_parse(raw, found)
            trace.step("selection", started, attempt=attempt + 1, facts=len(selected))
            started = time.perf_counter()
            trace.emit(ctx, step_event("verify"))
            selection_validate(selected)
            trace.step("validation", started, ok=True)
        except SelectionRejected as rejection:
            issues.append(rejection.issue)
            trace.step("validation", started, ok=False, issue=rejection.issue)
            # The reason goes back as a code (no fact: the whole selection), never as text.
            rejected += (Rejection("", None, None, rejection.issue),)
            continue
        except DatabaseError:
            raise
        except Exception:
            # A provider's exception text never reaches the user: a typed issue does.
            logger.exception("model provider failed during selection")
            issues.append("provider_error")
            continue
        started = time.perf_counter()
        trace.emit(ctx, step_event("judge"))
        try:
            support = support_judge(
                provider=ctx.provider, plan=plan, selected=selected, weights=weights, cache=judged
            )
        except JudgeUnavailable:
            logger.error("the support judge is unavailable: abstaining")
            return Selection(None, tuple(issues), attempts, judge_unavailable=True)
        trace.step(
            "judgement",
            started,
            attempt=attempt + 1,
            answered=sorted(support.answered),
            parts=support.parts,
            verdicts=[verdict.as_dict() for verdict in support.verdicts],
        )
        if best is None or len(support.answered) >= len(best.answered):
            best = support
        if not support.rejected:
            break
        rejected += support.rejected
    if best is None:
        issues.append("selection_rejected")
    elif rejected:
        issues.append("quote_unsupported")  # judged items were dropped
    return Selection(best, tuple(issues), attempts)


def gather_step(ctx: RunContext, trace: Trace, plan: Plan) -> Gathered:
    """The tool rounds (three in agent mode, broadening the searches) and the selection
    from what each round found; stops at the first round with a kept selection. Raw mode
    stops after the first round's tools."""
    rounds = AGENT_ROUNDS if ctx.request.mode == "agent" else 1
    candidates: tuple[CandidateFact, ...] = ()
    issues: tuple[str, ...] = ()
    attempts = 0
    support: Support | None = None
    for round_number in range(rounds):
        if round_number:
            plan = plan_broaden(plan, round_number)
        found = tools_step(ctx, trace, plan, round_number)
        candidates += tuple(found)
        if any(map(value_unmet, found)) and VALUE_UNMET not in issues:
            issues += (VALUE_UNMET,)  # a value computed without what its part asks for
        if ctx.request.mode == "raw":
            break
        if found:
            selection = select_step(ctx, trace, plan, found)
            issues += selection.issues
            attempts += selection.attempts
            if selection.judge_unavailable:
                return Gathered(plan, candidates, None, issues, attempts, judge_unavailable=True)
            support = selection.support
        if support is not None and support.kept:
            break
    return Gathered(plan, candidates, support, issues, attempts)


# --- endings -------------------------------------------------------------------------


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
    explanation: str,
    *,
    judgement: Judgement | None = None,
    evidence_status: str | None = None,
    issues: tuple[str, ...] = (),
    access_code: str | None = None,
) -> Ending:
    """A fixed text; no prose, citations, verification claims, scores or follow-ups."""
    outcomes = list(trace.outcomes)
    if access_code:
        outcomes.append(
            {
                "tool": "recheck",
                "state": "failed",
                "code": access_code,
                "result_count": 0,
                "retryable": access_code
                in {
                    "permission_unavailable",
                    "source_superseded",
                    "source_withdrawn",
                    "source_erased",
                },
            }
        )
    status = evidence_status or (judgement.evidence_status if judgement else "unavailable")
    return Ending(
        kind="refusal",
        text=texts.explanation(explanation, ctx.language),
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


def inspection(trace: Trace, *, answer_status: str, **extra: object) -> Ending:
    """plan and raw modes: inspection output, labelled unverified, no prose."""
    outcomes = list(trace.outcomes)
    return Ending(
        kind=None,
        text="",
        evidence={
            "status": "unknown" if not outcomes else _tool_status(outcomes),
            "answer_status": answer_status,
            "sources": [],
            "outcomes": outcomes,
        },
        quality={"completeness": "none", "degraded": False, "issues": []},
        extra=tuple(extra.items()),
    )


def decide(ctx: RunContext, trace: Trace) -> Decision:
    """Everything before publication: how this generation ends."""
    from answers.pipeline.comparison import comparison_decide, general_knowledge_decide

    policy = ctx.request.policy
    if policy.mode == "general_knowledge":
        if not ctx.provider.can_answer_generally:
            return Decision(unsupported(ctx, trace, "general_knowledge"))
        return general_knowledge_decide(ctx, trace)
    plan = plan_step(ctx, trace)
    if ctx.request.mode == "plan":
        return Decision(inspection(trace, answer_status="unverified", plan=plan.as_dict()))
    if plan.analysis and not ctx.provider.can_analyse:
        return Decision(unsupported(ctx, trace, "analysis"))
    if plan.comparison:
        if not ctx.provider.can_compare:
            return Decision(unsupported(ctx, trace, "comparison"))
        return comparison_decide(ctx, trace, plan)

    gathered = gather_step(ctx, trace, plan)
    found = gathered.candidates
    if ctx.request.mode == "raw":
        results = [_raw(fact) for fact in found]
        return Decision(inspection(trace, answer_status="unverified", results=results), found)
    return gathered_decision(ctx, trace, gathered)


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
        return Decision(ending, found, gathered.attempts, issues)

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
    return Decision(ending, found, gathered.attempts, issues)


def unsupported(ctx: RunContext, trace: Trace, prerequisite: str) -> Ending:
    return abstention(
        ctx,
        trace,
        "unsupported",
        evidence_status="not_requested",
        issues=(f"unsupported_prerequisite:{prerequisite}",),
    )


# --- the response and its sealing ----------------------------------------------------


def response_body(ctx: RunContext, trace: Trace, decision: Decision) -> dict[str, Any]:
    """The response body (SPEC §5) of an ending: the one builder of every body."""
    ending = decision.ending
    body = {
        "run_id": str(ctx.run.pk),
        "generation": ctx.generation.number,
        "mode": ctx.request.mode,
        "answer": {
            "text": ending.text,
            "language": ctx.language,
            "citations": list(ending.citations),
            "cards": list(ending.cards),
        },
        "evidence": {
            "status": ending.evidence["status"],
            "answer_status": ending.evidence["answer_status"],
            "policy": ctx.request.policy.as_dict(),
            "sources": ending.evidence["sources"],
            "outcomes": ending.evidence["outcomes"],
        },
        "quality": ending.quality,
    }
    if ending.kind is None:
        body["label"] = "unverified"
        body.update(ending.extra)
    if ctx.request.mode == "debug":
        # The sealed body cannot time its own sealing: publication is in the audit.
        body["trace"] = {
            # Judge scores stay in the audit: a body never carries a grounding score.
            "steps": [
                {key: value for key, value in step.items() if key != "verdicts"}
                for step in trace.steps
            ],
            "plan": ctx.run.plan,
            "candidates": [_raw(c) for c in decision.candidates],
        }
    return body


def seal(
    ctx: RunContext,
    trace: Trace,
    decision: Decision,
    *,
    recheck: Callable[[], str | None] | None = None,
) -> dict[str, Any]:
    """Publish a decision (answer_publish: one transaction) and return its sealed body.
    A comparison's claims enter the asker's world model in that transaction."""
    ending = decision.ending
    body = response_body(ctx, trace, decision)
    executed = sorted({c.source["query_id"] for c in decision.candidates if c.kind == "value"})
    started = time.perf_counter()
    answer_publish(
        Publication(
            ctx.run,
            ctx.generation,
            ending.text,
            body,
            list(ending.citations),
            list(ending.cards),
            kind=ending.kind,
            model_called=decision.attempts > 0,
            selected_fact_ids=[s.fact.fact_id for s in ending.selected],
            outcomes=list(trace.outcomes),
            events=trace.stream_events(),
            steps=list(trace.steps),
            sql=[{"planned": q["sql"]} for q in ctx.run.plan.get("dataset_queries", [])]
            + [{"query_id": query_id} for query_id in executed],
            recheck=recheck,
            record=_world_model_writer(ctx, ending),
        )
    )
    trace.step("publication", started)
    ctx.events.sealed(run_id=ctx.run.pk, generation=ctx.generation.number)
    audit_step_append(run_id=ctx.run.pk, generation=ctx.generation.number, step=trace.steps[-1])
    return body


def execute(ctx: RunContext, trace: Trace) -> dict[str, Any]:
    """Decide, then seal: an answer is rechecked inside the publication transaction and
    a refused recheck seals the access-failure text instead."""
    ctx.events.started(run_id=ctx.run.pk, generation=ctx.generation.number)
    decision = decide(ctx, trace)
    ctx.generation.attempts += decision.attempts  # saved with the publication
    if decision.ending.kind != "answer":
        return seal(ctx, trace, decision)
    selected = list(decision.ending.selected)

    def recheck() -> str | None:
        return publication_recheck(
            run=ctx.run, user=ctx.user, api_key=ctx.api_key, selected=selected
        )

    try:
        return seal(ctx, trace, decision, recheck=recheck)
    except PublicationDenied as denied:
        trace.step("recheck", time.perf_counter(), ok=False, code=denied.code)
        refusal = abstention(
            ctx,
            trace,
            "access_failure",
            issues=(*decision.issues, denied.code),
            access_code=denied.code,
        )
        return seal(ctx, trace, replace(decision, ending=refusal))


def _world_model_writer(ctx: RunContext, ending: Ending) -> Callable[[], None] | None:
    if ending.kind != "answer" or not ending.world_claims:
        return None

    def write() -> None:
        hooks.world_claims_record.call(
            user=ctx.user,
            run=ctx.run,
            generation=ctx.generation.number,
            claims=list(ending.world_claims),
        )

    return write


def _tool_status(outcomes: list[dict[str, Any]]) -> str:
    return "available" if any(o["code"] == "matched" for o in outcomes) else "absent"


def _raw(fact: CandidateFact) -> dict[str, Any]:
    return {
        "fact_id": fact.fact_id,
        "kind": fact.kind,
        "text": fact.text,
        "value": fact.value,
        "label": fact.label,
        "source": fact.source,
        "contributions": fact.contributions,
    }
