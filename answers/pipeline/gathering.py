"""The plan and the tool rounds: the provider's plan steered by memory (`plan_step`), each
round's tools (`tools_step`), and the rounds with their selections (`gather_step`; three in
agent mode, broadening the searches)."""

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


def gather_step(ctx: RunContext, trace: Trace, plan: Plan) -> Gathered:
    """The tool rounds (three in agent mode, broadening the searches) and the selection
    from what each round found; stops at the first round with a kept selection. Every
    round's plan is kept (the audit records them)."""
    rounds = AGENT_ROUNDS if ctx.request.mode == "agent" else 1
    candidates: tuple[CandidateFact, ...] = ()
    issues: tuple[str, ...] = ()
    plans: tuple[Plan, ...] = ()
    attempts = 0
    support: Support | None = None
    for round_number in range(rounds):
        if round_number:
            plan = plan_broaden(plan, round_number)
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
