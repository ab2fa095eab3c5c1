"""Question sets: create one (rows already parsed), run it through the answer pipeline (a
Celery task calls `question_set_run_execute`), and set a space's operating point from its
curve. Every service checks that the acting user curates the space (superusers do):
anyone else is told the space is not found, as the selectors do.

**As a reader would ask.** A set's questions are asked by the curator who started the run,
each in a new conversation (no history), with an explicit evidence policy (so no memory
steers it), no private file selected and the space as the only space searched. Nothing of
the answer path reads `curate_space`: what a curator may read there is what a reader of the
space may (`view_space`, which curators always hold), so each answer is the one a reader of
the space would get, at the space's operating point, and is sealed and receipted like any.

Only the chat shows these errors (there is no API for question sets): their messages are
worded in the curator's language, their codes and fields stay as they are.
"""

import logging

from django.db import transaction
from django.utils import timezone
from django.utils.formats import number_format
from django.utils.translation import gettext as _

from answers.judge.model import JudgeUnavailable
from answers.models import AnswerRun, Conversation, QuestionSet, QuestionSetRun, SetQuestion
from answers.models import SetQuestionResult as Result
from answers.pipeline.contracts import AnswerBody
from answers.pipeline.judgement import operating_point, policy_floor
from answers.pipeline.lifecycle import RunFailed, answer_create
from answers.pipeline.request import answer_request_parse
from answers.question_sets.figures import ReleasedQuote, holds
from answers.question_sets.parsing import QuestionRow
from answers.selectors import audited_generations, judge_scores, run_get_for_user
from core.errors import NotFoundError, ServiceUnavailableError, UnprocessableError, writing
from core.inputs import text_is_storable
from core.queue import QueueUnavailable, task_enqueue, task_named
from core.types import User
from knowledge.models import Space
from knowledge.scope import access_scope_build
from knowledge.selectors import space_can_curate

logger = logging.getLogger(__name__)

SET_POLICIES = ("auto", "strict")
NAME_MAX = 200


def curator_check(*, user: User, space: Space) -> None:
    """NotFoundError unless the user curates the space: only its curators know its sets."""
    if not space_can_curate(user=user, space=space):
        raise NotFoundError("Space not found.")


def question_set_create(
    *, user: User, space: Space, name: str, rows: list[QuestionRow]
) -> QuestionSet:
    """Store a set and its questions in one transaction (rows from `questions_parse` or
    `questions_check`: already valid). UnprocessableError `name_invalid` for an empty or
    overlong name."""
    curator_check(user=user, space=space)
    name = name.strip() if isinstance(name, str) else ""
    if not name or len(name) > NAME_MAX or not text_is_storable(name):
        raise UnprocessableError(
            _("Give the set a name of at most %(count)s characters.") % {"count": NAME_MAX},
            code="name_invalid",
            fields={"name": "Required, at most 200 characters."},
        )
    action = _("the question set “%(name)s”") % {"name": name[:80]}
    with writing(action), transaction.atomic():
        question_set = QuestionSet.objects.create(space=space, name=name, created_by=user)
        SetQuestion.objects.bulk_create(
            SetQuestion(
                question_set=question_set, position=index, text=row.question, expected=row.expected
            )
            for index, row in enumerate(rows, start=1)
        )
    return question_set


def question_set_run_start(*, user: User, question_set: QuestionSet, mode: str) -> QuestionSetRun:
    """Store a queued run of the set under policy `mode` and queue its execution after
    commit. UnprocessableError `invalid_policy` for a mode other than auto or strict;
    ServiceUnavailableError `queue_unavailable` (the run then ends `failed`) when the
    broker does not take it."""
    curator_check(user=user, space=question_set.space)
    if mode not in SET_POLICIES:
        raise UnprocessableError(
            _("A question set runs under the auto or the strict policy."),
            code="invalid_policy",
            fields={"policy": "auto or strict"},
        )
    with (
        writing(_("the run of “%(name)s”") % {"name": question_set.name[:80]}),
        transaction.atomic(),
    ):
        run = QuestionSetRun.objects.create(
            question_set=question_set, started_by=user, policy_mode=mode
        )
        transaction.on_commit(lambda: _enqueue(run.pk))
    return run


def _enqueue(run_id: int) -> None:
    try:
        task_enqueue(task_named("answers.question_set_run"), run_id)
    except QueueUnavailable:
        QuestionSetRun.objects.filter(pk=run_id).update(
            status=QuestionSetRun.Status.FAILED, finished_at=timezone.now()
        )
        raise ServiceUnavailableError(
            _("The question set could not be queued; try again."), code="queue_unavailable"
        ) from None


