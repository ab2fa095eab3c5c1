"""The Python client (clients/python, `koinon-client`) against the suite's live Daphne:
answers, event streams resumed after a dropped connection, collect, release checks, typed
errors and the `unknown` reading of a body without a report (SPEC §9, issue 15)."""

import copy
import json
import uuid

import httpx
import pytest
from koinon_client import (
    Answer,
    AuthenticationError,
    Client,
    ConflictError,
    EvidencePolicy,
    EvidenceReport,
    NotFoundError,
    PayloadTooLargeError,
    PermissionDeniedError,
    Release,
    ServerError,
    StreamError,
    ValidationError,
    canonical,
)

from core.services import api_key_create
from tests.clients.helpers import QUESTION, TEXT
from tests.knowledge.test_documents import wait_for_extraction
from tests.services import ROOT

VECTORS = ROOT / "clients" / "conformance" / "vectors.json"

pytestmark = pytest.mark.django_db(transaction=True)


class CutAfterFirstEvent(httpx.BaseTransport):
    """A real HTTP transport whose first event stream is cut after its first event, as a
    dropped connection would be; it records every request."""

    def __init__(self) -> None:
        self.inner = httpx.HTTPTransport()
        self.requests: list[httpx.Request] = []
        self.cut_done = False

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        response = self.inner.handle_request(request)
        if self.cut_done or not request.url.path.endswith("/events"):
            return response
        self.cut_done = True
        return httpx.Response(
            response.status_code, headers=response.headers, stream=_FirstEventOnly(response)
        )

    def close(self) -> None:
        self.inner.close()


class _FirstEventOnly(httpx.SyncByteStream):
    def __init__(self, response: httpx.Response) -> None:
        self.response = response

    def __iter__(self):
        seen = b""
        for chunk in self.response.stream:
            seen += chunk
            end = seen.find(b"\n\n")
            if end >= 0:
                yield seen[: end + 2]
                raise httpx.RemoteProtocolError("connection dropped (test)")
        raise httpx.RemoteProtocolError("connection dropped before any event (test)")

    def close(self) -> None:
        self.response.close()


def test_create_returns_the_sealed_answer_and_its_release_verifies(
    live_server_url, corpus, reader_key
):
    with Client(live_server_url, reader_key) as client:
        answer = client.answer.create(
            QUESTION,
            evidence_policy=EvidencePolicy(mode="strict", required_tools=("keyword_search",)),
        )
    assert answer.evidence.answer_status == "evidence_backed" and answer.evidence.is_evidence_backed
    assert answer.evidence.policy == EvidencePolicy(
        mode="strict",
        allowed_tools=("vector_search", "keyword_search", "dataset_query"),
        required_tools=("keyword_search",),
    )
    assert {o.tool for o in answer.evidence.outcomes} >= {"keyword_search"}
    assert f"“{TEXT}”" in answer.text
    assert answer.release is not None and answer.release.kind == "answer"
    assert answer.release.verify(answer.body) and answer.verified
    # Any change to what was sealed fails verification, by name.
    changed = copy.deepcopy(answer.body)
    changed["answer"]["text"] += " And it is on fire."
    assert answer.release.mismatches(changed) == ["text_sha256"]
    changed = copy.deepcopy(answer.body)
    changed["answer"]["citations"][0]["quote"] = "Nobody owns service reviews."
    assert answer.release.mismatches(changed) == ["citations_sha256"]
    changed = copy.deepcopy(answer.body)
    changed["evidence"]["policy"]["mode"] = "auto"
    assert not answer.release.verify(changed)


def test_events_resume_by_last_event_id_after_a_dropped_connection(
    live_server_url, corpus, reader_key
):
    with Client(live_server_url, reader_key) as client:
        run_id = client.answer.create(QUESTION).run_id
        replayed = list(client.answer.events(run_id))
    transport = CutAfterFirstEvent()
    with Client(live_server_url, reader_key, transport=transport) as client:
        resumed = list(client.answer.events(run_id))
    assert [e.id for e in resumed] == [e.id for e in replayed]
    assert [e.id for e in resumed] == [f"{run_id}:1:{n}" for n in range(1, len(resumed) + 1)]
    assert resumed[-1].event == "completed" and resumed[-1].is_final
    event_requests = [r for r in transport.requests if r.url.path.endswith("/events")]
    assert len(event_requests) == 2
    assert "last-event-id" not in event_requests[0].headers
    assert event_requests[1].headers["last-event-id"] == resumed[0].id
    # A cursor from earlier resumes after it, and only after it.
    with Client(live_server_url, reader_key) as client:
        rest = list(client.answer.events(run_id, last_event_id=replayed[1].id))
    assert [e.id for e in rest] == [e.id for e in replayed[2:]]


