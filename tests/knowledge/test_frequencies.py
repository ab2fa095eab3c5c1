"""Document frequencies from the kept lexeme counts equal counting the passages live.

The counts move in the transaction that changes which revision is current (an upload's
extraction, a new revision, an approved knowledge entry); an answer reads them instead of
counting the visible corpus.
"""

import pytest
from django.contrib.postgres.search import SearchQuery
from django.db import connection
from django.db.models import Q

from knowledge.documents.extraction import revision_extract
from knowledge.documents.upload import document_upload
from knowledge.frequencies import document_frequencies, lexeme_frequencies_rebuild
from knowledge.models import LexemeFrequency, Passage
from knowledge.scope import access_scope_build
from knowledge.services import space_create, space_member_set

pytestmark = pytest.mark.django_db

WORDS = ["pilots", "lanterns", "harbour", "the", "tides", "e-mail", "zeppelin", "Pilot"]


def live(user, words, **scope) -> tuple[dict[str, int], int]:
    """The old way: count the visible passages that match each word, per answer."""
    visible = access_scope_build(user=user, **scope).passages()
    counts = {
        word: visible.filter(
            search_vector=SearchQuery(word, search_type="plain", config="english")
        ).count()
        for word in dict.fromkeys(words)
    }
    return counts, visible.count()


def ingest(user, space, name: str, text: str, document=None, private=False):
    result = document_upload(
        user=user,
        filename=name,
        data=text.encode(),
        space=space,
        private=private,
        document=document,
    )
    revision_extract(revision_id=result.revision.pk)
    return result.revision


def kept_rows() -> set[tuple[int, str, int]]:
    return set(
        LexemeFrequency.objects.exclude(passages=0).values_list("space_id", "lexeme", "passages")
    )


def test_kept_counts_follow_uploads_and_new_revisions(space, owner, member, staff):
    other = space_create(name="Other", created_by=staff)
    space_member_set(space=other, username=owner.username, role="curator")
    first = ingest(owner, space, "pilots.txt", "Harbour pilots inspect lanterns.\n\nPilots rest.")
    ingest(owner, other, "tides.txt", "Tides turn. The pilots of the other space.")
    assert document_frequencies(scope=access_scope_build(user=member), words=WORDS) == live(
        member, WORDS
    )
    assert document_frequencies(scope=access_scope_build(user=owner), words=WORDS) == live(
        owner, WORDS
    )

    # A new revision replaces the old one's passages in the counts.
    ingest(
        owner,
        space,
        "pilots.txt",
        "Tides and e-mail.\n\nNo lanterns here.",
        document=first.document,
    )
    counts, total = document_frequencies(scope=access_scope_build(user=member), words=WORDS)
    assert (counts, total) == live(member, WORDS)
    assert counts["pilots"] == 0 and counts["tides"] == 1 and counts["lanterns"] == 1
    assert counts["e-mail"] == 1  # several lexemes ('e-mail', 'e', 'mail'): all in one
    assert counts["the"] == 0  # a stop word

    # The kept rows are exactly what counting everything afresh gives.
    before = kept_rows()
    for space_id in {space.pk, other.pk}:
        lexeme_frequencies_rebuild(space_id=space_id)
    assert kept_rows() == before


def test_private_files_are_counted_live_and_only_when_selected(space, owner, member):
    ingest(owner, space, "pilots.txt", "Harbour pilots inspect lanterns.")
    mine = ingest(owner, None, "mine.txt", "My own pilots and my own tides.", private=True)
    assert not LexemeFrequency.objects.filter(space=None).exists()
    selected = {"selected_sources": [mine.document_id]}
    counts, total = document_frequencies(
        scope=access_scope_build(user=owner, **selected), words=WORDS
    )
    assert (counts, total) == live(owner, WORDS, **selected)
    assert counts["pilots"] == 2 and total == 2
    assert (
        document_frequencies(scope=access_scope_build(user=owner), words=WORDS)[0]["pilots"] == 1
    )  # not selected
    # Somebody else's private file never counts, selected or not.
    assert document_frequencies(
        scope=access_scope_build(user=member, **selected), words=WORDS
    ) == live(member, WORDS)


def test_narrowed_to_spaces_and_capped(space, owner, staff, monkeypatch):
    import knowledge.frequencies

    other = space_create(name="Other", created_by=staff)
    space_member_set(space=other, username=owner.username, role="curator")
    ingest(owner, space, "a.txt", "Pilots one.\n\nPilots two.\n\nPilots three.")
    ingest(owner, other, "b.txt", "Pilots four.")
    narrowed = {"space_ids": [other.pk]}
    assert document_frequencies(
        scope=access_scope_build(user=owner, **narrowed), words=["pilots"]
    ) == ({"pilots": 1}, 1)
    monkeypatch.setattr(knowledge.frequencies, "DOCUMENT_FREQUENCY_CAP", 2)
    counts, total = document_frequencies(scope=access_scope_build(user=owner), words=["pilots"])
    assert counts == {"pilots": 2} and total == live(owner, ["pilots"])[1]


def test_a_spaces_kept_counts_are_its_current_passages_lexemes(space, owner):
    first = ingest(owner, space, "pilots.txt", "Harbour pilots inspect lanterns.")
    # Whatever is current, the kept counts of that space say the same, row for row.
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT l.lexeme, count(*) FROM knowledge_passage p CROSS JOIN LATERAL "
            "unnest(tsvector_to_array(p.search_vector)) AS l(lexeme) "
            "WHERE p.space_id = %s AND p.is_current GROUP BY l.lexeme",
            [space.pk],
        )
        expected = dict(cursor.fetchall())
    kept = dict(
        LexemeFrequency.objects.filter(space=space)
        .exclude(Q(lexeme="") | Q(passages=0))
        .values_list("lexeme", "passages")
    )
    assert kept == expected
    assert LexemeFrequency.objects.get(space=space, lexeme="").passages == (
        Passage.objects.filter(space=space, is_current=True).count()
    )
    first.document.refresh_from_db()
    assert first.document.current_revision_id == first.pk


def test_the_migration_counts_what_is_current(space, owner, staff):
    """The backfill of an existing installation gives what the kept counts would be."""
    import importlib

    migration = importlib.import_module("knowledge.migrations.0007_lexeme_frequency")
    (backfill,) = [op for op in migration.Migration.operations if hasattr(op, "sql")]
    other = space_create(name="Other", created_by=staff)
    space_member_set(space=other, username=owner.username, role="curator")
    first = ingest(owner, space, "pilots.txt", "Harbour pilots inspect lanterns.\n\nPilots rest.")
    ingest(owner, space, "pilots.txt", "Tides and e-mail.", document=first.document)
    ingest(owner, other, "tides.txt", "Tides turn.")
    ingest(owner, None, "mine.txt", "My own pilots.", private=True)
    kept = kept_rows()
    LexemeFrequency.objects.all().delete()
    with connection.cursor() as cursor:
        cursor.execute(backfill.sql)
    assert kept_rows() == kept and kept


def test_a_rebuild_gives_the_planner_the_tables_new_size(space, owner):
    ingest(owner, space, "pilots.txt", "Harbour pilots inspect lanterns of the northern quay.")
    ingest(owner, space, "boats.txt", "Pilot boats wait at the quay for the evening tide.")
    lexeme_frequencies_rebuild(space_id=space.pk)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT reltuples FROM pg_class WHERE oid = 'knowledge_lexemefrequency'::regclass"
        )
        (estimated,) = cursor.fetchone()
    # ANALYZE of a small table reads every row: the estimate is the count itself.
    assert estimated == LexemeFrequency.objects.count() > 10
