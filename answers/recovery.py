"""Lost answer work (issue 27, item 3), settled by every worker's sweeper (core.worker)
as extractions already are.

A streamed run is a Celery message on the `answers` queue. It can be lost two ways: a
Redis restart while it waits (its generation stays `running`, no worker ever claims
it), or the whole worker killed while it executes (`executing`, the message unacked
until the visibility timeout, and maybe never delivered again). So:

- `running` for KOINON_RUN_CLAIM_TIMEOUT seconds without a claim → queued again, once;
  still unclaimed after that → `failed`, `worker_lost`.
- `executing` on a worker whose heartbeat is gone → `failed`, `worker_lost` (not run
  again: its tool activity is already recorded, and events are append-only). A worker is
  named by its hostname and this start of it (core.worker.worker_claim_name): one killed
  whole and restarted under the same hostname heartbeats under a new name, so its former
  claims are lost too. Still
  `executing` after the task time limit — in a web process (no worker name), or on a
  live worker whose failure could not be recorded while the database was away → the same.

Every ending is `run_fail`'s: status, a `failed` event to replay; streams listening on
the run are told it is sealed. Rows locked by another sweeper are skipped.
"""

import logging
from datetime import datetime, timedelta

import redis
from django.conf import settings
from django.db import transaction
from django.db.models import Exists, OuterRef, Q, QuerySet
from django.utils import timezone

from answers.models import AnswerRun, Generation
from answers.pipeline.events import ChannelsSink
from answers.pipeline.lifecycle import run_fail
from core import worker
from core.queue import QueueUnavailable, task_enqueue, task_named

logger = logging.getLogger(__name__)

MAX_DISPATCHES = 2  # the first queueing and one more


RUNNING, EXECUTING = Generation.Status.RUNNING, Generation.Status.EXECUTING


def generations_stuck(*, now: datetime | None = None) -> QuerySet[Generation]:
    """Generations the sweeper should have settled by now: unclaimed for twice the claim
    timeout, or executing for longer than any task may run — of a run still running, and
    its newest generation. What health reports: a generation a retry superseded, or of a
    run that ended, no longer keeps anyone waiting (issue 48, item 12)."""
    now = now or timezone.now()
    unclaimed = now - timedelta(seconds=2 * settings.KOINON_RUN_CLAIM_TIMEOUT)
    overdue = now - timedelta(seconds=settings.CELERY_TASK_TIME_LIMIT + 60)
    newer = Generation.objects.filter(run=OuterRef("run"), number__gt=OuterRef("number"))
    return Generation.objects.filter(
        Q(status=RUNNING, queued_at__lt=unclaimed) | Q(status=EXECUTING, claimed_at__lt=overdue),
        run__status=AnswerRun.Status.RUNNING,
    ).exclude(Exists(newer))


def workers_alive_names() -> set[str] | None:
    """Hostnames of workers with a fresh heartbeat; None when Redis cannot say (then
    nothing is declared lost: unknown is not dead)."""
    try:
        return worker.workers_alive_names(worker.redis_client())
    except redis.RedisError:
        return None


_ASK_REDIS = object()


def runs_recover(*, now: datetime | None = None, alive: object = _ASK_REDIS) -> dict:
    """One sweep: returns {"queued": [...], "failed": [...]} as "run:generation" keys.
    `alive`: the live workers' hostnames (None: unknown); by default read from Redis."""
    now = now or timezone.now()
    alive = workers_alive_names() if alive is _ASK_REDIS else alive
    claim_deadline = now - timedelta(seconds=settings.KOINON_RUN_CLAIM_TIMEOUT)
    grace = now - timedelta(seconds=settings.KOINON_WORKER_STALE_AFTER)
    overdue = now - timedelta(seconds=settings.CELERY_TASK_TIME_LIMIT + 60)
    # Executing past the hard time limit is lost on any worker: the limit killed it, or its
    # failure could not be recorded (the database was away when it failed).
    lost = Q(status=RUNNING, queued_at__lt=claim_deadline) | Q(
        status=EXECUTING, claimed_at__lt=overdue
    )
    if alive is not None:
        lost |= Q(status=EXECUTING, claimed_at__lt=grace) & ~Q(worker="") & ~Q(worker__in=alive)
    queued, failed = [], []
    with transaction.atomic():
        rows = list(
            Generation.objects.filter(lost, run__status=AnswerRun.Status.RUNNING)
            .select_for_update(skip_locked=True, of=("self",))
            .only("pk", "run_id", "number", "status", "dispatches")
        )
        for row in rows:
            if row.status == "running" and row.dispatches < MAX_DISPATCHES:
                Generation.objects.filter(pk=row.pk).update(
                    dispatches=row.dispatches + 1, queued_at=now
                )
                queued.append(row)
            else:
                run_fail(run_id=row.run_id, generation=row.number, reason="worker_lost")
                failed.append(row)
    sink = ChannelsSink()  # streams waiting on a failed run end now, not at their timeout
    for row in failed:
        sink.sealed(run_id=row.run_id, generation=row.number)
    for row in queued:
        try:
            task_enqueue(task_named("answers.run_execute"), str(row.run_id), row.number)
        except QueueUnavailable:
            break  # still `running`: the next sweep tries again (and then ends it)
    settled = {
        "queued": [f"{r.run_id}:{r.number}" for r in queued],
        "failed": [f"{r.run_id}:{r.number}" for r in failed],
    }
    if rows:
        logger.warning(
            "sweeper: runs queued again %s, failed (worker lost) %s",
            settled["queued"],
            settled["failed"],
        )
    return settled