def test_collect_streams_to_the_final_body(live_server_url, corpus, reader_key):
    with Client(live_server_url, reader_key, transport=CutAfterFirstEvent()) as client:
        created = client.answer.create(QUESTION)
        collected = client.answer.collect(created.run_id)
        stored = client.runs.get(created.run_id)
        audit = client.runs.audit(created.run_id)
    assert collected.body == created.body == stored.body
    assert collected.verified
    assert audit["generations"][0]["output_release"]["id"] == collected.release.id


def test_a_streamed_run_started_by_the_client_is_collected_from_the_worker(
    live_server_url, celery_worker, corpus, reader_key
):
    with Client(live_server_url, reader_key) as client:
        run_id = client.answer.start(QUESTION)
        answer = client.answer.collect(run_id)
    assert answer.run_id == run_id
    assert answer.evidence.answer_status == "evidence_backed" and answer.verified


def test_errors_are_typed_from_the_servers_error_shape(live_server_url, corpus, reader_key, owner):
    with (
        Client(live_server_url, "kn_" + "x" * 43) as client,
        pytest.raises(AuthenticationError) as unknown,
    ):
        client.answer.create(QUESTION)
    assert (unknown.value.status, unknown.value.code) == (401, "invalid_credentials")

    with Client(live_server_url, reader_key) as client:
        with pytest.raises(ValidationError) as empty:
            client.answer.create("   ")
        assert (empty.value.status, empty.value.code) == (422, "empty_query")
        assert "query" in empty.value.fields
        with pytest.raises(ValidationError) as policy:
            client.answer.create(QUESTION, evidence_policy={"mode": "yolo"})
        assert policy.value.code == "invalid_policy"
        with pytest.raises(NotFoundError) as missing:
            client.runs.get(str(uuid.uuid4()))
        assert (missing.value.status, missing.value.code) == (404, "not_found")
        with pytest.raises(NotFoundError):
            list(client.answer.events(str(uuid.uuid4())))
    # Someone else's run reads exactly like a missing one.
    with Client(live_server_url, api_key_create(user=owner).secret) as other:
        their_run = other.answer.create(QUESTION).run_id
    with Client(live_server_url, reader_key) as client, pytest.raises(NotFoundError) as foreign:
        client.runs.audit(their_run)
    assert (foreign.value.code, foreign.value.message) == (
        missing.value.code,
        missing.value.message,
    )


def test_debug_is_the_services_refusal_for_a_reader_and_answers_staff(
    live_server_url, corpus, reader_key, staff
):
    """Issue 49, item 2: `mode="debug"` from someone not staff is refused by the service;
    the client raises its typed PermissionDeniedError with the service's code and message."""
    with Client(live_server_url, reader_key) as client, pytest.raises(PermissionDeniedError) as no:
        client.answer.create(QUESTION, mode="debug")
    assert (no.value.status, no.value.code) == (403, "permission_denied")
    assert no.value.message == "Debug mode is for staff."
    with Client(live_server_url, api_key_create(user=staff).secret) as client:
        answer = client.answer.create(QUESTION, mode="debug")
    assert answer.body["mode"] == "debug" and "trace" in answer.body


def test_a_body_without_an_evidence_report_reads_as_unknown():
    body = {"run_id": "r", "answer": {"text": "Trust me.", "citations": [], "cards": []}}
    answer = Answer.from_body(body)
    assert answer.evidence == EvidenceReport()
    assert (answer.evidence.status, answer.evidence.answer_status) == ("unknown", "unknown")
    assert not answer.evidence.is_evidence_backed and not answer.evidence.is_known
    assert answer.release is None and not answer.verified
    for evidence in (None, "available", [], {"answer_status": None}):
        report = EvidenceReport.from_body({**body, "evidence": evidence})
        assert report.answer_status == "unknown" and not report.is_evidence_backed
    assert Release.from_body({**body, "release": {"id": "x"}}) is None


