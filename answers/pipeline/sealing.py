"""Sealing a decision: the one builder of every response body (`response_body`), and its
publication in one transaction (`seal`), rechecked for an answer (`publish`)."""

import logging
import time
from collections.abc import Callable
from dataclasses import replace

from django.db import Error

from answers.pipeline import hooks
from answers.pipeline.contracts import AnswerBody, Decision, Ending, RunContext, Trace
from answers.pipeline.endings import abstention, raw_fact
from answers.pipeline.publication import Publication, PublicationDenied, answer_publish
from answers.pipeline.recheck import publication_recheck
from audit.services import audit_step_append
from core.errors import database_connection_discard, database_unavailable

logger = logging.getLogger(__name__)


def response_body(ctx: RunContext, trace: Trace, decision: Decision) -> AnswerBody:
    """The response body (SPEC §5) of an ending: the one builder of every body."""
    ending = decision.ending
    policy = ctx.request.policy.as_dict()
    if ending.kind == "answer" and trace.operating_point is not None:
        # The threshold its quotes were judged at, sealed with the policy (policy_sha256):
        # the receipt says which point a curator's choice or the policy set.
        policy["operating_point"] = trace.operating_point
    body: AnswerBody = {
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
            "policy": policy,
            "sources": ending.evidence["sources"],
            "outcomes": ending.evidence["outcomes"],
        },
        "quality": ending.quality,
    }
    if ending.inspected is not None:
        body["label"] = "unverified"
        if ending.inspected.plan is not None:
            body["plan"] = ending.inspected.plan
        if ending.inspected.results is not None:
            body["results"] = ending.inspected.results
    if ctx.request.mode == "debug":
        # The sealed body cannot time its own sealing: publication is in the audit.
        body["trace"] = {
            # Judge scores stay in the audit: a body never carries a grounding score.
            "steps": [
                {key: value for key, value in step.items() if key != "verdicts"}
                for step in trace.steps
            ],
            "plan": ctx.run.plan,
            "candidates": [raw_fact(c) for c in decision.candidates],
        }
    return body


def seal(
    ctx: RunContext,
    trace: Trace,
    decision: Decision,
    *,
    recheck: Callable[[], str | None] | None = None,
) -> AnswerBody:
    """Publish a decision (answer_publish: one transaction) and return the body it sealed
    (with its `release`). A comparison's claims enter the asker's world model in that
    transaction. Raises PublicationDenied when the recheck refuses (nothing written)."""
    ending = decision.ending
    body = response_body(ctx, trace, decision)
    executed = sorted({c.source["query_id"] for c in decision.candidates if c.kind == "value"})
    started = time.perf_counter()
    sealed = answer_publish(
        Publication(
            ctx.run,
            ctx.generation,
            ending.text,
            body,
            tuple(ending.citations),
            tuple(ending.cards),
            kind=ending.kind,
            model_called=decision.attempts > 0,
            attempts=decision.attempts,
            plans=tuple(plan.as_dict() for plan in decision.plans),
            selected_fact_ids=tuple(s.fact.fact_id for s in ending.selected),
            outcomes=tuple(trace.outcomes),
            events=tuple(trace.stream_events()),
            steps=tuple(trace.steps),
            sql=(
                *({"planned": q["sql"]} for q in ctx.run.plan.get("dataset_queries", [])),
                *({"query_id": query_id} for query_id in executed),
            ),
            recheck=recheck,
            record=_world_model_writer(ctx, ending),
        )
    )
    trace.step("publication", started)
    ctx.events.sealed(run_id=ctx.run.pk, generation=ctx.generation.number)
    try:
        audit_step_append(run_id=ctx.run.pk, generation=ctx.generation.number, step=trace.steps[-1])
    except Error as exc:
        # The answer is published (committed above): losing the database now costs the
        # audit this step's timing, never the answer.
        if not database_unavailable(exc):
            raise
        logger.warning("run %s: publication's timing not audited (database lost)", ctx.run.pk)
        database_connection_discard()
    return sealed.body


def seal_decision(ctx: RunContext, trace: Trace, decision: Decision) -> AnswerBody:
    """Seal what was decided: an answer is rechecked inside the publication transaction
    and a refused recheck seals the access-failure text instead."""
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
        # Audited with the refusal, as long as the recheck ran (not from now: ~0 ms).
        trace.timed("recheck", denied.ms, ok=False, code=denied.code)
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
