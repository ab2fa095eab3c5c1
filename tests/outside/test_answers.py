"""Outside evidence in answers (issue 50): a channel's text is stored as the asker's snapshot
and quoted from that stored text with both quote checks; the citation and the receipt's
source say which snapshot; the recheck at sealing refuses a snapshot whose channel was
disabled meanwhile; the asker reaches a channel only through a space that enables it."""

import hashlib
import json
import shlex
import sys
from pathlib import Path

import pytest

from answers.models import AnswerRun, CandidateFact
from answers.pipeline.vocabulary import Plan
from audit.log import log_entry
from audit.models import OutputRelease
from audit.services import audit_summary
from core.errors import UnprocessableError
from mcp_server.services import tool_call_run
from mcp_server.tools import Caller
from outside.models import Channel, ChannelKind, McpTransport, Snapshot
from outside.services import channel_save, space_channel_disable, space_channel_enable
from tests.answers.helpers import ask
from tests.answers.providers import ScriptedProvider
from tests.helpers import client_for
from tests.knowledge.helpers import kerned_pdf
from tests.outside.channels import pages_channel, superuser
from tests.outside.client_servers import (
    KEY,
    FakeKoinon,
    FakeSearxng,
    FakeVectorStore,
    Reply,
    koinon_candidate,
    searxng_result,
    vector_store_item,
)
from tests.outside.client_servers import SECRET as CLIENT_SECRET
from tests.outside.helpers import SECRET, LocalServer

pytestmark = pytest.mark.django_db

QUESTION = "How long are invoices kept?"
FETCH_ONLY = {"mode": "strict", "allowed_tools": ["fetch_url"], "required_tools": ["fetch_url"]}


@pytest.fixture
def server(settings):
    settings.KOINON_OUTSIDE_ALLOWED_NETWORKS = ["127.0.0.1/32"]
    with LocalServer(kerned_pdf(["A page."], gap=0)) as running:
        yield running


@pytest.fixture
def root(db):
    return superuser()


@pytest.fixture
def pages(root, server, space, owner) -> Channel:
    return pages_channel(
        owner=owner, space=space, urls=[server.url("/page.html")], timeout_seconds=5
    )


def plan() -> Plan:
    return Plan(standalone=QUESTION, searches=[QUESTION])


def select_kept(candidates):
    return {"facts": [{"fact_id": next(c.fact_id for c in candidates if "seven years" in c.text)}]}


def outcome(body, tool):
    return [(o["state"], o["code"]) for o in body["evidence"]["outcomes"] if o["tool"] == tool]


def test_a_fetched_page_is_quoted_from_its_stored_snapshot(pages, member, server):
    body = ask(
        member,
        QUESTION,
        provider=ScriptedProvider([select_kept], plan=plan()),
        evidence_policy=FETCH_ONLY,
    )
    assert body["evidence"]["answer_status"] == "evidence_backed", body["evidence"]
    assert outcome(body, "fetch_url") == [("succeeded", "matched")]
    [citation] = body["answer"]["citations"]
    assert citation["quote"] == "Invoices are kept for seven years."
    snapshot = Snapshot.objects.get(owner=member)
    assert citation["document_id"] == snapshot.document_id
    assert citation["revision_id"] == snapshot.revision_id
    outside = citation["outside"]
    assert outside["snapshot_id"] == snapshot.pk
    assert outside["channel_kind"] == "fetch_url" and outside["channel"] == "Policy pages"
    assert outside["url"] == server.url("/page.html")
    assert outside["sha256"] == snapshot.sha256
    assert outside["fetched_at"] == snapshot.fetched_at.isoformat()
    assert "fetched from 127.0.0.1 on" in body["answer"]["text"]
    [source] = body["evidence"]["sources"]
    assert (source["snapshot_id"], source["snapshot_sha256"]) == (snapshot.pk, snapshot.sha256)
    # The receipt's source references, and so the answer log's entry, carry the hash.
    release = OutputRelease.objects.get(pk=body["release"]["id"])
    assert log_entry(release)["source_refs"] == [source]


