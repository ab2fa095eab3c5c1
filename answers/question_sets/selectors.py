"""Reads of question sets, for the curators of their space only (anyone else: NotFound)."""

from dataclasses import dataclass, field

from django.db.models import QuerySet

from answers.models import QuestionSet, QuestionSetRun, SetQuestionResult
from answers.question_sets.figures import FAILED, Scored, Tally, curve, outcome_at, tally
from core.errors import NotFoundError
from core.inputs import object_id_parse
from core.types import UserOrAnonymous
from knowledge.models import Space
from knowledge.selectors import spaces_curated_by


def question_sets_of_space(*, user: UserOrAnonymous, space: Space) -> QuerySet[QuestionSet]:
    """The space's sets, newest first, if the user curates it; none otherwise."""
    curated = spaces_curated_by(user=user).filter(pk=space.pk)
    return QuestionSet.objects.filter(space__in=curated).order_by("-created_at", "-id")


def question_set_get_for_curator(
    *, user: UserOrAnonymous, space: Space, set_id: object
) -> QuestionSet:
    """One set of the space if the user curates it; NotFoundError whether it is missing, of
    another space or the user does not curate this one."""
    pk = object_id_parse(set_id)
    found = question_sets_of_space(user=user, space=space).filter(pk=pk).first() if pk else None
    if found is None:
        raise NotFoundError("Question set not found.")
    return found


def question_set_run_get(*, question_set: QuestionSet, run_id: object) -> QuestionSetRun:
    """A run of a set the caller read through `question_set_get_for_curator`."""
    pk = object_id_parse(run_id)
    found = question_set.runs.filter(pk=pk).first() if pk else None
    if found is None:
        raise NotFoundError("Run not found.")
    return found


@dataclass
class RunReport:
    """A run's figures at one threshold, the examples behind each, and the curve."""

    run: QuestionSetRun
    threshold: float
    figures: Tally
    examples: dict[str, list[dict]] = field(default_factory=dict)
    curve: list[Tally] = field(default_factory=list)
    done: int = 0
    total: int = 0


def question_set_run_report(
    *, run: QuestionSetRun, threshold: float | None = None
) -> RunReport | None:
    """The run's figures at `threshold` (default: the point it judged at; a threshold
    below that point is not measured and reads as that point), with every question behind
    each figure, and the curve from its point up. None before the run judged anything."""
    if run.operating_point is None:
        return None
    results = list(
        SetQuestionResult.objects.filter(run=run)
        .select_related("question")
        .order_by("question__position")
    )
    scored = [
        Scored(r.question.expected, r.quotes, r.outcome == SetQuestionResult.Outcome.FAILED)
        for r in results
    ]
    point = run.operating_point
    at = point if threshold is None else max(point, threshold)
    examples: dict[str, list[dict]] = {}
    for result, item in zip(results, scored, strict=True):
        outcome = outcome_at(item, at, point)
        kept = [q for q in result.quotes if (point if q["score"] is None else q["score"]) >= at]
        examples.setdefault(outcome, []).append(
            {
                "position": result.question.position,
                "question": result.question.text,
                "expected": result.question.expected,
                "quotes": [] if outcome == FAILED else kept,
                "answer_run_id": result.answer_run_id,
                "best_score": result.best_score,
            }
        )
    return RunReport(
        run=run,
        threshold=at,
        figures=tally(scored, at, point),
        examples=examples,
        curve=curve(scored, point),
        done=len(results),
        total=run.question_set.questions.count(),
    )
