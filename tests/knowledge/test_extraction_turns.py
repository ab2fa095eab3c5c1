"""Issue 27 (4): one uploader's extractions take at most KOINON_EXTRACT_PER_USER
processes at once; another revision of theirs waits (queued again, still pending) while
other users' uploads extract."""

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


def test_a_second_extraction_of_the_same_uploader_waits_for_their_turn(owner, member, deferred):
    mine, theirs = upload(owner, "mine.txt"), upload(member, "theirs.txt")
    params = connection.get_connection_params()
    # Another process is extracting one of owner's revisions: it holds owner's slot.
    with psycopg.connect(
        **{k: v for k, v in params.items() if k in ("dbname", "user", "host", "port", "password")},
        autocommit=True,
    ) as other:
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