def test_the_extractive_pipeline_answers_from_a_fetched_page(pages, member):
    body = ask(member, QUESTION, evidence_policy={"allowed_tools": ["fetch_url"]})
    assert body["evidence"]["answer_status"] == "evidence_backed", body["evidence"]
    assert "seven years" in body["answer"]["citations"][0]["quote"]


def test_a_channel_disabled_between_gathering_and_sealing_is_refused_at_the_seal(
    pages, member, owner, space
):
    def disable(attempt: int) -> None:
        space_channel_disable(user=owner, space=space, channel=pages)

    body = ask(
        member,
        QUESTION,
        provider=ScriptedProvider([select_kept], plan=plan(), on_select=disable),
        evidence_policy=FETCH_ONLY,
    )
    assert body["evidence"]["answer_status"] == "abstained"
    assert body["answer"]["citations"] == []
    assert "seven years" not in json.dumps(body["answer"])
    assert ("failed", "access_denied") in outcome(body, "recheck")


def test_a_channel_deactivated_between_gathering_and_sealing_is_refused_too(pages, member, root):
    def deactivate(attempt: int) -> None:
        pages.active = False
        channel_save(user=root, channel=pages)

    body = ask(
        member,
        QUESTION,
        provider=ScriptedProvider([select_kept], plan=plan(), on_select=deactivate),
        evidence_policy=FETCH_ONLY,
    )
    assert body["evidence"]["answer_status"] == "abstained"


def test_a_channel_no_space_of_the_asker_enables_is_not_configured(pages, outsider):
    body = ask(
        outsider,
        QUESTION,
        provider=ScriptedProvider([select_kept], plan=plan()),
        evidence_policy=FETCH_ONLY,
    )
    assert outcome(body, "fetch_url") == [("failed", "not_configured")]
    assert body["evidence"]["answer_status"] == "abstained"
    assert not Snapshot.objects.exists()  # nothing was fetched for them


@pytest.mark.parametrize(
    ("path", "code", "retryable"),
    [
        ("/status/404", "provider_unavailable", False),
        ("/status/401", "access_denied", False),
        ("/status/403", "access_denied", False),
        ("/status/500", "provider_unavailable", True),
        ("/huge", "provider_unavailable", False),
        ("/slow-headers", "timeout", True),
    ],
)
def test_a_failing_page_is_the_channels_outcome_and_its_text_is_never_shown(
    root, server, space, owner, member, path, code, retryable
):
    channel = channel_save(
        user=root,
        channel=Channel(
            name="Broken",
            kind=ChannelKind.FETCH_URL,
            options={"urls": [server.url(path)]},
            timeout_seconds=1,
            max_bytes=64 * 1024,
        ),
    )
    space_channel_enable(user=owner, space=space, channel=channel)
    body = ask(
        member,
        QUESTION,
        provider=ScriptedProvider([select_kept], plan=plan()),
        evidence_policy=FETCH_ONLY,
    )
    [found] = [o for o in body["evidence"]["outcomes"] if o["tool"] == "fetch_url"]
    assert (found["state"], found["code"], found["retryable"]) == ("failed", code, retryable)
    assert body["evidence"]["answer_status"] == "abstained"
    assert SECRET not in json.dumps(body)


def test_a_page_at_a_refused_address_is_never_fetched(root, space, owner, member, settings):
    settings.KOINON_OUTSIDE_ALLOWED_NETWORKS = []
    channel = channel_save(
        user=root,
        channel=Channel(
            name="Internal", kind=ChannelKind.FETCH_URL, options={"urls": ["http://10.0.0.7/"]}
        ),
    )
    space_channel_enable(user=owner, space=space, channel=channel)
    body = ask(
        member,
        QUESTION,
        provider=ScriptedProvider([select_kept], plan=plan()),
        evidence_policy=FETCH_ONLY,
    )
    assert outcome(body, "fetch_url") == [("failed", "access_denied")]


