"""A file's passages are embedded in turns of their own budget, and none is left behind.

A large file must neither hold a worker process for minutes nor be lost to a time limit:
each turn embeds for KOINON_EMBED_SECONDS and queues the rest behind other work; passages
left waiting (a time limit, a dead worker, a provider that was away) are found by the
sweeper and reported by health.
"""

import time
from datetime import timedelta

import pytest
from celery.exceptions import SoftTimeLimitExceeded
from django.utils import timezone

from knowledge import embeddings
from knowledge.documents import embedding as embedding_services
from knowledge.documents import extraction as extraction_services
from knowledge.documents.embedding import EMBED_BATCH, embeddings_resume
from knowledge.documents.extraction import revision_extract
from knowledge.documents.upload import document_upload
from knowledge.embeddings import EmbeddingError, get_embedding_provider
from knowledge.health import check_embeddings
from knowledge.models import Extraction, Passage
from knowledge.selectors import extractions_embedding_stalled
from knowledge.tasks import embed_extraction, extract_revision
from tests.guards import no_hang

pytestmark = pytest.mark.django_db(transaction=True)

CUES = 2 * EMBED_BATCH + 20  # three batches: one passage a cue


def captions(cues: int = CUES) -> bytes:
    lines = ["WEBVTT", ""]
    for number in range(cues):
        start = f"00:{number // 60:02d}:{number % 60:02d}.000"
        end = f"00:{number // 60:02d}:{number % 60:02d}.900"
        lines += [f"{start} --> {end}", f"Cue {number} says the harbour crane {number} lifts.", ""]
    return "\n".join(lines).encode()


def record_queued(monkeypatch, sent: list[tuple[str, tuple]]) -> None:
    """Embedding turns the services queue are recorded instead of sent (the test runs
    each itself); the upload's extraction task is dropped (the test extracts itself)."""

    def enqueue(task, *args) -> None:
        if task.name == "knowledge.embed_extraction":
            sent.append((task.name, args))

    for services in (extraction_services, embedding_services):
        monkeypatch.setattr(services, "task_enqueue", enqueue)


@pytest.fixture
def queued(monkeypatch) -> list[tuple[str, tuple]]:
    sent: list[tuple[str, tuple]] = []
    record_queued(monkeypatch, sent)
    return sent


def serving_extraction(owner, space) -> Extraction:
    result = document_upload(user=owner, filename="crane.vtt", data=captions(), space=space)
    revision_extract(revision_id=result.revision.pk)
    return Extraction.objects.get(revision=result.revision, serves_passages=True)


def embedded(extraction: Extraction) -> int:
    return extraction.passages.filter(embedding_status="embedded").count()


def statuses(extraction: Extraction) -> dict[str, int]:
    counts: dict[str, int] = {}
    for status in extraction.passages.values_list("embedding_status", flat=True):
        counts[status] = counts.get(status, 0) + 1
    return counts


def provider_failing_at(batch: int, error: Exception):
    """The real provider, except that its `batch`-th call raises `error` (as Celery raises
    SoftTimeLimitExceeded inside whatever the task is doing when the limit hits)."""
    real = get_embedding_provider()
    calls = []

    class Provider:
        model_id, dimension = real.model_id, real.dimension

        def embed(self, texts):
            calls.append(len(texts))
            if len(calls) == batch:
                raise error
            return real.embed(texts)

    return Provider()


def age(extraction: Extraction, seconds: float = 3600) -> None:
    """No worker has touched it for `seconds` (its task was lost)."""
    Extraction.objects.filter(pk=extraction.pk).update(
        heartbeat_at=timezone.now() - timedelta(seconds=seconds)
    )


def test_a_file_larger_than_one_turn_is_embedded_in_turns_that_queue_the_rest(
    settings, space, owner, queued
):
    settings.KOINON_EMBED_SECONDS = 0  # every turn: one batch, then the rest is queued
    extraction = serving_extraction(owner, space)
    assert extraction.passages.count() == CUES
    # The extraction task embedded one batch only, and queued the rest as a task of its own.
    assert extraction.status == "admitted"
    assert embedded(extraction) == EMBED_BATCH
    assert 30 < extraction.progress < 100
    assert queued == [("knowledge.embed_extraction", (extraction.pk,))]

    turns = 1
    while queued:
        _, args = queued.pop()
        embed_extraction.run(*args)
        turns += 1
        extraction.refresh_from_db()
        assert embedded(extraction) == min(turns * EMBED_BATCH, CUES)
    assert turns == 3
    assert statuses(extraction) == {"embedded": CUES}
    assert extraction.progress == 100
    assert check_embeddings().as_dict() == {"status": "ok", "detail": "every passage embedded"}


