"""Receipts of published output: releases, sealed stream events, audits and traces.

Called only from inside the publication transaction (answers.pipeline.publication).
"""

import json
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from uuid import UUID

from django.conf import settings
from django.db import connection, transaction

from audit.models import AnswerAudit, AuditStep, OutputRelease, StreamEvent
from audit.receipts import POLICY_VERSION, AnswerBodyJson, body_hashes
from core.fields import column_name, concrete_field
from core.queue import QueueUnavailable, task_enqueue, task_named

logger = logging.getLogger(__name__)


def release_record(
    *,
    run_id: UUID,
    message_id: int,
    generation_id: int | None,
    kind: str,
    reset_context: int,
    body: AnswerBodyJson,
    selected_fact_ids: list[str],
    source_refs: Sequence[Mapping[str, object]],
    result_hashes: dict,
    searched: dict | None = None,
) -> OutputRelease:
    """Append the release of one published body. Precondition: inside the publication
    transaction, so the release exists exactly when the message and events do. After
    commit, the answer log's integration is queued (no lock or write of the log here)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT nextval('audit_publication_sequence')")
        (sequence,) = cursor.fetchone()
    if settings.KOINON_LOG_INTEGRATE_AFTER_COMMIT:
        transaction.on_commit(log_integration_queue)
    return OutputRelease.objects.create(
        run_id=run_id,
        message_id=message_id,
        generation_id=generation_id,
        kind=kind,
        reset_context=reset_context,
        policy_version=POLICY_VERSION,
        publication_sequence=sequence,
        selected_fact_ids=selected_fact_ids,
        source_refs=source_refs,
        result_hashes=result_hashes,
        searched=searched or {},
        **body_hashes(body, policy_version=POLICY_VERSION),
    )


def log_integration_queue() -> None:
    """Queue the answer log's integration (after a publication commits). A broker that is
    down loses nothing: the next integration takes every release not yet in the log."""
    try:
        task_enqueue(task_named("audit.log_integrate"))
    except QueueUnavailable:
        logger.warning("answer log: integration not queued; the next one takes this release")


def release_summary(release: OutputRelease) -> dict:
    return {
        "id": str(release.pk),
        "kind": release.kind,
        "reset_context": release.reset_context,
        "publication_sequence": release.publication_sequence,
        "policy_version": release.policy_version,
        "text_sha256": release.text_sha256,
        "citations_sha256": release.citations_sha256,
        "cards_sha256": release.cards_sha256,
        "policy_sha256": release.policy_sha256,
        "searched": release.searched,
    }


def searched_record(plan: dict) -> dict:
    """What a release records of its plan's searches (`OutputRelease.searched`): the
    standalone question when it was rewritten from the conversation, and — when what was
    searched differs from what was typed — every search with its part and origin, and the
    memory entries that steered which parts and why. A plain question records nothing of
    itself: the body echoes no text the asker did not see as an answer."""
    rewritten = bool(plan.get("rewritten"))
    memory = [
        {key: entry.get(key) for key in ("id", "kind", "scope", "parts", "why")}
        for entry in plan.get("memory", [])
    ]
    differs = rewritten or bool(memory)
    return {
        "searched_as": plan.get("standalone", "") if rewritten else "",
        "searches": [
            {key: q[key] for key in ("part", "text", "origin", "memory") if key in q}
            for q in plan.get("queries", [])
        ]
        if differs
        else [],
        "memory": memory,
    }


def stream_event_started(*, run_id: UUID, generation: int) -> None:
    """`started` (seq 1), stored when a generation is created: a stream shows it at once,
    on any web process, before the worker has begun. It carries no answer content."""
    data = stream_started_data(run_id=run_id, generation=generation)
    StreamEvent.objects.create(
        run_id=run_id, generation=generation, sequence=1, event="started", data=data
    )


def stream_started_data(*, run_id: UUID, generation: int) -> dict:
    return {"run_id": str(run_id), "generation": generation}


def _events_append(*, run_id: UUID, generation: int, events: list[tuple[str, dict]]) -> None:
    """Store the generation's events after `started` (stored first if it is not yet)."""
    if not StreamEvent.objects.filter(run_id=run_id, generation=generation, sequence=1).exists():
        events = [("started", stream_started_data(run_id=run_id, generation=generation)), *events]
        first = 1
    else:
        first = 2
    StreamEvent.objects.bulk_create(
        StreamEvent(run_id=run_id, generation=generation, sequence=number, event=name, data=data)
        for number, (name, data) in enumerate(events, start=first)
    )


def stream_events_record(
    *, run_id: UUID, generation: int, body: AnswerBodyJson, events: list[tuple[str, dict]]
) -> None:
    """The events a stream will replay after `started`: the run's steps and tool
    activity as they were streamed live, then completed."""
    events = [*events, ("completed", {"payload": {"result": body}})]
    _events_append(run_id=run_id, generation=generation, events=events)


