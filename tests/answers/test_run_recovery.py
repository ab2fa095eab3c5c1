"""Issue 27 (3): a streamed run whose task message is lost still ends. The sweeper
queues an unclaimed generation again once (a real worker then seals it), ends one that
stays unclaimed or whose worker's heartbeat is gone `failed`/`worker_lost`, health
reports stuck runs, and a lost message comes back in minutes, not kombu's hour."""

import json
import time
import weakref
from datetime import timedelta

import pytest
from django.conf import settings
from django.utils import timezone

from answers.health import check_runs
from answers.models import AnswerRun, Generation
from answers.pipeline.lifecycle import run_start
from answers.pipeline.request import answer_request_parse
from answers.recovery import runs_recover
from audit.models import StreamEvent
from core.worker import (
    HEARTBEAT_PREFIX,
    INCARNATION_ENV,
    WorkerMaintenance,
    redis_client,
    worker_claim_name,
    workers_alive_names,
)
from tests.answers.helpers import ingest
from tests.guards import no_hang

TEXT = "The platform operations team owns service reviews."
QUESTION = "Who owns service reviews?"


def started(user) -> AnswerRun:
    """A run as `answer_stream_start` leaves it, its message never delivered."""
    return run_start(user=user, request=answer_request_parse({"query": QUESTION}))


def age(run: AnswerRun, **fields) -> None:
    Generation.objects.filter(run=run).update(**fields)


def failed_worker_lost(run: AnswerRun) -> bool:
    run.refresh_from_db()
    events = StreamEvent.objects.filter(run=run, event="failed")
    return run.status == "failed" and "worker_lost" in json.dumps([e.data for e in events])


@pytest.mark.django_db(transaction=True)
def test_an_unclaimed_run_is_queued_again_and_a_real_worker_seals_it(
    celery_worker, space, owner, member
):
    ingest(owner, space, "operations.txt", TEXT)
    run = started(member)
    long_ago = timezone.now() - timedelta(seconds=settings.KOINON_RUN_CLAIM_TIMEOUT + 1)
    age(run, queued_at=long_ago)
    assert runs_recover(alive=set()) == {"queued": [f"{run.pk}:1"], "failed": []}
    with no_hang(120):
        while AnswerRun.objects.get(pk=run.pk).status == "running":
            time.sleep(0.2)
    run.refresh_from_db()
    assert run.status == "published" and run.response["release"] is not None
    generation = Generation.objects.get(run=run)
    assert generation.dispatches == 2
    # The claim names this start of the worker, as its heartbeat does (issue 48, item 3):
    # `hostname#token`, among the live heartbeats.
    hostname, _, token = generation.worker.partition("#")
    assert hostname and len(token) == 16
    assert generation.worker in workers_alive_names(redis_client())


def test_a_worker_started_again_under_its_hostname_heartbeats_under_a_new_name(monkeypatch):
    """What a claim and a heartbeat are named by: the hostname and the start of the worker
    process (a token set at `worker_init`, which the pool's children inherit)."""
    from celery.signals import worker_init

    from core.worker import _name_this_start

    connected = [ref() if isinstance(ref, weakref.ref) else ref for _, ref in worker_init.receivers]
    assert _name_this_start in connected  # runs in the worker process, before its pool
    names = []
    for _ in range(2):  # the worker killed whole, then started again under its hostname
        monkeypatch.delenv(INCARNATION_ENV, raising=False)
        _name_this_start()
        names.append(worker_claim_name("koinon@w1"))
        assert WorkerMaintenance("koinon@w1").key == f"{HEARTBEAT_PREFIX}{names[-1]}"
    assert names[0] != names[1] and all(n.startswith("koinon@w1#") for n in names)
    monkeypatch.delenv(INCARNATION_ENV)
    assert worker_claim_name("koinon@w1") == "koinon@w1"  # outside a worker: the hostname


