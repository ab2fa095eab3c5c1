"""Withdrawing a document takes it out of the current library, and back when restored.

Not searched, not quotable; its history and the receipts that cited it stay; sealed
answers that quoted it read as the fixed "source withdrawn" notice everywhere (run,
replay, conversation, export, share) and can be regenerated.
"""

import json
from io import StringIO

import pytest
from django.core.management import call_command

from answers.models import AnswerRun
from answers.pipeline import texts
from answers.pipeline.lifecycle import answer_retry
from answers.streaming import frames_after
from audit.models import OutputRelease
from knowledge.frequencies import lexeme_frequencies_rebuild
from knowledge.lifecycle import document_restore, document_withdraw
from knowledge.models import Document, Passage
from knowledge.retrieval import retrieve
from knowledge.scope import access_scope_build
from tests.answers.helpers import ask, ingest
from tests.answers.providers import ScriptedProvider
from tests.answers.test_permissions import plan, select_first
from tests.helpers import client_for

pytestmark = pytest.mark.django_db

QUESTION = "Who owns service reviews?"
FIRST = "The platform operations team owns service reviews."
SECOND = "Service reviews are owned by the reliability guild."


def answer(user) -> dict:
    return ask(user, QUESTION, provider=ScriptedProvider([select_first], plan=plan()))


def cited_documents(body: dict) -> set[int]:
    return {s["document_id"] for s in body["evidence"]["sources"] if s["type"] == "revision"}


def replayed(user, run_id: str) -> dict:
    """The `completed` frame of the run's event replay (what `/v1/runs/<id>/events` sends
    to a client that reconnects after the run ended)."""
    frames, _, finished = frames_after(user=user, run_id=run_id, cursor=None, version="1")
    assert finished
    for block in frames:
        lines = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        if lines.get("event") == "completed":
            return json.loads(lines["data"])["payload"]["result"]
    raise AssertionError("no completed event in the replay")


def test_a_withdrawn_document_is_not_searched_and_its_answers_read_as_withdrawn(
    space, owner, member, outsider, tmp_path
):
    first = ingest(owner, space, "operations.txt", FIRST).document
    body = answer(member)
    assert body["evidence"]["answer_status"] == "evidence_backed"
    assert cited_documents(body) == {first.pk}
    run = AnswerRun.objects.get(pk=body["run_id"])
    client = client_for(member)
    client.post(
        f"/v1/conversations/{run.conversation_id}/shares", {"username": "owner"}, format="json"
    )
    export_before = client.get(f"/v1/conversations/{run.conversation_id}/export").json()
    releases = list(OutputRelease.objects.values_list("pk", "text_sha256"))

    document_withdraw(user=owner, document=first, reason="replaced by the new policy")

    # Not searched: no passage of it is current, and retrieval finds nothing.
    assert not Passage.objects.filter(document=first, is_current=True).exists()
    assert retrieve(scope=access_scope_build(user=member), query=QUESTION).candidates == []
    notice = texts.explanation("source_withdrawn", "en")
    reads = {
        "run": client.get(f"/v1/runs/{run.pk}").json(),
        "replay": replayed(member, str(run.pk)),
    }
    for name, read in reads.items():
        assert read["answer"]["text"] == notice, name
        assert read["answer"]["citations"] == [] and read["release"] is None, name
        assert read["quality"]["issues"] == ["source_withdrawn"], name
    conversation = client.get(f"/v1/conversations/{run.conversation_id}")
    shared = client_for(owner).get(f"/v1/conversations/{run.conversation_id}")
    exported = client.get(f"/v1/conversations/{run.conversation_id}/export")
    markdown = client.get(f"/v1/conversations/{run.conversation_id}/export", {"as": "markdown"})
    for name, response in {
        "conversation": conversation,
        "share": shared,
        "export": exported,
        "markdown": markdown,
    }.items():
        assert response.status_code == 200, name
        assert FIRST not in response.content.decode(), name
        assert notice in response.content.decode(), name
    assert [m.get("state") for m in conversation.json()["messages"]] == [None, "source_withdrawn"]
    # The receipts stay exactly as they were; the export made before still verifies, and
    # so does the one made now.
    assert list(OutputRelease.objects.values_list("pk", "text_sha256")) == releases
    for name, export in {"before": export_before, "after": exported.json()}.items():
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(export))
        out = StringIO()
        call_command("verify_export", str(path), stdout=out)
        assert "verified" in out.getvalue(), name
    # History stays readable: the document and its revision are still listed.
    detail = client_for(owner).get(f"/v1/documents/{first.pk}").json()
    assert detail["withdrawn"] is True and len(detail["revisions"]) == 1


