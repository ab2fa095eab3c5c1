"""Real HTTP servers on loopback for the outside clients' tests.

`LoopbackServer` runs an `App` (a function of the recorded request returning a `Reply`) in a
thread of its own. The apps below speak the products' APIs as they are published — SearxNG's
JSON search, OpenAI's vector store search, koinon's own `/v1/search` — fakes only because
those products cannot run here. `Reply` can also stall, drip a body a byte at a time or send
it without a length, for the bounds. Every error body carries `SECRET`, which no exception
or log of koinon's may repeat.
"""

import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import pytest

from outside.errors import OutsideError
from tests.guards import no_hang

SECRET = "SECRET-PROVIDER-DETAIL sk-live-51Habc0123456789 /srv/index/private.db"
KEY = "test-key-0123456789"


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: bytes

    def json(self) -> object:
        return json.loads(self.body)


@dataclass
class Reply:
    status: int = 200
    body: bytes = b""
    content_type: str = "application/json"
    stall: bool = False  # answer nothing until the server stops (a server that hangs)
    drip: bool = False  # headers, then one byte now and then until the server stops
    chunked: bool = False  # no Content-Length: the client learns the size only by reading

    @classmethod
    def json(cls, value: object, status: int = 200, **fields: bool) -> "Reply":
        return cls(status=status, body=json.dumps(value).encode(), **fields)

    @classmethod
    def error(cls, status: int) -> "Reply":
        """The kind of body a failing service sends: it must never reach a user or a log."""
        return cls.json({"error": {"message": SECRET, "type": "server_error"}}, status=status)


App = Callable[[Request], Reply]


@dataclass
class LoopbackServer:
    app: App
    requests: list[Request] = field(default_factory=list)
    stopping: threading.Event = field(default_factory=threading.Event)
    url: str = ""

    def start(self) -> "LoopbackServer":
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:  # the name http.server calls
                self._answer()

            def do_POST(self) -> None:  # the name http.server calls
                self._answer()

            def _answer(self) -> None:
                parts = urlsplit(self.path)
                length = int(self.headers.get("Content-Length") or 0)
                request = Request(
                    method=self.command,
                    path=parts.path,
                    query=parse_qs(parts.query),
                    headers={name.lower(): value for name, value in self.headers.items()},
                    body=self.rfile.read(length) if length else b"",
                )
                owner.requests.append(request)
                reply = owner.app(request)
                if reply.stall:
                    owner.stopping.wait(60)
                    return
                self.send_response(reply.status)
                self.send_header("Content-Type", reply.content_type)
                if reply.drip or reply.chunked:
                    self.send_header("Transfer-Encoding", "chunked")
                    self.end_headers()
                    self._chunks(reply)
                    return
                self.send_header("Content-Length", str(len(reply.body)))
                self.end_headers()
                self.wfile.write(reply.body)

            def _chunks(self, reply: Reply) -> None:
                try:
                    if reply.drip:
                        for byte in reply.body:
                            if owner.stopping.wait(0.05):
                                return
                            self._chunk(bytes([byte]))
                    else:
                        for start in range(0, len(reply.body), 4096):
                            self._chunk(reply.body[start : start + 4096])
                    self._chunk(b"")
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client stopped reading: what a bound does

            def _chunk(self, data: bytes) -> None:
                self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                self.wfile.flush()

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_port}"
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.05,), daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self.stopping.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(10)


def authorised(request: Request) -> bool:
    return request.headers.get("authorization") == f"Bearer {KEY}"


# --- SearxNG ------------------------------------------------------------------------------


def searxng_result(url: str, title: str, content: str, position: int) -> dict[str, object]:
    """One entry of SearxNG's `results`, with the fields its JSON format writes."""
    return {
        "url": url,
        "title": title,
        "content": content,
        "engine": "duckduckgo",
        "parsed_url": [*urlsplit(url), ""],
        "template": "default.html",
        "engines": ["duckduckgo", "brave"],
        "positions": [position],
        "score": 2.0 / position,
        "category": "general",
        "publishedDate": None,
    }


@dataclass
class FakeSearxng:
    """SearxNG's search endpoint: `GET /search?q=…&format=json` (403 when the format is not
    json, as an instance without it enabled answers); `override` replaces any answer."""

    results: list[dict[str, object]] = field(default_factory=list)
    key: str | None = KEY  # the guarding proxy's key, or None for an open instance
    override: Reply | None = None

    def __call__(self, request: Request) -> Reply:
        if self.override is not None:
            return self.override
        if request.path != "/search" or request.method != "GET":
            return Reply.error(404)
        if self.key is not None and not authorised(request):
            return Reply.error(401)
        if request.query.get("format") != ["json"]:
            return Reply.error(403)
        return Reply.json(
            {
                "query": request.query["q"][0],
                "number_of_results": 0,
                "results": self.results,
                "answers": [],
                "corrections": [],
                "infoboxes": [],
                "suggestions": [],
                "unresponsive_engines": [],
            }
        )