def question_set_run_execute(*, run_id: int) -> None:
    """Ask every question of a queued run and store each result; at most once per run (a
    redelivered task finds it taken). Precondition: none (a task's entry point).

    The run ends `done`, or `failed` when its starter no longer curates the space or the
    judge cannot be read (nothing is asked then). A question whose answer run fails is
    stored `failed` and counted apart; the others go on."""
    claimed = QuestionSetRun.objects.filter(pk=run_id, status=QuestionSetRun.Status.QUEUED)
    if not claimed.update(status=QuestionSetRun.Status.RUNNING):
        return
    run = QuestionSetRun.objects.select_related("question_set__space", "started_by").get(pk=run_id)
    space, user = run.question_set.space, run.started_by
    try:
        curator_check(user=user, space=space)
        scope = access_scope_build(user=user, space_ids=[space.pk])
        run.floor = policy_floor(run.policy_mode)
        run.operating_point = operating_point(
            rule=run.policy_mode, space_point=scope.operating_point
        )
    except (NotFoundError, JudgeUnavailable):
        logger.warning("question set run %s: not run (curator or judge missing)", run_id)
        _finish(run, QuestionSetRun.Status.FAILED)
        return
    run.save(update_fields=["floor", "operating_point"])
    for question in run.question_set.questions.all():
        _ask(run, question, user=user, space=space)
    _finish(run, QuestionSetRun.Status.DONE)


def _finish(run: QuestionSetRun, status: str) -> None:
    run.status = status
    run.finished_at = timezone.now()
    run.save(update_fields=["status", "finished_at"])


def _ask(run: QuestionSetRun, question: SetQuestion, *, user: User, space: Space) -> None:
    request = answer_request_parse(
        {
            "query": question.text,
            "space_ids": [space.pk],
            "evidence_policy": {"mode": run.policy_mode},
        }
    )
    try:
        body = answer_create(user=user, request=request, origin=Conversation.Origin.MEASURE)
    except RunFailed as failed:
        Result.objects.create(
            run=run,
            question=question,
            answer_run_id=failed.run_id,
            outcome=Result.Outcome.FAILED,
        )
        return
    answer_run = run_get_for_user(user=user, run_id=body["run_id"])  # the run just made
    quotes = released_quotes(answer_run, body)
    outcome = result_outcome(expected=question.expected, quotes=[q["quote"] for q in quotes])
    scores = [q["score"] for q in quotes if q["score"] is not None]
    Result.objects.create(
        run=run,
        question=question,
        answer_run=answer_run,
        outcome=outcome,
        quotes=quotes,
        best_score=max(scores) if scores else None,
    )


def released_quotes(answer_run: AnswerRun, body: AnswerBody) -> list[ReleasedQuote]:
    """The quotes an answer released, each with the judge's score from the run's audit
    (`judge_scores`: None where the audit cannot tell it). An abstention released none."""
    if body["evidence"]["answer_status"] == "abstained":
        return []
    citations = [c for c in body["answer"]["citations"] if c["kind"] == "quote"]
    audited = audited_generations([answer_run]).get(answer_run.pk, [])
    scores = judge_scores(audited, body["generation"], citations)
    return [{"quote": c["quote"], "score": scores.get(c["number"])} for c in citations]


def result_outcome(*, expected: str, quotes: list[str]) -> str:
    """supported: a released quote holds the expected text; wrong: quotes released and none
    holds it, or any released for a question marked not answerable; abstained: none."""
    if not quotes:
        return Result.Outcome.ABSTAINED
    if expected and any(holds(quote, expected) for quote in quotes):
        return Result.Outcome.SUPPORTED
    return Result.Outcome.WRONG


def space_operating_point_set(
    *, user: User, space: Space, point: float | None, run: QuestionSetRun | None = None
) -> Space:
    """Set (or with None, clear) the space's operating point: later answers reading the
    space judge at max(their policy's floor, this point). A point is refused with
    UnprocessableError `operating_point_below_floor` below the floor of the policy of
    `run` (the curve it was chosen on), or of auto without one — never below the pinned
    point that any policy judges at — and `operating_point_invalid` outside (0, 1).
    ServiceUnavailableError `judge_unavailable` when the pinned points cannot be read."""
    curator_check(user=user, space=space)
    if point is not None:
        if not 0.0 < point < 1.0:
            raise UnprocessableError(
                _("An operating point is a number between 0 and 1."),
                code="operating_point_invalid",
                fields={"operating_point": "Between 0 and 1 (exclusive)."},
            )
        mode = run.policy_mode if run is not None else "auto"
        try:
            floor = policy_floor(mode)
        except JudgeUnavailable:
            raise ServiceUnavailableError(
                _("The judge cannot be read now; the operating point was not changed."),
                code="judge_unavailable",
            ) from None
        if point < floor:
            raise UnprocessableError(
                _(
                    "The %(policy)s policy never judges below %(floor)s; choose a point at or "
                    "above it."
                )
                % {"policy": mode, "floor": number_format(floor, decimal_pos=2)},
                code="operating_point_below_floor",
                fields={"operating_point": f"At least {floor:.2f} under the {mode} policy."},
            )
    with (
        writing(_("the operating point of “%(name)s”") % {"name": space.name[:80]}),
        transaction.atomic(),
    ):
        Space.objects.filter(pk=space.pk).update(
            operating_point=point,
            operating_point_set_by=user if point is not None else None,
            operating_point_set_at=timezone.now() if point is not None else None,
        )
    space.refresh_from_db(
        fields=["operating_point", "operating_point_set_by", "operating_point_set_at"]
    )
    return space
