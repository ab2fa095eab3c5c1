"""Evidence policy matrix (SPEC §5), each rule against real retrieval and datasets."""

import pytest

from answers.pipeline.texts import explanation
from datasets.services import dataset_upload
from knowledge.embeddings import clear_embedding_caches
from knowledge.services import space_create, space_member_set
from tests.answers.helpers import ask
from tests.core.test_api_keys import assert_error
from tests.helpers import client_for
from tests.services import free_port

pytestmark = pytest.mark.django_db

OWNERS = "Who owns service reviews?"


def outcome(body: dict, tool: str) -> tuple[str, str]:
    found = [(o["state"], o["code"]) for o in body["evidence"]["outcomes"] if o["tool"] == tool]
    assert found, f"no outcome for {tool}"
    return found[0]


@pytest.fixture
def broken_vectors(settings):
    """Vector search fails (embedding endpoint down); keyword search still works."""
    settings.KOINON_EMBEDDING_PROVIDER = "openai"
    settings.KOINON_EMBEDDING_BASE_URL = f"http://127.0.0.1:{free_port()}/v1"
    settings.KOINON_EMBEDDING_MODEL = "test-model"
    settings.KOINON_EMBEDDING_TIMEOUT = 0.3
    clear_embedding_caches()
    yield
    clear_embedding_caches()


@pytest.mark.parametrize(
    ("policy", "mode", "field"),
    [
        ({"allowed_tools": ["telepathy"]}, "ask", "evidence_policy.allowed_tools"),
        (
            {"allowed_tools": ["keyword_search", "keyword_search"]},
            "ask",
            "evidence_policy.allowed_tools",
        ),
        (
            {"allowed_tools": ["keyword_search"], "required_tools": ["vector_search"]},
            "ask",
            "evidence_policy.required_tools",
        ),
        (
            {"mode": "general_knowledge", "required_tools": ["keyword_search"]},
            "ask",
            "evidence_policy.required_tools",
        ),
        ({"mode": "strict", "allowed_tools": []}, "ask", "evidence_policy.allowed_tools"),
        ({"mode": "relaxed"}, "ask", "evidence_policy.mode"),
        ({"mode": "auto", "colour": "blue"}, "ask", "evidence_policy.colour"),
        ("strict", "ask", "evidence_policy"),
        ({"mode": "auto"}, "agent", "evidence_policy"),
        ({"mode": "auto"}, "plan", "evidence_policy"),
        ({"mode": "auto"}, "debug", "evidence_policy"),
        ({"mode": "auto"}, "raw", "evidence_policy"),
    ],
)
def test_every_invalid_policy_is_a_422_naming_the_field(member, policy, mode, field):
    response = client_for(member).post(
        "/v1/answer", {"query": OWNERS, "mode": mode, "evidence_policy": policy}, format="json"
    )
    error = assert_error(response, 422, "invalid_policy")
    assert field in error["fields"]


def test_strict_with_evidence_and_no_failure_is_evidence_backed(library, member):
    policy = {
        "mode": "strict",
        "allowed_tools": ["keyword_search"],
        "required_tools": ["keyword_search"],
    }
    body = ask(member, OWNERS, evidence_policy=policy)
    assert body["evidence"]["answer_status"] == "evidence_backed"
    assert body["quality"]["completeness"] == "complete"


def test_strict_with_a_failing_tool_abstains(library, member, broken_vectors):
    policy = {"mode": "strict", "allowed_tools": ["vector_search", "keyword_search"]}
    body = ask(member, OWNERS, evidence_policy=policy)
    assert outcome(body, "vector_search") == ("failed", "embedding_unavailable")
    assert outcome(body, "keyword_search") == ("succeeded", "matched")
    assert body["evidence"]["answer_status"] == "abstained"
    assert body["answer"]["citations"] == []


def test_auto_with_one_failed_optional_tool_is_partial(library, member, broken_vectors):
    body = ask(
        member, OWNERS, evidence_policy={"allowed_tools": ["vector_search", "keyword_search"]}
    )
    assert body["evidence"]["status"] == "partial"
    assert body["evidence"]["answer_status"] == "partial"
    assert body["quality"]["completeness"] == "partial" and body["quality"]["degraded"] is True
    assert "tool_failed:vector_search" in body["quality"]["issues"]
    assert "owns service reviews" in body["answer"]["text"]


def test_auto_with_no_evidence_and_a_failure_abstains(library, member, broken_vectors):
    body = ask(member, OWNERS, evidence_policy={"allowed_tools": ["vector_search"]})
    assert body["evidence"]["status"] == "unavailable"
    assert body["evidence"]["answer_status"] == "abstained"
    assert body["answer"]["text"] == explanation("access_failure", "en")


@pytest.fixture
def vectors_pending(library):
    """Right after a start (or a large upload): the passages are extracted and keyword
    searchable, their vectors not written yet."""
    from knowledge.models import EmbeddingStatus, Passage

    Passage.objects.update(embedding=None, embedding_model="", embedding_status="pending")
    assert not Passage.objects.filter(embedding_status=EmbeddingStatus.EMBEDDED).exists()


