"""The answer log's pace (issue 33): at most one checkpoint per KOINON_LOG_CHECKPOINT_SECONDS,
each carrying its time; a deferred checkpoint is signed later without a new answer; and
`/v1/health`'s `answer_log` fails while a release waits longer than
KOINON_LOG_INTEGRATE_SECONDS to be integrated. No test waits on the clock: ages are
written as a database owner would."""

import re

import pytest
from rest_framework.test import APIClient

from audit import tasks as audit_tasks
from audit.checkpoint import checkpoint_open
from audit.health import check_answer_log
from audit.log import log_checkpoint_pending, log_checkpoint_wait, log_integrate, log_tree
from audit.models import LogCheckpoint
from tests.audit.helpers import as_owner, more_releases
from tests.settings_checks import django_setup_with


@pytest.mark.django_db
def test_a_batch_integrated_sooner_than_the_interval_waits_for_the_next_checkpoint(
    published, log_key, settings
):
    settings.KOINON_LOG_CHECKPOINT_SECONDS = 3600
    log_integrate()  # the first checkpoint is never deferred
    more_releases(3)
    assert log_integrate() == 3
    assert list(LogCheckpoint.objects.values_list("size", flat=True)) == [1]
    assert log_checkpoint_pending() and log_checkpoint_wait() > 3500
    # Once due, a later integration signs it, with no new entry to integrate.
    settings.KOINON_LOG_CHECKPOINT_SECONDS = 0
    assert log_integrate() == 0
    assert list(LogCheckpoint.objects.values_list("size", flat=True)) == [1, 4]
    latest = checkpoint_open(LogCheckpoint.objects.latest().note, verifier=log_key.verifier())
    assert latest.root == log_tree().root()
    assert not log_checkpoint_pending()


@pytest.mark.django_db
def test_each_checkpoint_carries_its_time_as_a_timestamp_extension(published, log_key):
    log_integrate()
    row = LogCheckpoint.objects.get()
    checkpoint = checkpoint_open(row.note, verifier=log_key.verifier())
    (extension,) = checkpoint.extensions
    name, seconds = extension.split(" ")
    assert name == "timestamp"
    assert abs(int(seconds) - row.created_at.timestamp()) <= 1
    # The client reads it too.
    from koinon_client import checkpoint_open as client_open

    assert client_open(row.note, log_key.verifier().key_string()).timestamp == int(seconds)


@pytest.mark.django_db
def test_the_task_queues_itself_for_when_a_deferred_checkpoint_is_due(
    published, log_key, settings, monkeypatch
):
    settings.KOINON_LOG_CHECKPOINT_SECONDS = 3600
    queued: list[float | None] = []
    monkeypatch.setattr(
        audit_tasks, "task_enqueue", lambda task, *args, countdown=None: queued.append(countdown)
    )
    audit_tasks.log_integrate_task()  # the first checkpoint: nothing deferred
    assert queued == []
    more_releases(2)
    audit_tasks.log_integrate_task()
    assert len(queued) == 1 and 3500 < queued[0] <= 3600


@pytest.mark.django_db
def test_answer_log_health_fails_once_a_release_waits_longer_than_the_limit(
    published, log_key, settings
):
    settings.KOINON_LOG_INTEGRATE_SECONDS = 30
    status = check_answer_log()
    assert status.ok and "1 release(s) waiting" in status.detail
    as_owner("UPDATE audit_outputrelease SET created_at = now() - interval '1 hour'")
    status = check_answer_log()
    assert not status.ok
    assert re.fullmatch(
        r"1 release\(s\) waiting, the oldest for 36\d\d s \(limit 30 s\)", status.detail
    )
    components = APIClient().get("/v1/health").json()["components"]
    assert components["answer_log"]["status"] == "failed"
    log_integrate()
    status = check_answer_log()
    assert status.ok and status.detail == "every release integrated"


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        ("KOINON_LOG_INTEGRATE_SECONDS", "0", "must be between 1 and 86400"),
        ("KOINON_LOG_INTEGRATE_SECONDS", "soon", "must be an integer"),
        ("KOINON_LOG_CHECKPOINT_SECONDS", "-1", "must be between 0 and 3600"),
    ],
)
def test_a_bad_log_setting_stops_the_start_naming_it(variable, value, message):
    started = django_setup_with(variable, value)
    assert started.returncode != 0
    assert f"{variable} {message}" in started.stderr