def test_snapshots_of_one_asker_are_never_another_askers_evidence(pages, member, owner):
    ask(
        member,
        QUESTION,
        provider=ScriptedProvider([select_kept], plan=plan()),
        evidence_policy=FETCH_ONLY,
    )
    theirs = ask(
        owner,
        QUESTION,
        provider=ScriptedProvider([select_kept], plan=plan()),
        evidence_policy=FETCH_ONLY,
    )
    own = set(Snapshot.objects.filter(owner=owner).values_list("document_id", flat=True))
    found = {
        fact.source["document_id"]
        for fact in CandidateFact.objects.filter(run_id=theirs["run_id"], kind="quote")
    }
    assert found and found <= own
    assert Snapshot.objects.filter(owner=member).count() == 1


# --- the other four channels, each through a server speaking its API on loopback ------------


def enabled(root, owner, space, **fields) -> Channel:
    channel = channel_save(user=root, channel=Channel(timeout_seconds=5, **fields), credential=KEY)
    space_channel_enable(user=owner, space=space, channel=channel)
    return channel


def vectors(root, owner, space, store) -> Channel:
    """A retrieval endpoint channel on a fake OpenAI vector store server, enabled."""
    return enabled(
        root,
        owner,
        space,
        name="Vectors",
        kind=ChannelKind.RETRIEVAL_ENDPOINT,
        endpoint=store.url + "/v1",
        options={"store_id": "vs_abc123"},
    )


def ask_with(member, tool):
    return ask(
        member,
        QUESTION,
        provider=ScriptedProvider([select_kept], plan=plan()),
        evidence_policy={"mode": "strict", "allowed_tools": [tool], "required_tools": [tool]},
    )


def test_web_search_results_are_fetched_and_quoted_from_their_snapshots(
    root, owner, space, member, server, serve
):
    page = server.url("/page.html")
    searx = serve(FakeSearxng(results=[searxng_result(page, "Retention", "kept", 1)]))
    enabled(root, owner, space, name="Search", kind=ChannelKind.WEB_SEARCH, endpoint=searx.url)
    body = ask_with(member, "web_search")
    assert body["evidence"]["answer_status"] == "evidence_backed", body["evidence"]
    [citation] = body["answer"]["citations"]
    assert citation["outside"]["url"] == page
    assert citation["outside"]["channel_kind"] == "web_search"
    # The search service's own snippet is never evidence: only the fetched page is.
    assert Snapshot.objects.get(owner=member).url == page


def test_a_retrieval_endpoints_chunks_become_snapshots_with_their_remote_identity(
    root, owner, space, member, serve
):
    store = serve(
        FakeVectorStore(
            data=[
                vector_store_item(
                    "file-7", "retention.pdf", 0.9, "Invoices are kept for seven years."
                )
            ]
        )
    )
    vectors(root, owner, space, store)
    body = ask_with(member, "retrieval_endpoint")
    assert body["evidence"]["answer_status"] == "evidence_backed", body["evidence"]
    outside = body["answer"]["citations"][0]["outside"]
    assert outside["remote_document_id"] == "file-7"
    assert outside["remote_text_sha256"]


def test_a_peer_koinons_passages_keep_the_peers_ids_and_hash(root, owner, space, member, serve):
    text = "Invoices are kept for seven years."
    peer = serve(FakeKoinon(by_space={3: [koinon_candidate(41, 12, 13, text, 0.8)]}))
    enabled(root, owner, space, name="Legal", kind=ChannelKind.FEDERATED_RAG, endpoint=peer.url)
    body = ask_with(member, "federated_rag")
    assert body["evidence"]["answer_status"] == "evidence_backed", body["evidence"]
    outside = body["answer"]["citations"][0]["outside"]
    assert (outside["remote_document_id"], outside["remote_revision_id"]) == ("12", "13")
    assert outside["remote_passage_id"] == "41"
    assert outside["remote_text_sha256"] == hashlib.sha256(text.encode()).hexdigest()


