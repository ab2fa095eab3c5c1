"""spaces_visible_to: built once per user object, evaluated afresh every time it runs
(outside `spaces_read_once`); inside that block, read once."""

import pytest
from guardian import shortcuts

from knowledge import selectors
from knowledge.selectors import spaces_read_once, spaces_visible_sql, spaces_visible_to
from knowledge.services import space_create, space_member_remove, space_member_set

pytestmark = pytest.mark.django_db


def test_the_permission_queryset_is_built_once_per_user_object(monkeypatch, space, member):
    built = []
    real = shortcuts.get_objects_for_user

    def counting(*args, **kwargs):
        built.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(selectors, "get_objects_for_user", counting)
    for _ in range(5):
        assert list(spaces_visible_to(user=member)) == [space]
    assert len(built) == 1


def test_a_role_granted_or_removed_later_counts_for_the_same_user_object(staff, space, member):
    visible = spaces_visible_to(user=member)
    assert list(visible) == [space]  # evaluated: this clone has a result cache now
    other = space_create(name="Finance", created_by=staff)
    space_member_set(space=other, username=member.username, role="reader")
    assert set(spaces_visible_to(user=member)) == {space, other}
    space_member_remove(space=space, username=member.username)
    assert list(spaces_visible_to(user=member)) == [other]
    assert list(visible) == [space]  # the earlier result is its own, not shared


def test_another_user_object_gets_its_own(space, member, outsider):
    assert list(spaces_visible_to(user=member)) == [space]
    assert list(spaces_visible_to(user=outsider)) == []
    member.is_active = False
    assert list(spaces_visible_to(user=member)) == []  # the checks before it still run


def _permission_reads(queries) -> list[str]:
    return [q["sql"] for q in queries.captured_queries if "guardian_" in q["sql"]]


def test_inside_read_once_the_permission_rows_are_read_once(staff, space, member, outsider):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    other = space_create(name="Finance", created_by=staff)
    space_member_set(space=other, username=outsider.username, role="reader")
    with CaptureQueriesContext(connection) as queries, spaces_read_once():
        for _ in range(3):
            assert list(spaces_visible_to(user=member)) == [space]
            assert list(spaces_visible_to(user=outsider)) == [other]
        sql, params = spaces_visible_sql(user=member, space_ids=[space.pk, other.pk])
        assert "guardian_" not in sql
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            assert [row[0] for row in cursor.fetchall()] == [space.pk]  # narrowed, not widened
    assert len(_permission_reads(queries)) == 2  # one per user, not one per use
    with CaptureQueriesContext(connection) as queries:
        assert list(spaces_visible_to(user=member)) == [space]
        assert list(spaces_visible_to(user=member)) == [space]
    assert len(_permission_reads(queries)) == 2  # outside the block: every time again


def test_inside_read_once_a_later_role_change_waits_for_the_next_block(staff, space, member):
    with spaces_read_once():
        assert list(spaces_visible_to(user=member)) == [space]
        space_member_remove(space=space, username=member.username)
        assert list(spaces_visible_to(user=member)) == [space]  # the block's snapshot
    assert list(spaces_visible_to(user=member)) == []  # gone as soon as the block ends
    with spaces_read_once():
        assert list(spaces_visible_to(user=member)) == []
        assert spaces_visible_sql(user=member) is None  # nothing can match


def test_read_once_does_not_reach_another_thread(space, member):
    from concurrent.futures import ThreadPoolExecutor

    from knowledge.selectors import _READ_ONCE

    with spaces_read_once(), ThreadPoolExecutor(1) as pool:
        assert list(spaces_visible_to(user=member)) == [space]
        assert pool.submit(_READ_ONCE.get).result() is None  # the other thread reads afresh
        assert _READ_ONCE.get() == {member.pk: [space.pk]}
    assert _READ_ONCE.get() is None


def test_vectors_of_another_model_are_found_through_the_index(space, owner):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from knowledge.documents import document_upload
    from knowledge.models import Extraction, Passage
    from knowledge.selectors import (
        embeddings_of_another_model_exist,
        passages_embedded_by_another_model,
    )

    revision = document_upload(user=owner, filename="a.txt", data=b"One.", space=space).revision
    extraction = Extraction.objects.get(revision=revision, role="primary")
    common = {"extraction": extraction, "revision": revision, "document": revision.document}
    rows = {
        (model, status): Passage.objects.create(
            **common,
            ordinal=i,
            char_start=i,
            char_end=i + 1,
            text="x",
            embedding_model=model,
            embedding_status=status,
        )
        for i, (model, status) in enumerate(
            [
                ("m-old", "embedded"),
                ("m-now", "embedded"),
                ("z-other", "embedded"),
                ("", "pending"),
                ("m-old", "unavailable"),
            ]
        )
    }
    stale = passages_embedded_by_another_model(model_id="m-now")
    assert set(stale) == {rows[("m-old", "embedded")], rows[("z-other", "embedded")]}
    assert embeddings_of_another_model_exist(model_id="m-now")
    assert embeddings_of_another_model_exist(model_id="m-old")
    Passage.objects.exclude(pk=rows[("m-now", "embedded")].pk).update(embedding_model="m-now")
    assert not embeddings_of_another_model_exist(model_id="m-now")

    # The sweeper's "anything stale?" reads the partial index by range, never the table.
    with CaptureQueriesContext(connection) as probes:
        embeddings_of_another_model_exist(model_id="m-now")
    assert len(probes) == 2
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")  # the table is tiny here
        for probe in probes.captured_queries:
            cursor.execute("EXPLAIN " + probe["sql"])
            plan = "\n".join(row[0] for row in cursor.fetchall())
            assert "passage_embedding_model_idx" in plan, plan
            assert "Index Cond: (embedding_model " in plan, plan
