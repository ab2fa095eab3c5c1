"""Conversations, exports, shares and publication intents (issue 14): owner, other user
and outsider on every endpoint; unsealed prose never leaves; exports verify; a share
recipient without access gets the access-failure text; intents go stale on retry."""

import json
from io import StringIO

import pytest
from django.core.management import call_command
from guardian.shortcuts import remove_perm

from answers.models import AnswerRun, Message
from answers.pipeline import texts
from answers.pipeline.lifecycle import answer_retry
from knowledge.curation import proposal_approve
from knowledge.models import KnowledgeProposal
from knowledge.services import space_create, space_member_set
from tests.answers.helpers import ingest
from tests.helpers import client_for, make_user

pytestmark = pytest.mark.django_db

TEXT = "The platform operations team owns service reviews."
QUESTION = "Who owns service reviews?"


@pytest.fixture
def answered(space, owner, member):
    """The member's conversation with one sealed answer."""
    ingest(owner, space, "operations.txt", TEXT)
    client = client_for(member)
    body = client.post("/v1/answer", {"query": QUESTION}, format="json").json()
    assert body["evidence"]["answer_status"] == "evidence_backed"
    run = AnswerRun.objects.get(pk=body["run_id"])
    return {"client": client, "body": body, "run": run, "conversation": run.conversation}


def endpoints(conversation_id: int) -> list[tuple[str, str, dict | None]]:
    base = f"/v1/conversations/{conversation_id}"
    return [
        ("get", base, None),
        ("get", f"{base}/export", None),
        ("get", f"{base}/shares", None),
        ("post", f"{base}/shares", {"username": "member"}),
        ("delete", f"{base}/shares/member", None),
        (
            "post",
            f"{base}/intents",
            {"run_id": "00000000-0000-0000-0000-000000000000", "space_id": 1},
        ),
    ]


def test_the_owner_lists_creates_and_reads_conversations(answered, member):
    client = answered["client"]
    listed = client.get("/v1/conversations").json()
    assert [c["id"] for c in listed["results"]] == [answered["conversation"].pk]
    assert listed["results"][0]["owned"] is True
    created = client.post("/v1/conversations", {"title": "Audit", "language": "de"}, format="json")
    assert created.status_code == 201 and created.json()["language"] == "de"
    detail = client.get(f"/v1/conversations/{answered['conversation'].pk}").json()
    roles = [(m["role"], m.get("state")) for m in detail["messages"]]
    assert roles == [("user", None), ("assistant", "sealed")]
    assert detail["messages"][1]["body"] == answered["body"]
    assert detail["messages"][1]["text"] == answered["body"]["answer"]["text"]


@pytest.mark.parametrize("who", ["other", "outsider"])
def test_another_user_and_an_outsider_get_404_on_every_conversation_endpoint(answered, space, who):
    user = make_user("other") if who == "other" else make_user("stranger")
    if who == "other":
        space_member_set(space=space, username="other", role="reader")  # sees the same space
    client = client_for(user)
    conversation = answered["conversation"].pk
    for method, path, body in [*endpoints(conversation), *endpoints(999999)]:
        response = getattr(client, method)(path, body, format="json")
        assert response.status_code == 404, (method, path, response.status_code)
        assert response.json()["error"]["code"] == "not_found"
    assert client.get("/v1/conversations").json()["results"] == []


@pytest.mark.parametrize(
    "bad",
    [
        {"title": ["x"]},
        {"language": "xx"},
        {"title": "t", "text": "x"},
        ["not", "an", "object"],
        {"title": "x" * 201},
    ],
)
def test_bad_conversation_bodies_are_typed_422s(member, bad):
    response = client_for(member).post("/v1/conversations", bad, format="json")
    assert response.status_code in (400, 422), response.content
    assert "error" in response.json()


def test_unsealed_prose_never_appears_in_detail_export_or_share(answered, member, outsider):
    """A message whose prose was never sealed (constructed here: no release) shows the
    localized notice in the conversation, its export and to a share recipient."""
    conversation = answered["conversation"]
    run = answered["run"]
    generation = run.generations.get()
    Message.objects.create(
        conversation=conversation,
        role="assistant",
        run=run,
        generation=generation,
        text="UNSEALED DRAFT PROSE",
    )
    client = answered["client"]
    detail = client.get(f"/v1/conversations/{conversation.pk}")
    exported = client.get(f"/v1/conversations/{conversation.pk}/export")
    markdown = client.get(f"/v1/conversations/{conversation.pk}/export", {"as": "markdown"})
    client.post(
        f"/v1/conversations/{conversation.pk}/shares", {"username": "outsider"}, format="json"
    )
    shared = client_for(outsider).get(f"/v1/conversations/{conversation.pk}")
    for response in (detail, exported, markdown, shared):
        assert response.status_code == 200
        assert "UNSEALED DRAFT PROSE" not in response.content.decode()
    notice = texts.regeneration_notice("en")
    states = [m.get("state") for m in detail.json()["messages"]]
    assert states == [None, "sealed", "unsealed"]
    assert detail.json()["messages"][2]["text"] == notice
    assert notice in markdown.content.decode()


