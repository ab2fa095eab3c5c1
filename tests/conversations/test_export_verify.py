"""Issue 27 (5): `verify_export` checks an export against the store — questions, titles,
which messages belong to the conversation and in what order, the fixed notices, missing
messages — and never ends in a traceback, whatever the file holds."""

import copy
import json
from io import StringIO

import pytest
from django.core.management import call_command

from answers.models import AnswerRun
from answers.pipeline import texts
from answers.pipeline.lifecycle import answer_retry
from conversations.services import export_verify
from knowledge.services import space_member_set
from tests.answers.helpers import ingest
from tests.helpers import client_for, make_user

pytestmark = pytest.mark.django_db

TEXTS = {
    "operations.txt": "The platform operations team owns service reviews.",
    "retention.txt": "Invoices are retained for ten years.",
}


@pytest.fixture
def exported(space, owner, member):
    """The member's conversation with two sealed answers, exported."""
    for name, text in TEXTS.items():
        ingest(owner, space, name, text)
    client = client_for(member)
    first = client.post("/v1/answer", {"query": "Who owns service reviews?"}, format="json").json()
    conversation_id = AnswerRun.objects.get(pk=first["run_id"]).conversation_id
    follow = {"query": "How long are invoices retained?", "conversation_id": conversation_id}
    second = client.post("/v1/answer", follow, format="json").json()
    assert first["release"] and second["release"]
    export = client.get(f"/v1/conversations/{conversation_id}/export").json()
    assert export_verify(export).problems == []
    return {"export": export, "client": client, "conversation_id": conversation_id}


def edited(export: dict, change) -> list[str]:
    copied = copy.deepcopy(export)
    change(copied)
    return export_verify(copied).problems


def messages(export: dict, role: str) -> list[dict]:
    return [m for m in export["messages"] if m["role"] == role]


def test_a_changed_question_is_reported(exported):
    def change(export):
        messages(export, "user")[0]["text"] = "Who owns the budget?"

    assert edited(exported["export"], change) == ["message 1: the question is not the stored one"]


def test_a_changed_title_is_reported(exported):
    def change(export):
        export["conversation"]["title"] = "Board minutes"

    assert edited(exported["export"], change) == ["the conversation title is not the stored one"]


def test_a_sealed_answer_relabelled_superseded_with_forged_text_is_reported(exported):
    def change(export):
        answer = messages(export, "assistant")[0]
        answer.update(state="superseded", text="The finance team owns service reviews.", body=None)

    problems = edited(exported["export"], change)
    assert problems == ["message 2: it is marked superseded, but the store says otherwise"]


def test_a_forged_unsealed_message_is_reported(exported):
    def change(export):
        answer = messages(export, "assistant")[1]
        answer.update(state="unsealed", text="Invoices are kept forever.", body=None)

    assert edited(exported["export"], change)[0].startswith("message 4: it is marked unsealed")


def test_a_deleted_answer_is_reported_as_missing(exported):
    def change(export):
        export["messages"].pop(1)

    [problem] = edited(exported["export"], change)
    assert problem.endswith("(assistant) is missing from the export")


def test_answers_swapped_between_questions_are_reported(exported):
    def change(export):
        order = export["messages"]
        order[1], order[3] = order[3], order[1]

    problems = edited(exported["export"], change)
    assert "the messages are not in the stored order" in problems


def test_a_sealed_answer_grafted_from_another_users_conversation_is_reported(exported, space):
    stranger = make_user("stranger")
    space_member_set(space=space, username="stranger", role="reader")
    client = client_for(stranger)
    theirs = client.post("/v1/answer", {"query": "Who owns service reviews?"}, format="json").json()
    conversation = AnswerRun.objects.get(pk=theirs["run_id"]).conversation_id
    graft = client.get(f"/v1/conversations/{conversation}/export").json()["messages"][1]
    assert graft["state"] == "sealed"

    def change(export):
        export["messages"][1] = graft

    problems = edited(exported["export"], change)
    assert "message 2: not a message of this conversation" in problems


def test_a_real_superseded_notice_verifies_and_a_changed_one_does_not(exported, member):
    run = AnswerRun.objects.get(pk=messages(exported["export"], "assistant")[0]["run_id"])
    answer_retry(user=member, run=run)
    export = (
        exported["client"].get(f"/v1/conversations/{exported['conversation_id']}/export").json()
    )
    assert export_verify(export).problems == []
    notice = next(m for m in export["messages"] if m.get("state") == "superseded")
    assert notice["text"] == texts.regeneration_notice("en")

    def change(copied):
        next(m for m in copied["messages"] if m.get("state") == "superseded")["text"] = "Forged."

    assert edited(export, change) == [
        "message 2: a superseded message must carry exactly the fixed notice"
    ]


@pytest.mark.parametrize(
    "bad",
    [
        {"format": "koinon-conversation-export", "messages": {"a": 1}, "conversation": {"id": 1}},
        {"format": "koinon-conversation-export", "messages": [], "conversation": "x"},
        {
            "format": "koinon-conversation-export",
            "messages": [1, "x", None, [2]],
            "conversation": {"id": 999999},
        },
        {"format": "koinon-conversation-export", "messages": [], "conversation": {"id": [1]}},
        [],
        "text",
    ],
)
def test_malformed_exports_are_reported_not_tracebacks(bad, tmp_path):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(bad))
    err = StringIO()
    with pytest.raises(SystemExit) as failed:
        call_command("verify_export", str(path), stderr=err)
    assert failed.value.code == 1 and err.getvalue().strip()


def test_malformed_messages_of_a_real_conversation_are_reported(exported):
    def change(export):
        export["messages"][1] = {"id": [1], "role": "assistant"}
        export["messages"][3]["body"] = {"answer": {"text": 5}, "release": "x"}

    problems = edited(exported["export"], change)
    assert "message 2: not a message of this conversation" in problems
    assert any(p.startswith("message 4:") for p in problems)


def test_a_deeply_nested_file_is_reported(tmp_path):
    path = tmp_path / "deep.json"
    path.write_text("[" * 100000 + "]" * 100000)
    err = StringIO()
    with pytest.raises(SystemExit) as failed:
        call_command("verify_export", str(path), stderr=err)
    assert failed.value.code == 1 and "not a koinon conversation export" in err.getvalue()