def test_regenerating_answers_without_the_withdrawn_document(space, owner, member):
    first = ingest(owner, space, "operations.txt", FIRST).document
    second = ingest(owner, space, "guild.txt", SECOND).document
    body = answer(member)
    quoted = Document.objects.get(pk=cited_documents(body).pop())
    other = second if quoted == first else first
    document_withdraw(user=owner, document=quoted)

    retried = answer_retry(
        user=member,
        run=AnswerRun.objects.get(pk=body["run_id"]),
        provider=ScriptedProvider([select_first], plan=plan()),
    )
    assert retried["evidence"]["answer_status"] == "evidence_backed"
    assert cited_documents(retried) == {other.pk}
    assert (FIRST if quoted == first else SECOND) not in json.dumps(retried)


def test_restore_makes_it_quotable_again(space, owner, member):
    first = ingest(owner, space, "operations.txt", FIRST).document
    document_withdraw(user=owner, document=first)
    withdrawn = answer(member)
    assert withdrawn["evidence"]["answer_status"] == "abstained"
    assert FIRST not in json.dumps(withdrawn)

    document_restore(user=owner, document=first)
    assert Passage.objects.filter(document=first, is_current=True).exists()
    again = answer_retry(
        user=member,
        run=AnswerRun.objects.get(pk=withdrawn["run_id"]),
        provider=ScriptedProvider([select_first], plan=plan()),
    )
    assert again["evidence"]["answer_status"] == "evidence_backed"
    assert cited_documents(again) == {first.pk}


def test_a_document_withdrawn_between_selection_and_sealing_is_not_published(space, owner, member):
    first = ingest(owner, space, "operations.txt", FIRST).document

    def withdraw(attempt: int) -> None:
        document_withdraw(user=owner, document=first)

    provider = ScriptedProvider([select_first], plan=plan(), on_select=withdraw)
    body = ask(member, QUESTION, provider=provider)
    assert body["evidence"]["answer_status"] == "abstained"
    assert FIRST not in json.dumps(body)
    assert {
        "tool": "recheck",
        "state": "failed",
        "code": "source_withdrawn",
        "result_count": 0,
        "retryable": True,
    } in body["evidence"]["outcomes"]


def test_a_new_revision_of_a_withdrawn_document_waits_for_the_restore(space, owner, member):
    first = ingest(owner, space, "operations.txt", FIRST).document
    document_withdraw(user=owner, document=first)
    ingest(owner, space, "operations.txt", SECOND, document=first)
    first.refresh_from_db()
    assert first.current_revision.number == 2 and first.is_withdrawn
    assert not Passage.objects.filter(document=first, is_current=True).exists()
    document_restore(user=owner, document=first)
    current = Passage.objects.filter(document=first, is_current=True)
    assert {p.revision.number for p in current} == {2}


def test_withdraw_and_restore_keep_the_spaces_word_counts_exact(space, owner):
    from knowledge.models import LexemeFrequency

    ingest(owner, space, "operations.txt", FIRST)
    second = ingest(owner, space, "guild.txt", SECOND).document

    def counts() -> dict[str, int]:
        return dict(
            LexemeFrequency.objects.filter(space=space, passages__gt=0).values_list(
                "lexeme", "passages"
            )
        )

    before = counts()
    document_withdraw(user=owner, document=second)
    withdrawn = counts()
    assert "guild" not in withdrawn and withdrawn["review"] == before["review"] - 1
    lexeme_frequencies_rebuild(space_id=space.pk)
    assert counts() == withdrawn  # the same as counting afresh
    document_restore(user=owner, document=second)
    assert counts() == before
    document_withdraw(user=owner, document=second)
    document_withdraw(user=owner, document=second)  # twice: no double count
    assert counts() == withdrawn