def test_the_rest_of_a_file_is_embedded_by_the_worker(
    monkeypatch, settings, space, owner, celery_worker
):
    settings.KOINON_EMBED_SECONDS = 0  # here; the worker's turns run on its own budget
    sent_on = embedding_services.task_enqueue

    def enqueue(task, *args) -> None:
        # The test extracts itself (a worker taking the upload's extraction first would
        # leave nothing for it to do); the embedding turns go to the worker.
        if task.name != "knowledge.extract_revision":
            sent_on(task, *args)

    for services in (extraction_services, embedding_services):
        monkeypatch.setattr(services, "task_enqueue", enqueue)
    extraction = serving_extraction(owner, space)
    assert embedded(extraction) >= EMBED_BATCH  # the worker may already be at the rest
    with no_hang():
        while extraction.progress < 100:
            time.sleep(0.2)
            extraction.refresh_from_db()
    assert statuses(extraction) == {"embedded": CUES}


@pytest.mark.parametrize("where", ["extraction task", "embedding turn"])
def test_a_time_limit_during_embedding_leaves_no_passage_behind(
    monkeypatch, settings, space, owner, queued, where
):
    if where == "extraction task":
        # The limit hits during the extraction task's own first batch.
        monkeypatch.setattr(
            embeddings,
            "get_embedding_provider",
            lambda: provider_failing_at(1, SoftTimeLimitExceeded()),
        )
        result = document_upload(user=owner, filename="crane.vtt", data=captions(), space=space)
        extract_revision.run(result.revision.pk)  # ends quietly, as under Celery
        extraction = Extraction.objects.get(revision=result.revision, serves_passages=True)
        expected = 0
    else:
        settings.KOINON_EMBED_SECONDS = 0
        extraction = serving_extraction(owner, space)
        settings.KOINON_EMBED_SECONDS = 60
        queued.clear()
        provider = provider_failing_at(2, SoftTimeLimitExceeded())
        monkeypatch.setattr(embeddings, "get_embedding_provider", lambda: provider)
        embed_extraction.run(extraction.pk)  # ends quietly, as under Celery
        expected = 2 * EMBED_BATCH  # the batch the limit hit rolled back
    extraction.refresh_from_db()
    assert extraction.status == "admitted"
    left = {"embedded": expected, "pending": CUES - expected}
    assert statuses(extraction) == {status: count for status, count in left.items() if count}
    assert extraction.progress < 100
    assert queued == []  # nothing was queued: the task was stopped

    # While its heartbeat is fresh a worker may still be at it: waiting, not failed.
    health = check_embeddings().as_dict()
    assert health == {"status": "ok", "detail": f"{CUES - expected} passage(s) waiting"}
    assert embeddings_resume() == []

    age(extraction)
    assert list(extractions_embedding_stalled()) == [extraction]
    health = check_embeddings().as_dict()
    assert health["status"] == "failed"
    assert "1 extraction(s) stalled" in health["detail"]

    monkeypatch.undo()  # the real provider again
    record_queued(monkeypatch, queued)
    assert embeddings_resume() == [extraction.pk]
    assert embeddings_resume() == []  # queued once: its heartbeat was renewed
    assert queued == [("knowledge.embed_extraction", (extraction.pk,))]
    embed_extraction.run(extraction.pk)
    extraction.refresh_from_db()
    assert statuses(extraction) == {"embedded": CUES}
    assert extraction.progress == 100
    assert check_embeddings().ok


def test_passages_left_keyword_only_by_an_unavailable_provider_are_embedded_later(
    monkeypatch, space, owner, queued
):
    class Down:
        model_id, dimension = get_embedding_provider().model_id, 384

        def embed(self, texts):
            raise EmbeddingError("embedding_unavailable")

    monkeypatch.setattr(embeddings, "get_embedding_provider", lambda: Down())
    extraction = serving_extraction(owner, space)
    assert statuses(extraction) == {"embedding_unavailable": CUES}
    assert extraction.progress == 100  # done, keyword-only
    assert queued == []  # not queued again at once: the provider is away
    health = check_embeddings().as_dict()
    assert health["status"] == "failed"
    assert f"{CUES} keyword-only (provider unavailable)" in health["detail"]

    # Still away at the sweeper's next try: marked again, heartbeat renewed, nothing lost.
    age(extraction)
    assert embeddings_resume() == [extraction.pk]
    embed_extraction.run(extraction.pk)
    assert statuses(extraction) == {"embedding_unavailable": CUES}

    monkeypatch.setattr(embeddings, "get_embedding_provider", get_embedding_provider)
    age(extraction)
    queued.clear()
    assert embeddings_resume() == [extraction.pk]
    embed_extraction.run(extraction.pk)
    assert statuses(extraction) == {"embedded": CUES}
    assert check_embeddings().ok


def test_a_turn_for_an_extraction_that_is_gone_or_not_admitted_does_nothing(space, owner, queued):
    embed_extraction.run(987654321)
    result = document_upload(user=owner, filename="crane.vtt", data=captions(8), space=space)
    pending = Extraction.objects.filter(revision=result.revision).first()
    embed_extraction.run(pending.pk)
    assert not Passage.objects.exists()
    assert queued == []
