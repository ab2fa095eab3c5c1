"""The answer pipeline as named steps:
plan → tools → candidates (recorded) → selection → validation → support judgement →
recheck → rendering → publication → response."""

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from django.contrib.auth.models import AbstractBaseUser
from django.db import DatabaseError, transaction
from django.db.models import Max

from answers.judge.lexical import TermWeights, stem
from answers.judge.lexical import content_words as lexical_words
from answers.judge.model import JudgeUnavailable
from answers.models import AnswerRun, CandidateFact, Conversation, Generation, Message
from answers.pipeline import texts
from answers.pipeline.events import EventSink, NullSink
from answers.pipeline.judgement import Support, support_judge
from answers.pipeline.planner import Plan, content_words
from answers.pipeline.policy import EvidencePolicy, Judgement, policy_judge
from answers.pipeline.providers import ModelProvider, Rejection, get_model_provider
from answers.pipeline.publication import Publication, PublicationDenied, answer_publish
from answers.pipeline.recheck import publication_recheck
from answers.pipeline.rendering import render_answer
from answers.pipeline.request import AnswerRequest, response_language
from answers.pipeline.tools import candidate_views, run_tools, visible_datasets
from answers.pipeline.validation import (
    SelectedFact,
    SelectionRejected,
    selection_parse,
    selection_validate,
)
from answers.services import conversation_sources_set
from audit.services import audit_step_append, stream_events_fail
from core.errors import ApiError, NotFoundError, ServiceUnavailableError
from core.models import ApiKey
from knowledge.retrieval import document_frequencies

logger = logging.getLogger(__name__)

SELECTION_ATTEMPTS = 3  # the first selection and at most two retries
AGENT_ROUNDS = 3


@dataclass
class Trace:
    steps: list[dict] = field(default_factory=list)
    _started: float = field(default_factory=time.perf_counter)

    def step(self, name: str, started: float, **details: object) -> None:
        self.steps.append(
            {"step": name, "ms": round((time.perf_counter() - started) * 1000, 2), **details}
        )


def _conversation(*, user: AbstractBaseUser, request: AnswerRequest) -> Conversation:
    if request.conversation_id is None:
        return Conversation.objects.create(
            user=user, title=request.query[:200], language=request.language or ""
        )
    conversation = Conversation.objects.filter(pk=request.conversation_id, user=user).first()
    if conversation is None:
        raise NotFoundError("Conversation not found.")
    return conversation


class RunFailed(ApiError):
    """A run that ended `failed`: a typed reason, never the exception's text."""

    status_code = 503
    default_code = "run_failed"

    def __init__(self, *, run_id: object, reason: str) -> None:
        super().__init__(
            "The answer could not be completed; nothing was published.",
            fields={"run_id": str(run_id), "reason": reason},
        )
        self.run_id = run_id
        self.reason = reason


class ProviderFailed(Exception):
    """The model provider raised while planning: a typed failure of the run."""


def run_start(
    *,
    user: AbstractBaseUser,
    request: AnswerRequest,
    api_key: ApiKey | None = None,
    provider: ModelProvider | None = None,
) -> AnswerRun:
    """Write the conversation (new or the user's own) with its source selection, the run,
    the user's message and generation 1 in one transaction. Raises NotFoundError for a
    foreign conversation."""
    provider = provider or get_model_provider()
    with transaction.atomic():
        conversation = _conversation(user=user, request=request)
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
        )
        Message.objects.create(
            conversation=conversation, role=Message.Role.USER, text=request.query, run=run
        )
        Generation.objects.create(
            run=run, number=1, provider=provider.name, model_id=provider.model_id
        )
    return run


def stored_request(run: AnswerRun) -> AnswerRequest:
    """The request as the run stored it: what every execution (inline, worker, retry)
    reads, so that they all answer the same question under the same policy."""
    policy = EvidencePolicy(
        mode=run.policy["mode"],
        allowed_tools=tuple(run.policy["allowed_tools"]),
        required_tools=tuple(run.policy["required_tools"]),
        explicit=run.explicit_policy,
    )
    return AnswerRequest(
        query=run.question,
        mode=run.mode,
        policy=policy,
        conversation_id=run.conversation_id,
        space_ids=run.space_ids,
        selected_sources=run.selected_sources,
        language=run.language,
    )


