"""Outside snapshots (issue 50, item 1): outside text stored as a private document of the
asker, extracted like an upload, recorded append-only, never one of their files or anyone
else's, erased by the document's erasure path."""

from datetime import UTC, datetime

import pytest
from django.contrib.auth import get_user_model
from django.db import DatabaseError, connection, transaction

from knowledge.documents.upload import document_upload
from knowledge.models import DocumentOrigin, Extraction, ExtractionStatus, Passage
from knowledge.scope import access_scope_build
from knowledge.selectors import documents_visible_to, private_files_of
from outside.errors import OutsideError
from outside.models import Channel, ChannelKind, Snapshot
from outside.services import channel_save
from outside.snapshots import (
    RemoteIdentity,
    snapshot_erase,
    snapshot_filename,
    snapshot_get_for_user,
    snapshot_passages,
    snapshot_store,
    snapshots_of,
)

pytestmark = pytest.mark.django_db

PAGE = (
    b"<!doctype html><html><head><title>Retention</title></head><body>"
    b"<h1>Retention</h1><p>Invoices are kept for seven years after the financial year ends."
    b"</p><p>Receipts older than that are shredded by the records office.</p></body></html>"
)
WHEN = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)


@pytest.fixture
def pages(db) -> Channel:
    root = get_user_model().objects.create_superuser(username="root", password="x-1", email="")
    return channel_save(user=root, channel=Channel(name="Pages", kind=ChannelKind.FETCH_URL))


def store(user, channel, data=PAGE, content_type="text/html; charset=utf-8", **identity):
    identity = {"url": "https://example.org/policies/retention.html", **identity}
    return snapshot_store(
        user=user,
        channel=channel,
        data=data,
        content_type=content_type,
        identity=RemoteIdentity(**identity),
        fetched_at=WHEN,
    )


def test_a_snapshot_is_stored_extracted_and_recorded_with_its_source(pages, member):
    snapshot = store(member, pages, title="Retention policy")
    assert snapshot.owner == member
    assert (snapshot.channel_kind, snapshot.channel_name) == ("fetch_url", "Pages")
    assert snapshot.url == "https://example.org/policies/retention.html"
    assert snapshot.fetched_at == WHEN
    assert snapshot.sha256 == snapshot.revision.sha256 and snapshot.size == len(PAGE)
    document = snapshot.document
    assert (document.origin, document.owner, document.space) == ("outside", member, None)
    assert document.kind == "html" and document.title == "Retention policy"
    # Both readings extracted now, by the same extractors as an upload.
    statuses = set(
        Extraction.objects.filter(revision=snapshot.revision).values_list("status", flat=True)
    )
    assert statuses == {ExtractionStatus.ADMITTED}
    texts = " ".join(snapshot_passages(snapshot=snapshot).values_list("text", flat=True))
    assert "Invoices are kept for seven years" in texts


def test_a_snapshot_is_not_one_of_the_askers_files_nor_searched_as_one(pages, member):
    snapshot = store(member, pages)
    assert not private_files_of(user=member).exists()
    scope = access_scope_build(user=member, selected_sources=[snapshot.document_id])
    assert snapshot.document_id not in scope.file_ids
    assert not scope.passages().filter(document_id=snapshot.document_id).exists()


def test_a_snapshot_is_its_askers_alone(pages, member, outsider, staff):
    snapshot = store(member, pages)
    root = get_user_model().objects.get(username="root")
    for other in (outsider, staff, root):
        assert not snapshots_of(user=other).exists()
        assert not documents_visible_to(user=other).filter(pk=snapshot.document_id).exists()
        with pytest.raises(Exception) as caught:
            snapshot_get_for_user(user=other, snapshot_id=snapshot.pk)
        assert getattr(caught.value, "error_code", "") == "snapshot_not_found"
    assert snapshot_get_for_user(user=member, snapshot_id=snapshot.pk) == snapshot


def test_the_same_bytes_fetched_again_are_one_text_and_two_records(pages, member):
    first = store(member, pages)
    again = store(member, pages)
    assert first.pk != again.pk
    assert first.revision_id == again.revision_id


def test_a_private_upload_of_the_same_bytes_stays_a_file_of_its_own(pages, member):
    snapshot = store(member, pages)
    upload = document_upload(user=member, filename="kept.html", data=PAGE, private=True)
    assert upload.created and upload.document.pk != snapshot.document_id
    assert upload.document.origin == DocumentOrigin.UPLOAD
    assert list(private_files_of(user=member)) == [upload.document]


def test_snapshots_are_append_only(pages, member):
    snapshot = store(member, pages)
    for statement in (
        "UPDATE outside_snapshot SET url = 'https://elsewhere.example/' WHERE id = %s",
        "DELETE FROM outside_snapshot WHERE id = %s",
    ):
        with (
            pytest.raises(DatabaseError, match="append-only"),
            transaction.atomic(),
            connection.cursor() as cursor,
        ):
            cursor.execute(statement, [snapshot.pk])
    assert Snapshot.objects.get(pk=snapshot.pk).url == snapshot.url


