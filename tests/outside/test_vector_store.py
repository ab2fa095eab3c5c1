"""`retrieval_endpoint` against a server speaking OpenAI's vector store search API over real
HTTP on loopback."""

import pytest

from outside import vector_store
from outside.errors import OutsideError
from outside.hits import Bounds, RemoteHit, text_hash
from tests.outside.client_servers import (
    KEY,
    FakeVectorStore,
    Reply,
    outside_error,
    vector_store_item,
)

BOUNDS = Bounds(timeout_seconds=5, max_results=10, max_bytes=100_000)
POLICY = "Invoices are kept for seven years after the end of the financial year."
DATA = [
    vector_store_item("file-abc123", "retention.pdf", 0.91, POLICY, attributes={"team": "fin"}),
    vector_store_item("file-def456", "handbook.md", 0.42, "Ask finance.", "Or ask legal."),
]


def search(url: str, *, store: str = "vs_abc123", bounds: Bounds = BOUNDS, api_key=KEY):
    return vector_store.search(url, store, "retention period", api_key=api_key, bounds=bounds)


def failure(url: str, caplog: pytest.LogCaptureFixture, **kwargs) -> OutsideError:
    return outside_error(lambda: search(url, **kwargs), caplog)


def test_each_text_part_becomes_a_hit_with_the_files_identity(serve):
    server = serve(FakeVectorStore(data=DATA))
    hits = search(server.url + "/v1")
    assert hits == [
        RemoteHit(
            channel="retrieval_endpoint",
            text=POLICY,
            title="retention.pdf",
            document_id="file-abc123",
            text_sha256=text_hash(POLICY),
            score=0.91,
        ),
        RemoteHit(
            channel="retrieval_endpoint",
            text="Ask finance.",
            title="handbook.md",
            document_id="file-def456",
            text_sha256=text_hash("Ask finance."),
            score=0.42,
        ),
        RemoteHit(
            channel="retrieval_endpoint",
            text="Or ask legal.",
            title="handbook.md",
            document_id="file-def456",
            text_sha256=text_hash("Or ask legal."),
            score=0.42,
        ),
    ]
    (request,) = server.requests
    assert (request.method, request.path) == ("POST", "/v1/vector_stores/vs_abc123/search")
    assert request.json() == {"query": "retention period", "max_num_results": 10}
    assert request.headers["authorization"] == f"Bearer {KEY}"


def test_it_asks_for_and_keeps_at_most_max_results(serve):
    server = serve(FakeVectorStore(data=DATA))
    hits = search(server.url + "/v1", bounds=Bounds(timeout_seconds=5, max_results=2))
    assert [hit.text for hit in hits] == [POLICY, "Ask finance."]
    assert server.requests[0].json()["max_num_results"] == 2


def test_max_num_results_stays_within_the_apis_ceiling(serve):
    server = serve(FakeVectorStore(data=DATA))
    search(server.url + "/v1", bounds=Bounds(timeout_seconds=5, max_results=200))
    assert server.requests[0].json()["max_num_results"] == 50


def test_a_store_id_is_one_path_segment(serve, caplog):
    server = serve(FakeVectorStore(data=DATA))
    error = failure(server.url + "/v1", caplog, store="vs_abc123/../other")
    assert error.code == "provider_unavailable"
    assert server.requests[0].path == "/v1/vector_stores/vs_abc123%2F..%2Fother/search"


def test_no_results_is_an_empty_list_not_an_error(serve):
    server = serve(FakeVectorStore(data=[]))
    assert search(server.url + "/v1") == []


def test_parts_that_are_not_text_are_left_out(serve):
    item = vector_store_item("file-1", "a.pdf", 0.5)
    item["content"] = [{"type": "image", "url": "x"}, {"type": "text", "text": ""}]
    server = serve(FakeVectorStore(data=[item]))
    assert search(server.url + "/v1") == []


def test_an_unknown_store_404_is_provider_unavailable_never_an_empty_search(serve, caplog):
    server = serve(FakeVectorStore(data=DATA))
    error = failure(server.url + "/v1", caplog, store="vs_missing")
    assert (error.code, error.retryable) == ("provider_unavailable", False)


def test_a_wrong_key_is_access_denied(serve, caplog):
    server = serve(FakeVectorStore(data=DATA))
    assert failure(server.url + "/v1", caplog, api_key="sk-wrong").code == "access_denied"


def test_a_500_is_provider_unavailable_and_retryable(serve, caplog):
    server = serve(FakeVectorStore(override=Reply.error(500)))
    error = failure(server.url + "/v1", caplog)
    assert (error.code, error.retryable) == ("provider_unavailable", True)


def test_a_429_is_provider_unavailable_and_retryable(serve, caplog):
    server = serve(FakeVectorStore(override=Reply.error(429)))
    error = failure(server.url + "/v1", caplog)
    assert (error.code, error.retryable) == ("provider_unavailable", True)


def test_an_answer_of_another_shape_is_provider_unavailable(serve, caplog):
    server = serve(FakeVectorStore(override=Reply.json({"data": {"not": "a list"}})))
    assert failure(server.url + "/v1", caplog).code == "provider_unavailable"


def test_a_server_that_never_answers_times_out(serve, caplog):
    server = serve(FakeVectorStore(override=Reply(stall=True)))
    error = failure(server.url + "/v1", caplog, bounds=Bounds(timeout_seconds=0.5))
    assert (error.code, error.retryable) == ("timeout", True)


def test_an_answer_over_max_bytes_is_too_large(serve, caplog):
    big = [vector_store_item(f"file-{n}", "f.txt", 0.5, "y" * 500) for n in range(20)]
    server = serve(FakeVectorStore(data=big))
    error = failure(server.url + "/v1", caplog, bounds=Bounds(max_bytes=2_000))
    assert error.code == "too_large"
