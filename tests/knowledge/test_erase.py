"""Erasing a revision's text for good (issue 28; docs/erasure.md).

After an erasure no table, trace or stored file holds the erased sentences: not the
passages or search, not `/text`, not the run bodies, messages, stream events, audits,
candidate facts or MCP call records, not the admin pages. The erasure log row stays and
nobody but the erasure function writes it; records stay closed to the runtime role
outside that path. Receipts are untouched: an export made before still verifies, and
sealed answers that quoted the text read as the fixed "erased on <date>" notice.
"""

import json
from datetime import UTC
from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.files.storage import default_storage
from django.core.management import call_command
from django.db import DatabaseError, connection, transaction
from django.test import Client

from answers.models import AnswerRun
from answers.pipeline import texts
from answers.pipeline.lifecycle import answer_retry
from audit.models import OutputRelease, StreamEvent
from audit.services import trace_write
from knowledge.curation import proposal_create
from knowledge.erasure import TOMBSTONE, revision_erase
from knowledge.models import Erasure, Extraction, Passage
from knowledge.retrieval import retrieve
from knowledge.scope import access_scope_build
from mcp_server.services import tool_call_run
from mcp_server.tools import Caller
from tests.answers.helpers import ask, ingest
from tests.answers.providers import ScriptedProvider
from tests.answers.test_permissions import plan, select_first
from tests.helpers import client_for
from tests.knowledge.test_withdraw import replayed

QUESTION = "Who owns service reviews?"
SENTENCES = [
    "The platform operations team owns service reviews.",
    "Reviews happen every second Tuesday in the harbour room.",
    "The escalation contact is Dana Whitfield at extension 4471.",
]
TEXT = " ".join(SENTENCES)
OTHER = "Invoices are kept for ten years by the finance office."


def answer(user) -> dict:
    return ask(user, QUESTION, provider=ScriptedProvider([select_first], plan=plan()))


def copies(sentences: list[str]) -> dict[str, int]:
    """Every text and JSON column of every table in the database: how many rows hold one
    of the sentences (`table.column` → rows)."""
    found = {}
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT table_name, column_name FROM information_schema.columns "
            "WHERE table_schema = 'public' AND data_type IN "
            "('text', 'character varying', 'json', 'jsonb', 'tsvector')"
        )
        for table, column in cursor.fetchall():
            for sentence in sentences:
                cursor.execute(
                    f'SELECT count(*) FROM "{table}" WHERE strpos("{column}"::text, %s) > 0',  # noqa: S608
                    [sentence],
                )
                count = cursor.fetchone()[0]
                if count:
                    found[f"{table}.{column}"] = found.get(f"{table}.{column}", 0) + count
    return found


def in_traces(sentences: list[str]) -> list[str]:
    from django.conf import settings

    return [
        path.name
        for path in settings.LOG_DIR.glob("*.jsonl")
        if any(s in path.read_text() for s in sentences)
    ]