def test_a_retried_answer_shows_the_notice_for_the_replaced_generation(answered, member):
    run = answered["run"]
    retried = answer_retry(user=member, run=run)
    messages = (
        answered["client"]
        .get(f"/v1/conversations/{answered['conversation'].pk}")
        .json()["messages"]
    )
    assistant = [m for m in messages if m["role"] == "assistant"]
    assert [(m["generation"], m["state"]) for m in assistant] == [(1, "superseded"), (2, "sealed")]
    assert assistant[0]["text"] == texts.regeneration_notice("en")
    assert assistant[1]["body"] == retried


def test_an_untouched_export_verifies_and_one_changed_character_is_reported(answered, tmp_path):
    client = answered["client"]
    export = client.get(f"/v1/conversations/{answered['conversation'].pk}/export").json()
    path = tmp_path / "export.json"
    path.write_text(json.dumps(export))
    out = StringIO()
    call_command("verify_export", str(path), stdout=out)
    assert "verified: 1 sealed answer" in out.getvalue()

    answer = next(m for m in export["messages"] if m.get("state") == "sealed")
    text = answer["body"]["answer"]["text"]
    answer["body"]["answer"]["text"] = text.replace("platform", "plAtform", 1)
    answer["text"] = answer["body"]["answer"]["text"]
    path.write_text(json.dumps(export))
    out, err = StringIO(), StringIO()
    with pytest.raises(SystemExit) as failed:
        call_command("verify_export", str(path), stdout=out, stderr=err)
    assert failed.value.code == 1
    assert "text_sha256 does not match release" in err.getvalue()


def test_verify_export_refuses_what_is_not_an_export(tmp_path):
    path = tmp_path / "junk.json"
    path.write_text("[1, 2")
    err = StringIO()
    with pytest.raises(SystemExit):
        call_command("verify_export", str(path), stderr=err)
    assert "not a koinon conversation export" in err.getvalue()


def test_a_share_recipient_without_access_to_a_cited_space_gets_the_access_failure(
    answered, space, outsider
):
    conversation = answered["conversation"]
    client = answered["client"]
    assert (
        client.post(
            f"/v1/conversations/{conversation.pk}/shares", {"username": "outsider"}, format="json"
        ).status_code
        == 201
    )
    shared = client_for(outsider).get(f"/v1/conversations/{conversation.pk}").json()
    answer = shared["messages"][1]
    assert shared["owned"] is False
    assert answer["state"] == "access_failure"
    assert answer["text"] == texts.explanation("access_failure", "en")
    assert TEXT not in json.dumps(shared)
    # The recipient reads, and that is all: no export, no shares, no new answers in it.
    outsider_client = client_for(outsider)
    assert outsider_client.get(f"/v1/conversations/{conversation.pk}/export").status_code == 404
    into = {"query": QUESTION, "conversation_id": conversation.pk}
    asked = outsider_client.post("/v1/answer", into, format="json")
    assert asked.status_code == 404
    # Given access to the space, the same share shows the sealed answer.
    space_member_set(space=space, username="outsider", role="reader")
    again = client_for(outsider).get(f"/v1/conversations/{conversation.pk}").json()
    assert again["messages"][1]["state"] == "sealed"
    assert again["messages"][1]["body"] == answered["body"]


def test_shares_are_unique_and_a_removed_share_reads_as_missing(answered, outsider):
    conversation = answered["conversation"]
    client = answered["client"]
    path = f"/v1/conversations/{conversation.pk}/shares"
    assert client.post(path, {"username": "outsider"}, format="json").status_code == 201
    assert client.post(path, {"username": "outsider"}, format="json").status_code == 409
    assert client.post(path, {"username": "nobody"}, format="json").status_code == 404
    assert client.post(path, {"username": "member"}, format="json").status_code == 404  # self
    assert [s["username"] for s in client.get(path).json()["results"]] == ["outsider"]
    assert client.delete(f"{path}/outsider").status_code == 204
    assert client_for(outsider).get(f"/v1/conversations/{conversation.pk}").status_code == 404


def test_an_intent_after_regeneration_is_refused_at_approval_and_a_fresh_one_is_accepted(
    answered, space, owner, member
):
    client = answered["client"]
    conversation, run = answered["conversation"], answered["run"]
    path = f"/v1/conversations/{conversation.pk}/intents"
    preview = client.post(
        path,
        {"run_id": str(run.pk), "space_id": space.pk, "title": "Service reviews"},
        format="json",
    )
    assert preview.status_code == 201, preview.content
    intent = preview.json()
    assert intent["text"] == answered["body"]["answer"]["text"]
    assert intent["capture"]["release_id"] == answered["body"]["release"]["id"]
    proposed = client.post(f"/v1/intents/{intent['id']}/proposal")
    assert proposed.status_code == 201
    proposal = KnowledgeProposal.objects.get(pk=proposed.json()["id"])
    assert proposal.origin == "conversation" and proposal.capture["generation"] == 1

    answer_retry(user=member, run=run)  # the conversation is regenerated
    from core.errors import ConflictError

    with pytest.raises(ConflictError) as refused:
        proposal_approve(proposal_id=proposal.pk, curator=owner)
    assert refused.value.detail.code == "capture_stale"
    proposal.refresh_from_db()
    assert proposal.status == "superseded"

    fresh = client.post(path, {"run_id": str(run.pk), "space_id": space.pk}, format="json").json()
    assert fresh["capture"]["generation"] == 2
    second = client.post(f"/v1/intents/{fresh['id']}/proposal").json()
    version = proposal_approve(proposal_id=second["id"], curator=owner)
    assert version.body == KnowledgeProposal.objects.get(pk=second["id"]).body


