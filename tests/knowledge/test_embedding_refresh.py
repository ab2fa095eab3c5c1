"""Vectors of another embedding model are embedded again, in the background, and only once.

A new model id (here: the int8 kernels) leaves every stored vector of the old one out of
vector retrieval until the worker's sweeper has them embedded again.
"""

import threading
import time

import numpy as np
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection

from core.worker import WorkerMaintenance, redis_client
from knowledge import embeddings
from knowledge.documents.embedding import (
    EMBEDDINGS_REFRESH_KEY,
    embeddings_refresh,
    embeddings_refresh_schedule,
    passages_embed_stale,
)
from knowledge.embeddings import EmbeddingError, get_embedding_provider
from knowledge.models import Passage
from knowledge.retrieval import vector_search
from knowledge.tasks import refresh_embeddings
from tests.helpers import client_for
from tests.knowledge.test_documents import wait_for_extraction

pytestmark = pytest.mark.django_db(transaction=True)

OLD_MODEL = "local:all-MiniLM-L6-v2-int8"
TEXT = (
    b"The lighthouse keeper logs the tide every morning.\n\n"
    b"Invoices are paid within thirty days of receipt.\n\n"
    b"The greenhouse is watered twice a week in summer.\n\n"
    b"Visitors sign in at the front desk before noon.\n"
)


@pytest.fixture(autouse=True)
def no_refresh_key():
    redis_client().delete(EMBEDDINGS_REFRESH_KEY)
    yield
    redis_client().delete(EMBEDDINGS_REFRESH_KEY)


@pytest.fixture
def passages(celery_worker, space, owner) -> list[Passage]:
    response = client_for(owner).post(
        "/v1/documents",
        {"file": SimpleUploadedFile("notes.txt", TEXT), "space": space.pk},
        format="multipart",
    )
    assert response.status_code == 202, response.json()
    wait_for_extraction(response.json()["revision"])
    rows = list(Passage.objects.filter(document__space=space, is_current=True).order_by("pk"))
    assert len(rows) >= 4 and {p.embedding_model for p in rows} == {
        get_embedding_provider().model_id
    }
    return rows


def made_old(rows: list[Passage]) -> dict[int, list[float]]:
    """What an installation from before the int8 kernels has: other vectors, the old id."""
    rng = np.random.default_rng(3)
    old = {}
    for passage in rows:
        vector = rng.normal(size=384)
        old[passage.pk] = (vector / np.linalg.norm(vector)).tolist()
        Passage.objects.filter(pk=passage.pk).update(
            embedding=old[passage.pk], embedding_model=OLD_MODEL
        )
    return old


def stale_count(space) -> int:
    return (
        Passage.objects.filter(document__space=space)
        .exclude(embedding_model=get_embedding_provider().model_id)
        .count()
    )


def wait_until_fresh(space, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while stale_count(space) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert stale_count(space) == 0, "the worker did not embed the stale passages again"


def current_scope(space):
    return Passage.objects.filter(space=space, is_current=True)


def test_the_sweeper_has_old_vectors_embedded_again_and_retrieval_finds_them(passages, space):
    made_old(passages)
    question = "When are invoices paid?"
    found, outcome = vector_search(current_scope(space), question, 5)
    assert (outcome.state, outcome.code) == ("failed", "embedding_configuration_invalid")

    WorkerMaintenance("test-sweeper").sweep()  # what every worker does each sweep interval
    wait_until_fresh(space)

    provider = get_embedding_provider()
    for passage in Passage.objects.filter(pk__in=[p.pk for p in passages]):
        assert passage.embedding_model == provider.model_id
        assert list(passage.embedding) == pytest.approx(provider.embed([passage.text])[0])
    found, outcome = vector_search(current_scope(space), question, 5)
    assert outcome.state == "succeeded"
    assert "Invoices are paid" in found[0][0].text
    assert not redis_client().exists(EMBEDDINGS_REFRESH_KEY)  # the refresh let go of it


def test_nothing_stale_queues_nothing_and_a_running_refresh_is_not_queued_twice(
    monkeypatch, passages, space
):
    queued = []
    monkeypatch.setattr(
        "knowledge.documents.embedding.task_enqueue", lambda task, *args: queued.append(task)
    )
    assert embeddings_refresh_schedule() is False
    assert not redis_client().exists(EMBEDDINGS_REFRESH_KEY)
    assert queued == []

    made_old(passages)
    redis_client().set(EMBEDDINGS_REFRESH_KEY, "another worker's refresh", ex=60)
    assert embeddings_refresh_schedule() is False
    assert queued == []  # nobody was asked to refresh
    assert redis_client().get(EMBEDDINGS_REFRESH_KEY) == b"another worker's refresh"

    redis_client().delete(EMBEDDINGS_REFRESH_KEY)  # that refresh ended: the next sweep queues
    assert embeddings_refresh_schedule() is True
    assert queued == [refresh_embeddings]


def test_a_refresh_out_of_time_queues_itself_again(settings, passages, space):
    made_old(passages)
    settings.KOINON_EMBEDDINGS_REFRESH_SECONDS = 0  # here, not in the worker
    assert embeddings_refresh() == 0
    assert redis_client().exists(EMBEDDINGS_REFRESH_KEY)  # the next one is queued
    wait_until_fresh(space)  # and the worker did it


def test_an_unavailable_provider_keeps_the_old_vectors(monkeypatch, passages, space):
    old = made_old(passages)

    class Down:
        model_id = get_embedding_provider().model_id
        dimension = 384

        def embed(self, texts):
            raise EmbeddingError("embedding_unavailable")

    monkeypatch.setattr(embeddings, "get_embedding_provider", lambda: Down())
    redis_client().set(EMBEDDINGS_REFRESH_KEY, Down.model_id, ex=60)
    assert embeddings_refresh() == 0
    for passage in Passage.objects.filter(pk__in=old):
        assert passage.embedding_model == OLD_MODEL
        assert list(passage.embedding) == pytest.approx(old[passage.pk])
    assert not redis_client().exists(EMBEDDINGS_REFRESH_KEY)  # a later sweep tries again


def test_two_refreshes_at_once_embed_each_passage_once(monkeypatch, passages, space):
    made_old(passages)
    real = get_embedding_provider()
    inside, release, embedded = threading.Event(), threading.Event(), []

    class Slow:
        model_id, dimension = real.model_id, real.dimension

        def embed(self, texts):
            embedded.extend(texts)
            if threading.current_thread().name == "first":
                inside.set()
                assert release.wait(30)
            return real.embed(texts)

    monkeypatch.setattr(embeddings, "get_embedding_provider", lambda: Slow())
    counts = {}

    def refresh(name: str, limit: int) -> None:
        try:
            counts[name] = passages_embed_stale(limit=limit)
        finally:
            connection.close()

    first = threading.Thread(target=refresh, args=("first", 2), name="first")
    first.start()
    assert inside.wait(30)
    # The first holds its two rows; the second takes the others instead of waiting.
    refresh("second", len(passages))
    release.set()
    first.join(30)
    assert counts == {"first": 2, "second": len(passages) - 2}
    assert sorted(embedded) == sorted(p.text for p in passages)
    assert stale_count(space) == 0