@pytest.mark.django_db(transaction=True)
def test_after_an_erasure_no_table_trace_or_file_holds_the_erased_sentences(
    space, owner, member, tmp_path, settings
):
    settings.LOG_DIR = tmp_path / "traces"  # this test's traces only
    erased = ingest(owner, space, "operations.txt", TEXT)
    kept = ingest(owner, space, "finance.txt", OTHER)
    body = answer(member)
    assert body["evidence"]["answer_status"] == "evidence_backed"
    assert SENTENCES[0] in body["answer"]["text"]
    run = AnswerRun.objects.get(pk=body["run_id"])
    # Copies outside the answer itself: an MCP search for a sentence, and a trace line
    # that quotes one (written by the real trace writer).
    tool_call_run(
        caller=Caller(user=member),
        tool="search",
        arguments={"query": SENTENCES[2]},
        transport="stdio",
    )
    trace_write(run_id=run.pk, lines=[{"step": "note", "quote": SENTENCES[1]}])
    mcp = tool_call_run(
        caller=Caller(user=member), tool="answer", arguments={"query": QUESTION}, transport="stdio"
    )
    assert SENTENCES[0] in json.dumps(mcp.payload)  # a second run, answered over MCP
    client = client_for(member)
    conversation = f"/v1/conversations/{run.conversation_id}"
    assert (
        client.post(f"{conversation}/shares", {"username": "owner"}, format="json").status_code
        == 201
    )
    export_before = client.get(f"{conversation}/export").json()
    # A proposal a curator wrote by hand, quoting the file (not captured from a run).
    proposal_create(
        user=owner,
        space=space,
        title="Extensions",
        body=f"From the operations file: {SENTENCES[1]}",
        reason=f"It says: {SENTENCES[1]}",
    )
    releases = list(OutputRelease.objects.values_list("pk", "text_sha256", "citations_sha256"))
    stored_file = erased.revision.file.name
    assert default_storage.exists(stored_file)
    before = copies(SENTENCES)
    for where in (
        "knowledge_passage.text",
        "knowledge_extraction.text",
        "answers_answerrun.response",
        "answers_message.text",
        "answers_candidatefact.text",
        "audit_streamevent.data",
        "answers_citation.data",
        "mcp_server_toolcall.arguments",
        "knowledge_knowledgeproposal.body",
        "knowledge_knowledgeproposal.reason",
    ):
        assert where in before, where
    assert in_traces(SENTENCES)

    erasure = revision_erase(
        user=owner,
        document=erased.document,
        revision=erased.revision,
        reason="a leaked personal record",
    )

    assert copies(SENTENCES) == {}
    assert in_traces(SENTENCES) == []
    assert not default_storage.exists(stored_file)
    # What stood there is the tombstone, and the other document is untouched.
    assert (
        TOMBSTONE
        in StreamEvent.objects.get(run=run, event="completed").data["payload"]["result"]["answer"][
            "text"
        ]
    )
    assert OTHER in Extraction.objects.get(revision=kept.revision, role="primary").text
    assert Passage.objects.filter(revision=kept.revision).exists()
    assert not Passage.objects.filter(revision=erased.revision).exists()
    assert set(
        Extraction.objects.filter(revision=erased.revision).values_list("status", flat=True)
    ) == {"erased"}
    # The log row: who, why, when and what was replaced.
    log = Erasure.objects.get()
    assert (log.pk, log.revision_id, log.erased_by_id) == (erasure.pk, erased.revision.pk, owner.pk)
    assert log.reason == "a leaked personal record"
    assert log.counts["knowledge_passage"] >= 1 and log.counts["audit_streamevent"] >= 1
    assert log.counts["mcp_server_toolcall"] == 1 and log.counts["refused"] == 0

    # Search and /text find nothing; reads carry the dated notice.
    assert (
        retrieve(scope=access_scope_build(user=member), query="Dana Whitfield extension").candidates
        == []
    )
    text = client.get(f"/v1/documents/{erased.document.pk}/text")
    assert text.status_code == 410 and text.json()["error"]["code"] == "source_erased"
    day = log.erased_at.astimezone(UTC).date()
    notice = texts.erased_notice("en", day)
    assert day.isoformat() in notice
    reads = {
        "run": client.get(f"/v1/runs/{run.pk}").json(),
        "replay": replayed(member, str(run.pk)),
    }
    for name, read in reads.items():
        assert json.dumps(read, ensure_ascii=False).count(notice) == 1, name
        assert read["release"] is None and read["quality"]["issues"] == ["source_erased"], name
    responses = {
        "conversation": client.get(conversation),
        "share": client_for(owner).get(conversation),
        "export": client.get(f"{conversation}/export"),
        "markdown": client.get(f"{conversation}/export", {"as": "markdown"}),
    }
    for name, response in responses.items():
        assert response.status_code == 200, name
        assert notice in response.content.decode(), name
        assert not any(s in response.content.decode() for s in SENTENCES), name
    chat = Client()
    chat.force_login(member)
    page = chat.get(f"/c/{run.conversation_id}/")
    assert page.status_code == 200 and notice in page.content.decode()
    assert not any(s in page.content.decode() for s in SENTENCES)
    assert [m.get("state") for m in responses["conversation"].json()["messages"]] == [
        None,
        "source_erased",
    ]
    # Receipts untouched: the export made before still verifies, and so does a new one.
    assert (
        list(OutputRelease.objects.values_list("pk", "text_sha256", "citations_sha256")) == releases
    )
    for name, export in {"before": export_before, "after": responses["export"].json()}.items():
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(export))
        out = StringIO()
        call_command("verify_export", str(path), stdout=out)
        assert "verified" in out.getvalue(), name
    # The admin pages of the revision, its extractions and the run show none of it.
    root = get_user_model().objects.create_superuser("root", password="test-password-1")
    admin = Client()
    admin.force_login(root)
    extraction = Extraction.objects.filter(revision=erased.revision).first()
    completed = StreamEvent.objects.get(run=run, event="completed")
    for url in (
        f"/admin/knowledge/documentrevision/{erased.revision.pk}/change/",
        f"/admin/knowledge/extraction/{extraction.pk}/change/",
        f"/admin/knowledge/document/{erased.document.pk}/change/",
        f"/admin/audit/answeraudit/{run.audits.get().pk}/change/",
        "/admin/audit/streamevent/",
        f"/admin/audit/streamevent/{completed.pk}/change/",
        "/admin/mcp_server/toolcall/",
        "/admin/knowledge/erasure/",
    ):
        page = admin.get(url)
        assert page.status_code == 200, url
        assert not any(s in page.content.decode() for s in SENTENCES), url
    # MCP answers from what is left; so does regenerating; the same bytes are not taken
    # again.
    mcp = tool_call_run(
        caller=Caller(user=member), tool="answer", arguments={"query": QUESTION}, transport="stdio"
    )
    assert not any(s in json.dumps(mcp.payload) for s in SENTENCES)
    retried = answer_retry(
        user=member, run=run, provider=ScriptedProvider([select_first], plan=plan())
    )
    assert not any(s in json.dumps(retried) for s in SENTENCES)
    again = client_for(owner).post(
        "/v1/documents", {"space": space.pk, "file": _file(TEXT)}, format="multipart"
    )
    assert again.status_code == 409 and again.json()["error"]["code"] == "revision_erased"


