"""Issue 27 (4): while another uploader's revision waits, one uploader's extractions take at
most KOINON_EXTRACT_PER_USER processes at once; another revision of theirs waits (queued
again, still pending) while other users' uploads extract. Issue 51 (6): while nobody else
waits, an uploader's revisions extract side by side."""

from contextlib import contextmanager

import psycopg
import pytest
from django.db import connection

from knowledge import tasks
from knowledge.documents.upload import document_upload
from knowledge.models import Extraction
from knowledge.turns import NAMESPACE

pytestmark = pytest.mark.django_db


@pytest.fixture
def deferred(monkeypatch) -> list[int]:
    calls: list[int] = []
    monkeypatch.setattr(tasks, "_defer", calls.append)
    return calls


def upload(user, name: str):
    return document_upload(
        user=user, filename=name, data=f"{name} says hello.".encode(), private=True
    ).revision


def statuses(revision) -> set[str]:
    return set(Extraction.objects.filter(revision=revision).values_list("status", flat=True))


@contextmanager
def another_process():
    """A session of its own, as another worker process would hold a slot."""
    params = connection.get_connection_params()
    with psycopg.connect(
        **{k: v for k, v in params.items() if k in ("dbname", "user", "host", "port", "password")},
        autocommit=True,
    ) as other:
        yield other


def test_a_second_extraction_of_the_same_uploader_waits_for_their_turn(owner, member, deferred):
    mine, theirs = upload(owner, "mine.txt"), upload(member, "theirs.txt")
    # Another process is extracting one of owner's revisions: it holds owner's slot.
    with another_process() as other:
        other.execute("SELECT pg_advisory_lock(%s, %s)", [NAMESPACE, owner.pk])
        tasks.extract_revision(mine.pk)
        assert deferred == [mine.pk] and statuses(mine) == {"pending"}
        tasks.extract_revision(theirs.pk)  # another uploader is not held up
        assert statuses(theirs) == {"admitted"}
        other.execute("SELECT pg_advisory_unlock(%s, %s)", [NAMESPACE, owner.pk])
    tasks.extract_revision(mine.pk)
    assert statuses(mine) == {"admitted"} and deferred == [mine.pk]


def test_the_slot_is_released_after_an_extraction(owner, deferred):
    first, second = upload(owner, "first.txt"), upload(owner, "second.txt")
    tasks.extract_revision(first.pk)
    tasks.extract_revision(second.pk)
    assert statuses(first) == statuses(second) == {"admitted"} and deferred == []


def test_an_uploader_alone_extracts_side_by_side(owner, deferred):
    first, second = upload(owner, "first.txt"), upload(owner, "second.txt")
    # Another process extracts `first` in owner's first slot; nobody else has uploads waiting.
    with another_process() as other:
        other.execute("SELECT pg_advisory_lock(%s, %s)", [NAMESPACE, owner.pk])
        tasks.extract_revision(second.pk)
        assert statuses(second) == {"admitted"} and deferred == []
        assert statuses(first) == {"pending"}  # its own waiting revision holds nobody back


def test_an_uploader_past_the_share_waits_once_someone_else_waits(owner, member, deferred):
    mine, theirs = upload(owner, "mine.txt"), upload(member, "theirs.txt")
    # Owner took a second slot while alone; the first is free again, but member now waits:
    # owner is at the share already and waits too.
    with another_process() as other:
        other.execute("SELECT pg_advisory_lock(%s, %s)", [NAMESPACE + 1, owner.pk])
        tasks.extract_revision(mine.pk)
        assert deferred == [mine.pk] and statuses(mine) == {"pending"}
        tasks.extract_revision(theirs.pk)
        assert statuses(theirs) == {"admitted"}
        tasks.extract_revision(mine.pk)  # nobody else waits: a slot beside the held one
    assert statuses(mine) == {"admitted"} and deferred == [mine.pk]
