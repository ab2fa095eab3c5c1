"""Issue 27 (1, 2): a publication intent carries sealed text only into the space its
sources are in, and only while its author may still see them — at preview, at proposal,
at approval, and when the intent is read."""

import pytest
from django.contrib.auth import get_user_model
from guardian.shortcuts import remove_perm

from answers.models import AnswerRun
from answers.pipeline import texts
from conversations.models import PublicationIntent
from core.errors import ConflictError
from knowledge.curation import proposal_approve
from knowledge.models import KnowledgeProposal
from knowledge.services import space_create, space_member_set
from tests.answers.helpers import ingest
from tests.helpers import client_for, make_user

pytestmark = pytest.mark.django_db

TEXT = "The platform operations team owns service reviews."
QUESTION = "Who owns service reviews?"
ACCESS_FAILURE = texts.explanation("access_failure", "en")


@pytest.fixture
def spaces(space, staff, owner, member):
    """Space A (the fixture's, member reads it) and space G: member, owner and a G-only
    reader read it."""
    general = space_create(name="General", created_by=staff)
    space_member_set(space=general, username=owner.username, role="curator")
    space_member_set(space=general, username=member.username, role="reader")
    make_user("gonly")
    space_member_set(space=general, username="gonly", role="reader")
    return space, general


@pytest.fixture
def answered(spaces, owner, member):
    ingest(owner, spaces[0], "operations.txt", TEXT)
    client = client_for(member)
    body = client.post("/v1/answer", {"query": QUESTION}, format="json").json()
    assert body["evidence"]["answer_status"] == "evidence_backed"
    run = AnswerRun.objects.get(pk=body["run_id"])
    return {"client": client, "body": body, "run": run}


def _preview(answered, space):
    conversation = answered["run"].conversation
    return answered["client"].post(
        f"/v1/conversations/{conversation.pk}/intents",
        {"run_id": str(answered["run"].pk), "space_id": space.pk},
        format="json",
    )


def test_an_answer_quoting_space_a_cannot_be_previewed_for_space_g(answered, spaces):
    refused = _preview(answered, spaces[1])
    assert refused.status_code == 422, refused.content
    assert refused.json()["error"]["code"] == "sources_outside_space"
    assert PublicationIntent.objects.count() == 0
    gonly = client_for(get_user_model().objects.get(username="gonly"))
    assert gonly.get("/v1/knowledge/proposals").json()["results"] == []
    assert _preview(answered, spaces[0]).status_code == 201  # its own space is fine


def test_an_intent_whose_author_lost_a_source_shows_the_access_failure_and_cannot_be_proposed(
    answered, spaces, member
):
    """The reviewed attack: an intent aimed at G from an answer quoting A (made before
    previews checked spaces), then the author loses A."""
    a, g = spaces
    preview = _preview(answered, a).json()
    PublicationIntent.objects.filter(pk=preview["id"]).update(space=g)
    client = answered["client"]
    assert (
        client.get(f"/v1/intents/{preview['id']}").json()["text"]
        == answered["body"]["answer"]["text"]
    )
    refused = client.post(f"/v1/intents/{preview['id']}/proposal")
    assert refused.status_code == 422
    assert refused.json()["error"]["code"] == "sources_outside_space"

    remove_perm("knowledge.view_space", member, a)
    shown = client.get(f"/v1/intents/{preview['id']}")
    assert shown.status_code == 200
    assert shown.json()["text"] == ACCESS_FAILURE
    assert TEXT not in str(shown.json())
    refused = client.post(f"/v1/intents/{preview['id']}/proposal")
    assert refused.status_code == 409
    assert refused.json()["error"]["code"] == "sources_unavailable"
    assert KnowledgeProposal.objects.count() == 0
    gonly = client_for(get_user_model().objects.get(username="gonly"))
    assert TEXT not in str(gonly.get("/v1/knowledge/proposals").json())


def test_a_proposal_whose_author_lost_a_source_is_refused_at_approval(
    answered, spaces, owner, member
):
    a, _ = spaces
    intent = _preview(answered, a).json()
    proposed = answered["client"].post(f"/v1/intents/{intent['id']}/proposal")
    assert proposed.status_code == 201
    remove_perm("knowledge.view_space", member, a)
    with pytest.raises(ConflictError) as refused:
        proposal_approve(proposal_id=proposed.json()["id"], curator=owner)
    assert refused.value.detail.code == "sources_unavailable"
    proposal = KnowledgeProposal.objects.get(pk=proposed.json()["id"])
    assert proposal.status == "superseded" and proposal.approved_version is None


def test_a_proposal_whose_author_keeps_access_is_approved(answered, spaces, owner):
    intent = _preview(answered, spaces[0]).json()
    proposed = answered["client"].post(f"/v1/intents/{intent['id']}/proposal").json()
    version = proposal_approve(proposal_id=proposed["id"], curator=owner)
    assert version.body == answered["body"]["answer"]["text"]
