"""Extraction failures and degraded embeddings, run in-process through the same services
the Celery task calls (the worker itself is covered in test_documents)."""

import io

import pytest
from celery.exceptions import SoftTimeLimitExceeded

from knowledge.documents.extraction import revision_extract
from knowledge.documents.upload import document_upload
from knowledge.embeddings import clear_embedding_caches
from knowledge.models import Extraction, Passage
from knowledge.retrieval import retrieve
from knowledge.scope import access_scope_build
from knowledge.tasks import extract_revision
from tests.knowledge.test_documents import POLICY, pdf_bytes
from tests.services import free_port

pytestmark = pytest.mark.django_db


def encrypted_pdf() -> bytes:
    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter()
    for page in PdfReader(io.BytesIO(pdf_bytes(["Secret numbers."]))).pages:
        writer.add_page(page)
    writer.encrypt(user_password="open-sesame", owner_password="owner")
    buffer = io.BytesIO()
    writer.write(buffer)
    return buffer.getvalue()


def upload_and_extract(owner, space, filename: str, data: bytes) -> list[Extraction]:
    result = document_upload(user=owner, filename=filename, data=data, space=space)
    revision_extract(revision_id=result.revision.pk)
    return list(Extraction.objects.filter(revision=result.revision).order_by("role"))


def test_an_encrypted_pdf_fails_with_encrypted_and_keeps_the_revision(space, owner):
    primary, secondary = upload_and_extract(owner, space, "locked.pdf", encrypted_pdf())
    assert (primary.status, primary.error_code) == ("failed", "encrypted")
    assert (secondary.status, secondary.error_code) == ("failed", "encrypted")
    assert primary.revision.file.size > 0
    assert not Passage.objects.exists()


def test_a_pdf_over_the_page_limit_fails_with_too_large(space, owner, settings):
    settings.KOINON_EXTRACT_MAX_PAGES = 2
    primary, _ = upload_and_extract(owner, space, "long.pdf", pdf_bytes(["a", "b", "c"]))
    assert (primary.status, primary.error_code) == ("failed", "too_large")


def test_text_over_the_character_limit_fails_with_too_large(space, owner, settings):
    settings.KOINON_EXTRACT_MAX_CHARS = 50
    primary, _ = upload_and_extract(owner, space, "long.txt", b"word " * 100)
    assert (primary.status, primary.error_code) == ("failed", "too_large")


def test_the_task_time_limit_ends_every_extraction_of_the_revision_timeout(
    space, owner, monkeypatch
):
    from knowledge.documents import extraction

    def too_slow(*args, **kwargs):
        raise SoftTimeLimitExceeded()  # what Celery raises in the task at its soft limit

    result = document_upload(user=owner, filename="notes.txt", data=b"Some text.", space=space)
    monkeypatch.setattr(extraction, "extract_isolated", too_slow)
    extract_revision.run(result.revision.pk)
    # Both roles were claimed and neither was read: neither may be left running for ever.
    assert {
        (e.role, e.status, e.error_code, e.progress)
        for e in Extraction.objects.filter(revision=result.revision)
    } == {("primary", "failed", "timeout", 100), ("secondary", "failed", "timeout", 100)}


def test_a_time_limit_inside_a_parser_is_not_recorded_as_corrupt(monkeypatch):
    from knowledge.extraction import extract, text

    def parser_at_the_limit(data, limits):
        raise SoftTimeLimitExceeded()

    monkeypatch.setattr(text, "extract_primary", parser_at_the_limit)
    with pytest.raises(SoftTimeLimitExceeded):
        extract("text", b"Some text.", role="primary")


@pytest.fixture
def unreachable_embeddings(settings):
    settings.KOINON_EMBEDDING_PROVIDER = "openai"
    settings.KOINON_EMBEDDING_BASE_URL = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens
    settings.KOINON_EMBEDDING_MODEL = "text-embedding-test"
    settings.KOINON_EMBEDDING_TIMEOUT = 0.5
    clear_embedding_caches()
    yield
    clear_embedding_caches()


def test_an_unavailable_embedding_provider_leaves_keyword_search_working(
    space, owner, member, unreachable_embeddings
):
    primary, _ = upload_and_extract(owner, space, "policy.md", POLICY.encode())
    assert primary.status == "admitted"
    statuses = set(Passage.objects.values_list("embedding_status", flat=True))
    assert statuses == {"embedding_unavailable"}

    result = retrieve(scope=access_scope_build(user=member), query="Who owns service reviews?")
    outcomes = {o.tool: (o.state, o.code, o.retryable) for o in result.outcomes}
    assert outcomes["vector_search"] == ("failed", "embedding_unavailable", True)
    assert outcomes["keyword_search"] == ("succeeded", "matched", False)
    assert "owns service reviews" in result.candidates[0].text
    assert set(result.candidates[0].contributions) == {"keyword_search"}


def test_a_failed_extraction_says_in_words_why_over_the_api_and_in_admin(space, owner):
    from django.test import Client

    from knowledge.services import space_member_set
    from tests.helpers import client_for, make_user

    primary, _ = upload_and_extract(owner, space, "locked.pdf", encrypted_pdf())
    document_id = primary.revision.document_id
    body = client_for(owner).get(f"/v1/documents/{document_id}").json()
    [extraction, _] = body["revisions"][0]["extractions"]
    assert (extraction["error_code"], extraction["error_message"]) == (
        "encrypted",
        "The file is password-protected.",
    )

    curator = make_user("curator", staff=True)
    space_member_set(space=space, username="curator", role="curator")
    admin = Client()
    admin.force_login(curator)
    page = admin.get("/admin/knowledge/extraction/").content.decode()
    assert "The file is password-protected." in page