def _file(text: str):
    from django.core.files.uploadedfile import SimpleUploadedFile

    return SimpleUploadedFile("operations.txt", text.encode())


def test_erasing_needs_a_reason_and_happens_once(space, owner):
    erased = ingest(owner, space, "operations.txt", TEXT)
    client = client_for(owner)
    url = f"/v1/documents/{erased.document.pk}/revisions/{erased.revision.pk}/erase"
    for data in ({}, {"reason": ""}, {"reason": "   "}, {"reason": "x" * 501}, {"reason": 5}):
        response = client.post(url, data, format="json")
        assert response.status_code == 422, data  # a number too: it cannot be undone
        assert "reason" in response.json()["error"]["fields"], data
        assert not Erasure.objects.exists()
    assert client.post(url, {"reason": "leaked"}, format="json").status_code == 200
    again = client.post(url, {"reason": "twice"}, format="json")
    assert again.status_code == 409 and again.json()["error"]["code"] == "already_erased"
    assert Erasure.objects.count() == 1
    for bad in ("abc", "0", "999999"):
        missing = client.post(
            f"/v1/documents/{erased.document.pk}/revisions/{bad}/erase",
            {"reason": "r"},
            format="json",
        )
        assert missing.status_code == 404, bad


# --- the database keeps the path closed ---------------------------------------------


def refused(statement: str, params: tuple = ()) -> str:
    """Run the statement in a savepoint; the database's refusal, or '' if it ran."""
    try:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(statement, params)
    except DatabaseError as error:
        return str(error)
    return ""


