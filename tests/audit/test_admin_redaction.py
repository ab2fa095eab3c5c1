"""Issue 27 (8): a superuser reading receipts, stream events and answer audits in admin
sees how a run went — events, codes, ids, hashes — never another user's private text."""

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from audit.models import AnswerAudit, OutputRelease, StreamEvent
from core.redaction import redacted
from tests.answers.helpers import ask, ingest

pytestmark = pytest.mark.django_db

SALARY = "The salary review of the platform team is scheduled for April."
QUESTION = "When is the salary review of the platform team?"


@pytest.fixture
def private_answer(owner):
    document = ingest(owner, None, "salary.txt", SALARY, private=True).document
    body = ask(owner, QUESTION, selected_sources=[document.pk])
    assert body["evidence"]["answer_status"] == "evidence_backed"
    return body


def test_admin_pages_of_a_private_answer_show_no_text(private_answer):
    root = Client()
    root.force_login(get_user_model().objects.create_superuser("root", "r@example.invalid", "pw"))
    run_id = private_answer["run_id"]
    completed = StreamEvent.objects.get(run_id=run_id, event="completed")
    pages = [
        f"/admin/audit/streamevent/{completed.pk}/change/",
        f"/admin/audit/answeraudit/{AnswerAudit.objects.get(run_id=run_id).pk}/change/",
        f"/admin/audit/outputrelease/{OutputRelease.objects.get(run_id=run_id).pk}/change/",
        "/admin/audit/streamevent/",
        "/admin/audit/answeraudit/",
    ]
    for path in pages:
        page = root.get(path)
        assert page.status_code == 200, path
        html = page.content.decode()
        for words in ("salary", "April", "platform team"):
            assert words not in html, (path, words)
    event_page = root.get(pages[0]).content.decode()
    assert "completed" in event_page and "evidence_backed" in event_page
    assert private_answer["release"]["text_sha256"] in event_page  # hashes stay


def test_redaction_keeps_codes_ids_and_hashes_and_replaces_text():
    value = {
        "event": "completed",
        "run_id": "r1",
        "text_sha256": "ab",
        "quote": "secret",
        "items": [{"code": "matched", "text": "hidden words"}],
        "count": 3,
    }
    assert redacted(value) == {
        "event": "completed",
        "run_id": "r1",
        "text_sha256": "ab",
        "quote": "‹6 characters›",
        "items": [{"code": "matched", "text": "‹12 characters›"}],
        "count": 3,
    }
