"""Memory (issue 14): corrections steer the planner and revoking one stops that; only
sealed answers are remembered; memory never answers by itself; each used entry is
rechecked before sealing; project memory is opt-in by a curator; 404 for everyone else."""

import json

import pytest
from guardian.shortcuts import remove_perm

from audit.services import audit_summary
from memory.models import MemoryEntry
from tests.answers.helpers import OPERATIONS, ingest
from tests.answers.providers import ScriptedProvider
from tests.helpers import client_for, make_user

pytestmark = pytest.mark.django_db

RETENTION = "How long are invoices retained?"
CORRECTION = "Invoices are retained as the accounting policy says, not the handbook"


@pytest.fixture
def corpus(space, owner):
    ingest(owner, space, "operations.md", OPERATIONS)
    policy = "# Accounting policy\n\n## Retention\n\nInvoices are retained for ten years.\n"
    ingest(owner, space, "accounting.md", policy)


def plan_of(client, query: str, **fields) -> tuple[dict, dict]:
    body = client.post("/v1/answer", {"query": query, **fields}, format="json").json()
    audit = audit_summary(body["run_id"])
    return audit["plan"], {"memories_used": audit["memories_used"], "body": body}


def test_a_correction_changes_the_next_plan_and_revoking_it_stops_that(corpus, member):
    client = client_for(member)
    before, _ = plan_of(client, RETENTION)
    created = client.post("/v1/memory", {"kind": "correction", "text": CORRECTION}, format="json")
    assert created.status_code == 201, created.content
    entry = created.json()
    assert entry["origin"] == {"type": "correction"} and entry["scope"] == "personal"

    steered, seen = plan_of(client, RETENTION)
    # The part stays the question's own words (what is judged); the search gains the
    # entry's words, and the plan, audit and receipt say which entry steered it and why.
    assert steered["searches"] == before["searches"] == [RETENTION]
    # Memory's words are recorded by entry id, never as text (they may come from a quote).
    [search] = steered["queries"]
    assert search == {"part": 0, "text": RETENTION, "origin": "memory", "memory": [entry["id"]]}
    assert "accounting" not in json.dumps(steered)
    [used] = steered["memory"]
    assert (used["id"], used["kind"], used["scope"], used["parts"]) == (
        entry["id"],
        "correction",
        "personal",
        [0],
    )
    assert set(used["why"]["shared"]) == {"invoic", "retain"}
    assert "every space" in used["why"]["scope"]
    assert seen["memories_used"] == steered["memory"]  # listed in the audit
    assert seen["body"]["evidence"]["answer_status"] == "evidence_backed"
    receipt = seen["body"]["release"]["searched"]
    assert receipt["memory"][0]["id"] == entry["id"] and receipt["memory"][0]["parts"] == [0]
    assert receipt["searches"] == [search]

    assert client.delete(f"/v1/memory/{entry['id']}").json()["revoked_at"] is not None
    after, seen = plan_of(client, RETENTION)
    assert after["queries"] == before["queries"] and after["memory"] == []
    assert seen["memories_used"] == []
    assert seen["body"]["release"]["searched"] == {"searched_as": "", "searches": [], "memory": []}


def test_an_explicit_evidence_policy_disables_memory(corpus, member):
    client = client_for(member)
    client.post("/v1/memory", {"kind": "correction", "text": CORRECTION}, format="json")
    policy = {"mode": "auto", "allowed_tools": ["keyword_search", "vector_search"]}
    plan, _ = plan_of(client, RETENTION, evidence_policy=policy)
    assert plan["memory"] == []


def test_an_unrelated_correction_is_not_used(corpus, member):
    client = client_for(member)
    client.post("/v1/memory", {"kind": "correction", "text": "Backups run at night"}, format="json")
    plan, _ = plan_of(client, RETENTION)
    assert plan["memory"] == []


def test_only_a_sealed_answer_is_remembered_and_it_never_answers_by_itself(
    corpus, space, owner, member
):
    client = client_for(member)
    refused = client.post(
        "/v1/answer", {"query": "What is the moon made of?"}, format="json"
    ).json()
    not_sealed = client.post(
        "/v1/memory", {"kind": "fact", "run_id": refused["run_id"]}, format="json"
    )
    assert not_sealed.status_code == 409
    assert not_sealed.json()["error"]["code"] == "not_sealed"

    answered = client.post("/v1/answer", {"query": RETENTION}, format="json").json()
    fact = client.post(
        "/v1/memory", {"kind": "fact", "run_id": answered["run_id"]}, format="json"
    ).json()
    assert fact["origin"]["release_id"] == answered["release"]["id"]
    assert "Invoices are retained for ten years." in fact["text"]
    assert fact["sources"] == answered["evidence"]["sources"]

    # The remembered answer steers the search, but the answer comes from a fresh read:
    # with the source gone, nothing is answered from memory.
    remove_perm("knowledge.view_space", member, space)
    plan, seen = plan_of(client, RETENTION)
    assert plan["memory"] == []  # its source is no longer visible: not used
    assert seen["body"]["evidence"]["answer_status"] == "abstained"
    assert "ten years" not in seen["body"]["answer"]["text"]


