"""Curated knowledge: proposals over REST, review by curators in the real admin pages."""

import time

import pytest
from django.test import Client

from knowledge.models import (
    Document,
    DocumentRevision,
    KnowledgeEntry,
    KnowledgeProposal,
    KnowledgeVersion,
    Passage,
)
from knowledge.retrieval import retrieve
from knowledge.scope import access_scope_build
from knowledge.services import space_member_set
from tests.core.test_api_keys import assert_error
from tests.helpers import client_for, make_user

pytestmark = pytest.mark.django_db

BODY = "Expense reports are due on the fifth working day of each month."


@pytest.fixture
def curator(space):
    user = make_user("curator", staff=True)  # admin needs staff; approval needs curate_space
    space_member_set(space=space, username="curator", role="curator")
    return user


@pytest.fixture
def bystander(space):
    """Staff, but not a curator of the space: may open admin, may not review."""
    return make_user("bystander", staff=True)


def propose(user, space, **fields):
    return client_for(user).post(
        "/v1/knowledge/proposals",
        {"space": space.pk, "body": BODY, "title": "Expenses", **fields},
        format="json",
    )


def admin_client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def admin_decide(user, proposal_id: int, decision: str, note: str = ""):
    return admin_client(user).post(
        f"/admin/knowledge/knowledgeproposal/{proposal_id}/change/",
        {decision: "1", "review_note": note},
    )


def test_a_reader_proposes_and_it_stays_pending(space, member):
    response = propose(member, space, reason="Finance asked")
    assert response.status_code == 201
    body = response.json()
    assert body["status"] == "pending" and body["entry"] is None and body["body"] == BODY
    assert not KnowledgeVersion.objects.exists()
    listed = client_for(member).get("/v1/knowledge/proposals").json()["results"]
    assert [row["id"] for row in listed] == [body["id"]]


def test_nothing_in_the_rest_api_approves(space, member, owner):
    proposal_id = propose(member, space).json()["id"]
    client = client_for(owner)  # even a curator
    for method in ("put", "patch", "post", "delete"):
        response = getattr(client, method)(
            f"/v1/knowledge/proposals/{proposal_id}", {"status": "approved"}, format="json"
        )
        assert response.status_code == 405
    assert KnowledgeProposal.objects.get(pk=proposal_id).status == "pending"


def test_proposal_bad_input(space, member, outsider):
    assert_error(propose(outsider, space), 404, "not_found")
    assert_error(propose(member, space, body="  \n "), 422, "no_text")
    error = assert_error(propose(member, space, title=""), 422, "invalid")
    assert "title" in error["fields"]
    assert_error(propose(member, space, entry=999999), 404, "not_found")
    assert not KnowledgeProposal.objects.exists()


def test_a_curator_approves_in_admin_and_a_version_is_indexed(space, member, curator):
    proposal_id = propose(member, space).json()["id"]
    response = admin_decide(curator, proposal_id, "_approve", "Checked with finance")
    assert response.status_code == 302

    proposal = KnowledgeProposal.objects.get(pk=proposal_id)
    assert (proposal.status, proposal.reviewer, proposal.review_note) == (
        "approved",
        curator,
        "Checked with finance",
    )
    version = proposal.approved_version
    assert (version.number, version.body, version.approved_by) == (1, BODY, curator)
    entry = version.entry
    assert entry.current_version == version and entry.title == "Expenses"
    passages = list(Passage.objects.filter(revision=version.revision))
    assert passages and all(version.body[p.char_start : p.char_end] == p.text for p in passages)
    assert entry.document.current_revision == version.revision
    found = retrieve(
        scope=access_scope_build(user=member),
        query="When are expense reports due?",
        tools=("keyword_search",),
    )
    assert found.candidates[0].revision_id == version.revision_id


def test_the_admin_page_shows_a_diff_against_the_current_version(space, member, curator):
    admin_decide(curator, propose(member, space).json()["id"], "_approve")
    entry = KnowledgeEntry.objects.get()
    proposal_id = propose(
        member, space, entry=entry.pk, body="Expense reports are due on the 10th."
    )
    page = admin_client(curator).get(
        f"/admin/knowledge/knowledgeproposal/{proposal_id.json()['id']}/change/"
    )
    html = page.content.decode()
    assert page.status_code == 200
    assert "-Expense reports are due on the fifth working day" in html
    assert "+Expense reports are due on the 10th." in html
    assert 'name="_approve"' in html and 'name="_reject"' in html