def test_the_first_answer_while_vectors_are_pending_says_indexing_not_access_failure(
    vectors_pending, member
):
    body = ask(member, "Which moons orbit Jupiter?")  # no keyword hit either
    assert body["evidence"]["answer_status"] == "abstained"
    assert outcome(body, "vector_search") == ("failed", "indexing")
    assert outcome(body, "keyword_search") == ("succeeded", "no_relevant_hit")
    text = body["answer"]["text"]
    assert text == explanation("indexing", "en", documents=2)
    assert text.startswith("2 documents are still being indexed for semantic search")
    assert "could not be accessed" not in text and text != explanation("access_failure", "en")
    issues = body["quality"]["issues"]
    assert "tool_indexing:vector_search" in issues and "tool_failed:vector_search" not in issues


def test_while_vectors_are_pending_the_keyword_channel_answers_marked_partial(
    vectors_pending, member
):
    body = ask(member, OWNERS)
    assert body["evidence"]["answer_status"] == "partial"
    assert body["quality"]["completeness"] == "partial"
    assert "tool_indexing:vector_search" in body["quality"]["issues"]
    assert "owns service reviews" in body["answer"]["text"]
    # strict: no answer from an incomplete search, and the refusal says why.
    strict = ask(member, OWNERS, evidence_policy={"mode": "strict"})
    assert strict["evidence"]["answer_status"] == "abstained"
    assert strict["answer"]["text"] == explanation("indexing", "en", documents=2)


def test_indexing_is_said_in_each_language():
    for language in ("de", "fr", "ja"):
        assert explanation("indexing", language, documents=3) != explanation(
            "indexing", "en", documents=3
        )
        assert "3" in explanation("indexing", language, documents=3)
        assert explanation("indexing", language) != explanation("indexing", "en")


def test_a_successful_empty_retrieval_gives_the_no_evidence_text(library, member):
    body = ask(member, "Which moons orbit Jupiter?")
    assert body["evidence"]["status"] == "absent"
    assert body["answer"]["text"] == explanation("insufficient_evidence", "en")


def test_an_empty_tool_list_in_auto_disables_every_tool(library, member):
    body = ask(member, OWNERS, evidence_policy={"mode": "auto", "allowed_tools": []})
    assert body["evidence"]["outcomes"] == []
    assert body["evidence"]["answer_status"] == "abstained"


def test_tools_that_are_not_configured_say_so(library, member):
    policy = {"allowed_tools": ["keyword_search", "web_search", "mcp_search"]}
    body = ask(member, OWNERS, evidence_policy=policy)
    assert outcome(body, "web_search") == ("failed", "not_configured")
    assert outcome(body, "mcp_search") == ("failed", "not_configured")
    assert body["evidence"]["answer_status"] == "evidence_backed"


def test_a_required_tool_unmet_after_a_successful_empty_search_is_partial(staff, owner, member):
    numbers = space_create(name="Numbers", created_by=staff)
    space_member_set(space=numbers, username="member", role="reader")
    dataset_upload(
        user=staff,
        space=numbers,
        filename="sales.csv",
        data=b"region,revenue\nnorth,100\nsouth,250\n",
        table="sales",
    )
    policy = {
        "allowed_tools": ["keyword_search", "dataset_query"],
        "required_tools": ["keyword_search"],
    }
    body = ask(member, "What is the total revenue?", evidence_policy=policy, space_ids=[numbers.pk])
    assert outcome(body, "keyword_search") == ("succeeded", "empty_corpus")
    assert "SUM(sales.revenue) = 350" in body["answer"]["text"]
    assert body["quality"]["completeness"] == "partial"
    assert "required_tool_unmet:keyword_search" in body["quality"]["issues"]
    assert body["evidence"]["answer_status"] == "partial"


def test_a_required_tool_is_met_only_by_selected_evidence_from_it(library, member):
    policy = {
        "allowed_tools": ["keyword_search", "dataset_query"],
        "required_tools": ["dataset_query"],
    }
    body = ask(member, OWNERS, evidence_policy=policy)  # no dataset question: no value selected
    assert "required_tool_unmet:dataset_query" in body["quality"]["issues"]
    assert body["quality"]["completeness"] == "partial"


def test_strict_with_an_unmet_required_tool_abstains(library, member):
    policy = {
        "mode": "strict",
        "allowed_tools": ["keyword_search", "dataset_query"],
        "required_tools": ["dataset_query"],
    }
    body = ask(member, OWNERS, evidence_policy=policy)
    assert body["evidence"]["answer_status"] == "abstained"


def test_general_knowledge_with_the_extractive_provider_is_unsupported(library, member):
    body = ask(member, OWNERS, evidence_policy={"mode": "general_knowledge"})
    assert body["evidence"]["status"] == "not_requested"
    assert body["evidence"]["outcomes"] == []
    assert body["answer"]["text"] == explanation("unsupported", "en")
    assert body["answer"]["citations"] == []
