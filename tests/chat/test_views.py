"""The chat UI without JavaScript (SPEC §9, issue 12): Django's test client against the
views, the real pipeline inline, owner / member / outsider."""

import re

import pytest
from django.test import Client

from answers.models import AnswerRun, ConversationSource
from answers.pipeline.lifecycle import run_execute, run_fail, run_start
from answers.pipeline.request import answer_request_parse
from answers.pipeline.vocabulary import Plan
from answers.services import conversation_sources_set
from audit.services import audit_summary
from audit.signed_note import NoteSigner
from knowledge.documents.extraction import revision_extract
from knowledge.documents.upload import document_upload
from tests.answers.helpers import AUTO_POINT, MIXED_QUESTION, STRICT_POINT, ingest, whole_passage
from tests.answers.helpers import ask as ask_api
from tests.answers.providers import ScriptedProvider

pytestmark = pytest.mark.django_db

TEXT = "The platform operations team owns service reviews."
QUESTION = "Who owns service reviews?"


@pytest.fixture
def corpus(space, owner):
    return ingest(owner, space, "operations.txt", TEXT)


def browser(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def ask(client: Client, query: str = QUESTION, **fields) -> tuple[str, str]:
    """POST the question form as a browser without JavaScript; (page, run id)."""
    response = client.post("/", {"query": query, "action": "ask", **fields})
    assert response.status_code == 302, response.content[:500]
    location = response["Location"]
    run_id = location.rsplit("#run-", 1)[1]
    page = client.get(location.split("#")[0])
    assert page.status_code == 200
    return page.content.decode(), run_id


def test_every_page_requires_a_login(corpus, member):
    run_id = answer_request_parse({"query": QUESTION})
    run = run_start(user=member, request=run_id)
    anonymous = Client()
    for url in [
        "/",
        f"/c/{run.conversation_id}/",
        f"/runs/{run.pk}/answer/",
        f"/runs/{run.pk}/receipt/1/",
        "/files/1/status/",
    ]:
        response = anonymous.get(url)
        assert response.status_code == 302 and response["Location"].startswith("/login/?next=")
    for url in [f"/runs/{run.pk}/regenerate/", "/files/", "/"]:
        response = anonymous.post(url)
        assert response.status_code == 302 and response["Location"].startswith("/login/?next=")


def test_the_login_page_signs_in_and_out(member):
    client = Client()
    page = client.get("/login/")
    assert page.status_code == 200 and 'name="csrfmiddlewaretoken"' in page.content.decode()
    response = client.post("/login/", {"username": "member", "password": "test-password-1"})
    assert response.status_code == 302 and response["Location"] == "/"
    assert client.get("/").status_code == 200
    assert client.post("/logout/").status_code == 302
    assert client.get("/").status_code == 302


def test_a_question_without_javascript_ends_on_the_sealed_answer(corpus, member, space):
    client = browser(member)
    home = client.get("/").content.decode()
    assert f'name="spaces" value="{space.pk}"' in home
    page, run_id = ask(client, spaces=[space.pk])
    assert f'<blockquote lang="">{TEXT}</blockquote>' in page
    assert "operations" in page and "revision 1 of" in page
    assert f'href="/runs/{run_id}/receipt/1/"' in page
    run = AnswerRun.objects.get(pk=run_id)
    # The selection is stored per conversation, not only in the run's copy.
    assert list(
        ConversationSource.objects.filter(conversation=run.conversation).values_list(
            "space_id", flat=True
        )
    ) == [space.pk]
    assert f'value="{space.pk}" checked' in page


def test_the_answer_says_what_was_checked_and_each_quotes_score_from_the_audit(corpus, member):

    client = browser(member)
    page, run_id = ask(client)
    assert "Quoted word for word · judged to answer" in page
    assert "found word for word in the stored text of its source, checked twice" in page
    assert f"quotes scored under {AUTO_POINT:.2f} are never shown" in page
    assert "Verified answer" not in page
    (citation,) = AnswerRun.objects.get(pk=run_id).response["answer"]["citations"]
    (generation,) = audit_summary(run_id)["generations"]
    (verdict,) = [
        v
        for step in generation["steps"]
        if step["step"] == "judgement"
        for v in step["verdicts"]
        if v["fact_id"] == citation["fact_id"]
    ]
    score = max(verdict["scores"].values())
    assert score >= AUTO_POINT
    assert f"judged to answer: {score:.2f}</span>" in page
    receipt = client.get(f"/runs/{run_id}/receipt/1/").content.decode()
    assert "checked twice, and a trained model judged that it answers the question" in receipt
    assert f"judged to answer: {score:.2f}</span>" in receipt


def test_the_answer_states_the_threshold_its_own_policy_applied(corpus, member):
    """A strict answer was judged at strict's point: the page and the receipt say that one,
    not auto's (nor a global one)."""
    plan = Plan(QUESTION, [QUESTION])
    provider = ScriptedProvider([whole_passage], plan=plan, scores=lambda part, quote: 0.9)
    body = ask_api(member, QUESTION, provider=provider, evidence_policy={"mode": "strict"})
    assert body["evidence"]["policy"]["operating_point"] == STRICT_POINT
    run = AnswerRun.objects.get(pk=body["run_id"])
    client = browser(member)
    page = client.get(f"/c/{run.conversation_id}/").content.decode()
    assert f"quotes scored under {STRICT_POINT:.2f} are never shown" in page
    assert f"under {AUTO_POINT:.2f}" not in page
    receipt = client.get(f"/runs/{run.pk}/receipt/1/").content.decode()
    assert f"data-operating-point>{STRICT_POINT:.2f}, saved with the answer’s policy<" in receipt


def test_a_quote_the_audit_does_not_score_shows_no_score(corpus, member):
    from django.db import connection

    from audit.models import AnswerAudit

    client = browser(member)
    _, run_id = ask(client)
    # An audit without the judge's steps, as a run audited before they existed has: the
    # audit is a record, so rewritten as the database owner would, triggers bypassed.
    with connection.cursor() as cursor:
        cursor.execute("SET session_replication_role = replica")
        for audit in AnswerAudit.objects.filter(run_id=run_id):
            steps = [s for s in audit.generation["steps"] if s["step"] != "judgement"]
            audit.generation = {**audit.generation, "steps": steps}
            audit.save(update_fields=["generation"])
        cursor.execute("SET session_replication_role = DEFAULT")
    page = client.get(f"/c/{AnswerRun.objects.get(pk=run_id).conversation_id}/").content.decode()
    assert f">{TEXT}</blockquote>" in page and "Quoted word for word" in page
    assert "data-judged" not in page


def test_document_markup_and_citation_lookalikes_render_as_text(space, owner, member):
    hostile = (
        "The platform operations team owns service reviews <b>bold</b> "
        "<script>alert(1)</script> [2] “an invented quote”."
    )
    ingest(owner, space, "hostile.txt", hostile)
    page, run_id = ask(browser(member))
    assert "<script>alert(1)</script>" not in page
    assert "<b>bold</b>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page and "&lt;b&gt;bold&lt;/b&gt;" in page
    body = AnswerRun.objects.get(pk=run_id).response
    assert body["evidence"]["answer_status"] == "evidence_backed"
    # One block quote per sealed citation: "[2] “…”" inside the text adds none.
    assert page.count("<blockquote") == len(body["answer"]["citations"]) == 1
    assert page.count('<span class="number">[') == 1
    # No inline script anywhere: every <script> has a src.
    assert re.findall(r"<script(?![^>]*\bsrc=)", page) == []


def test_quotes_and_titles_render_without_bidi_controls(space, owner, member):
    """Issue 27 (13): the chat shows a citation's display form — a right-to-left override
    in a quote or a title cannot reorder what the reader sees."""
    ingest(
        owner,
        space,
        "\u202eregister.md",
        "The platform operations team owns service reviews \u202eecilA\u202c Sm\u200bith.",
    )
    page, run_id = ask(browser(member))
    body = AnswerRun.objects.get(pk=run_id).response
    assert body["evidence"]["answer_status"] == "evidence_backed"
    assert "\u202e" in body["answer"]["citations"][0]["quote"]  # verbatim in the body
    for char in "\u202e\u202c\u200b":
        assert char not in page
    assert "ecilA Smith." in page


def test_an_abstention_shows_the_fixed_text_and_how_to_go_on(corpus, member):
    page, _ = ask(browser(member), "What is the colour of the moon rover?")
    assert "Not in your library" in page
    assert page.count("Refine the question or select another source.") == 1  # said once
    assert "<blockquote" not in page


def test_someone_elses_conversation_run_and_file_are_404(corpus, member, outsider):
    client = browser(member)
    _, run_id = ask(client)
    run = AnswerRun.objects.get(pk=run_id)
    private = document_upload(user=member, filename="mine.txt", data=b"My own notes.", private=True)
    stranger = browser(outsider)
    for url in [
        f"/c/{run.conversation_id}/",
        f"/runs/{run_id}/answer/",
        f"/runs/{run_id}/receipt/1/",
        f"/files/{private.document.pk}/status/",
        "/c/999999999/",
        "/runs/not-a-uuid/receipt/1/",
    ]:
        assert stranger.get(url).status_code == 404, url
    assert stranger.post(f"/runs/{run_id}/regenerate/").status_code == 404
    assert stranger.post("/files/", {"conversation": run.conversation_id}).status_code == 404
    # The outsider's question may not name the member's conversation either.
    response = stranger.post(f"/c/{run.conversation_id}/", {"query": QUESTION})
    assert response.status_code == 404
    assert run.generations.count() == 1


def test_forms_are_refused_without_a_csrf_token(corpus, member):
    client = Client(enforce_csrf_checks=True)
    client.force_login(member)
    assert client.post("/", {"query": QUESTION}).status_code == 403
    assert client.post("/files/", {}).status_code == 403
    assert AnswerRun.objects.count() == 0


def test_the_outsider_sees_neither_the_space_nor_its_text(corpus, outsider, space):
    client = browser(outsider)
    home = client.get("/").content.decode()
    assert space.name not in home
    # A hand-made selection of the hidden space is a field error, not a lookup.
    response = client.post("/", {"query": QUESTION, "spaces": [space.pk]})
    assert response.status_code == 422
    assert AnswerRun.objects.count() == 0
    page, _ = ask(client)
    assert TEXT not in page and "Not in your library" in page


def test_a_private_file_is_uploaded_selected_and_reports_its_extraction(corpus, member):
    client = browser(member)
    _, run_id = ask(client)
    conversation = AnswerRun.objects.get(pk=run_id).conversation
    from django.core.files.uploadedfile import SimpleUploadedFile

    upload = SimpleUploadedFile("notes.txt", b"Retention of my notes is two weeks.")
    response = client.post(
        "/files/",
        {"file": upload, "conversation": conversation.pk},
        HTTP_ACCEPT="application/json",
    )
    assert response.status_code == 202
    body = response.json()
    assert body["state"] == "extracting" and body["title"] == "notes"
    document_id = body["document"]
    assert ConversationSource.objects.filter(
        conversation=conversation, document_id=document_id
    ).exists()
    from knowledge.models import Document

    revision_extract(revision_id=Document.objects.get(pk=document_id).revisions.get().pk)
    status = client.get(body["status_url"]).json()
    assert status["state"] == "admitted"
    page = client.get(f"/c/{conversation.pk}/").content.decode()
    assert f'name="files" value="{document_id}" checked' in page
    # An unsupported file gets the human message, nothing is stored.
    bad = SimpleUploadedFile("tool.exe", b"MZ\x90\x00binary")
    refused = client.post("/files/", {"file": bad}, HTTP_ACCEPT="application/json")
    assert refused.status_code == 422
    assert refused.json()["error"]["code"] == "unsupported_type"
    # Without JavaScript the same upload redirects back with a message.
    plain = client.post("/files/", {"file": SimpleUploadedFile("b.txt", b"Text.")}, follow=True)
    assert plain.status_code == 200 and "being extracted" in plain.content.decode()


def test_a_file_deselected_before_sealing_is_withdrawn_by_the_recheck(member):
    private = document_upload(user=member, filename="mine.txt", data=TEXT.encode(), private=True)
    revision_extract(revision_id=private.revision.pk)
    request = answer_request_parse({"query": QUESTION, "selected_sources": [private.document.pk]})
    run = run_start(user=member, request=request)
    assert ConversationSource.objects.filter(
        conversation=run.conversation, document=private.document
    ).exists()
    # The user deselects the file while the answer is still being prepared.
    conversation_sources_set(user=member, conversation=run.conversation, space_ids=[], file_ids=[])
    body = run_execute(run_id=run.pk, generation=1)
    assert body["evidence"]["answer_status"] == "abstained"
    assert "access_denied" in body["quality"]["issues"]
    assert TEXT not in body["answer"]["text"]


def test_a_selected_private_file_answers(member):
    private = document_upload(user=member, filename="mine.txt", data=TEXT.encode(), private=True)
    revision_extract(revision_id=private.revision.pk)
    page, _ = ask(browser(member), files=[private.document.pk])
    assert f">{TEXT}</blockquote>" in page


def test_the_receipt_shows_the_release_hashes_steps_and_the_audit_link(corpus, member):
    client = browser(member)
    _, run_id = ask(client)
    run = AnswerRun.objects.get(pk=run_id)
    release = run.releases.get()
    page = client.get(f"/runs/{run_id}/receipt/1/").content.decode()
    assert str(release.pk) in page
    for name in ("text_sha256", "citations_sha256", "cards_sha256", "policy_sha256"):
        assert getattr(release, name) in page
    assert page.count("matches") >= 4 and "does not match" not in page
    for fact_id in release.selected_fact_ids:
        assert fact_id in page
    assert "<td>retrieval</td>" in page and "<td>recheck</td>" in page
    assert f'href="/v1/runs/{run_id}/audit"' in page
    assert client.get(f"/runs/{run_id}/receipt/2/").status_code == 404


def test_the_receipt_shows_the_key_that_verifies_the_answer_log(corpus, member, settings):
    """The public key to check the log with is on the receipt (issue 51), never the
    private one; without a configured key there is none to show."""
    client = browser(member)
    _, run_id = ask(client)
    assert "data-receipt-log-key" not in client.get(f"/runs/{run_id}/receipt/1/").content.decode()
    signer = NoteSigner.generate("koinon.test/log")
    key_file = settings.DATA_DIR / "receipt-test.key"
    key_file.write_text(signer.key_string() + "\n")
    settings.KOINON_LOG_KEY_FILE = str(key_file)
    try:
        page = client.get(f"/runs/{run_id}/receipt/1/").content.decode()
    finally:
        key_file.unlink()
    public = signer.verifier().key_string()
    assert f"<code data-receipt-log-key>{public}</code>" in page
    assert signer.key_string() not in page


def test_regenerate_adds_a_generation_and_keeps_the_earlier_one_visible(corpus, member):
    client = browser(member)
    _, run_id = ask(client)
    response = client.post(f"/runs/{run_id}/regenerate/")
    assert response.status_code == 302
    page = client.get(response["Location"].split("#")[0]).content.decode()
    assert "1 earlier answer" in page and "Answer 2 of 2" in page
    assert 'data-generation="2"' in page and 'data-generation="1"' in page
    assert f'href="/runs/{run_id}/receipt/1/"' in page
    assert f'href="/runs/{run_id}/receipt/2/"' in page
    assert page.count(f">{TEXT}</blockquote>") == 2


def test_an_answer_never_sealed_shows_the_regeneration_notice(corpus, member):
    request = answer_request_parse({"query": QUESTION})
    run = run_start(user=member, request=request)
    run_fail(run_id=run.pk, generation=1, reason="internal_error")
    page = browser(member).get(f"/c/{run.conversation_id}/").content.decode()
    assert "This answer was not sealed" in page
    assert f"/runs/{run.pk}/receipt/" not in page
    assert "data-regenerate" in page


def test_curators_see_the_admin_link_and_readers_do_not(corpus, owner, member):
    owner.is_staff = True
    owner.save()
    assert "data-admin-link" in browser(owner).get("/").content.decode()
    assert "data-admin-link" not in browser(member).get("/").content.decode()


def test_pages_carry_a_content_security_policy_without_inline_script(member):
    response = browser(member).get("/")
    policy = response["Content-Security-Policy"]
    assert "script-src 'self'" in policy and "unsafe-inline" not in policy
    assert "default-src 'self'" in policy


def test_the_language_switch_translates_the_ui_and_the_fixed_texts(corpus, member):
    client = browser(member)
    response = client.post("/i18n/setlang/", {"language": "de", "next": "/"})
    assert response.status_code == 302
    home = client.get("/").content.decode()
    assert '<html lang="de">' in home and "Fragen" in home
    page, _ = ask(client)
    assert "Aus Ihrer Bibliothek" in page or "Ihrer Bibliothek" in page


def test_out_of_range_ids_in_urls_are_404_not_errors(corpus, member):
    client = browser(member)
    _, run_id = ask(client)
    huge = "9" * 30
    for url in [f"/c/{huge}/", f"/runs/{run_id}/receipt/{huge}/", f"/files/{huge}/status/"]:
        assert client.get(url).status_code == 404, url
    response = client.post("/", {"query": QUESTION, "spaces": [huge], "files": ["x"]})
    assert response.status_code == 422


def test_a_quote_whose_revision_was_replaced_since_is_marked_superseded(corpus, owner, member):
    client = browser(member)
    page, run_id = ask(client)
    assert '<span class="badge">current</span>' in page
    newer = document_upload(
        user=owner,
        filename="operations.txt",
        data=b"The review board owns service reviews.",
        space=corpus.document.space,
        document=corpus.document,
    )
    revision_extract(revision_id=newer.revision.pk)
    run = AnswerRun.objects.get(pk=run_id)
    page = client.get(f"/c/{run.conversation_id}/").content.decode()
    assert "superseded" in page and f">{TEXT}</blockquote>" in page


def test_dataset_values_are_cards_with_label_value_snapshot_and_lineage(library, member):

    page, run_id = ask(browser(member), MIXED_QUESTION)
    body = AnswerRun.objects.get(pk=run_id).response
    cards = body["answer"]["cards"]
    assert cards, body["evidence"]
    assert page.count('class="value-card"') == len(cards)
    assert "<code>SUM(orders.amount)</code>" in page
    assert '<p class="value">4000</p>' in page
    assert "dataset invoices, snapshot 1" in page
    assert "Lineage:" in page and "<code>orders.amount</code>" in page


def test_a_partial_answer_says_which_part_found_nothing(corpus, member):
    page, run_id = ask(
        browser(member), "Who owns service reviews, and what colour is the moon rover?"
    )
    body = AnswerRun.objects.get(pk=run_id).response
    assert body["evidence"]["answer_status"] == "partial", body["evidence"]
    assert "This answer is partial." in page and "Nothing was found for:" in page
    assert "<ul><li>what colour is the moon rover</li></ul>" in page
    assert f">{TEXT}</blockquote>" in page


def test_a_longer_conversation_costs_no_more_queries(corpus, member):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    client = browser(member)
    _, run_id = ask(client)
    conversation_id = AnswerRun.objects.get(pk=run_id).conversation_id
    with CaptureQueriesContext(connection) as one_run:
        client.get(f"/c/{conversation_id}/")
    for _ in range(3):
        client.post(f"/c/{conversation_id}/", {"query": QUESTION, "action": "ask"})
    client.post(f"/runs/{run_id}/regenerate/")
    with CaptureQueriesContext(connection) as five_answers:
        page = client.get(f"/c/{conversation_id}/").content.decode()
    assert page.count("<blockquote") == 5
    assert len(one_run) > 0
    assert len(five_answers) <= len(one_run)


def test_the_first_answers_while_vectors_are_pending_say_indexing_not_access_failure(
    corpus, member
):
    from knowledge.models import Passage

    Passage.objects.update(embedding=None, embedding_model="", embedding_status="pending")
    client = browser(member)
    page, _ = ask(client, "Which moons orbit Jupiter?")
    assert "1 document is still being indexed for semantic search" in page
    assert "could not be accessed" not in page
    # The keyword channel answers meanwhile; the page says the semantic one is catching up.
    page, _ = ask(client)
    assert TEXT in page and "still being indexed for semantic search" in page
    assert "could not be searched" not in page


def test_a_reader_who_lost_access_sees_the_access_failure_text_not_the_quote(corpus, space, member):
    from knowledge.services import space_member_remove

    client = browser(member)
    _, run_id = ask(client)
    run = AnswerRun.objects.get(pk=run_id)
    space_member_remove(space=space, username=member.username)
    page = client.get(f"/c/{run.conversation_id}/").content.decode()
    assert TEXT not in page and "could not be accessed" in page
    receipt = client.get(f"/runs/{run_id}/receipt/1/").content.decode()
    assert "data-no-release" in receipt and TEXT not in receipt
    assert str(run.releases.get().pk) not in receipt
    fragment = client.get(f"/runs/{run_id}/answer/").content.decode()
    assert TEXT not in fragment


def test_memory_page_adds_lists_and_revokes_corrections_and_remembers_an_answer(corpus, member):
    """Memory in the UI (issue 14): a correction from the form, a sealed answer
    remembered from its page, both listed, revoked from the list; CSRF on every form."""
    from memory.models import MemoryEntry

    client = browser(member)
    _, run_id = ask(client)
    assert client.post(f"/runs/{run_id}/remember/").status_code == 302
    response = client.post("/memory/", {"text": "Service reviews are in the handbook"})
    assert response.status_code == 302
    page = client.get("/memory/").content.decode()
    assert "Service reviews are in the handbook" in page
    assert TEXT in page  # the remembered answer's quote
    entries = MemoryEntry.objects.filter(user=member)
    assert sorted(entries.values_list("kind", flat=True)) == ["correction", "fact"]
    correction = entries.get(kind="correction")
    assert client.post(f"/memory/{correction.pk}/revoke/").status_code == 302
    correction.refresh_from_db()
    assert correction.revoked_at is not None
    assert "revoked" in client.get("/memory/").content.decode()
    checked = Client(enforce_csrf_checks=True)
    checked.force_login(member)
    assert checked.post("/memory/", {"text": "x"}).status_code == 403


def test_a_correction_made_for_a_space_on_the_memory_page_steers_that_space(
    corpus, space, member, outsider
):
    from memory.models import MemoryEntry

    client = browser(member)
    text = "Service reviews are owned by the platform operations team"
    assert client.post("/memory/", {"text": text, "space": space.pk}).status_code == 302
    entry = MemoryEntry.objects.get(user=member)
    assert (entry.scope, entry.space_id) == ("personal", space.pk)
    _, run_id = ask(client, spaces=[space.pk])
    assert [m["id"] for m in AnswerRun.objects.get(pk=run_id).plan["memory"]] == [entry.pk]
    # A space the user cannot read is no choice: a field error, nothing saved.
    refused = browser(outsider).post("/memory/", {"text": text, "space": space.pk})
    assert refused.status_code == 422 and not MemoryEntry.objects.filter(user=outsider).exists()


def test_another_users_memory_entry_cannot_be_revoked_from_the_page(corpus, member, outsider):
    from memory.services import correction_create

    entry = correction_create(user=member, text="Service reviews are quarterly", scope="personal")
    assert browser(outsider).post(f"/memory/{entry.pk}/revoke/").status_code == 404
    assert "quarterly" not in browser(outsider).get("/memory/").content.decode()
    entry.refresh_from_db()
    assert entry.revoked_at is None


def test_a_follow_up_shows_what_it_was_searched_as(corpus, owner, space, member):
    ingest(
        owner,
        space,
        "approvals.txt",
        "Service reviews are approved by the chief technology officer.",
    )
    client = browser(member)
    _, first = ask(client)
    conversation = AnswerRun.objects.get(pk=first).conversation_id
    response = client.post(
        f"/c/{conversation}/", {"query": "And who approves them?", "action": "ask"}
    )
    assert response.status_code == 302, response.content[:500]
    page = client.get(response["Location"].split("#")[0]).content.decode()
    searched = re.findall(r"data-searched-as>Searched as: <q>([^<]*)</q>", page)
    assert searched == ["Who approves service reviews?"]  # only the rewritten follow-up
    assert "approved by the chief technology officer" in page
    run_id = response["Location"].rsplit("#run-", 1)[1]
    receipt = client.get(f"/runs/{run_id}/receipt/1/").content.decode()
    assert "Rewritten from the conversation as: <q>Who approves service reviews?</q>" in receipt
    assert "part 1 (asked): <q>And who approves them?</q>" in receipt
    assert "part 1 (rewritten): <q>Who approves service reviews?</q>" in receipt


def test_regenerating_a_debug_run_is_refused_once_its_asker_is_no_longer_staff(corpus, staff):
    """Issue 49, item 2: the chat has no staff rule of its own; it shows the service's."""
    body = ask_api(staff, QUESTION, mode="debug")
    client = browser(staff)
    assert client.post(f"/runs/{body['run_id']}/regenerate/").status_code == 302
    run = AnswerRun.objects.get(pk=body["run_id"])
    assert run.generations.count() == 2
    staff.is_staff = False
    staff.save(update_fields=["is_staff"])
    response = client.post(f"/runs/{body['run_id']}/regenerate/", follow=True)
    assert "Debug mode is for staff." in response.content.decode()
    assert run.generations.count() == 2  # the refused regeneration wrote nothing
