from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from knowledge.models import Document, DocumentRevision, Extraction, Space
from tests.knowledge.helpers import BACKUP_POLICY, GAP_BOTH_GLUED, GAP_PRIMARY_GLUED, kerned_pdf

pytestmark = pytest.mark.django_db


def test_ingest_uploads_every_file_and_reports_refusals(tmp_path, space, owner):
    (tmp_path / "a.md").write_text("# A\n\nAlpha text.\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.txt").write_text("Beta text.\n")
    (tmp_path / "c.exe").write_bytes(b"MZ\x90\x00")
    out, err = StringIO(), StringIO()
    with pytest.raises(CommandError, match="1 file"):
        call_command(
            "ingest",
            str(tmp_path),
            "--space",
            "Operations",
            "--user",
            "owner",
            stdout=out,
            stderr=err,
        )
    assert sorted(Document.objects.values_list("title", flat=True)) == ["a", "b"]
    assert Extraction.objects.filter(status="pending").count() == 4  # queued for the worker
    assert "c.exe: unsupported_type" in err.getvalue()
    # Running it again changes nothing: identical bytes are the same revisions.
    with pytest.raises(CommandError):
        call_command(
            "ingest",
            str(tmp_path),
            "--space",
            str(space.pk),
            "--user",
            "owner",
            stdout=StringIO(),
            stderr=StringIO(),
        )
    assert DocumentRevision.objects.count() == 2


def test_ingest_rejects_an_unknown_space(tmp_path, owner):
    with pytest.raises(CommandError, match="No space is named or numbered 'Nowhere'"):
        call_command("ingest", str(tmp_path), "--space", "Nowhere", "--user", "owner")


def test_loaddemo_creates_users_space_and_corpus_once(db):
    call_command("loaddemo", if_empty=True, stdout=StringIO())
    demo = Space.objects.get(name="Demo")
    assert Document.objects.filter(space=demo).count() == 4
    out = StringIO()
    call_command("loaddemo", if_empty=True, stdout=out)
    assert "skipped" in out.getvalue()
    assert Document.objects.count() == 4


def test_space_commands_create_a_space_and_set_roles(owner, member, outsider):
    out = StringIO()
    call_command("space", "create", "Finance", "--curator", "owner", stdout=out)
    finance = Space.objects.get(name="Finance")
    assert owner.has_perm("knowledge.curate_space", finance)
    call_command("space", "member", "Finance", "member", "--role", "reader", stdout=out)
    assert member.has_perm("knowledge.view_space", finance)
    assert not member.has_perm("knowledge.curate_space", finance)
    call_command("space", "member", str(finance.pk), "outsider", "--role", "curator", stdout=out)
    assert outsider.has_perm("knowledge.curate_space", finance)
    call_command("space", "member", "Finance", "outsider", "--remove", stdout=out)
    assert not outsider.has_perm("knowledge.view_space", finance)
    listing = StringIO()
    call_command("space", "list", stdout=listing)
    assert "Finance\tmember (reader), owner (curator)" in listing.getvalue()


def test_space_commands_name_what_is_wrong(owner):
    call_command("space", "create", "Finance", "--curator", "owner", stdout=StringIO())
    with pytest.raises(CommandError, match="space_exists"):
        call_command("space", "create", "Finance", "--curator", "owner")
    with pytest.raises(CommandError, match="no active user"):
        call_command("space", "create", "Legal", "--curator", "ghost")
    with pytest.raises(CommandError, match="no space"):
        call_command("space", "member", "Nowhere", "owner", "--role", "reader")
    with pytest.raises(CommandError, match="unknown_user"):
        call_command("space", "member", "Finance", "ghost", "--role", "reader")
    with pytest.raises(CommandError, match="either --role"):
        call_command("space", "member", "Finance", "owner")


@pytest.mark.django_db(transaction=True)
def test_ingest_wait_reports_each_file_and_why_one_failed(celery_worker, tmp_path, space, owner):
    (tmp_path / "notes.md").write_text("# Notes\n\nReviews happen every quarter.\n")
    (tmp_path / "blank.txt").write_text("  \n \n")
    (tmp_path / "glued.pdf").write_bytes(kerned_pdf(BACKUP_POLICY, gap=GAP_BOTH_GLUED))
    (tmp_path / "kerned.pdf").write_bytes(kerned_pdf(BACKUP_POLICY, gap=GAP_PRIMARY_GLUED))
    out, err = StringIO(), StringIO()
    with pytest.raises(CommandError, match="1 file"):
        call_command(
            "ingest",
            str(tmp_path),
            "--space",
            "Operations",
            "--user",
            "owner",
            "--wait",
            "--timeout",
            "120",
            stdout=out,
            stderr=err,
        )
    assert "notes.md: admitted (" in out.getvalue()
    assert "blank.txt: failed: no_text: The file contains no extractable text." in err.getvalue()
    # Damaged text is admitted with a warning; a clean secondary serves instead of a glued primary.
    assert "glued.pdf: admitted (1 passages, pdfplumber)" in out.getvalue()
    assert "glued.pdf: warning: The text looks damaged (100% of its words glued)" in err.getvalue()
    assert "kerned.pdf: admitted (1 passages, pypdf)" in out.getvalue()
    assert "kerned.pdf: warning: The primary extraction looks damaged" in err.getvalue()
