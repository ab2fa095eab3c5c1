"""`web_search` against a server speaking SearxNG's JSON API over real HTTP on loopback."""

import threading

import pytest

from outside import searxng
from outside.errors import OutsideError
from outside.hits import Bounds, CandidateUrl
from tests.guards import no_hang
from tests.outside.client_servers import (
    KEY,
    SECRET,
    FakeSearxng,
    Reply,
    outside_error,
    searxng_result,
)

BOUNDS = Bounds(timeout_seconds=5, max_results=10, max_bytes=100_000)
RESULTS = [
    searxng_result("https://example.org/retention", "Retention policy", "Kept seven years.", 1),
    searxng_result("https://example.com/records", "Records", "Invoices are records.", 2),
    searxng_result("https://example.net/third", "Third", "A third page.", 3),
]


def search(url: str, *, bounds: Bounds = BOUNDS, api_key: str | None = KEY, **kwargs):
    with no_hang():
        return searxng.search(url, "retention period", api_key=api_key, bounds=bounds, **kwargs)


def failure(url: str, caplog: pytest.LogCaptureFixture, **kwargs) -> OutsideError:
    return outside_error(lambda: search(url, **kwargs), caplog)


def test_it_returns_the_results_as_candidate_urls_in_the_engines_order(serve):
    fake = FakeSearxng(results=RESULTS)
    server = serve(fake)
    assert search(server.url + "/") == [
        CandidateUrl("https://example.org/retention", "Retention policy", "Kept seven years."),
        CandidateUrl("https://example.com/records", "Records", "Invoices are records."),
        CandidateUrl("https://example.net/third", "Third", "A third page."),
    ]
    (request,) = server.requests
    assert (request.method, request.path) == ("GET", "/search")
    assert request.query == {"q": ["retention period"], "format": ["json"]}
    assert request.headers["authorization"] == f"Bearer {KEY}"


def test_it_keeps_at_most_max_results(serve):
    server = serve(FakeSearxng(results=RESULTS))
    found = search(server.url, bounds=Bounds(timeout_seconds=5, max_results=2))
    assert [candidate.url for candidate in found] == [
        "https://example.org/retention",
        "https://example.com/records",
    ]


def test_it_leaves_out_results_that_are_not_http_pages(serve):
    odd = [searxng_result("magnet:?xt=urn:btih:abc", "Torrent", "", 1), {"title": "no url"}]
    server = serve(FakeSearxng(results=[*odd, RESULTS[0]]))
    assert [c.url for c in search(server.url)] == ["https://example.org/retention"]


def test_an_open_instance_is_called_without_a_key(serve):
    server = serve(FakeSearxng(results=RESULTS[:1], key=None))
    assert len(search(server.url, api_key=None)) == 1
    assert "authorization" not in server.requests[0].headers


def test_no_results_is_an_empty_list_not_an_error(serve):
    server = serve(FakeSearxng(results=[]))
    assert search(server.url) == []


def test_a_404_is_provider_unavailable_never_an_empty_search(serve, caplog):
    server = serve(FakeSearxng(results=RESULTS))
    error = failure(server.url + "/not-searxng", caplog)
    assert (error.code, error.retryable) == ("provider_unavailable", False)


def test_a_wrong_key_is_access_denied(serve, caplog):
    server = serve(FakeSearxng(results=RESULTS))
    error = failure(server.url, caplog, api_key="wrong")
    assert error.code == "access_denied"


def test_an_instance_without_the_json_format_is_access_denied(serve, caplog):
    server = serve(FakeSearxng(override=Reply.error(403)))
    assert failure(server.url, caplog).code == "access_denied"


def test_a_500_is_provider_unavailable_and_retryable(serve, caplog):
    server = serve(FakeSearxng(override=Reply.error(500)))
    error = failure(server.url, caplog)
    assert (error.code, error.retryable) == ("provider_unavailable", True)


def test_a_redirect_is_not_followed(serve, caplog):
    server = serve(FakeSearxng(override=Reply(status=302, body=b"")))
    assert failure(server.url, caplog).code == "provider_unavailable"


def test_a_body_that_is_not_json_is_provider_unavailable(serve, caplog):
    server = serve(FakeSearxng(override=Reply(body=SECRET.encode(), content_type="text/html")))
    assert failure(server.url, caplog).code == "provider_unavailable"


def test_a_server_that_never_answers_times_out(serve, caplog):
    server = serve(FakeSearxng(override=Reply(stall=True)))
    error = failure(server.url, caplog, bounds=Bounds(timeout_seconds=0.5))
    assert (error.code, error.retryable) == ("timeout", True)


def test_a_body_dripped_slowly_times_out_over_the_whole_call(serve, caplog):
    # Each byte arrives well within any per-read timeout; only the whole call's deadline ends it.
    body = Reply.json({"results": RESULTS}).body
    server = serve(FakeSearxng(override=Reply(body=body, drip=True)))
    error = failure(server.url, caplog, bounds=Bounds(timeout_seconds=0.5))
    assert error.code == "timeout"


@pytest.mark.parametrize("chunked", [False, True], ids=["declared", "streamed"])
def test_an_answer_over_max_bytes_is_too_large(serve, caplog, chunked):
    many = [searxng_result(f"https://example.org/{n}", "t", "x" * 200, n + 1) for n in range(50)]
    body = Reply.json({"results": many}).body
    server = serve(FakeSearxng(override=Reply(body=body, chunked=chunked)))
    error = failure(server.url, caplog, bounds=Bounds(max_bytes=2_000))
    assert error.code == "too_large"


def test_an_unreachable_server_is_provider_unavailable(caplog):
    # A port nothing listens on: bound, then closed.
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    error = failure(f"http://127.0.0.1:{port}", caplog)
    assert (error.code, error.retryable) == ("provider_unavailable", True)


def test_a_cancelled_call_stops_waiting(serve, caplog):
    server = serve(FakeSearxng(override=Reply(stall=True)))
    cancel = threading.Event()
    threading.Timer(0.2, cancel.set).start()
    error = failure(server.url, caplog, bounds=Bounds(timeout_seconds=60), cancel=cancel)
    assert error.code == "cancelled"
