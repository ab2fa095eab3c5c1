"""The plan and the tool rounds: the provider's plan steered by memory (`plan_step`), each
round's tools (`tools_step`), and the rounds with their selections (`gather_step`; three in
agent mode, broadening the searches; three in `deep` without an explicit policy, following
the best lead found so far)."""

import time
from dataclasses import replace

from django.db import DatabaseError

from answers.judge.lexical import PLAN_STOPWORDS, content_words
from answers.models import CandidateFact
from answers.pipeline import hooks
from answers.pipeline.candidates import value_unmet
from answers.pipeline.contracts import Gathered, ProviderFailed, RunContext, Trace
from answers.pipeline.events import provider_step, tool_event
from answers.pipeline.judgement import VALUE_UNMET, Support
from answers.pipeline.selection import select_step
from answers.pipeline.tools import run_tools, visible_datasets
from answers.pipeline.vocabulary import Plan

AGENT_ROUNDS = 3
# `deep` without an explicit policy: rounds that follow the best leads (the bound).
DEEP_ROUNDS = 3
LEAD_WORDS = 4


def plan_step(ctx: RunContext, trace: Trace) -> Plan:
    """The provider's plan, steered by memory, stored on the run. Raises ProviderFailed."""
    started = time.perf_counter()
    datasets = visible_datasets(scope=ctx.scope)
    trace.emit(ctx, provider_step(waits_for_model=ctx.provider.waits_for_model, step="plan"))
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
    words = content_words(plan.standalone, stopwords=PLAN_STOPWORDS)
    search = " ".join(words if round_number == 1 else words[: max(2, len(words) // 2)])
    return replace(plan, searches=[search] if search else plan.searches, dataset_queries=[])


def plan_follow(plan: Plan, found: tuple[CandidateFact, ...], round_number: int) -> Plan:
    """`deep` research: a further round that follows the best lead so far — the question's
    content words with the words of the best-scored quote found that the question does not
    have; with no lead, as agent mode broadens."""
    quotes = [fact for fact in found if fact.kind == "quote"]
    if not quotes:
        return plan_broaden(plan, round_number)
    best = max(quotes, key=lambda fact: float(fact.source.get("score", 0.0)))
    asked = content_words(plan.standalone, stopwords=PLAN_STOPWORDS)
    leads = [w for w in content_words(best.text, stopwords=PLAN_STOPWORDS) if w not in asked]
    search = " ".join([*asked, *dict.fromkeys(leads).keys()][: len(asked) + LEAD_WORDS])
    return replace(plan, searches=[search] if search else plan.searches, dataset_queries=[])


def _rounds(ctx: RunContext) -> int:
    if ctx.request.mode == "agent":
        return AGENT_ROUNDS
    if ctx.request.mode == "deep" and not ctx.request.policy.explicit:
        return DEEP_ROUNDS
    return 1


def tools_step(ctx: RunContext, trace: Trace, plan: Plan, round_number: int) -> list[CandidateFact]:
    """One round of the plan's tools; their outcomes go to the trace and, live, to the
    event sink. Returns the recorded candidate facts."""
    started = time.perf_counter()
    found, outcomes = run_tools(
        run=ctx.run,
        scope=ctx.scope,
        plan=plan,
        policy=ctx.request.policy,
        mode=ctx.request.mode,
        urls=ctx.request.urls,
    )
    trace.outcomes += outcomes
    for outcome in outcomes:
        trace.emit(ctx, tool_event(outcome), outcome)
    trace.step("retrieval", started, candidates=len(found), round=round_number + 1)
    return found


def gather_step(ctx: RunContext, trace: Trace, plan: Plan) -> Gathered:
    """The tool rounds (three in agent mode, broadening the searches) and the selection
    from what each round found; stops at the first round with a kept selection. Every
    round's plan is kept (the audit records them)."""
    rounds = _rounds(ctx)
    candidates: tuple[CandidateFact, ...] = ()
    issues: tuple[str, ...] = ()
    plans: tuple[Plan, ...] = ()
    attempts = 0
    support: Support | None = None
    for round_number in range(rounds):
        if round_number:
            plan = (
                plan_follow(plan, candidates, round_number)
                if ctx.request.mode == "deep"
                else plan_broaden(plan, round_number)
            )
        plans += (plan,)
        found = tools_step(ctx, trace, plan, round_number)
        candidates += tuple(found)
        if any(map(value_unmet, found)) and VALUE_UNMET not in issues:
            issues += (VALUE_UNMET,)  # a value computed without what its part asks for
        if found:
            selection = select_step(ctx, trace, plan, found)
            issues += selection.issues
            attempts += selection.attempts
            if selection.judge_unavailable:
                return Gathered(plan, candidates, None, issues, attempts, True, plans)
            support = selection.support
        if support is not None and support.kept:
            break
    return Gathered(plan, candidates, support, issues, attempts, plans=plans)