def stream_events_fail(
    *, run_id: UUID, generation: int, reason: str, events: Sequence[tuple[str, dict]] = ()
) -> None:
    """The events a replay shows for a generation that failed: after `started`, the steps
    and tool activity that had happened (numbered as they were streamed live), failed."""
    events = [*events, ("failed", {"code": reason})]
    _events_append(run_id=run_id, generation=generation, events=events)


def audit_record(
    *, run_id: UUID, plan: dict, generation: dict, memories: Sequence[Mapping[str, object]] = ()
) -> bool:
    """The audit of one generation (its steps, retrieval manifest, SQL and the memory
    entries its plan used): a row of its own, in one statement. The row is a record, so a
    generation recorded before keeps its first row (whether this one was written)."""
    generation = {**generation, "memories": list(memories)}
    values = {
        "run": run_id,
        "number": generation["number"],
        "plan": plan,
        "generation": generation,
    }
    fields = {name: concrete_field(AnswerAudit, name) for name in values}
    columns = ", ".join(
        connection.ops.quote_name(column_name(AnswerAudit, name)) for name in fields
    )
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {connection.ops.quote_name(AnswerAudit._meta.db_table)} "  # noqa: S608
            f"({columns}, created_at) VALUES (%s, %s, %s, %s, now()) "
            "ON CONFLICT (run_id, number) DO NOTHING RETURNING id",
            [field.get_db_prep_save(values[name], connection) for name, field in fields.items()],
        )
        return cursor.fetchone() is not None


def audit_step_append(*, run_id: UUID, generation: int, step: dict) -> None:
    """Add a step timed after sealing (publication itself) to the generation's audit and
    the trace: one statement, so that it needs no transaction of its own. A generation
    without an audit row gets none."""
    audits = connection.ops.quote_name(AnswerAudit._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {connection.ops.quote_name(AuditStep._meta.db_table)} "  # noqa: S608
            "(run_id, generation, step, created_at) "
            f"SELECT %s, %s, %s, now() WHERE EXISTS (SELECT 1 FROM {audits} "
            "WHERE run_id = %s AND number = %s)",
            [
                run_id,
                generation,
                AuditStep._meta.get_field("step").get_db_prep_save(step, connection),
                run_id,
                generation,
            ],
        )
        if not cursor.rowcount:
            return
    line = {"run_id": str(run_id), "generation": generation, **step}
    transaction.on_commit(lambda: trace_write(run_id=run_id, lines=[line]))


def audit_generations(run_ids: Sequence[UUID | str]) -> dict[str, list[dict]]:
    """Run id (as text) → its audited generations in order, each with the steps timed
    after its sealing at the end of its steps: two queries, whatever the number of runs.
    Callers pass runs the asker may read (answers.selectors)."""
    ids = [run if isinstance(run, UUID) else UUID(run) for run in run_ids]
    later: dict[tuple[str, int], list[dict]] = {}
    for run, number, step in AuditStep.objects.filter(run__in=ids).values_list(
        "run_id", "generation", "step"
    ):
        later.setdefault((str(run), number), []).append(step)
    out: dict[str, list[dict]] = {str(run): [] for run in run_ids}
    for run, number, generation in AnswerAudit.objects.filter(run__in=ids).values_list(
        "run_id", "number", "generation"
    ):
        steps = [*generation.get("steps", []), *later.get((str(run), number), [])]
        out.setdefault(str(run), []).append({**generation, "steps": steps})
    return out


def audit_summary(run_id: UUID | str) -> dict | None:
    """A run's audit as one document: the latest generation's plan, every memory entry a
    generation used (first use first) and the generations; None before any was audited."""
    generations = audit_generations([run_id])[str(run_id)]
    if not generations:
        return None
    run = run_id if isinstance(run_id, UUID) else UUID(run_id)
    latest = AnswerAudit.objects.filter(run=run).order_by("-number").values("plan").first()
    memories: list[dict] = []
    for generation in generations:
        known = {m.get("id") for m in memories}
        memories += [m for m in generation.get("memories", []) if m.get("id") not in known]
    return {
        "plan": latest["plan"] if latest else {},
        "memories_used": memories,
        "generations": generations,
    }


def trace_write(*, run_id: UUID, lines: list[dict]) -> Path:
    """The run's JSON-lines trace (one line per step), appended after commit."""
    settings.LOG_DIR.mkdir(parents=True, exist_ok=True)
    path = settings.LOG_DIR / f"{run_id}.jsonl"
    with path.open("a", encoding="utf-8") as handle:
        for line in lines:
            handle.write(json.dumps(line, sort_keys=True, default=str) + "\n")
    return path