# --- OpenAI vector store search -----------------------------------------------------------


def vector_store_item(
    file_id: str, filename: str, score: float, *texts: str, attributes: dict | None = None
) -> dict[str, object]:
    """One `data` entry of `vector_store.search_results.page` (openai-python's
    `VectorStoreSearchResponse`)."""
    return {
        "file_id": file_id,
        "filename": filename,
        "score": score,
        "attributes": attributes or {},
        "content": [{"type": "text", "text": text} for text in texts],
    }


@dataclass
class FakeVectorStore:
    """`POST /v1/vector_stores/{id}/search` for the store `store_id` (any other store is a
    404, as OpenAI answers), bearer key required, `max_num_results` honoured."""

    store_id: str = "vs_abc123"
    data: list[dict[str, object]] = field(default_factory=list)
    override: Reply | None = None

    def __call__(self, request: Request) -> Reply:
        if self.override is not None:
            return self.override
        if request.method != "POST" or request.path != f"/v1/vector_stores/{self.store_id}/search":
            return Reply.error(404)
        if not authorised(request):
            return Reply.error(401)
        body = request.json()
        assert isinstance(body, dict)
        limit = body.get("max_num_results", 10)
        assert isinstance(limit, int) and 1 <= limit <= 50
        return Reply.json(
            {
                "object": "vector_store.search_results.page",
                "search_query": [body["query"]],
                "data": self.data[:limit],
                "has_more": False,
                "next_page": None,
            }
        )


# --- koinon's /v1/search --------------------------------------------------------------------


def koinon_candidate(
    passage_id: int, document_id: int, revision_id: int, text: str, score: float
) -> dict[str, object]:
    """One entry of koinon's search `results`: `knowledge.retrieval.Candidate` as
    `SearchApi` writes it (its `__dict__`: CandidateOutput's fields and `units`)."""
    return {
        "passage_id": passage_id,
        "document_id": document_id,
        "revision_id": revision_id,
        "extraction_id": revision_id + 1000,
        "char_start": 0,
        "char_end": len(text),
        "text": text,
        "locator": {"page": 1},
        "score": score,
        "contributions": {"keyword_search": {"rank": 1, "score": score}},
        "units": [],
    }


def koinon_outcome(tool: str, state: str, code: str, count: int, retryable: bool = False) -> dict:
    return {
        "tool": tool,
        "state": state,
        "code": code,
        "result_count": count,
        "retryable": retryable,
    }


@dataclass
class FakeKoinon:
    """A peer koinon's `GET /v1/search` (TODO, issue 50: the whole-stack test against a
    second koinon comes with the channel's wiring). Results per space id; a query without
    `space` sees every space."""

    by_space: dict[int, list[dict[str, object]]] = field(default_factory=dict)
    outcomes: list[dict[str, object]] | None = None
    override: Reply | None = None

    def __call__(self, request: Request) -> Reply:
        if self.override is not None:
            return self.override
        if request.method != "GET" or request.path != "/v1/search":
            return Reply.error(404)
        if not authorised(request):
            return Reply.json(
                {"error": {"code": "invalid_credentials", "message": SECRET}}, status=401
            )
        spaces = [int(space) for space in request.query.get("space", [])]
        limit = int(request.query.get("limit", ["10"])[0])
        results = [
            result
            for space, rows in sorted(self.by_space.items())
            if not spaces or space in spaces
            for result in rows
        ][:limit]
        outcomes = self.outcomes or [
            koinon_outcome(
                "keyword_search", "succeeded", "matched" if results else "no_relevant_hit", 1
            )
        ]
        return Reply.json({"label": "unverified", "results": results, "outcomes": outcomes})


def wait_until(condition: Callable[[], bool], seconds: float = 30) -> None:
    """A generous guard while a server thread starts, never a measured bound."""
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError("the server did not start")
        time.sleep(0.02)


def outside_error(
    call: Callable[[], object],
    caplog: pytest.LogCaptureFixture,
    *,
    server_loggers: tuple[str, ...] = (),
) -> OutsideError:
    """The `OutsideError` that `call` raises, checked to repeat nothing the server sent: not
    in its text, its repr, its detail, nor in any log line written meanwhile (but those of
    `server_loggers`: a server running in the test's own process logs its own failures)."""
    with caplog.at_level(logging.DEBUG), pytest.raises(OutsideError) as raised, no_hang():
        call()
    error = raised.value
    ours = [r.getMessage() for r in caplog.records if not r.name.startswith(server_loggers)]
    for text in (str(error), repr(error), error.detail, *ours):
        assert "SECRET" not in text and "sk-live" not in text
    return error
