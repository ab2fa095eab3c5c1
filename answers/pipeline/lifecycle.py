"""The run lifecycle: `run_start` stores a run (conversation, run, message, generation in
one transaction); `run_execute` executes one stored generation — inline for REST, in the
worker for streams and retries alike: it decides (`strategies.decide`) and seals what was
decided (`sealing.seal_decision`);
every failure ends the run `failed` with a typed reason."""

import logging
from collections.abc import Sequence
from uuid import UUID

from django.db import Error, transaction
from django.db.models import Max
from django.utils import timezone
from django.utils.translation import gettext as _

from answers.models import AnswerRun, Conversation, Generation, Message
from answers.pipeline.contracts import AnswerBody, ProviderFailed, RunContext, Trace
from answers.pipeline.events import EventSink, NullSink, StreamEvent
from answers.pipeline.providers import get_model_provider
from answers.pipeline.providers.base import ModelProvider
from answers.pipeline.request import response_language
from answers.pipeline.sealing import seal_decision
from answers.pipeline.strategies import decide
from answers.pipeline.tools import research_request
from answers.pipeline.vocabulary import AnswerRequest, EvidencePolicy, evidence_rule_of, mode_of
from answers.selectors import conversation_get_owned
from answers.services import conversation_sources_set
from audit.services import stream_event_started, stream_events_fail
from core.errors import (
    DATABASE_RETRY_AFTER,
    ApiError,
    ForbiddenError,
    ServiceUnavailableError,
    database_connection_discard,
    database_unavailable,
    writing,
)
from core.models import ApiKey
from core.queue import QueueUnavailable, task_enqueue, task_named
from core.replicas import replica_read
from core.types import User
from knowledge.scope import access_scope_build

__all__ = [
    "AlreadyExecuted",
    "ProviderFailed",
    "RunFailed",
    "answer_create",
    "answer_mode_check",
    "answer_retry",
    "answer_stream_start",
    "run_execute",
    "run_fail",
    "run_start",
    "stored_request",
]

logger = logging.getLogger(__name__)


def _conversation(*, user: User, request: AnswerRequest, origin: str) -> Conversation:
    if request.conversation_id is None:
        return Conversation.objects.create(
            user=user, title=request.query[:200], language=request.language or "", origin=origin
        )
    return conversation_get_owned(user=user, conversation_id=request.conversation_id)


def answer_mode_check(*, user: User, mode: str) -> None:
    """Raise ForbiddenError (403 `permission_denied`) when `user` may not run `mode`.

    Debug mode is for staff: its body carries the plan, every candidate fact and the
    timings. The one place the rule lives; `run_start` and `answer_retry` call it before
    writing anything, so every edge (REST, MCP, the chat, the `ask` command) only
    translates the refusal."""
    if mode == "debug" and not user.is_staff:
        raise ForbiddenError("Debug mode is for staff.")


class RunFailed(ApiError):
    """A run that ended `failed`: a typed reason, never the exception's text. Reason
    `database_unavailable` (the database lost mid-run, its publication rolled back) says
    so and carries Retry-After: asking again, or retrying the run, is expected to work."""

    status_code = 503
    default_code = "run_failed"

    def __init__(self, *, run_id: UUID, reason: str) -> None:
        message = "The answer could not be completed; nothing was published."
        if reason == "database_unavailable":
            message = (
                "The answer was not published: the database restarted while it was being "
                "saved. Nothing of it was kept; ask again."
            )
            self.retry_after = DATABASE_RETRY_AFTER
        super().__init__(message, fields={"run_id": str(run_id), "reason": reason})
        self.run_id = run_id
        self.reason = reason


def run_start(
    *,
    user: User,
    request: AnswerRequest,
    api_key: ApiKey | None = None,
    provider: ModelProvider | None = None,
    origin: str = Conversation.Origin.API,
) -> AnswerRun:
    """Write the conversation (new or the user's own) with its source selection, the run,
    the user's message and generation 1 in one transaction. Raises ForbiddenError for
    debug mode asked by someone who is not staff (`answer_mode_check`: nothing written)
    and NotFoundError for a foreign (or deleted) conversation. `origin` marks a new
    conversation: where it was started (the chat lists its own by default)."""
    answer_mode_check(user=user, mode=request.mode)
    provider = provider or get_model_provider()
    with (
        writing(_("your question “%(question)s”") % {"question": request.query[:80]}),
        transaction.atomic(),
    ):
        conversation = _conversation(user=user, request=request, origin=origin)
        # The request's selection becomes the conversation's current one (recheck reads it).
        conversation_sources_set(
            user=user,
            conversation=conversation,
            space_ids=request.space_ids,
            file_ids=request.selected_sources,
        )
        run = AnswerRun.objects.create(
            user=user,
            api_key=api_key,
            conversation=conversation,
            question=request.query,
            mode=request.mode,
            policy=request.policy.as_dict(),
            explicit_policy=request.policy.explicit,
            language=response_language(request, conversation.language),
            space_ids=request.space_ids,
            selected_sources=request.selected_sources,
            urls=list(request.urls),
        )
        Message.objects.create(
            conversation=conversation, role=Message.Role.USER, text=request.query, run=run
        )
        Generation.objects.create(
            run=run, number=1, provider=provider.name, model_id=provider.model_id
        )
        stream_event_started(run_id=run.pk, generation=1)
    return run


