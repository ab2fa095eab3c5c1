"""`federated_rag` against a server speaking koinon's own `GET /v1/search` over real HTTP on
loopback.

TODO (issue 50): the whole-stack test — a second koinon started by the harness, its key
issued there, the peer's permissions deciding what comes back — belongs with the channel's
wiring into the answer pipeline. Here the peer's answer is koinon's search shape, checked
against the serializer it is written from.
"""

import json

import pytest

from knowledge.document_apis import CandidateOutput, OutcomeOutput, SearchOutput
from outside import federated
from outside.errors import OutsideError
from outside.hits import Bounds, RemoteHit, text_hash
from tests.outside.client_servers import (
    KEY,
    FakeKoinon,
    Reply,
    koinon_candidate,
    koinon_outcome,
    outside_error,
)

BOUNDS = Bounds(timeout_seconds=5, max_results=10, max_bytes=100_000)
FINANCE = "Invoices are kept for seven years."
LEGAL = "Contracts are kept for ten years after they end."
PEER = {
    1: [koinon_candidate(101, 11, 21, FINANCE, 0.03)],
    2: [koinon_candidate(202, 12, 22, LEGAL, 0.02)],
}


def search(url: str, *, bounds: Bounds = BOUNDS, api_key=KEY, space_ids=None):
    return federated.search(
        url, "retention period", api_key=api_key, bounds=bounds, space_ids=space_ids
    )


def failure(url: str, caplog: pytest.LogCaptureFixture, **kwargs) -> OutsideError:
    return outside_error(lambda: search(url, **kwargs), caplog)


def test_the_fake_peer_answers_koinons_search_shape(serve):
    server = serve(FakeKoinon(by_space=PEER))
    search(server.url)
    body = json.loads(FakeKoinon(by_space=PEER)(server.requests[0]).body)
    assert set(body) == set(SearchOutput().fields)
    assert set(body["results"][0]) == {*CandidateOutput().fields, "units"}
    assert set(body["outcomes"][0]) == set(OutcomeOutput().fields)


def test_it_keeps_the_peers_document_revision_and_passage_ids_and_the_text_hash(serve):
    server = serve(FakeKoinon(by_space=PEER))
    assert search(server.url + "/") == [
        RemoteHit(
            channel="federated_rag",
            text=FINANCE,
            document_id="11",
            revision_id="21",
            passage_id="101",
            text_sha256=text_hash(FINANCE),
            score=0.03,
        ),
        RemoteHit(
            channel="federated_rag",
            text=LEGAL,
            document_id="12",
            revision_id="22",
            passage_id="202",
            text_sha256=text_hash(LEGAL),
            score=0.02,
        ),
    ]
    (request,) = server.requests
    assert (request.method, request.path) == ("GET", "/v1/search")
    assert request.query == {"q": ["retention period"], "limit": ["10"]}
    assert request.headers["authorization"] == f"Bearer {KEY}"


def test_a_hash_the_peer_sends_is_kept(serve):
    row = {**koinon_candidate(101, 11, 21, FINANCE, 0.03), "text_sha256": "AB" * 32}
    server = serve(FakeKoinon(by_space={1: [row]}))
    assert search(server.url)[0].text_sha256 == "ab" * 32


def test_space_ids_narrow_the_search_at_the_peer(serve):
    server = serve(FakeKoinon(by_space=PEER))
    hits = search(server.url, space_ids=[2])
    assert [hit.passage_id for hit in hits] == ["202"]
    assert server.requests[0].query["space"] == ["2"]


def test_it_asks_for_and_keeps_at_most_max_results(serve):
    server = serve(FakeKoinon(by_space=PEER))
    hits = search(server.url, bounds=Bounds(timeout_seconds=5, max_results=1))
    assert [hit.passage_id for hit in hits] == ["101"]
    assert server.requests[0].query["limit"] == ["1"]


def test_the_limit_stays_within_the_peers_ceiling(serve):
    server = serve(FakeKoinon(by_space=PEER))
    search(server.url, bounds=Bounds(timeout_seconds=5, max_results=500))
    assert server.requests[0].query["limit"] == ["50"]


def test_nothing_visible_to_the_key_is_an_empty_list(serve):
    server = serve(FakeKoinon(by_space=PEER))
    assert search(server.url, space_ids=[3]) == []


def test_a_peer_whose_every_tool_failed_is_unavailable_not_empty(serve, caplog):
    outcomes = [
        koinon_outcome("vector_search", "failed", "embedding_unavailable", 0, retryable=True),
        koinon_outcome("keyword_search", "failed", "provider_unavailable", 0),
    ]
    server = serve(FakeKoinon(outcomes=outcomes))
    error = failure(server.url, caplog)
    assert (error.code, error.retryable) == ("provider_unavailable", True)


def test_a_peer_whose_tools_timed_out_is_a_timeout(serve, caplog):
    outcomes = [koinon_outcome("keyword_search", "failed", "timeout", 0, retryable=True)]
    server = serve(FakeKoinon(outcomes=outcomes))
    assert failure(server.url, caplog).code == "timeout"


def test_one_tool_failing_beside_one_that_searched_is_still_a_search(serve):
    outcomes = [
        koinon_outcome("vector_search", "failed", "indexing", 0, retryable=True),
        koinon_outcome("keyword_search", "succeeded", "no_relevant_hit", 0),
    ]
    server = serve(FakeKoinon(outcomes=outcomes))
    assert search(server.url) == []


def test_a_404_is_provider_unavailable_never_an_empty_search(serve, caplog):
    server = serve(FakeKoinon(by_space=PEER))
    error = failure(server.url + "/not-koinon", caplog)
    assert (error.code, error.retryable) == ("provider_unavailable", False)


def test_a_key_the_peer_does_not_know_is_access_denied(serve, caplog):
    server = serve(FakeKoinon(by_space=PEER))
    assert failure(server.url, caplog, api_key="kn_revoked").code == "access_denied"


def test_a_500_is_provider_unavailable_and_retryable(serve, caplog):
    server = serve(FakeKoinon(override=Reply.error(500)))
    error = failure(server.url, caplog)
    assert (error.code, error.retryable) == ("provider_unavailable", True)


def test_a_peer_that_never_answers_times_out(serve, caplog):
    server = serve(FakeKoinon(override=Reply(stall=True)))
    error = failure(server.url, caplog, bounds=Bounds(timeout_seconds=0.5))
    assert (error.code, error.retryable) == ("timeout", True)


def test_an_answer_over_max_bytes_is_too_large(serve, caplog):
    rows = [koinon_candidate(n, n, n, "z" * 400, 0.01) for n in range(1, 30)]
    server = serve(FakeKoinon(by_space={1: rows}))
    error = failure(server.url, caplog, bounds=Bounds(max_bytes=2_000))
    assert error.code == "too_large"