def run_execute(
    *,
    run_id: object,
    generation: int,
    provider: ModelProvider | None = None,
    events: EventSink | None = None,
) -> dict:
    """Execute one generation of a stored run and return its sealed response body.

    Reads only stored state. Provider failures and invalid selections end in a fixed
    abstention; any other failure ends the run `failed` (a typed reason, a `failed`
    event to replay) and raises RunFailed. Nothing stays `running`.
    """
    provider = provider or get_model_provider()
    run = AnswerRun.objects.select_related("user", "api_key").get(pk=run_id)
    row = run.generations.get(number=generation)
    history = list(
        Message.objects.filter(conversation_id=run.conversation_id, role=Message.Role.USER)
        .exclude(run=run)
        .filter(created_at__lt=run.created_at)
        .order_by("id")
        .values_list("text", flat=True)
    )
    events = events or NullSink()
    pipeline = Pipeline(run, row, stored_request(run), provider, run.user, run.api_key, history,
                        events=events)  # fmt: skip
    try:
        return pipeline.execute()
    except ProviderFailed:
        logger.exception("model provider failed while planning run %s", run.pk)
        reason = "provider_error"
    except Exception:
        logger.exception("run %s failed", run.pk)
        reason = "internal_error"
    try:
        run_fail(run_id=run.pk, generation=generation, reason=reason,
                 outcomes=pipeline.outcomes)  # fmt: skip
    except DatabaseError:
        logger.exception("run %s: its failure could not be recorded", run.pk)
    events.sealed(run_id=run.pk, generation=generation)
    raise RunFailed(run_id=run.pk, reason=reason)


@transaction.atomic
def run_fail(*, run_id: object, generation: int, reason: str, outcomes: list[dict] = ()) -> None:
    """End a generation `failed`: status on run and generation, and the events a replay
    shows (started, the tool activity so far, failed). No text, no release."""
    AnswerRun.objects.filter(pk=run_id).update(status=AnswerRun.Status.FAILED)
    Generation.objects.filter(run_id=run_id, number=generation).update(status="failed")
    stream_events_fail(run_id=run_id, generation=generation, reason=reason, outcomes=outcomes)


def answer_stream_start(
    *, user: AbstractBaseUser, request: AnswerRequest, api_key: ApiKey | None = None
) -> AnswerRun:
    """Start a run that the worker executes (queue `answers`); its events are streamed
    from the database. Raises ServiceUnavailableError when it cannot be queued (the run
    then ends `failed`, `queue_unavailable`)."""
    from answers.tasks import run_execute_task
    from core.queue import QueueUnavailable, task_enqueue

    run = run_start(user=user, request=request, api_key=api_key)
    try:
        task_enqueue(run_execute_task, str(run.pk), 1)
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
    user: AbstractBaseUser,
    request: AnswerRequest,
    api_key: ApiKey | None = None,
    provider: ModelProvider | None = None,
) -> dict:
    """Answer a question from the evidence the user may see now, and publish it.

    Returns the response body (SPEC §5). Raises NotFoundError for a foreign
    conversation and RunFailed when the run could not complete. Provider failures
    during selection and invalid selections never raise: they end in a fixed abstention.
    """
    provider = provider or get_model_provider()
    run = run_start(user=user, request=request, api_key=api_key, provider=provider)
    return run_execute(run_id=run.pk, generation=1, provider=provider)