CHANGE_LOG = (
    "UPDATE knowledge_erasure SET reason = 'changed' WHERE id = %s",
    "DELETE FROM knowledge_erasure WHERE id = %s",
)


def test_the_runtime_role_can_erase_only_through_the_function(space, owner, member, runtime_role):
    erased = ingest(owner, space, "operations.txt", TEXT)
    body = answer(member)
    run = AnswerRun.objects.get(pk=body["run_id"])
    with connection.cursor() as cursor:
        cursor.execute(f'SET ROLE "{runtime_role}"')
    try:
        # Records: not by hand, not with the erasing flag set by itself.
        refused("SELECT set_config('koinon.erasing', 'on', true)")
        for statement in (
            "UPDATE audit_streamevent SET data = '{}'",
            "UPDATE mcp_server_toolcall SET arguments = '{}'",
            "UPDATE answers_answerrun SET response = '{\"generation\": 9}'",
        ):
            assert refused(statement), statement
        assert refused(
            "INSERT INTO knowledge_erasure (revision_id, document_id, erased_by_id, reason, "
            "erased_at, counts) VALUES (%s, %s, %s, 'forged', now(), '{}')",
            (erased.revision.pk, erased.document.pk, owner.pk),
        )
        # The function: a string that is not the revision's text is not taken.
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT koinon_erase_revision(%s, %s, %s, %s::text[])",
                [
                    erased.revision.pk,
                    owner.pk,
                    "runtime erasure",
                    [SENTENCES[0], "From your library: this is not in the text at all"],
                ],
            )
            erasure_id = cursor.fetchone()[0]
        # It ran as the runtime role, replaced the sentence in the sealed records, and
        # the flag is off again for whatever follows in the transaction.
        log = Erasure.objects.get(pk=erasure_id)
        assert log.counts["refused"] == 1 and log.counts["strings"] == 1
        assert SENTENCES[0] not in json.dumps(
            StreamEvent.objects.get(run=run, event="completed").data
        )
        assert "From your library:" in json.dumps(
            StreamEvent.objects.get(run=run, event="completed").data
        )
        assert refused("UPDATE audit_streamevent SET data = '{}'")
        for statement in CHANGE_LOG:
            assert refused(statement, (erasure_id,)), statement
        for statement in (
            "TRUNCATE knowledge_erasure",
            "ALTER TABLE knowledge_erasure DISABLE TRIGGER USER",
        ):
            assert refused(statement), statement
    finally:
        with connection.cursor() as cursor:
            cursor.execute("RESET ROLE")
    # Even the owner cannot change the log row or delete it (the triggers).
    for statement in CHANGE_LOG:
        assert refused(statement, (erasure_id,)), statement
    assert Erasure.objects.get(pk=erasure_id).reason == "runtime erasure"


def test_a_revision_erased_between_selection_and_sealing_is_not_published(space, owner, member):
    erased = ingest(owner, space, "operations.txt", TEXT)

    def erase(attempt: int) -> None:
        if not Erasure.objects.exists():
            revision_erase(
                user=owner, document=erased.document, revision=erased.revision, reason="leaked"
            )

    provider = ScriptedProvider([select_first], plan=plan(), on_select=erase)
    body = ask(member, QUESTION, provider=provider)
    assert body["evidence"]["answer_status"] == "abstained"
    assert "quote_source_not_admitted" in body["quality"]["issues"]
    assert not any(s in json.dumps(body) for s in SENTENCES)


def test_the_publication_recheck_refuses_an_erased_revision(space, owner):
    from types import SimpleNamespace

    from answers.pipeline.recheck import _quoted_revisions_fit

    erased = ingest(owner, space, "operations.txt", TEXT)
    quote = SimpleNamespace(
        fact=SimpleNamespace(
            kind="quote",
            source={"document_id": erased.document.pk, "revision_id": erased.revision.pk},
        )
    )
    assert _quoted_revisions_fit([quote]) is None
    revision_erase(user=owner, document=erased.document, revision=erased.revision, reason="leaked")
    assert _quoted_revisions_fit([quote]) == "source_erased"