@pytest.mark.django_db
def test_the_claims_of_a_worker_killed_whole_are_lost_though_its_hostname_lives_on(member):
    """The review's case: the whole answer worker killed mid-answer, started again by
    koinon_up under the same hostname. Its old claim is lost (the new start heartbeats
    under another name): the run ends `worker_lost`, and health no longer counts it."""
    run, other = started(member), started(member)
    minute_ago = timezone.now() - timedelta(seconds=60)
    age(run, status="executing", worker="koinon@w1#0123456789abcdef", claimed_at=minute_ago)
    age(other, status="executing", worker="koinon@w1#fedcba9876543210", claimed_at=minute_ago)
    alive = {"koinon@w1#fedcba9876543210"}  # the same hostname, started again
    assert runs_recover(alive=alive) == {"queued": [], "failed": [f"{run.pk}:1"]}
    assert failed_worker_lost(run)
    assert AnswerRun.objects.get(pk=other.pk).status == "running"


@pytest.mark.django_db
def test_a_run_still_unclaimed_after_its_second_queueing_ends_worker_lost(member):
    run = started(member)
    recent = started(member)
    long_ago = timezone.now() - timedelta(seconds=settings.KOINON_RUN_CLAIM_TIMEOUT + 1)
    age(run, queued_at=long_ago, dispatches=2)
    assert runs_recover(alive=set()) == {"queued": [], "failed": [f"{run.pk}:1"]}
    assert failed_worker_lost(run)
    assert Generation.objects.get(run=run).status == "failed"
    assert AnswerRun.objects.get(pk=recent.pk).status == "running"  # not yet due


@pytest.mark.django_db
def test_an_execution_whose_worker_heartbeat_is_gone_ends_worker_lost(member):
    dead, live, inline = started(member), started(member), started(member)
    minute_ago = timezone.now() - timedelta(seconds=60)
    age(dead, status="executing", worker="koinon@gone", claimed_at=minute_ago)
    age(live, status="executing", worker="koinon@here", claimed_at=minute_ago)
    age(inline, status="executing", worker="", claimed_at=minute_ago)
    # Redis cannot say who is alive: nobody is declared lost.
    assert runs_recover(alive=None) == {"queued": [], "failed": []}
    assert runs_recover(alive={"koinon@here"}) == {"queued": [], "failed": [f"{dead.pk}:1"]}
    assert failed_worker_lost(dead)
    assert AnswerRun.objects.get(pk=live.pk).status == "running"
    assert AnswerRun.objects.get(pk=inline.pk).status == "running"
    # An execution in a web process (no worker) that outlived any task's time limit.
    overdue = timezone.now() - timedelta(seconds=settings.CELERY_TASK_TIME_LIMIT + 61)
    age(inline, claimed_at=overdue)
    assert runs_recover(alive={"koinon@here"})["failed"] == [f"{inline.pk}:1"]
    # On a live worker too: its failure could not be recorded while the database was away
    # (issue 46), and no task outlives the time limit.
    age(live, claimed_at=overdue)
    assert runs_recover(alive={"koinon@here"})["failed"] == [f"{live.pk}:1"]
    assert failed_worker_lost(live)


@pytest.mark.django_db
def test_health_reports_runs_the_sweeper_has_not_settled(member):
    assert check_runs().ok
    run = started(member)
    assert check_runs().ok  # just queued
    age(run, queued_at=timezone.now() - timedelta(seconds=3 * settings.KOINON_RUN_CLAIM_TIMEOUT))
    status = check_runs()
    assert not status.ok and status.detail.startswith("1 stuck")


@pytest.mark.django_db
def test_a_stuck_generation_stops_counting_once_its_run_is_superseded_or_ended(member):
    """Issue 48 (12): one stuck generation kept health 503 for good, even after a retry
    published generation 2. Health counts the newest generation of a running run only."""
    run = started(member)
    overdue = timezone.now() - timedelta(seconds=settings.CELERY_TASK_TIME_LIMIT + 61)
    age(run, status="executing", worker="koinon@gone#0123456789abcdef", claimed_at=overdue)
    assert not check_runs().ok
    Generation.objects.create(run=run, number=2, status="published")  # a retry, published
    assert check_runs().ok
    Generation.objects.filter(run=run, number=2).delete()
    assert not check_runs().ok
    AnswerRun.objects.filter(pk=run.pk).update(status="published")  # the run ended
    assert check_runs().ok


def test_a_lost_message_returns_in_minutes_not_an_hour():
    from koinon.celery import app

    timeout = app.conf.broker_transport_options["visibility_timeout"]
    assert app.conf.task_time_limit < timeout <= 30 * 60
