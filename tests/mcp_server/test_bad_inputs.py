"""Bad inputs to every MCP tool: typed errors, never an internal error, never a 5xx, and
the server keeps serving (SPEC §11)."""

import httpx
import pytest

from mcp_server.models import ToolCall
from tests.mcp_server.mcp_clients import call, with_http_session
from tests.mcp_server.test_http import initialize_body, post_mcp

pytestmark = pytest.mark.django_db(transaction=True)

HUGE = "x" * 1_000_000


def nested(depth: int) -> dict:
    value: dict = {}
    for _ in range(depth):
        value = {"a": value}
    return value


NESTED = nested(40)

BAD_CALLS = [
    # wrong types
    ("search", {"query": 5}, "invalid_arguments"),
    ("search", {"query": "ok", "limit": "10"}, "invalid_arguments"),
    ("search", {"query": "ok", "limit": 0}, "invalid_arguments"),
    ("search", {"query": "ok", "space_ids": "1"}, "invalid_arguments"),
    ("search", {"query": "ok", "space_ids": [True]}, "invalid_arguments"),
    ("search", {"query": "ok", "tools": [{"a": 1}]}, "invalid_arguments"),
    ("search", {"query": "ok", "tools": ["web_search"]}, "invalid_arguments"),
    ("read_passage", {"passage_id": "1"}, "invalid_arguments"),
    ("read_passage", {"passage_id": 1.5}, "invalid_arguments"),
    ("read_passage", {"passage_id": -1}, "invalid_arguments"),
    ("read_passage", {"passage_id": 10**30}, "invalid_arguments"),
    ("query_dataset", {"dataset_id": [1], "sql": "SELECT 1"}, "invalid_arguments"),
    ("query_dataset", {"dataset_id": 1, "sql": {"select": 1}}, "invalid_arguments"),
    ("list_sources", {"space_id": "Operations"}, "invalid_arguments"),
    ("answer", {"query": ["a"]}, "empty_query"),
    ("answer", {"query": "ok", "mode": "raw"}, "invalid_arguments"),
    # the service's refusal, passed on: debug is for staff (the reader is not)
    ("answer", {"query": "ok", "mode": "debug"}, "permission_denied"),
    ("answer", {"query": "ok", "evidence_policy": "strict"}, "invalid_policy"),
    ("answer", {"query": "ok", "evidence_policy": {"mode": "yolo"}}, "invalid_policy"),
    ("answer", {"query": "ok", "language": 3}, "invalid"),
    # missing and unknown arguments
    ("search", {}, "invalid_arguments"),
    ("read_passage", {"passage": 1}, "invalid_arguments"),
    ("query_dataset", {"sql": "SELECT 1"}, "invalid_arguments"),
    ("list_sources", {"everything": True}, "invalid_arguments"),
    ("answer", {}, "invalid_arguments"),
    # unknown ids
    ("read_passage", {"passage_id": 999_999_999}, "not_found"),
    ("query_dataset", {"dataset_id": 999_999_999, "sql": "SELECT 1"}, "not_found"),
    (
        "query_dataset",
        {"dataset_id": "DATASET", "sql": "SELECT 1", "snapshot": 99},
        "snapshot_not_found",
    ),
    # huge strings, NUL, deep nesting
    ("search", {"query": HUGE}, "invalid_arguments"),
    ("search", {"query": "a\x00b"}, "invalid_arguments"),
    ("query_dataset", {"dataset_id": "DATASET", "sql": HUGE}, "invalid_arguments"),
    ("answer", {"query": HUGE}, "query_too_long"),
    ("answer", {"query": "ok", "evidence_policy": NESTED}, "invalid_policy"),
    ("list_sources", {"space_id": NESTED}, "invalid_arguments"),
    # SQL the governed engine refuses
    ("query_dataset", {"dataset_id": "DATASET", "sql": "DROP TABLE orders"}, "unsupported_sql"),
    (
        "query_dataset",
        {"dataset_id": "DATASET", "sql": "SELECT nope FROM orders"},
        "unknown_column",
    ),
    # no such tool
    ("delete_everything", {}, "unknown_tool"),
]


def test_bad_arguments_to_every_tool_are_typed_errors(live_server_url, keys, library):
    dataset_id = library["dataset"].pk
    bad = [
        (tool, {k: dataset_id if v == "DATASET" else v for k, v in arguments.items()}, code)
        for tool, arguments, code in BAD_CALLS
    ]

    async def work(session):
        results = [await call(session, tool, **arguments) for tool, arguments, _ in bad]
        return results, await call(session, "list_sources")

    results, after = with_http_session(live_server_url, keys["reader"].secret, work)
    pairs = zip(bad, results, strict=True)
    codes = [(tool, payload["error"]["code"]) for (tool, _, _), (_, payload) in pairs]
    assert codes == [(tool, code) for tool, _, code in bad]
    assert all(is_error for is_error, _ in results)
    for _, payload in results:
        assert set(payload["error"]) == {"code", "message", "fields"}
        assert len(payload["error"]["message"]) < 500  # never an echo of the input
    assert after[0] is False and after[1]["spaces"]
    # Refused calls are audited too, with their long strings cut.
    assert ToolCall.objects.count() == len(bad) + 1
    huge = ToolCall.objects.filter(
        tool="search", error_code="invalid_arguments", arguments__query__endswith="…[cut]"
    ).get()
    assert len(huge.arguments["query"]) < 600


def test_arguments_nested_past_the_parser_limit_are_a_protocol_error(live_server_url, keys):
    auth = {"Authorization": f"Bearer {keys['reader'].secret}"}
    deep = "[" * 5000 + "]" * 5000
    body = (
        '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"search",'
        '"arguments":{"query":"ok","space_ids":' + deep + "}}}"
    )
    response = post_mcp(
        live_server_url,
        {**auth, "Content-Type": "application/json"},
        json=None,
        content=body.encode(),
    )
    assert 400 <= response.status_code < 500
    assert response.json()["error"]["code"] == -32700  # JSON-RPC parse error (the SDK's)
    assert post_mcp(live_server_url, auth).status_code == 200


def test_malformed_requests_to_the_endpoint_are_4xx(live_server_url, keys):
    auth = {"Authorization": f"Bearer {keys['reader'].secret}"}
    responses = [
        post_mcp(live_server_url, auth, json=None, content=b"{not json"),
        post_mcp(live_server_url, auth, json=None, content=b"[]"),
        post_mcp(live_server_url, auth, json={"jsonrpc": "2.0", "id": 1, "method": "nope"}),
        post_mcp(
            live_server_url, {**auth, "Content-Type": "text/plain"}, json=None, content=b"hello"
        ),
        post_mcp(live_server_url, auth, json={**initialize_body(), "params": "x"}),
        post_mcp(live_server_url, auth, json=None, content=b"{" * 100_000),
        post_mcp(live_server_url, auth, json=None, content=b"x" * (3 * 1024 * 1024)),
        httpx.get(f"{live_server_url}/mcp", headers=auth, timeout=30),
        httpx.delete(f"{live_server_url}/mcp", headers=auth, timeout=30),
        httpx.get(f"{live_server_url}/mcp/anything", headers=auth, timeout=30),
    ]
    statuses = [response.status_code for response in responses]
    assert statuses == [400, 400, 200, 400, 400, 400, 413, 405, 405, 404]
    assert responses[2].json()["error"]["code"] == -32601  # JSON-RPC: no such method
    # Still serving.
    assert post_mcp(live_server_url, auth).status_code == 200