def test_an_intent_takes_no_text_from_the_client_and_needs_a_sealed_answer(answered, space):
    client = answered["client"]
    conversation, run = answered["conversation"], answered["run"]
    path = f"/v1/conversations/{conversation.pk}/intents"
    smuggled = client.post(
        path,
        {"run_id": str(run.pk), "space_id": space.pk, "text": "A saved payload"},
        format="json",
    )
    assert smuggled.status_code == 422
    assert "text" in smuggled.json()["error"]["fields"]
    hidden = space_create(name="Hidden", created_by=make_user("boss", staff=True))
    missing = client.post(path, {"run_id": str(run.pk), "space_id": hidden.pk}, format="json")
    assert missing.status_code == 404
    stale = client.post(path, {"run_id": str(run.pk), "space_id": space.pk}, format="json").json()
    client.post(f"/v1/intents/{stale['id']}/proposal")
    assert client.post(f"/v1/intents/{stale['id']}/proposal").status_code == 409


def test_a_reader_who_lost_the_space_cannot_capture_its_answer(answered, space, member):
    remove_perm("knowledge.view_space", member, space)
    response = answered["client"].post(
        f"/v1/conversations/{answered['conversation'].pk}/intents",
        {"run_id": str(answered["run"].pk), "space_id": space.pk},
        format="json",
    )
    assert response.status_code == 404


@pytest.mark.parametrize("name", ["a%00b", "%00", "x" * 400])
def test_a_share_name_no_user_can_have_is_404_not_an_error(answered, name):
    """Issue 27 (11): a NUL byte in the share's path was a 500."""
    conversation = answered["conversation"]
    response = answered["client"].delete(f"/v1/conversations/{conversation.pk}/shares/{name}")
    assert response.status_code == 404 and response.json()["error"]["code"] == "not_found"
    created = answered["client"].post(
        f"/v1/conversations/{conversation.pk}/shares", {"username": "a\x00b"}, format="json"
    )
    assert created.status_code == 422 and created.json()["error"]["fields"]["username"]


def test_the_markdown_export_renders_no_raw_html_of_questions_or_documents(space, owner, member):
    """Issue 27 (12): HTML in a question, a document title or a quote stays text."""
    text = "The night shift team owns the database backups.\n\n<script>alert(1)</script>\n"
    ingest(owner, space, "evil.txt", text, title="<img src=x onerror=alert(1)> Runbook")
    client = client_for(member)
    body = client.post(
        "/v1/answer", {"query": "Who owns the database <i>backups</i>?"}, format="json"
    ).json()
    assert body["answer"]["citations"], (body["evidence"], body["quality"])
    conversation = AnswerRun.objects.get(pk=body["run_id"]).conversation
    markdown = client.get(f"/v1/conversations/{conversation.pk}/export", {"as": "markdown"})
    exported = markdown.content.decode()
    assert "<" not in exported and ">" not in exported, exported
    assert "&lt;i&gt;backups&lt;/i&gt;" in exported  # the question
    assert "&lt;img src=x onerror=alert(1)&gt; Runbook" in exported  # the title, twice
    assert exported.count("&lt;img") == 2  # in the answer's source line and the citation


def test_the_markdown_export_keeps_http_links_and_no_other_link_target():
    """Issue 48 (9): `[x](javascript:…)` in a question, an answer or a title, or a reference
    definition to `data:`, renders as text in a CommonMark viewer; an https link stays."""
    from markdown_it import MarkdownIt

    from conversations.services import export_markdown

    export = {
        "conversation": {"title": "[t](javascript:alert(1))"},
        "messages": [
            {"role": "user", "text": "[q](javascript:alert(2)) or [ok](https://example.org/a)?"},
            {
                "role": "assistant",
                "text": "See [r].\n\n[r]: data:text/html,<b>x</b>\n\n![i](JavaScript:alert(3))",
                "body": {"answer": {"citations": [{"title": "[c]( vbscript:x) Runbook"}]}},
            },
        ],
    }
    exported = export_markdown(export)
    viewer = MarkdownIt("commonmark")
    viewer.validateLink = lambda url: True  # a viewer that links whatever it is given
    rendered = viewer.render(exported)
    assert rendered.count("<a ") == 1 and 'href="https://example.org/a"' in rendered
    assert "<img" not in rendered
    for scheme in ("javascript:", "data:", "vbscript:"):
        assert f'="{scheme}' not in rendered.lower()
    # The characters themselves are kept, as text.
    assert "(javascript:alert(2))" in rendered and "[t]" in rendered
