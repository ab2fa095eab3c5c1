from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from knowledge.models import Document, DocumentRevision, Extraction, Space

pytestmark = pytest.mark.django_db


def test_ingest_uploads_every_file_and_reports_refusals(tmp_path, space, owner):
    (tmp_path / "a.md").write_text("# A\n\nAlpha text.\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.txt").write_text("Beta text.\n")
    (tmp_path / "c.exe").write_bytes(b"MZ\x90\x00")
    out, err = StringIO(), StringIO()
    with pytest.raises(CommandError, match="1 file"):
        call_command(
            "ingest", str(tmp_path), "--space", "Operations", "--user", "owner",
            stdout=out, stderr=err,
        )  # fmt: skip
    assert sorted(Document.objects.values_list("title", flat=True)) == ["a", "b"]
    assert Extraction.objects.filter(status="pending").count() == 4  # queued for the worker
    assert "c.exe: unsupported_type" in err.getvalue()
    # Running it again changes nothing: identical bytes are the same revisions.
    with pytest.raises(CommandError):
        call_command("ingest", str(tmp_path), "--space", str(space.pk), "--user", "owner",
                     stdout=StringIO(), stderr=StringIO())  # fmt: skip
    assert DocumentRevision.objects.count() == 2


def test_ingest_rejects_an_unknown_space(tmp_path, owner):
    with pytest.raises(CommandError, match="no space"):
        call_command("ingest", str(tmp_path), "--space", "Nowhere", "--user", "owner")


def test_loaddemo_creates_users_space_and_corpus_once(db):
    call_command("loaddemo", if_empty=True, stdout=StringIO())
    demo = Space.objects.get(name="Demo")
    assert Document.objects.filter(space=demo).count() == 4
    out = StringIO()
    call_command("loaddemo", if_empty=True, stdout=out)
    assert "skipped" in out.getvalue()
    assert Document.objects.count() == 4
