"""Memory in scope (issue 26): an entry steers only the searches it is about, in the scope
it came from; the relevance threshold is the one measured on the labelled set."""

import json

import pytest

from answers.pipeline.vocabulary import Plan
from audit.services import audit_summary
from knowledge.services import space_create, space_member_set
from memory.relevance_set import PAIRS, set_weights
from memory.services import MIN_SHARED_STEMS, RELEVANCE_THRESHOLD, memory_relevance
from tests.answers.helpers import OPERATIONS, ingest
from tests.helpers import client_for

pytestmark = pytest.mark.django_db

REVIEWS = "Who owns service reviews?"
THREADS = "Which platform is affected when the parser is used from several threads?"


@pytest.fixture
def two_spaces(space, staff, owner, member):
    """Space A (the operations handbook) and space B (a C library's notes)."""
    ingest(owner, space, "operations.md", OPERATIONS)
    library = space_create(name="Parser library", created_by=staff)
    space_member_set(space=library, username=owner.username, role="curator")
    space_member_set(space=library, username=member.username, role="reader")
    notes = "# Threads\n\nThe parser is thread safe on every platform since version 2.\n"
    ingest(owner, library, "threads.md", notes)
    return space, library


def plan_of(client, query: str, **fields) -> dict:
    body = client.post("/v1/answer", {"query": query, **fields}, format="json").json()
    return audit_summary(body["run_id"])["plan"]


def remember(client, query: str, **fields) -> dict:
    answered = client.post("/v1/answer", {"query": query, **fields}, format="json").json()
    assert answered["evidence"]["answer_status"] == "evidence_backed", answered
    entry = client.post("/v1/memory", {"kind": "fact", "run_id": answered["run_id"]}, format="json")
    assert entry.status_code == 201, entry.content
    return entry.json()


def test_a_fact_from_space_a_never_steers_a_search_limited_to_space_b(two_spaces, member):
    a, b = two_spaces
    client = client_for(member)
    fact = remember(client, REVIEWS, space_ids=[a.pk])  # "The platform operations team …"

    # About the question and inside the run's scope: it steers.
    assert [m["id"] for m in plan_of(client, "Which team owns service reviews?")["memory"]] == [
        fact["id"]
    ]
    # Limited to space B, the same question is not steered by a fact from A …
    assert plan_of(client, "Which team owns service reviews?", space_ids=[b.pk])["memory"] == []
    # … nor is a question on another topic that shares one word with it ("platform"),
    # even when the run searches every space.
    assert plan_of(client, THREADS)["memory"] == []
    steered = plan_of(client, THREADS, space_ids=[b.pk])
    assert steered["memory"] == [] and "operations" not in steered["queries"][0]["text"]


def test_a_correction_steers_only_the_space_it_was_made_in(two_spaces, member):
    a, b = two_spaces
    client = client_for(member)
    made_in_a = client.post(
        "/v1/memory",
        {
            "kind": "correction",
            "space_id": a.pk,
            "text": "Service reviews are owned by the platform operations team",
        },
        format="json",
    )
    assert made_in_a.status_code == 201, made_in_a.content
    entry = made_in_a.json()
    assert (entry["scope"], entry["space"]) == ("personal", a.pk)

    in_a = plan_of(client, REVIEWS, space_ids=[a.pk])
    assert [m["id"] for m in in_a["memory"]] == [entry["id"]]
    assert in_a["memory"][0]["why"]["scope"] == "made in a space the run searches"
    assert plan_of(client, REVIEWS, space_ids=[b.pk])["memory"] == []
    assert [m["id"] for m in plan_of(client, REVIEWS)["memory"]] == [entry["id"]]  # A is searched


def test_a_personal_correction_for_no_space_steers_only_runs_over_every_space(two_spaces, member):
    a, _ = two_spaces
    client = client_for(member)
    entry = client.post(
        "/v1/memory",
        {"kind": "correction", "text": "Service reviews are owned by the platform operations team"},
        format="json",
    ).json()
    assert entry["space"] is None
    assert [m["id"] for m in plan_of(client, REVIEWS)["memory"]] == [entry["id"]]
    assert plan_of(client, REVIEWS, space_ids=[a.pk])["memory"] == []


def test_a_correction_for_a_space_the_user_cannot_see_is_404(two_spaces, outsider):
    a, _ = two_spaces
    response = client_for(outsider).post(
        "/v1/memory",
        {"kind": "correction", "text": "Service reviews", "space_id": a.pk},
        format="json",
    )
    assert response.status_code == 404 and response.json()["error"]["code"] == "not_found"


def test_the_shipped_relevance_threshold_separates_the_labelled_set():
    weights = set_weights()
    wrong = [
        (part, text)
        for part, text, label in PAIRS
        if memory_relevance(part, text, weights).relevant != label
    ]
    assert wrong == []
    # One shared stem is never enough, whatever its weight.
    single = memory_relevance("Which platform is affected?", "The platform team.", weights)
    assert single.shared == ("platform",) and not single.relevant
    assert MIN_SHARED_STEMS == 2 and 0 < RELEVANCE_THRESHOLD < 1


def test_memory_words_steer_the_search_and_are_recorded_by_entry_id():
    question = "How long are invoices retained?"
    entry = {
        "id": 7,
        "kind": "correction",
        "scope": "personal",
        "parts": [0],
        "words": ["accounting", "policy"],
        "why": {"scope": "…"},
    }
    plan = Plan(question, [question], memory=[entry], question=question)
    assert plan.queries() == [(0, f"{question} accounting policy", "memory")]
    assert plan.part_texts(0) == [question]  # the judge reads the part's own words
    stored = plan.as_dict()
    assert stored["queries"] == [{"part": 0, "text": question, "origin": "memory", "memory": [7]}]
    assert "accounting" not in json.dumps(stored)