def test_a_non_curator_cannot_approve_in_admin(space, member, bystander, owner):
    proposal_id = propose(member, space).json()["id"]
    page = admin_client(bystander).get(f"/admin/knowledge/knowledgeproposal/{proposal_id}/change/")
    assert page.status_code in {302, 403, 404}  # no review page for them
    changelist = admin_client(bystander).get("/admin/knowledge/knowledgeproposal/")
    assert changelist.status_code == 200 and "Expenses" not in changelist.content.decode()

    response = admin_decide(bystander, proposal_id, "_approve")
    assert response.status_code in {302, 403, 404}
    admin_client(bystander).post(
        "/admin/knowledge/knowledgeproposal/",
        {"action": "approve_selected", "_selected_action": [proposal_id]},
    )
    assert KnowledgeProposal.objects.get(pk=proposal_id).status == "pending"
    assert not KnowledgeVersion.objects.exists()
    # A curator who is not staff cannot reach admin at all.
    assert admin_client(owner).get("/admin/knowledge/knowledgeproposal/").status_code == 302


def test_a_proposal_against_an_outdated_version_is_superseded(space, member, curator):
    admin_decide(curator, propose(member, space).json()["id"], "_approve")
    entry = KnowledgeEntry.objects.get()
    first = propose(member, space, entry=entry.pk, body="Due on the 10th.").json()["id"]
    second = propose(member, space, entry=entry.pk, body="Due on the 15th.").json()["id"]
    admin_decide(curator, first, "_approve")
    response = admin_client(curator).post(
        f"/admin/knowledge/knowledgeproposal/{second}/change/", {"_approve": "1"}, follow=True
    )
    assert "newer version" in response.content.decode()
    assert KnowledgeProposal.objects.get(pk=second).status == "superseded"
    entry.refresh_from_db()
    assert entry.current_version.number == 2 and entry.current_version.body == "Due on the 10th."
    # History is kept: version 1 is still readable.
    assert KnowledgeVersion.objects.get(entry=entry, number=1).body == BODY


def test_a_curator_rejects_with_a_note(space, member, curator):
    proposal_id = propose(member, space).json()["id"]
    admin_decide(curator, proposal_id, "_reject", "Not our policy")
    proposal = KnowledgeProposal.objects.get(pk=proposal_id)
    assert (proposal.status, proposal.review_note) == ("rejected", "Not our policy")
    assert not KnowledgeEntry.objects.exists()
    again = admin_client(curator).post(
        f"/admin/knowledge/knowledgeproposal/{proposal_id}/change/", {"_approve": "1"}, follow=True
    )
    assert "already rejected" in again.content.decode()


@pytest.mark.parametrize("decision", ["_reject", "_approve"])
def test_a_review_note_postgresql_cannot_store_is_refused_not_a_500(
    space, member, curator, decision
):
    """Issue 48 (4): the admin's decision reads its note from the raw form; a NUL in it is
    the shared text check's typed refusal, and the proposal stays pending."""
    proposal_id = propose(member, space).json()["id"]
    response = admin_client(curator).post(
        f"/admin/knowledge/knowledgeproposal/{proposal_id}/change/",
        {decision: "1", "review_note": "fine\x00"},
        follow=True,
    )
    assert response.status_code == 200
    assert "review_note cannot be used" in response.content.decode()
    assert KnowledgeProposal.objects.get(pk=proposal_id).status == "pending"


def test_approval_is_all_or_nothing(space, member, curator, monkeypatch):
    import knowledge.curation

    def broken(**kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(knowledge.curation, "passages_create", broken)
    proposal_id = propose(member, space).json()["id"]
    with pytest.raises(RuntimeError):
        admin_decide(curator, proposal_id, "_approve")
    assert KnowledgeProposal.objects.get(pk=proposal_id).status == "pending"
    assert not KnowledgeEntry.objects.exists()
    assert not KnowledgeVersion.objects.exists()
    assert not Document.objects.exists() and not DocumentRevision.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_approved_passages_are_embedded_by_the_worker(celery_worker, space, member, curator):
    admin_decide(curator, propose(member, space).json()["id"], "_approve")
    version = KnowledgeVersion.objects.get()
    deadline = time.monotonic() + 60
    while Passage.objects.filter(revision=version.revision, embedding_status="pending").exists():
        assert time.monotonic() < deadline, "passages were not embedded"
        time.sleep(0.2)
    assert set(
        Passage.objects.filter(revision=version.revision).values_list("embedding_status", flat=True)
    ) == {"embedded"}
    found = retrieve(
        scope=access_scope_build(user=member),
        query="deadline for expense reports",
        tools=("vector_search",),
    )
    assert found.candidates and found.candidates[0].revision_id == version.revision_id