def stored_request(run: AnswerRun) -> AnswerRequest:
    """The request as the run stored it: what every execution (inline, worker, retry)
    reads, so that they all answer the same question under the same policy. ValueError if
    it stored a mode or evidence rule the vocabulary does not name (it stored a parsed request)."""
    mode, rule = mode_of(run.mode), evidence_rule_of(run.policy["mode"])
    if mode is None or rule is None:
        raise ValueError(f"run {run.pk} stored mode {run.mode!r}, policy {run.policy['mode']!r}")
    policy = EvidencePolicy(
        rule=rule,
        allowed_tools=tuple(run.policy["allowed_tools"]),
        required_tools=tuple(run.policy["required_tools"]),
        explicit=run.explicit_policy,
    )
    return AnswerRequest(
        query=run.question,
        mode=mode,
        policy=policy,
        conversation_id=run.conversation_id,
        space_ids=run.space_ids,
        selected_sources=run.selected_sources,
        language=run.language,
        urls=tuple(run.urls),
    )


class AlreadyExecuted(Exception):
    """This generation was taken by an execution before: a redelivered task."""


def generation_claim(*, run_id: UUID, generation: int, events: EventSink, worker: str = "") -> None:
    """Take the generation for this execution (`running` → `executing`), once.

    A task delivered again (acks_late: a worker that died mid-run, a restored message)
    finds it taken: a finished generation is left as it is, and one still `executing`
    belongs to an execution that died — it ends `failed`, `worker_lost`, so nothing
    stays running. Raises AlreadyExecuted in both cases."""
    claimed = Generation.objects.filter(
        run_id=run_id, number=generation, status=Generation.Status.RUNNING
    ).update(status=Generation.Status.EXECUTING, worker=worker[:200], claimed_at=timezone.now())
    if claimed:
        return
    lost = Generation.objects.filter(
        run_id=run_id, number=generation, status=Generation.Status.EXECUTING
    )
    if lost.exists():
        logger.error("run %s generation %s: its execution was lost", run_id, generation)
        run_fail(run_id=run_id, generation=generation, reason="worker_lost")
        events.sealed(run_id=run_id, generation=generation)
    raise AlreadyExecuted(f"{run_id} g{generation}")


def execute(ctx: RunContext, trace: Trace) -> AnswerBody:
    """Decide, then seal (an answer is rechecked inside the publication transaction)."""
    ctx.events.started(run_id=ctx.run.pk, generation=ctx.generation.number)
    return seal_decision(ctx, trace, decide(ctx, trace))


def run_execute(
    *,
    run_id: UUID,
    generation: int,
    provider: ModelProvider | None = None,
    events: EventSink | None = None,
    worker: str = "",
) -> AnswerBody:
    """Execute one generation of a stored run and return its sealed response body.
    `worker`: the Celery worker's hostname when a worker executes it (recovery reads it).

    Reads only stored state, and executes a generation at most once (AlreadyExecuted).
    Provider failures and invalid selections end in a fixed abstention; any other failure
    ends the run `failed` (a typed reason, a `failed` event to replay) and raises
    RunFailed. Nothing stays `running`.
    """
    provider = provider or get_model_provider()
    events = events or NullSink()
    generation_claim(run_id=run_id, generation=generation, events=events, worker=worker)
    run = AnswerRun.objects.select_related("user", "api_key").get(pk=run_id)
    row = run.generations.get(number=generation)
    history = list(
        Message.objects.filter(conversation_id=run.conversation_id, role=Message.Role.USER)
        .exclude(run=run)
        .filter(created_at__lt=run.created_at)
        .order_by("id")
        .values_list("text", flat=True)
    )
    trace = Trace()
    try:
        # The permission rows are read once for the gathering (the recheck reads them again,
        # on the primary); a failure to read them ends the run `failed` like any other. The
        # gathering may read a streaming replica (core.replicas): its scope and passages
        # come from one replica, and nothing it finds is published before the recheck.
        scope = replica_read(
            lambda database: access_scope_build(
                user=run.user,
                space_ids=run.space_ids,
                selected_sources=run.selected_sources,
                database=database,
            )
        )
        request = research_request(stored_request(run), user=run.user, scope=scope)
        context = RunContext(run, row, request, provider, tuple(history), events, scope)
        return execute(context, trace)
    except ProviderFailed:
        logger.exception("model provider failed while planning run %s", run.pk)
        reason = "provider_error"
    except Exception as exc:
        logger.exception("run %s failed", run.pk)
        reason = "internal_error"
        if database_unavailable(exc):
            # Its transaction rolled back; the failure is recorded on a live connection.
            reason = "database_unavailable"
            database_connection_discard()
    try:
        run_fail(run_id=run.pk, generation=generation, reason=reason, events=trace.stream_events())
    except Error:
        # Still away: the generation stays `executing` until the sweeper ends it
        # (answers.recovery: executing past the task time limit is lost).
        logger.exception("run %s: its failure could not be recorded", run.pk)
    events.sealed(run_id=run.pk, generation=generation)
    raise RunFailed(run_id=run.pk, reason=reason)