def test_a_peer_that_refuses_the_key_is_access_denied_and_abstains(
    root, owner, space, member, serve
):
    peer = serve(FakeKoinon(by_space={3: []}))
    channel = enabled(
        root, owner, space, name="Legal", kind=ChannelKind.FEDERATED_RAG, endpoint=peer.url
    )
    channel_save(user=root, channel=channel, credential="a-key-the-peer-never-issued")
    body = ask_with(member, "federated_rag")
    assert outcome(body, "federated_rag") == [("failed", "access_denied")]
    assert body["evidence"]["answer_status"] == "abstained"
    assert CLIENT_SECRET not in json.dumps(body)


@pytest.mark.parametrize("status", [404, 500])
def test_an_outside_services_404_or_500_is_provider_unavailable(
    root, owner, space, member, serve, status
):
    store = serve(FakeVectorStore(override=Reply.error(status)))
    vectors(root, owner, space, store)
    body = ask_with(member, "retrieval_endpoint")
    assert outcome(body, "retrieval_endpoint") == [("failed", "provider_unavailable")]
    assert body["evidence"]["answer_status"] == "abstained"


def test_an_empty_outside_search_is_no_relevant_hit(root, owner, space, member, serve):
    store = serve(FakeVectorStore(data=[]))
    vectors(root, owner, space, store)
    body = ask_with(member, "retrieval_endpoint")
    assert outcome(body, "retrieval_endpoint") == [("succeeded", "no_relevant_hit")]


def test_an_mcp_servers_search_results_are_quoted_from_their_snapshots(root, owner, space, member):
    script = Path(__file__).with_name("mcp_fixture_server.py")
    channel = channel_save(
        user=root,
        channel=Channel(
            name="Wiki",
            kind=ChannelKind.MCP_SEARCH,
            transport=McpTransport.STDIO,
            endpoint=f"{shlex.quote(sys.executable)} {shlex.quote(str(script))}",
            timeout_seconds=30,
        ),
    )
    space_channel_enable(user=owner, space=space, channel=channel)
    body = ask_with(member, "mcp_search")
    assert body["evidence"]["answer_status"] == "evidence_backed", body["evidence"]
    outside = body["answer"]["citations"][0]["outside"]
    assert (outside["channel_kind"], outside["channel"]) == ("mcp_search", "Wiki")
    # Both passages the tool returned were stored, each a snapshot of its own.
    assert Snapshot.objects.filter(owner=member, channel=channel).count() == 2


# --- deep research (item 5) ------------------------------------------------------------


def retrieval_rounds(body) -> list[int]:
    [generation] = audit_summary(body["run_id"])["generations"]
    return [s["round"] for s in generation["steps"] if s["step"] == "retrieval"]


def test_deep_without_a_policy_researches_the_enabled_channels_too(pages, member):
    body = ask(member, QUESTION, mode="deep")
    policy = body["evidence"]["policy"]
    assert policy["allowed_tools"] == [
        "vector_search",
        "keyword_search",
        "dataset_query",
        "fetch_url",
    ]
    assert body["evidence"]["answer_status"] == "evidence_backed", body["evidence"]
    assert body["answer"]["citations"][0]["outside"]["channel_kind"] == "fetch_url"
    # Only the kinds someone enabled: no `not_configured` for the other four.
    assert {o["tool"] for o in body["evidence"]["outcomes"]} <= {
        "vector_search",
        "keyword_search",
        "dataset_query",
        "fetch_url",
    }


def test_deep_under_an_explicit_policy_keeps_its_tools_and_does_not_iterate(pages, member):
    calls = []

    def nothing(candidates):
        calls.append(len(candidates))
        return {"facts": []}

    body = ask(
        member,
        QUESTION,
        mode="deep",
        provider=ScriptedProvider([nothing]),
        evidence_policy={"allowed_tools": ["keyword_search"]},
    )
    assert body["evidence"]["policy"]["allowed_tools"] == ["keyword_search"]
    assert not Snapshot.objects.exists()
    assert retrieval_rounds(body) == [1]


