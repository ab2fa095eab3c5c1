"""Selection → validation → support judgement, at most SELECTION_ATTEMPTS times, with the
IDF weights of the corpus the run may see (`term_weights`)."""

import logging
import time

from django.db import DatabaseError

from answers.judge.features import JudgeItem
from answers.judge.lexical import TermWeights, content_words, stem
from answers.judge.model import JudgeUnavailable
from answers.models import CandidateFact
from answers.pipeline.candidates import candidate_views
from answers.pipeline.contracts import RunContext, Selection, Trace
from answers.pipeline.events import provider_step, step_event
from answers.pipeline.judgement import Support, operating_point, support_judge
from answers.pipeline.validation import (
    SelectionRejected,
    selection_parse,
    selection_validate,
)
from answers.pipeline.vocabulary import Plan, Rejection
from knowledge.frequencies import document_frequencies

logger = logging.getLogger(__name__)


SELECTION_ATTEMPTS = 3  # the first selection and at most two retries


def term_weights(ctx: RunContext, plan: Plan) -> TermWeights:
    """IDF of the plan's words in the corpus this run may see (SPEC §1.4 scope)."""
    words = [w for search in plan.searches for w in content_words(search)]
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
    try:
        threshold = operating_point(
            rule=ctx.request.policy.rule, space_point=ctx.scope.operating_point
        )
    except JudgeUnavailable:
        logger.error("the support judge is unavailable: abstaining")
        return Selection(None, (), 0, judge_unavailable=True)
    trace.operating_point = threshold
    for attempt in range(SELECTION_ATTEMPTS):
        started = time.perf_counter()
        attempts += 1
        waits = ctx.provider.waits_for_model
        trace.emit(ctx, provider_step(waits_for_model=waits, step="select"))
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
                provider=ctx.provider,
                plan=plan,
                selected=selected,
                weights=weights,
                threshold=threshold,
                cache=judged,
            )
        except JudgeUnavailable:
            logger.error("the support judge is unavailable: abstaining")
            return Selection(None, tuple(issues), attempts, judge_unavailable=True)
        trace.step(
            "judgement",
            started,
            attempt=attempt + 1,
            threshold=threshold,
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
