"""Upload → Celery extraction (real worker) → passages with offsets and embeddings."""

import io
import time

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from knowledge.models import Document, DocumentRevision, Extraction, Passage
from knowledge.normalise import normalised_key
from tests.core.test_api_keys import assert_error
from tests.helpers import client_for

pytestmark = pytest.mark.django_db(transaction=True)

POLICY = (
    "# Retention\n\nInvoices are kept for ten years. Contracts are kept for seven years "
    "after they end.\n\n## Owners\n\nThe operations team owns service reviews. "
    "They meet every quarter.\n"
)


def upload(client, name: str, data: bytes, **fields):
    return client.post(
        "/v1/documents", {"file": SimpleUploadedFile(name, data), **fields}, format="multipart"
    )


def wait_for_extraction(revision_id: int, timeout: float = 90) -> list[Extraction]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        extractions = list(Extraction.objects.filter(revision_id=revision_id).order_by("role"))
        if extractions and all(
            e.status in {"admitted", "failed"} and e.progress == 100 for e in extractions
        ):
            return extractions
        time.sleep(0.2)
    raise AssertionError("extraction did not finish")


def pdf_bytes(pages: list[str]) -> bytes:
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_font("Helvetica", size=12)
    for text in pages:
        pdf.add_page()
        pdf.multi_cell(0, 8, text)
    return bytes(pdf.output())


def docx_bytes(paragraphs: list[str]) -> bytes:
    import docx

    document = docx.Document()
    document.add_heading("Handbook", level=1)
    for paragraph in paragraphs:
        document.add_paragraph(paragraph)
    buffer = io.BytesIO()
    document.save(buffer)
    return buffer.getvalue()


SAMPLES = {
    "policy.md": POLICY.encode(),
    "notes.txt": b"The backup runs nightly at two. Restores are tested monthly.\n",
    "page.html": b"<html><body><h1>Travel</h1><p>Economy class is used for flights under "
    b"six hours.</p><script>var x = 1;</script></body></html>",
    "standup.vtt": b"WEBVTT\n\n00:00:01.000 --> 00:00:04.000\nThe release ships on Friday.\n\n"
    b"00:00:05.000 --> 00:00:08.000\nQA signs off on Thursday.\n",
    "standup.srt": b"1\n00:00:01,000 --> 00:00:04,000\nThe database migrates first.\n\n"
    b"2\n00:00:05,000 --> 00:00:07,500\nThen the web tier restarts.\n",
    "report.pdf": pdf_bytes(["Revenue grew in the third quarter.", "Costs fell in the fourth."]),
    "handbook.docx": docx_bytes(["New staff get a laptop on day one.", "Badges expire yearly."]),
}


@pytest.mark.parametrize("filename", sorted(SAMPLES))
def test_every_format_ingests_end_to_end_through_the_worker(celery_worker, space, owner, filename):
    response = upload(client_for(owner), filename, SAMPLES[filename], space=space.pk)
    assert response.status_code == 202, response.content
    body = response.json()
    primary, secondary = wait_for_extraction(body["revision"])
    assert (primary.role, secondary.role) == ("primary", "secondary")
    assert primary.status == "admitted", primary.error_code
    assert secondary.status == "admitted", secondary.error_code
    assert primary.extractor != secondary.extractor
    assert primary.norm_text == normalised_key(primary.text)

    passages = list(Passage.objects.filter(extraction=primary).order_by("ordinal"))
    assert passages, "an admitted primary extraction produces passages"
    for passage in passages:
        # The offsets property: every passage is an exact slice of the admitted text.
        assert primary.text[passage.char_start : passage.char_end] == passage.text
        assert passage.embedding_status == "embedded"
        assert passage.embedding_dimension == 384 and len(passage.embedding) == 384
    assert Passage.objects.filter(extraction=secondary).count() == 0

    document = Document.objects.get(pk=body["id"])
    assert document.current_revision_id == body["revision"]
    detail = client_for(owner).get(f"/v1/documents/{document.pk}").json()
    revision = detail["revisions"][0]
    assert revision["passage_count"] == len(passages)
    assert {e["status"] for e in revision["extractions"]} == {"admitted"}
    text = client_for(owner).get(f"/v1/documents/{document.pk}/text").json()
    assert text["text"] == primary.text


def test_locators_name_pages_and_cue_times(celery_worker, space, owner):
    client = client_for(owner)
    pdf = upload(client, "report.pdf", SAMPLES["report.pdf"], space=space.pk).json()
    vtt = upload(client, "standup.vtt", SAMPLES["standup.vtt"], space=space.pk).json()
    wait_for_extraction(pdf["revision"])
    wait_for_extraction(vtt["revision"])
    pages = {p.locator.get("page") for p in Passage.objects.filter(revision_id=pdf["revision"])}
    assert pages == {1, 2}
    cue = Passage.objects.filter(revision_id=vtt["revision"]).order_by("ordinal").first()
    assert cue.locator["start"].startswith("00:00:01")


