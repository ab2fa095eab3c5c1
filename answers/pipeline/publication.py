"""Publication: the only place an answer becomes visible. One transaction writes the
assistant message, citations, cards, the output release, the stream events to replay,
the audit and the run's final body — or nothing at all."""

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from django.db import transaction

from answers.models import AnswerRun, CandidateFact, Card, Citation, Generation, Message
from answers.pipeline.contracts import AnswerBody
from answers.pipeline.events import StreamEvent
from answers.pipeline.vocabulary import Card as CardValue
from answers.pipeline.vocabulary import Citation as CitationValue
from answers.pipeline.vocabulary import EndingKind, Outcome
from audit.services import (
    audit_record,
    release_record,
    release_summary,
    searched_record,
    stream_events_record,
    trace_write,
)


@dataclass(frozen=True)
class Publication:
    """What one generation's publication writes; `answer_publish` reads it and changes
    nothing of it (what it sealed comes back as `Sealed`)."""

    run: AnswerRun
    generation: Generation
    text: str
    body: AnswerBody  # as built, without `release`: sealed as a copy that gains it
    citations: tuple[CitationValue, ...]
    cards: tuple[CardValue, ...]
    kind: EndingKind = None  # None: inspection output, no release
    model_called: bool = False
    selected_fact_ids: tuple[str, ...] = ()
    outcomes: tuple[Outcome, ...] = ()
    # The stream's, after started.
    events: tuple[StreamEvent, ...] = ()
    steps: tuple[dict[str, object], ...] = ()
    sql: tuple[dict[str, object], ...] = ()
    # Every round's plan (agent mode broadens the first, which the run stores).
    plans: tuple[dict[str, object], ...] = ()
    # The selection attempts of this execution, added to the generation's count here.
    attempts: int = 0
    # The permission recheck, run first inside the publication transaction: None to go
    # ahead, else a typed code that cancels the whole publication.
    recheck: Callable[[], str | None] | None = None
    # Further rows of this output written in the same transaction (a comparison's world
    # model claims); runs after the recheck.
    record: Callable[[], None] | None = None


@dataclass(frozen=True)
class Sealed:
    """What `answer_publish` sealed: the assistant message, the body as stored on the run
    (the publication's, with its `release`) and the steps as audited (with the recheck's)."""

    message: Message
    body: AnswerBody
    steps: tuple[dict[str, object], ...]


class PublicationDenied(Exception):
    """The recheck inside the publication transaction refused: nothing was written.
    `ms`: how long the refusing recheck ran, for the audit of the refusal."""

    def __init__(self, code: str, *, ms: float) -> None:
        super().__init__(code)
        self.code = code
        self.ms = ms


def _ms_since(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 2)


def _result_hashes(
    facts: dict[str, CandidateFact], fact_ids: Sequence[str]
) -> dict[str, dict[str, str]]:
    selected = [facts[fact_id] for fact_id in fact_ids if fact_id in facts]
    return {
        "facts": {fact.fact_id: fact.sha256 for fact in selected},
        "queries": {
            str(fact.source["query_id"]): fact.source["result_sha256"]
            for fact in selected
            if fact.kind == "value"
        },
    }


@transaction.atomic
def answer_publish(publication: Publication) -> Sealed:
    """Write everything of one generation's output atomically and return what was sealed:
    a copy of the body with its `release` (`release: null` for inspection output such as
    plan and raw modes) and the steps as audited. `publication` is left as it was.

    With a `recheck`, it runs first, under row locks held until commit, so that a
    revocation either precedes this publication (and refuses it: PublicationDenied with
    the recheck's duration, nothing written) or follows it."""
    run, generation = publication.run, publication.generation
    steps = list(publication.steps)
    if publication.recheck is not None:
        started = time.perf_counter()
        denied = publication.recheck()
        if denied:
            raise PublicationDenied(denied, ms=_ms_since(started))
        steps.append({"step": "recheck", "ms": _ms_since(started), "ok": True})
    if publication.record is not None:
        publication.record()
    message = Message.objects.create(
        conversation_id=run.conversation_id,
        role=Message.Role.ASSISTANT,
        text=publication.text,
        run=run,
        generation=generation,
    )
    facts = {f.fact_id: f for f in CandidateFact.objects.filter(run=run)}
    Citation.objects.bulk_create(
        Citation(
            run=run,
            generation=generation,
            message=message,
            ordinal=index,
            fact=facts[data["fact_id"]],
            data=data,
        )
        for index, data in enumerate(publication.citations)
    )
    Card.objects.bulk_create(
        Card(
            run=run,
            generation=generation,
            message=message,
            ordinal=index,
            kind=data["kind"],
            data=data,
        )
        for index, data in enumerate(publication.cards)
    )
    body = publication.body.copy()
    body["release"] = None
    if publication.kind is not None:
        release = release_record(
            run_id=run.pk,
            message_id=message.pk,
            generation_id=generation.pk if publication.model_called else None,
            kind=publication.kind,
            reset_context=run.reset_context,
            body=body,
            selected_fact_ids=list(publication.selected_fact_ids),
            source_refs=body["evidence"]["sources"],
            result_hashes=_result_hashes(facts, publication.selected_fact_ids),
            searched=searched_record(run.plan or {}),
        )
        body["release"] = release_summary(release)
    stream_events_record(
        run_id=run.pk, generation=generation.number, body=body, events=list(publication.events)
    )
    audit_record(
        run_id=run.pk,
        plan=run.plan,
        memories=run.plan.get("memory", []),
        generation={
            "number": generation.number,
            "reset_context": run.reset_context,
            "steps": steps,
            "retrieval": {
                "queries": [q["text"] for q in run.plan.get("queries", [])],
                "tools": body["evidence"]["policy"]["allowed_tools"],
                "outcomes": list(publication.outcomes),
                "candidate_fact_ids": sorted(facts),
            },
            "sql": list(publication.sql),
            "plans": list(publication.plans),
            "release_id": body["release"]["id"] if body["release"] else None,
        },
    )
    generation.status = Generation.Status.PUBLISHED
    generation.attempts += publication.attempts
    generation.save(update_fields=["status", "attempts"])
    run.response = body
    run.status = AnswerRun.Status.PUBLISHED
    run.save(update_fields=["response", "status"])
    lines = [{"run_id": str(run.pk), "generation": generation.number, **step} for step in steps]
    transaction.on_commit(lambda: trace_write(run_id=run.pk, lines=lines))
    return Sealed(message, body, tuple(steps))