@transaction.atomic
def run_fail(
    *,
    run_id: UUID,
    generation: int,
    reason: str,
    events: Sequence[StreamEvent] = (),
) -> None:
    """End a generation `failed`: status on run and generation, and the events a replay
    shows (started, the steps and tool activity so far, failed). No text, no release.
    A generation already published or failed is left as it is (a failure noticed after
    its publication committed does not unpublish it)."""
    ended = Generation.objects.filter(
        run_id=run_id,
        number=generation,
        status__in=(Generation.Status.RUNNING, Generation.Status.EXECUTING),
    ).update(status=Generation.Status.FAILED)
    if not ended:
        return
    AnswerRun.objects.filter(pk=run_id).update(status=AnswerRun.Status.FAILED)
    stream_events_fail(run_id=run_id, generation=generation, reason=reason, events=events)


def answer_stream_start(
    *,
    user: User,
    request: AnswerRequest,
    api_key: ApiKey | None = None,
    origin: str = Conversation.Origin.API,
) -> AnswerRun:
    """Start a run that the worker executes (queue `answers`); its events are streamed
    from the database. Raises what `run_start` raises, and ServiceUnavailableError when
    it cannot be queued (the run then ends `failed`, `queue_unavailable`)."""
    run = run_start(user=user, request=request, api_key=api_key, origin=origin)
    try:
        task_enqueue(task_named("answers.run_execute"), str(run.pk), 1)
    except QueueUnavailable:
        run_fail(run_id=run.pk, generation=1, reason="queue_unavailable")
        raise ServiceUnavailableError(
            "The answer could not be queued; nothing was published. Try again.",
            code="queue_unavailable",
            fields={"run_id": str(run.pk)},
        ) from None
    return run


def answer_create(
    *,
    user: User,
    request: AnswerRequest,
    api_key: ApiKey | None = None,
    provider: ModelProvider | None = None,
    origin: str = Conversation.Origin.API,
) -> AnswerBody:
    """Answer a question from the evidence the user may see now, and publish it.

    Returns the response body (SPEC §5). Raises ForbiddenError for debug mode asked by
    someone who is not staff, NotFoundError for a foreign conversation and RunFailed when
    the run could not complete. Provider failures during selection and invalid selections
    never raise: they end in a fixed abstention.
    """
    provider = provider or get_model_provider()
    run = run_start(user=user, request=request, api_key=api_key, provider=provider, origin=origin)
    return run_execute(run_id=run.pk, generation=1, provider=provider)


def answer_retry(
    *,
    user: User,
    run: AnswerRun,
    api_key: ApiKey | None = None,
    provider: ModelProvider | None = None,
) -> AnswerBody:
    """A genuine retry: generation n+1 in a new reset context, with fresh retrieval.

    Earlier generations, their messages and their releases stay as they are. Raises
    ForbiddenError, nothing written, when the run is in debug mode and `user` is not staff
    now (`answer_mode_check`).
    """
    answer_mode_check(user=user, mode=run.mode)
    provider = provider or get_model_provider()
    with (
        writing(_("the new attempt at “%(question)s”") % {"question": run.question[:80]}),
        transaction.atomic(),
    ):
        run = AnswerRun.objects.select_for_update().get(pk=run.pk)
        number = (run.generations.aggregate(top=Max("number"))["top"] or 0) + 1
        run.reset_context += 1
        run.status = AnswerRun.Status.RUNNING
        if api_key is not None:
            run.api_key = api_key  # the credential of this retry is the one to recheck
        run.save(update_fields=["reset_context", "status", "api_key"])
        Generation.objects.create(
            run=run, number=number, provider=provider.name, model_id=provider.model_id
        )
        stream_event_started(run_id=run.pk, generation=number)
    return run_execute(run_id=run.pk, generation=number, provider=provider)