def test_upload_and_search_through_the_client(live_server_url, corpus, reader_key):
    with Client(live_server_url, reader_key) as client:
        uploaded = client.documents.upload(
            b"My private note: the quarterly budget meeting moved to Thursday.",
            filename="note.txt",
            private=True,
            title="Budget note",
        )
        assert uploaded["private"] is True and uploaded["created"] is True
        assert uploaded["revision"] and uploaded["space"] is None
        found = client.search("operations team service reviews", limit=5)
    # The worker extracts the upload meanwhile: let it finish before the test's data is
    # truncated (a TRUNCATE while it writes the passages deadlocks the teardown).
    wait_for_extraction(uploaded["revision"])
    assert found.label == "unverified"
    assert any(TEXT in result["text"] for result in found.results)
    assert {o.tool for o in found.outcomes} == {"vector_search", "keyword_search"}


def test_errors_without_the_error_shape_are_typed_by_status():
    answers = {
        "/v1/runs/a": httpx.Response(502, text="<html>Bad gateway</html>"),
        "/v1/runs/b": httpx.Response(
            409, json={"error": {"code": "space_exists", "message": "Taken.", "fields": {}}}
        ),
        "/v1/runs/c": httpx.Response(413, json={"error": {"code": "too_large", "message": "Big"}}),
        "/v1/runs/d": httpx.Response(403, json={"error": {"code": "permission_denied"}}),
    }
    transport = httpx.MockTransport(lambda request: answers[request.url.path])
    expected = {
        "a": (ServerError, "http_502"),
        "b": (ConflictError, "space_exists"),
        "c": (PayloadTooLargeError, "too_large"),
        "d": (PermissionDeniedError, "permission_denied"),
    }
    with Client("http://koinon.invalid", "kn_test", transport=transport) as client:
        for run_id, (kind, code) in expected.items():
            with pytest.raises(kind) as error:
                client.runs.get(run_id)
            assert (
                error.value.code == code
                and error.value.status == answers[f"/v1/runs/{run_id}"].status_code
            )


def test_a_stream_that_never_progresses_ends_in_a_stream_error_without_repeats():
    requests = []

    def replaying(request: httpx.Request) -> httpx.Response:
        requests.append(request)
        body = 'id: r:1:1\nevent: started\ndata: {"run_id": "r", "generation": 1}\n\n'
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, text=body)

    with Client(
        "http://koinon.invalid", "kn_test", transport=httpx.MockTransport(replaying)
    ) as client:
        received = []
        with pytest.raises(StreamError) as interrupted:
            for event in client.answer.events("r", max_reconnects=3):
                received.append(event)
    assert [e.id for e in received] == ["r:1:1"]
    assert interrupted.value.code == "stream_interrupted"
    assert len(requests) == 4  # the first, then 3 reconnects that brought nothing new
    assert all(r.headers["last-event-id"] == "r:1:1" for r in requests[1:])


def one_character_changed(body: dict, part: str) -> dict:
    """The body with one character changed in its text, first citation, first card or
    policy."""
    changed = copy.deepcopy(body)
    if part == "text":
        changed["answer"]["text"] = changed["answer"]["text"][:-1] + "!"
    elif part == "policy":
        changed["evidence"]["policy"]["mode"] = changed["evidence"]["policy"]["mode"][:-1] + "X"
    else:
        item = changed["answer"][part][0]
        key = "quote" if "quote" in item else "label"
        item[key] = item[key][:-1] + "X"
    return changed


def test_the_python_client_agrees_with_every_conformance_vector():
    document = json.loads(VECTORS.read_text(encoding="utf-8"))
    for vector in document["jcs"]:
        assert canonical(json.loads(vector["input_json"])).decode() == vector["canonical"]
    for vector in document["releases"]:
        body, version = json.loads(vector["body_json"]), vector["policy_version"]
        release = Release.from_body(body)
        assert release.policy_version == version and release.verify(body), vector["name"]
        for part, value in (
            ("citations", body["answer"]["citations"]),
            ("cards", body["answer"]["cards"]),
            ("policy", body["evidence"]["policy"]),
        ):
            assert canonical(value, version).decode() == vector["canonical"][part]
        parts = ["text", "policy"] + [p for p in ("citations", "cards") if body["answer"][p]]
        for part in parts:
            name = f"{part}_sha256"
            assert release.mismatches(one_character_changed(body, part)) == [name]
    # A receipt from before versions were reported is version 1; an unknown one verifies
    # nothing.
    v1 = next(v for v in document["releases"] if v["policy_version"] == "1")
    body = json.loads(v1["body_json"])
    del body["release"]["policy_version"]
    assert Release.from_body(body).verify(body)
    body["release"]["policy_version"] = "3"
    assert Release.from_body(body).mismatches(body) == [
        "text_sha256",
        "citations_sha256",
        "cards_sha256",
        "policy_sha256",
    ]