def test_identical_bytes_make_no_new_revision(celery_worker, space, owner):
    client = client_for(owner)
    first = upload(client, "policy.md", POLICY.encode(), space=space.pk)
    again = upload(client, "policy-copy.md", POLICY.encode(), space=space.pk)
    assert first.status_code == 202 and again.status_code == 200
    assert again.json()["revision"] == first.json()["revision"]
    assert again.json()["created"] is False
    assert DocumentRevision.objects.count() == 1

    changed = upload(
        client,
        "policy.md",
        POLICY.encode() + b"\nNew rule.\n",
        space=space.pk,
        document=first.json()["id"],
    )
    assert changed.status_code == 202
    assert [r["number"] for r in changed.json()["revisions"]] == [2, 1]


def test_a_corrupt_pdf_keeps_its_revision_and_error(celery_worker, space, owner):
    response = upload(
        client_for(owner), "broken.pdf", b"%PDF-1.4\n" + b"\x00garbage" * 50, space=space.pk
    )
    assert response.status_code == 202
    primary, _ = wait_for_extraction(response.json()["revision"])
    assert (primary.status, primary.error_code) == ("failed", "corrupt")
    assert DocumentRevision.objects.filter(pk=response.json()["revision"]).exists()
    assert not Passage.objects.exists()
    detail = client_for(owner).get(f"/v1/documents/{response.json()['id']}").json()
    assert detail["revisions"][0]["extractions"][0]["error_code"] == "corrupt"


def test_whitespace_only_text_fails_with_no_text(celery_worker, space, owner):
    response = upload(client_for(owner), "blank.txt", b"   \n\n\t  \n", space=space.pk)
    primary, _ = wait_for_extraction(response.json()["revision"])
    assert (primary.status, primary.error_code) == ("failed", "no_text")


def test_an_oversized_file_is_refused_and_nothing_stored(space, owner, settings):
    settings.KOINON_UPLOAD_MAX_BYTES = 100
    response = upload(client_for(owner), "big.txt", b"word " * 100, space=space.pk)
    assert_error(response, 413, "too_large")
    assert not Document.objects.exists() and not DocumentRevision.objects.exists()


@pytest.mark.parametrize(
    ("filename", "data"),
    [
        ("picture.txt", b"\x89PNG\r\n\x1a\n" + b"\x00" * 64),
        ("fake.pdf", b"just some words, not a PDF"),
        ("archive.zip", b"PK\x03\x04whatever"),
    ],
)
def test_unsupported_or_mismatched_content_is_refused(space, owner, filename, data):
    error = assert_error(
        upload(client_for(owner), filename, data, space=space.pk), 422, "unsupported_type"
    )
    assert "file" in error["fields"]
    assert not Document.objects.exists()


def test_upload_into_an_invisible_space_is_404(space, outsider):
    response = upload(client_for(outsider), "notes.txt", SAMPLES["notes.txt"], space=space.pk)
    assert_error(response, 404, "not_found")
    assert not Document.objects.exists()


def test_a_reader_cannot_upload_into_the_space(space, member):
    response = upload(client_for(member), "notes.txt", SAMPLES["notes.txt"], space=space.pk)
    assert_error(response, 403, "permission_denied")


def test_a_private_file_is_visible_to_its_owner_only(celery_worker, space, member, owner):
    response = upload(client_for(member), "notes.txt", SAMPLES["notes.txt"], private="true")
    assert response.status_code == 202
    document_id = response.json()["id"]
    assert response.json()["private"] is True and response.json()["space"] is None
    mine = client_for(member).get("/v1/documents").json()["results"]
    assert [row["id"] for row in mine] == [document_id]
    assert_error(client_for(owner).get(f"/v1/documents/{document_id}"), 404, "not_found")
    assert client_for(owner).get("/v1/documents").json()["results"] == []


def test_space_documents_are_hidden_from_outsiders(celery_worker, space, owner, outsider):
    document_id = upload(
        client_for(owner), "notes.txt", SAMPLES["notes.txt"], space=space.pk
    ).json()["id"]
    assert client_for(outsider).get("/v1/documents").json()["results"] == []
    assert_error(client_for(outsider).get(f"/v1/documents/{document_id}/text"), 404, "not_found")


def test_a_failed_extraction_can_be_retried_from_admin(celery_worker, space, owner, staff):
    from django.test import Client

    response = upload(client_for(owner), "blank.txt", b"  \n \n", space=space.pk)
    revision_id = response.json()["revision"]
    primary, _ = wait_for_extraction(revision_id)
    assert (primary.status, primary.attempts) == ("failed", 1)

    admin = Client()
    admin.force_login(staff)
    admin.post(
        "/admin/knowledge/documentrevision/",
        {"action": "retry_failed_extractions", "_selected_action": [revision_id]},
    )
    deadline = time.monotonic() + 60
    while Extraction.objects.get(pk=primary.pk).attempts < 2:
        assert time.monotonic() < deadline, "the retry did not run"
        time.sleep(0.2)
    primary, _ = wait_for_extraction(revision_id)
    # Same bytes, same verdict, but a second attempt was made and the revision kept.
    assert (primary.status, primary.error_code, primary.attempts) == ("failed", "no_text", 2)
