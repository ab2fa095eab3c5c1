"""Issue 27 (3): a streamed run whose task message is lost still ends. The sweeper
queues an unclaimed generation again once (a real worker then seals it), ends one that
stays unclaimed or whose worker's heartbeat is gone `failed`/`worker_lost`, health
reports stuck runs, and a lost message comes back in minutes, not kombu's hour."""

import json
import time
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
    assert generation.dispatches == 2 and generation.worker  # the worker's hostname


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


def test_a_lost_message_returns_in_minutes_not_an_hour():
    from koinon.celery import app

    timeout = app.conf.broker_transport_options["visibility_timeout"]
    assert app.conf.task_time_limit < timeout <= 30 * 60
