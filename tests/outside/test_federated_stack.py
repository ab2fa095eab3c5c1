"""Outside channels against a real koinon over HTTP (issue 50): the peer is the suite's
Daphne process serving koinon's own REST search (`federated_rag`) and its own MCP server
(`mcp_search`), whose permissions decide what a key sees. A strict answer requiring the
channel quotes the peer's passage, verified against the snapshot stored here; with a key
whose user lacks the peer's space it abstains. An export of a conversation whose answer
quotes a snapshot verifies."""

import json
from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command

from answers.models import AnswerRun
from core.services import api_key_create
from knowledge.services import space_create, space_member_set
from outside.models import Channel, ChannelKind, Snapshot
from outside.services import channel_save, space_channel_enable
from tests.answers.helpers import ask, ingest
from tests.helpers import client_for, make_user

pytestmark = pytest.mark.django_db(transaction=True)

QUESTION = "How long are contracts kept after they end?"
REQUIRED = {
    "mode": "strict",
    "allowed_tools": ["federated_rag"],
    "required_tools": ["federated_rag"],
}


@pytest.fixture
def peer_space(staff):
    """The peer's side: a space only its own people read, with a legal handbook."""
    legal = space_create(name="Legal department", created_by=staff)
    ingest(
        staff,
        legal,
        "contracts.md",
        "# Contracts\n\nContracts are kept for ten years after they end.\n",
    )
    return legal


def federated(space, owner, *, endpoint: str, key: str) -> Channel:
    root = get_user_model().objects.create_superuser(username="root", password="x-1", email="")
    channel = channel_save(
        user=root,
        channel=Channel(name="Legal koinon", kind=ChannelKind.FEDERATED_RAG, endpoint=endpoint),
        credential=key,
    )
    space_channel_enable(user=owner, space=space, channel=channel)
    return channel


def test_a_strict_answer_quotes_a_second_koinons_passage_from_its_snapshot(
    live_server_url, peer_space, space, owner, member
):
    lawyer = make_user("lawyer")
    space_member_set(space=peer_space, username=lawyer.username, role="reader")
    federated(space, owner, endpoint=live_server_url, key=api_key_create(user=lawyer).secret)
    body = ask(member, QUESTION, evidence_policy=REQUIRED)
    assert body["evidence"]["answer_status"] == "evidence_backed", body["evidence"]
    [citation] = body["answer"]["citations"]
    assert citation["quote"] == "Contracts are kept for ten years after they end."
    outside = citation["outside"]
    snapshot = Snapshot.objects.get(pk=outside["snapshot_id"], owner=member)
    assert outside["channel_kind"] == "federated_rag"
    # The peer's own ids and text hash, so the quote can be traced to the peer's receipt.
    peer_document = peer_space.documents.get()
    assert outside["remote_document_id"] == str(peer_document.pk)
    assert outside["remote_revision_id"] == str(peer_document.current_revision_id)
    assert outside["remote_passage_id"] and outside["remote_text_sha256"]
    # Quoted from the stored snapshot: a private document of the asker, not the peer's.
    assert citation["document_id"] == snapshot.document_id != peer_document.pk


def test_a_peer_key_whose_user_lacks_the_space_abstains(
    live_server_url, peer_space, space, owner, member
):
    stranger = make_user("stranger")
    federated(space, owner, endpoint=live_server_url, key=api_key_create(user=stranger).secret)
    body = ask(member, QUESTION, evidence_policy=REQUIRED)
    assert body["evidence"]["answer_status"] == "abstained"
    found = [o for o in body["evidence"]["outcomes"] if o["tool"] == "federated_rag"]
    assert found and all(o["code"] != "matched" for o in found)
    assert "ten years" not in body["answer"]["text"]
    assert not Snapshot.objects.exists()


def test_koinons_own_mcp_server_is_an_mcp_search_channel(
    live_server_url, peer_space, space, owner, member
):
    lawyer = make_user("lawyer")
    space_member_set(space=peer_space, username=lawyer.username, role="reader")
    root = get_user_model().objects.create_superuser(username="root", password="x-1", email="")
    channel = channel_save(
        user=root,
        channel=Channel(
            name="Legal MCP",
            kind=ChannelKind.MCP_SEARCH,
            endpoint=f"{live_server_url}/mcp",
            timeout_seconds=30,
        ),
        credential=api_key_create(user=lawyer).secret,
    )
    space_channel_enable(user=owner, space=space, channel=channel)
    required = {"mode": "strict", "allowed_tools": ["mcp_search"], "required_tools": ["mcp_search"]}
    body = ask(member, QUESTION, evidence_policy=required)
    assert body["evidence"]["answer_status"] == "evidence_backed", body["evidence"]
    outside = body["answer"]["citations"][0]["outside"]
    assert outside["channel_kind"] == "mcp_search"
    # koinon's MCP search result keeps the peer's ids, as its REST search does.
    assert outside["remote_document_id"] == str(peer_space.documents.get().pk)


def test_an_export_quoting_a_snapshot_verifies(
    live_server_url, peer_space, space, owner, member, tmp_path
):
    lawyer = make_user("lawyer")
    space_member_set(space=peer_space, username=lawyer.username, role="reader")
    federated(space, owner, endpoint=live_server_url, key=api_key_create(user=lawyer).secret)
    body = ask(member, QUESTION, evidence_policy=REQUIRED)
    assert body["answer"]["citations"][0]["outside"]
    conversation = AnswerRun.objects.get(pk=body["run_id"]).conversation_id
    export = client_for(member).get(f"/v1/conversations/{conversation}/export").json()
    path = tmp_path / "export.json"
    path.write_text(json.dumps(export))
    out = StringIO()
    call_command("verify_export", str(path), stdout=out)
    assert "verified: 1 sealed answer" in out.getvalue()
