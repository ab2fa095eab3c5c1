import pytest

from knowledge.retrieval import retrieve
from knowledge.scope import access_scope_build
from knowledge.services import space_create, space_member_set
from tests.helpers import client_for, make_user
from tests.knowledge.test_documents import POLICY, upload, wait_for_extraction

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def corpus(celery_worker, space, owner):
    client = client_for(owner)
    revisions = [
        upload(client, "policy.md", POLICY.encode(), space=space.pk).json()["revision"],
        upload(
            client,
            "travel.txt",
            b"Economy class is used for flights shorter than six hours.",
            space=space.pk,
        ).json()["revision"],
    ]
    for revision in revisions:
        wait_for_extraction(revision)
    return space


def outcome_codes(result) -> dict[str, str]:
    return {outcome.tool: outcome.code for outcome in result.outcomes}


def test_hybrid_search_finds_the_passage_with_both_tools(corpus, member):
    result = retrieve(scope=access_scope_build(user=member), query="Who owns service reviews?")
    assert outcome_codes(result) == {"vector_search": "matched", "keyword_search": "matched"}
    best = result.candidates[0]
    assert "owns service reviews" in best.text
    assert set(best.contributions) == {"vector_search", "keyword_search"}
    assert best.contributions["keyword_search"]["rank"] >= 1
    assert best.char_end > best.char_start


def test_a_reader_of_another_space_finds_nothing(corpus, staff):
    stranger = make_user("stranger")
    other = space_create(name="Other", created_by=staff)
    space_member_set(space=other, username="stranger", role="reader")
    result = retrieve(scope=access_scope_build(user=stranger), query="Who owns service reviews?")
    assert result.candidates == []
    assert outcome_codes(result) == {
        "vector_search": "empty_corpus",
        "keyword_search": "empty_corpus",
    }
    # Asking for the hidden space by id changes nothing: hidden looks like none.
    result = retrieve(
        scope=access_scope_build(user=stranger, space_ids=[corpus.pk]), query="service reviews"
    )
    assert outcome_codes(result)["keyword_search"] == "empty_corpus"


def test_an_unrelated_question_is_no_relevant_hit(corpus, member):
    result = retrieve(
        scope=access_scope_build(user=member),
        query="zygomorphic xylophone",
        tools=("keyword_search",),
    )
    assert outcome_codes(result) == {"keyword_search": "no_relevant_hit"}
    assert result.candidates == []


def test_a_private_file_is_found_only_by_its_owner_and_only_when_selected(
    celery_worker, space, member, owner
):
    response = upload(
        client_for(member),
        "salary.txt",
        b"My salary review is scheduled for April.",
        private="true",
    )
    document_id = response.json()["id"]
    wait_for_extraction(response.json()["revision"])
    query = "When is the salary review?"
    assert retrieve(scope=access_scope_build(user=member), query=query).candidates == []
    selected = retrieve(
        scope=access_scope_build(user=member, selected_sources=[document_id]), query=query
    )
    assert selected.candidates and selected.candidates[0].document_id == document_id
    other = retrieve(
        scope=access_scope_build(user=owner, selected_sources=[document_id]), query=query
    )
    assert other.candidates == []


def test_the_search_api_labels_results_unverified(corpus, member):
    response = client_for(member).get(
        "/v1/search", {"q": "service reviews", "tools": "keyword_search"}
    )
    assert response.status_code == 200
    body = response.json()
    assert body["label"] == "unverified"
    assert body["outcomes"][0]["code"] == "matched"
    assert "service reviews" in body["results"][0]["text"]


def test_the_search_api_rejects_unknown_tools_and_empty_queries(member):
    client = client_for(member)
    bad_tool = client.get("/v1/search", {"q": "x", "tools": "web_search"})
    assert bad_tool.status_code == 422 and "tools" in bad_tool.json()["error"]["fields"]
    empty = client.get("/v1/search", {"q": ""})
    assert empty.status_code == 422 and "q" in empty.json()["error"]["fields"]


def test_a_deactivated_reader_finds_nothing_through_either_channel(corpus, member):
    member.is_active = False  # no space is visible: the scope compiles to nothing at all
    result = retrieve(scope=access_scope_build(user=member), query="Who owns service reviews?")
    assert result.candidates == []
    assert outcome_codes(result) == {
        "vector_search": "empty_corpus",
        "keyword_search": "empty_corpus",
    }