def test_deep_research_follows_the_best_lead_for_further_rounds(pages, member):
    seen = []

    def later(candidates):
        seen.append(candidates)
        if len(seen) <= 3:  # every attempt of round one comes back empty
            return {"facts": []}
        return select_kept(candidates)

    body = ask(member, QUESTION, mode="deep", provider=ScriptedProvider([later]))
    assert body["evidence"]["answer_status"] == "evidence_backed", body["evidence"]
    assert retrieval_rounds(body) == [1, 2]
    assert AnswerRun.objects.get(pk=body["run_id"]).generations.get().attempts == 4
    # Round two searched the question's words with the best lead's: the quote round one
    # found ("… seven years"), which the question does not say.
    [generation] = audit_summary(body["run_id"])["generations"]
    assert [plan["searches"] for plan in generation["plans"]] == [
        [QUESTION],
        ["long invoices kept seven years"],
    ]


def test_other_modes_never_call_a_channel_the_policy_does_not_name(pages, member):
    for mode in ("ask", "quick", "pro", "agent"):
        body = ask(member, QUESTION, mode=mode)
        assert "fetch_url" not in body["evidence"]["policy"]["allowed_tools"]
    assert not Snapshot.objects.exists()


# --- pages the asker chooses ------------------------------------------------------------


@pytest.fixture
def open_pages(root, space, owner) -> Channel:
    """A fetch_url channel that lists no page: it reads what askers choose."""
    channel = channel_save(
        user=root, channel=Channel(name="Open pages", kind=ChannelKind.FETCH_URL, timeout_seconds=5)
    )
    space_channel_enable(user=owner, space=space, channel=channel)
    return channel


def test_a_page_the_asker_chooses_is_read_and_quoted(open_pages, member, server):
    page = server.url("/page.html")
    body = ask(member, QUESTION, urls=[page])
    assert body["evidence"]["policy"]["allowed_tools"][-1] == "fetch_url"
    assert body["evidence"]["answer_status"] == "evidence_backed", body["evidence"]
    assert body["answer"]["citations"][0]["outside"]["url"] == page
    assert AnswerRun.objects.get(pk=body["run_id"]).urls == [page]


def test_a_chosen_page_is_read_only_through_an_enabled_channel(member, server):
    body = ask(member, QUESTION, urls=[server.url("/page.html")])
    assert outcome(body, "fetch_url") == [("failed", "not_configured")]
    assert not Snapshot.objects.exists()


def test_a_chosen_page_at_a_refused_address_is_never_fetched(open_pages, member, settings):
    settings.KOINON_OUTSIDE_ALLOWED_NETWORKS = []
    body = ask(member, QUESTION, urls=["http://169.254.169.254/latest/meta-data/"])
    assert outcome(body, "fetch_url") == [("failed", "access_denied")]
    assert not Snapshot.objects.exists()


def test_an_explicit_policy_must_allow_fetch_url_for_chosen_pages(member):
    with pytest.raises(UnprocessableError) as refused:
        ask(
            member,
            QUESTION,
            urls=["https://example.org/"],
            evidence_policy={"allowed_tools": ["keyword_search"]},
        )
    assert "urls" in refused.value.fields


@pytest.mark.parametrize(
    "urls",
    [
        "https://example.org/",
        ["ftp://example.org/file"],
        ["https://user:pw@example.org/"],
        ["https://"],
        ["not a url"],
        [7],
        [f"https://example.org/{'a' * 2000}"],
        ["https://example.org:99999/"],
        ["https://example.org/\x00"],
        [f"https://example.org/{n}" for n in range(6)],
    ],
)
def test_bad_chosen_pages_are_a_422_naming_the_field(member, urls):
    response = client_for(member).post(
        "/v1/answer", {"query": QUESTION, "urls": urls}, format="json"
    )
    assert response.status_code == 422
    assert "urls" in response.json()["error"]["fields"]
    assert not AnswerRun.objects.exists()


def test_the_mcp_answer_tool_reads_chosen_pages_and_cites_the_snapshot(open_pages, member, server):
    page = server.url("/page.html")
    call = tool_call_run(
        caller=Caller(user=member),
        tool="answer",
        arguments={"query": QUESTION, "urls": [page]},
        transport="stdio",
    )
    body = call.payload
    assert body["evidence"]["answer_status"] == "evidence_backed", body["evidence"]
    assert body["answer"]["citations"][0]["outside"]["url"] == page