@dataclass
class Pipeline:
    run: AnswerRun
    generation: Generation
    request: AnswerRequest
    provider: ModelProvider
    user: AbstractBaseUser
    api_key: ApiKey | None
    history: list[str]
    trace: Trace = field(default_factory=Trace)
    outcomes: list[dict] = field(default_factory=list)
    issues: list[str] = field(default_factory=list)
    candidates: list[CandidateFact] = field(default_factory=list)
    model_called: bool = False
    events: EventSink = field(default_factory=NullSink)

    @property
    def language(self) -> str:
        return self.run.language

    def execute(self) -> dict:
        self.events.started(run_id=self.run.pk, generation=self.generation.number)
        policy = self.request.policy
        if policy.mode == "general_knowledge" and not self.provider.can_answer_generally:
            return self.abstain(
                "unsupported",
                evidence_status="not_requested",
                issues=["unsupported_prerequisite:general_knowledge"],
            )
        started = time.perf_counter()
        datasets = visible_datasets(user=self.user, space_ids=self.run.space_ids)
        try:
            plan = self.provider.plan(
                question=self.request.query, history=self.history, datasets=datasets
            )
        except DatabaseError:
            raise
        except Exception as error:
            raise ProviderFailed from error
        self.run.plan = plan.as_dict()
        self.run.save(update_fields=["plan"])
        self.trace.step("plan", started, searches=len(plan.searches))
        if self.request.mode == "plan":
            return self.finish_without_answer({"plan": plan.as_dict()}, answer_status="unverified")
        if plan.analysis and not self.provider.can_analyse:
            return self.abstain(
                "unsupported",
                evidence_status="not_requested",
                issues=["unsupported_prerequisite:analysis"],
            )
        if plan.comparison and not self.provider.can_compare:
            return self.abstain(
                "unsupported",
                evidence_status="not_requested",
                issues=["unsupported_prerequisite:comparison"],
            )

        rounds = AGENT_ROUNDS if self.request.mode == "agent" else 1
        support: Support | None = None
        for round_number in range(rounds):
            if round_number:
                plan = self.broaden(plan, round_number)
            started = time.perf_counter()
            found, outcomes = run_tools(
                run=self.run, user=self.user, plan=plan, policy=policy, mode=self.request.mode
            )
            self.candidates += found
            self.events.tools(run_id=self.run.pk, generation=self.generation.number,
                              first=len(self.outcomes), outcomes=outcomes)  # fmt: skip
            self.outcomes += outcomes
            self.trace.step("retrieval", started, candidates=len(found), round=round_number + 1)
            if self.request.mode == "raw":
                return self.finish_without_answer(
                    {"results": [_raw(f) for f in found]}, answer_status="unverified"
                )
            if found:
                try:
                    support = self.select(plan, found)
                except JudgeUnavailable:
                    logger.error("the support judge is unavailable: abstaining")
                    return self.abstain(
                        "unsupported", evidence_status="unavailable", issues=["judge_unavailable"]
                    )
            if support is not None and support.kept:
                break

        selected = list(support.kept) if support is not None else []
        selected_tools = [set(s.fact.contributions) for s in selected]
        unanswered = len(support.unanswered) if support is not None and selected else 0
        judgement = policy_judge(
            policy=policy,
            outcomes=self.outcomes,
            selected_tools=selected_tools,
            unanswered_parts=unanswered,
        )
        if not judgement.publish:
            return self.abstain(judgement.explanation, judgement=judgement)

        return self.publish(selected, judgement)

    def broaden(self, plan: Plan, round_number: int) -> Plan:
        """Agent mode: a further round with the question's content words only."""
        words = content_words(plan.standalone)
        search = " ".join(words if round_number == 1 else words[: max(2, len(words) // 2)])
        return Plan(
            standalone=plan.standalone,
            searches=[search] if search else plan.searches,
            comparison=plan.comparison,
            rewritten=plan.rewritten,
        )

    def term_weights(self, plan: Plan) -> TermWeights:
        """IDF of the plan's words in the corpus this run may see (SPEC §1.4 scope)."""
        words = [w for search in plan.searches for w in lexical_words(search)]
        frequencies, documents = document_frequencies(
            user=self.user,
            words=words,
            space_ids=self.run.space_ids or None,
            selected_sources=self.run.selected_sources or None,
        )
        by_stem: dict[str, int] = {}
        for word, count in frequencies.items():
            by_stem[stem(word)] = max(by_stem.get(stem(word), 0), count)
        return TermWeights(by_stem, documents)

    def select(self, plan: Plan, found: list[CandidateFact]) -> Support | None:
        """Selection → validation → support judgement, at most SELECTION_ATTEMPTS times.

        A selection failing validation is rejected whole (SPEC §1.3); quotes the judge
        rejects go back to the provider with their reasons. Returns the judged selection
        that answers the most parts (the latest among equals), or None if no selection
        was ever valid. Raises JudgeUnavailable when there is no judge.
        """
        views = candidate_views(found)
        started = time.perf_counter()
        weights = self.term_weights(plan)
        self.trace.step("term_weights", started, documents=weights.documents)
        rejected: tuple[Rejection, ...] = ()
        best: Support | None = None
        judged: dict = {}
        for attempt in range(SELECTION_ATTEMPTS):
            started = time.perf_counter()
            self.generation.attempts += 1
            self.model_called = True
            try:
                raw = self.provider.select(
                    question=self.request.query,
                    plan=plan,
                    candidates=views,
                    attempt=attempt,
                    rejected=rejected,
                    weights=weights,
                )
                selected = selection_parse(raw, found)
                self.trace.step("selection", started, attempt=attempt + 1, facts=len(selected))
                started = time.perf_counter()
                selection_validate(selected)
                self.trace.step("validation", started, ok=True)
            except SelectionRejected as rejection:
                self.issues.append(rejection.issue)
                self.trace.step("validation", started, ok=False, issue=rejection.issue)
                continue
            except DatabaseError:
                raise
            except Exception:
                # A provider's exception text never reaches the user: a typed issue does.
                logger.exception("model provider failed during selection")
                self.issues.append("provider_error")
                continue
            started = time.perf_counter()
            support = support_judge(
                provider=self.provider,
                plan=plan,
                selected=selected,
                weights=weights,
                cache=judged,
            )
            self.trace.step(
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
            self.issues.append("selection_rejected")
        elif rejected:
            self.issues.append("quote_unsupported")  # judged items were dropped
        return best

    # --- endings ---------------------------------------------------------------------

    def body(
        self, *, text: str, citations: list, cards: list, evidence: dict, quality: dict
    ) -> dict:
        return {
            "run_id": str(self.run.pk),
            "generation": self.generation.number,
            "mode": self.request.mode,
            "answer": {
                "text": text,
                "language": self.language,
                "citations": citations,
                "cards": cards,
            },
            "evidence": evidence,
            "quality": quality,
        }

    def publish(self, selected: list[SelectedFact], judgement: Judgement) -> dict:
        started = time.perf_counter()
        rendered = render_answer(selected=selected, language=self.language)
        self.trace.step("rendering", started)
        body = self.body(
            text=rendered.text,
            citations=rendered.citations,
            cards=rendered.cards,
            evidence={
                "status": judgement.evidence_status,
                "answer_status": judgement.answer_status,
                "policy": self.request.policy.as_dict(),
                "sources": rendered.sources,
                "outcomes": self.outcomes,
            },
            quality={
                "completeness": judgement.completeness,
                "degraded": judgement.completeness != "complete",
                "issues": sorted(set(self.issues + judgement.issues)),
            },
        )
        try:
            return self.seal(
                body,
                rendered.text,
                rendered.citations,
                rendered.cards,
                kind="answer",
                selected_fact_ids=[s.fact.fact_id for s in selected],
                recheck=lambda: publication_recheck(
                    run=self.run, user=self.user, api_key=self.api_key, selected=selected
                ),
            )
        except PublicationDenied as denied:
            self.trace.step("recheck", time.perf_counter(), ok=False, code=denied.code)
            return self.abstain("access_failure", issues=[denied.code], access_code=denied.code)

    def abstain(
        self,
        explanation: str,
        *,
        judgement: Judgement | None = None,
        evidence_status: str | None = None,
        issues: list[str] | None = None,
        access_code: str | None = None,
    ) -> dict:
        """A fixed text; no prose, citations, verification claims, scores or follow-ups."""
        outcomes = list(self.outcomes)
        if access_code:
            outcomes.append(
                {
                    "tool": "recheck",
                    "state": "failed",
                    "code": access_code,
                    "result_count": 0,
                    "retryable": access_code == "permission_unavailable",
                }
            )
        status = evidence_status or (judgement.evidence_status if judgement else "unavailable")
        all_issues = sorted(
            set(self.issues + (issues or []) + (judgement.issues if judgement else []))
        )
        body = self.body(
            text=texts.explanation(explanation, self.language),
            citations=[],
            cards=[],
            evidence={
                "status": status,
                "answer_status": "abstained",
                "policy": self.request.policy.as_dict(),
                "sources": [],
                "outcomes": outcomes,
            },
            quality={"completeness": "none", "degraded": True, "issues": all_issues},
        )
        return self.seal(body, body["answer"]["text"], [], [], kind="refusal")

    def finish_without_answer(self, extra: dict, *, answer_status: str) -> dict:
        """plan and raw modes: inspection output, labelled unverified, no prose."""
        body = self.body(
            text="",
            citations=[],
            cards=[],
            evidence={
                "status": "unknown" if not self.outcomes else _status(self.outcomes),
                "answer_status": answer_status,
                "policy": self.request.policy.as_dict(),
                "sources": [],
                "outcomes": self.outcomes,
            },
            quality={"completeness": "none", "degraded": False, "issues": []},
        )
        body["label"] = "unverified"
        body.update(extra)
        return self.seal(body, "", [], [], kind=None)

    def seal(
        self,
        body: dict,
        text: str,
        citations: list,
        cards: list,
        *,
        kind: str | None,
        selected_fact_ids: list[str] | None = None,
        recheck: Callable[[], str | None] | None = None,
    ) -> dict:
        if self.request.mode == "debug":
            # The sealed body cannot time its own sealing: publication is in the audit.
            body["trace"] = {
                # Judge scores stay in the audit: a body never carries a grounding score.
                "steps": [
                    {key: value for key, value in step.items() if key != "verdicts"}
                    for step in self.trace.steps
                ],
                "plan": self.run.plan,
                "candidates": [_raw(c) for c in self.candidates],
            }
        executed = sorted({c.source["query_id"] for c in self.candidates if c.kind == "value"})
        started = time.perf_counter()
        answer_publish(
            Publication(
                self.run,
                self.generation,
                text,
                body,
                citations,
                cards,
                kind=kind,
                model_called=self.model_called,
                selected_fact_ids=selected_fact_ids or [],
                outcomes=self.outcomes,
                steps=list(self.trace.steps),
                sql=[{"planned": q["sql"]} for q in self.run.plan.get("dataset_queries", [])]
                + [{"query_id": query_id} for query_id in executed],
                recheck=recheck,
            )
        )
        self.trace.step("publication", started)
        self.events.sealed(run_id=self.run.pk, generation=self.generation.number)
        audit_step_append(
            run_id=self.run.pk, generation=self.generation.number, step=self.trace.steps[-1]
        )
        return body


def _status(outcomes: list[dict]) -> str:
    return "available" if any(o["code"] == "matched" for o in outcomes) else "absent"


def _raw(fact: CandidateFact) -> dict:
    return {
        "fact_id": fact.fact_id,
        "kind": fact.kind,
        "text": fact.text,
        "value": fact.value,
        "label": fact.label,
        "source": fact.source,
        "contributions": fact.contributions,
    }


def answer_retry(
    *,
    user: AbstractBaseUser,
    run: AnswerRun,
    api_key: ApiKey | None = None,
    provider: ModelProvider | None = None,
) -> dict:
    """A genuine retry: generation n+1 in a new reset context, with fresh retrieval.

    Earlier generations, their messages and their releases stay as they are.
    """
    provider = provider or get_model_provider()
    with transaction.atomic():
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
    return run_execute(run_id=run.pk, generation=number, provider=provider)
