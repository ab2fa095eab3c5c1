"""`mcp_search` against a real MCP server built with the official SDK (tests/outside/
mcp_fixture_server.py): over streamable HTTP on a loopback port (uvicorn in a thread, behind a
bearer check) and over stdio (the same server started as a child process).

TODO (issue 50): koinon's own MCP server (`/mcp` of a second koinon, and `manage.py mcp`) as
the configured server, in the whole-stack test that comes with the channel's wiring; here
`library_search` answers in its result shape."""

import json
import sys
import threading
from pathlib import Path

import pytest
import uvicorn

from outside import mcp_search
from outside.hits import Bounds, RemoteHit, text_hash
from tests.outside import mcp_fixture_server
from tests.outside.client_servers import KEY, SECRET, outside_error, wait_until
from tests.outside.mcp_fixture_server import FINANCE, LEGAL

BOUNDS = Bounds(timeout_seconds=30, max_results=10, max_bytes=100_000)
# The server runs in this process: its own logs (the SDK's, uvicorn's) may quote its failures.
SERVER_LOGGERS = ("mcp.server", "uvicorn", "tests.")
SCRIPT = Path(mcp_fixture_server.__file__)


def guarded(app, key: str):
    """The MCP app at /mcp behind a bearer key (401 otherwise); /broken answers 500. Both
    error bodies carry the secret."""

    async def guard(scope, receive, send):
        if scope["type"] == "http":
            headers = dict(scope["headers"])
            status = None
            if scope["path"] == "/broken":
                status = 500
            elif headers.get(b"authorization") != f"Bearer {key}".encode():
                status = 401
            if status is not None:
                body = json.dumps({"error": SECRET}).encode()
                await send(
                    {
                        "type": "http.response.start",
                        "status": status,
                        "headers": [
                            (b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode()),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": body})
                return
        await app(scope, receive, send)

    return guard


@pytest.fixture(scope="module")
def mcp_url():
    app = guarded(mcp_fixture_server.build().streamable_http_app(), KEY)
    config = uvicorn.Config(
        app, host="127.0.0.1", port=0, log_level="warning", timeout_graceful_shutdown=1
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    wait_until(lambda: server.started)
    port = server.servers[0].sockets[0].getsockname()[1]
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(30)


def http(url: str, path: str = "/mcp", **fields) -> mcp_search.McpHttpServer:
    return mcp_search.McpHttpServer(url=f"{url}{path}", credential=KEY, **fields)


STDIO = mcp_search.McpStdioServer(command=sys.executable, args=(str(SCRIPT),))
PASSAGES = [
    RemoteHit(channel="mcp_search", text=FINANCE, text_sha256=text_hash(FINANCE)),
    RemoteHit(channel="mcp_search", text=LEGAL, text_sha256=text_hash(LEGAL)),
]


def failure(server, query: str, caplog, bounds: Bounds = BOUNDS):
    return outside_error(
        lambda: mcp_search.search(server, query, bounds=bounds),
        caplog,
        server_loggers=SERVER_LOGGERS,
    )


# --- streamable HTTP -------------------------------------------------------------------------


def test_text_items_become_hits_over_http(mcp_url):
    assert mcp_search.search(http(mcp_url), "retention", bounds=BOUNDS) == PASSAGES


def test_it_keeps_at_most_max_results(mcp_url):
    bounds = Bounds(timeout_seconds=30, max_results=1)
    assert mcp_search.search(http(mcp_url), "retention", bounds=bounds) == PASSAGES[:1]


def test_koinons_result_shape_keeps_the_remote_ids(mcp_url):
    server = http(mcp_url, tool="library_search", limit_argument="limit")
    hits = mcp_search.search(server, "retention", bounds=Bounds(timeout_seconds=30, max_results=1))
    assert hits == [
        RemoteHit(
            channel="mcp_search",
            text=FINANCE,
            title="Retention policy",
            document_id="11",
            revision_id="21",
            passage_id="101",
            text_sha256=text_hash(FINANCE),
            score=0.03,
        )
    ]


def test_koinons_failed_retrieval_is_provider_unavailable_not_empty(mcp_url, caplog):
    error = failure(http(mcp_url, tool="library_search"), "broken", caplog)
    assert (error.code, error.retryable) == ("provider_unavailable", True)


def test_no_text_is_an_empty_list_over_http(mcp_url):
    assert mcp_search.search(http(mcp_url), "nothing", bounds=BOUNDS) == []


def test_a_tool_error_is_provider_unavailable_over_http(mcp_url, caplog):
    assert failure(http(mcp_url), "fail", caplog).code == "provider_unavailable"


def test_an_unknown_tool_is_provider_unavailable(mcp_url, caplog):
    assert failure(http(mcp_url, tool="missing"), "x", caplog).code == "provider_unavailable"


def test_a_wrong_credential_is_access_denied(mcp_url, caplog):
    server = mcp_search.McpHttpServer(url=f"{mcp_url}/mcp", credential="wrong")
    assert failure(server, "retention", caplog).code == "access_denied"


def test_a_404_is_provider_unavailable_never_an_empty_search(mcp_url, caplog):
    error = failure(http(mcp_url, "/elsewhere"), "retention", caplog)
    assert (error.code, error.retryable) == ("provider_unavailable", False)


def test_a_500_is_provider_unavailable_and_retryable(mcp_url, caplog):
    error = failure(http(mcp_url, "/broken"), "retention", caplog)
    assert (error.code, error.retryable) == ("provider_unavailable", True)


def test_a_tool_that_never_finishes_times_out_over_http(mcp_url, caplog):
    error = failure(http(mcp_url), "slow", caplog, bounds=Bounds(timeout_seconds=1))
    assert (error.code, error.retryable) == ("timeout", True)


def test_an_answer_over_max_bytes_is_too_large_over_http(mcp_url, caplog):
    error = failure(http(mcp_url), "big", caplog, bounds=Bounds(max_bytes=10_000))
    assert error.code == "too_large"


# --- stdio -----------------------------------------------------------------------------------


def test_text_items_become_hits_over_stdio():
    assert mcp_search.search(STDIO, "retention", bounds=BOUNDS) == PASSAGES


def test_no_text_is_an_empty_list_over_stdio():
    assert mcp_search.search(STDIO, "nothing", bounds=BOUNDS) == []


def test_a_tool_error_is_provider_unavailable_over_stdio(caplog):
    assert failure(STDIO, "fail", caplog).code == "provider_unavailable"


def test_a_tool_that_never_finishes_times_out_over_stdio(caplog):
    # Long enough for the child to start and answer the handshake; the tool then never ends.
    error = failure(STDIO, "slow", caplog, bounds=Bounds(timeout_seconds=5))
    assert error.code == "timeout"


def test_an_answer_over_max_bytes_is_too_large_over_stdio(caplog):
    assert failure(STDIO, "big", caplog, bounds=Bounds(max_bytes=10_000)).code == "too_large"


def test_a_command_that_cannot_start_is_provider_unavailable(caplog, tmp_path):
    server = mcp_search.McpStdioServer(command=str(tmp_path / "no-such-server"))
    assert failure(server, "retention", caplog).code == "provider_unavailable"