def test_erasing_a_snapshot_removes_its_text_and_keeps_the_record(pages, member):
    snapshot = store(member, pages)
    erasure = snapshot_erase(user=member, snapshot=snapshot, reason="fetched by mistake")
    assert erasure.revision_id == snapshot.revision_id
    assert not snapshot_passages(snapshot=snapshot).exists()
    assert not Passage.objects.filter(revision=snapshot.revision).exists()
    for extraction in Extraction.objects.filter(revision=snapshot.revision):
        assert "seven years" not in (extraction.text or "")
    assert Snapshot.objects.filter(pk=snapshot.pk).exists()


def test_only_the_owner_erases_a_snapshot(pages, member, outsider):
    snapshot = store(member, pages)
    with pytest.raises(Exception) as caught:
        snapshot_erase(user=outsider, snapshot=snapshot, reason="not mine")
    assert getattr(caught.value, "status_code", 0) in {403, 404}
    assert snapshot_passages(snapshot=snapshot).exists()


@pytest.mark.parametrize(
    ("data", "content_type", "code"),
    [
        (b"", "text/plain", "provider_unavailable"),
        (b"\x89PNG\r\n\x1a\n" + b"\x00" * 64, "image/png", "provider_unavailable"),
        (b"<html>not a pdf</html>", "application/pdf", "provider_unavailable"),
    ],
)
def test_content_koinon_cannot_read_is_refused_and_nothing_is_stored(
    pages, member, data, content_type, code
):
    with pytest.raises(OutsideError) as caught:
        store(member, pages, data=data, content_type=content_type)
    assert caught.value.code == code
    assert not Snapshot.objects.exists()


def test_content_above_the_upload_limit_is_too_large(pages, member, settings):
    settings.KOINON_UPLOAD_MAX_BYTES = 100
    with pytest.raises(OutsideError) as caught:
        store(member, pages)
    assert caught.value.code == "too_large"
    assert not Snapshot.objects.exists()


@pytest.mark.parametrize(
    ("content_type", "url", "name"),
    [
        ("text/html; charset=utf-8", "https://a.example/docs/guide.html", "guide.html"),
        ("application/pdf", "https://a.example/manual.pdf", "manual.pdf"),
        ("text/plain", "", "snapshot.txt"),
        ("application/octet-stream", "https://a.example/", "snapshot.txt"),
        ("text/markdown", "https://a.example/README", "README.md"),
    ],
)
def test_the_stored_name_carries_the_format_the_content_type_says(content_type, url, name):
    assert snapshot_filename(content_type, url) == name


def test_a_snapshot_whose_text_cannot_be_extracted_is_recorded_with_no_passages(pages, member):
    snapshot = store(
        member, pages, data=b"%PDF-1.7\n% broken beyond reading\n", content_type="application/pdf"
    )
    assert snapshot.document.kind == "pdf"
    assert not snapshot_passages(snapshot=snapshot).exists()


# --- REST: the caller's own snapshots ---------------------------------------------------


def test_the_snapshot_list_shows_the_callers_own_only(pages, member, outsider):
    from tests.helpers import client_for

    mine = store(member, pages)
    store(outsider, pages, data=PAGE.replace(b"seven", b"eight"))
    response = client_for(member).get("/v1/snapshots")
    assert response.status_code == 200
    [row] = response.json()["results"]
    assert row["id"] == mine.pk and row["channel_kind"] == "fetch_url"
    assert row["url"] == mine.url and row["sha256"] == mine.sha256
    assert (row["document"], row["revision"], row["erased"]) == (
        mine.document_id,
        mine.revision_id,
        False,
    )
    assert "Invoices" not in response.content.decode()  # a list of records, not of texts


def test_a_snapshot_is_erased_through_its_documents_revision_by_its_owner_alone(
    pages, member, outsider
):
    from tests.helpers import client_for

    snapshot = store(member, pages)
    url = f"/v1/documents/{snapshot.document_id}/revisions/{snapshot.revision_id}/erase"
    refused = client_for(outsider).post(url, {"reason": "not mine"}, format="json")
    assert refused.status_code == 404
    erased = client_for(member).post(url, {"reason": "fetched by mistake"}, format="json")
    assert erased.status_code == 200
    [row] = client_for(member).get("/v1/snapshots").json()["results"]
    assert row["erased"] is True


def test_snapshots_are_not_in_the_document_list(pages, member):
    from tests.helpers import client_for

    store(member, pages)
    upload = document_upload(user=member, filename="kept.html", data=PAGE, private=True)
    listed = client_for(member).get("/v1/documents").json()["results"]
    assert [row["id"] for row in listed] == [upload.document.pk]


def test_the_snapshot_list_needs_a_signed_in_caller(client):
    assert client.get("/v1/snapshots").status_code in {401, 403}
