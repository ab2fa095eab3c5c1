"""Queued extraction work is never lost: a broker outage, a dead worker, a stuck row."""

import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.utils import timezone
from rest_framework.test import APIClient

from knowledge.documents.extraction import (
    extractions_recover,
    revision_extract,
    revision_retry_extraction,
)
from knowledge.models import DocumentRevision
from koinon.celery import app as celery_app
from tests.guards import no_hang
from tests.helpers import client_for
from tests.knowledge.test_documents import wait_for_extraction

pytestmark = pytest.mark.django_db(transaction=True)


def _use_broker(url: str) -> None:
    celery_app.conf.broker_url = url
    # kombu keeps one pool per broker URL: dropping the app's reference is enough.
    celery_app._pool = None
    celery_app.amqp._producer_pool = None


@contextmanager
def broker_unreachable(directory: Path) -> Iterator[None]:
    """The web side's broker is gone (nothing listens on its socket); the worker is not."""
    original = celery_app.conf.broker_url
    _use_broker(f"redis+socket://{directory}/gone.sock")
    try:
        yield
    finally:
        _use_broker(original)


def upload(owner, space, name: str, data: bytes):
    return client_for(owner).post(
        "/v1/documents",
        {"file": SimpleUploadedFile(name, data), "space": space.pk},
        format="multipart",
    )


def later(seconds: float) -> datetime:
    return timezone.now() + timedelta(seconds=seconds)


def stored_but_not_queued(owner, space, tmp_path, data: bytes) -> DocumentRevision:
    with broker_unreachable(tmp_path):
        response = upload(owner, space, f"doc-{time.monotonic_ns()}.txt", data)
    assert response.status_code == 503, response.json()
    return DocumentRevision.objects.get(pk=response.json()["error"]["fields"]["revision"])


def stuck_running(revision: DocumentRevision, *, attempts: int) -> None:
    """What a worker killed mid-extraction leaves behind: its message is gone with it."""
    revision.extractions.update(
        status="running", progress=5, attempts=attempts, heartbeat_at=later(-3600)
    )


def test_an_upload_while_the_broker_is_down_is_stored_answers_503_and_is_extracted_later(
    settings, tmp_path, celery_worker, space, owner
):
    with broker_unreachable(tmp_path), no_hang():  # refused, not waiting on the broker
        response = upload(owner, space, "outage.txt", b"Written while Redis was down.\n")
    assert response.status_code == 503
    error = response.json()["error"]
    assert error["code"] == "extraction_delayed"
    assert "stored" in error["message"]
    revision = DocumentRevision.objects.get(pk=error["fields"]["revision"])
    assert set(revision.extractions.values_list("status", flat=True)) == {"pending"}

    # Nothing is stale yet; once the re-queue delay has passed, the sweeper sends it.
    assert extractions_recover() == []
    assert extractions_recover(now=later(settings.KOINON_EXTRACT_REQUEUE_AFTER + 1)) == [
        revision.pk
    ]
    assert [e.status for e in wait_for_extraction(revision.pk)] == ["admitted", "admitted"]


def test_a_running_extraction_whose_worker_died_is_queued_again_and_admitted(
    tmp_path, celery_worker, space, owner
):
    revision = stored_but_not_queued(owner, space, tmp_path, b"The worker died reading this.\n")
    stuck_running(revision, attempts=1)
    assert extractions_recover() == [revision.pk]
    extractions = wait_for_extraction(revision.pk)
    assert [(e.status, e.attempts) for e in extractions] == [("admitted", 2), ("admitted", 2)]


def test_an_extraction_that_keeps_killing_workers_ends_failed_with_timeout(
    settings, tmp_path, space, owner
):
    revision = stored_but_not_queued(owner, space, tmp_path, b"Every attempt died.\n")
    stuck_running(revision, attempts=settings.KOINON_EXTRACT_MAX_ATTEMPTS)
    assert extractions_recover() == []
    assert set(revision.extractions.values_list("status", "error_code", "progress")) == {
        ("failed", "timeout", 100)
    }


def test_retry_covers_stuck_extractions_not_only_failed_ones(tmp_path, celery_worker, space, owner):
    revision = stored_but_not_queued(owner, space, tmp_path, b"Stuck at five percent.\n")
    stuck_running(revision, attempts=1)
    revision_retry_extraction(revision=revision)
    assert [e.status for e in wait_for_extraction(revision.pk)] == ["admitted", "admitted"]


def test_health_reports_stale_extractions(tmp_path, space, owner):
    revision = stored_but_not_queued(owner, space, tmp_path, b"Nobody is working on this.\n")
    stuck_running(revision, attempts=1)
    response = APIClient().get("/v1/health")
    assert response.status_code == 503
    assert response.json()["components"]["extractions"] == {
        "status": "failed",
        "detail": "2 stale (queued or running, no progress)",
    }


def test_a_second_message_leaves_an_extraction_another_worker_runs_alone(tmp_path, space, owner):
    revision = stored_but_not_queued(owner, space, tmp_path, b"Queued twice by the sweeper.\n")
    revision.extractions.update(status="running", attempts=1, heartbeat_at=timezone.now())
    revision_extract(revision_id=revision.pk)  # the duplicate message
    assert list(revision.extractions.values_list("status", "attempts")) == [
        ("running", 1),
        ("running", 1),
    ]
