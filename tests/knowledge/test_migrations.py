"""Knowledge migrations with raw SQL, run both ways on rows that exist."""

import pytest
from django.core.management import call_command
from django.db import connection

from knowledge.models import Document, DocumentRevision, Extraction


def serving() -> set[tuple[int, str]]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT revision_id, role FROM knowledge_extraction WHERE serves_passages")
        return set(cursor.fetchall())


def columns() -> set[str]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT column_name FROM information_schema.columns "
            "WHERE table_name = 'knowledge_extraction'"
        )
        return {row[0] for row in cursor.fetchall()}


@pytest.mark.django_db(transaction=True)
def test_the_damage_migration_keeps_admitted_primaries_serving_and_reverses(space, owner):
    def revision(number: int, primary: str) -> DocumentRevision:
        document = Document.objects.create(
            space=space, title=f"d{number}", kind="text", created_by=owner
        )
        revision = DocumentRevision.objects.create(
            document=document,
            number=1,
            sha256=f"{number:064d}",
            file="x.txt",
            filename="x.txt",
            size=1,
            uploaded_by=owner,
        )
        Extraction.objects.create(revision=revision, role="primary", status=primary)
        Extraction.objects.create(revision=revision, role="secondary", status="admitted")
        return revision

    admitted, failed = revision(1, "admitted"), revision(2, "failed")

    call_command("migrate", "knowledge", "0008", verbosity=0)
    assert not {"damage", "serves_passages"} & columns()
    # Forward again, and every app whose migrations depend on knowledge's later ones with it
    # (going back to knowledge 0008 unapplied them too: outside's snapshots).
    call_command("migrate", verbosity=0)
    assert {"damage", "serves_passages"} <= columns()
    # Before, the admitted primary fed passages: it keeps serving them; nothing else does.
    assert serving() == {(admitted.pk, "primary")}
    assert not Extraction.objects.filter(revision=failed, serves_passages=True).exists()
    assert set(Extraction.objects.values_list("damage", flat=True)) == {None}