def test_an_entry_revoked_before_sealing_fails_the_recheck(corpus, member):
    from answers.pipeline.lifecycle import answer_create
    from answers.pipeline.request import answer_request_parse

    client = client_for(member)
    entry = client.post(
        "/v1/memory", {"kind": "correction", "text": CORRECTION}, format="json"
    ).json()

    def select(candidates):
        quote = next(c for c in candidates if "retained for ten years" in c.text)
        return {"facts": [{"fact_id": quote.fact_id}]}

    def revoke(attempt):
        MemoryEntry.objects.filter(pk=entry["id"]).update(revoked_at="2026-01-01T00:00:00Z")

    body = answer_create(
        user=member,
        request=answer_request_parse({"query": RETENTION}),
        provider=ScriptedProvider([select], on_select=revoke),
    )
    assert body["evidence"]["answer_status"] == "abstained"
    assert "access_denied" in body["quality"]["issues"]


def test_project_memory_is_opt_in_by_a_curator_and_serves_the_space(corpus, space, owner, member):
    reader, curator = client_for(member), client_for(owner)
    project = {"kind": "correction", "text": CORRECTION, "scope": "project", "space_id": space.pk}
    off = reader.post("/v1/memory", project, format="json")
    assert off.status_code == 409 and off.json()["error"]["code"] == "project_memory_off"
    path = f"/v1/spaces/{space.pk}/project-memory"
    assert reader.put(path, {"enabled": True}, format="json").status_code == 403
    assert curator.put(path, {"enabled": True}, format="json").json()["enabled"] is True
    entry = reader.post("/v1/memory", project, format="json").json()
    # Another reader of the space is steered by it.
    other = make_user("other")
    from knowledge.services import space_member_set

    space_member_set(space=space, username="other", role="reader")
    plan, _ = plan_of(client_for(other), RETENTION)
    assert [m["id"] for m in plan["memory"]] == [entry["id"]]
    # The curator sees and revokes it; the other reader cannot even see it.
    assert client_for(other).get(f"/v1/memory/{entry['id']}").status_code == 404
    assert entry["id"] in [e["id"] for e in curator.get("/v1/memory").json()["results"]]
    assert curator.delete(f"/v1/memory/{entry['id']}").status_code == 200
    plan, _ = plan_of(client_for(other), RETENTION)
    assert plan["memory"] == []


@pytest.mark.parametrize("who", ["other", "outsider"])
def test_memory_entries_are_404_for_anyone_but_their_owner(corpus, space, member, who):
    entry = (
        client_for(member)
        .post("/v1/memory", {"kind": "correction", "text": CORRECTION}, format="json")
        .json()
    )
    user = make_user(who)
    if who == "other":
        from knowledge.services import space_member_set

        space_member_set(space=space, username=who, role="reader")
    client = client_for(user)
    assert client.get(f"/v1/memory/{entry['id']}").status_code == 404
    assert client.delete(f"/v1/memory/{entry['id']}").status_code == 404
    assert client.get("/v1/memory").json()["results"] == []
    run_id = (
        client_for(member).post("/v1/answer", {"query": RETENTION}, format="json").json()["run_id"]
    )
    assert (
        client.post("/v1/memory", {"kind": "fact", "run_id": run_id}, format="json").status_code
        == 404
    )
    assert client.get(f"/v1/spaces/{space.pk}/project-memory").status_code == (
        200 if who == "other" else 404
    )
    assert MemoryEntry.objects.get(pk=entry["id"]).revoked_at is None


@pytest.mark.parametrize(
    "bad",
    [
        {"kind": "correction"},
        {"kind": "fact"},
        {"kind": "wish", "text": "x"},
        {"kind": "correction", "text": "   "},
        {"kind": "correction", "text": "x" * 2001},
        {"kind": "correction", "text": "retention", "scope": "personal", "space_id": 1},
        {"kind": "correction", "text": "retention", "scope": "project"},
        {"kind": "fact", "run_id": "not-a-uuid"},
        {"kind": "correction", "text": "retention", "extra": True},
    ],
)
def test_bad_memory_bodies_are_typed_errors(member, bad):
    response = client_for(member).post("/v1/memory", bad, format="json")
    assert response.status_code in (400, 404, 422), response.content
    assert "error" in response.json()


def test_a_remembered_quote_is_not_served_after_its_source_is_lost(corpus, space, member):
    """Issue 27 (2): the list, the entry and the chat page show the access-failure text."""
    from django.test import Client

    from answers.pipeline.texts import explanation

    client = client_for(member)
    answered = client.post("/v1/answer", {"query": RETENTION}, format="json").json()
    fact = client.post(
        "/v1/memory", {"kind": "fact", "run_id": answered["run_id"]}, format="json"
    ).json()
    assert "ten years" in client.get(f"/v1/memory/{fact['id']}").json()["text"]

    remove_perm("knowledge.view_space", member, space)
    entry = client.get(f"/v1/memory/{fact['id']}").json()
    listed = client.get("/v1/memory").json()["results"]
    page = Client()
    page.force_login(member)
    html = page.get("/memory/").content.decode()
    for shown in (entry, *listed):
        assert shown["text"] == explanation("access_failure", "en") and shown["sources"] == []
    assert "ten years" not in json.dumps([entry, listed]) and "ten years" not in html
    assert "ten years" in MemoryEntry.objects.get(pk=fact["id"]).text  # kept, not served
