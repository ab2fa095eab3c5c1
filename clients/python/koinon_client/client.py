"""The koinon REST client: `Client(base_url, api_key)`.

>>> from koinon_client import Client, EvidencePolicy
>>> with Client("http://127.0.0.1:8000", api_key="kn_…") as client:  # doctest: +SKIP
...     answer = client.answer.create("Who owns service reviews?",
...                                   evidence_policy=EvidencePolicy(mode="strict"))
...     if answer.evidence.is_evidence_backed and answer.verified:
...         print(answer.text)
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

import httpx
from httpx_sse import SSEError, connect_sse

from koinon_client.errors import RunFailedError, StreamError, error_from_response
from koinon_client.models import Answer, Event, EvidencePolicy, SearchResults
from koinon_client.transparency import (
    Checkpoint,
    LogVerificationError,
    checkpoint_open,
    proof_hashes,
    verify_consistency,
)

STREAM_VERSION = "1"
# What a dropped connection looks like to httpx while reading a stream.
_DISCONNECTS = (httpx.TransportError, httpx.StreamError, SSEError)


class Client:
    """A client of one koinon server, authenticated with one API key.

    `transport` is passed to httpx (a mock, or a proxy transport); `timeout` is per
    request (seconds; streams wait up to it between two events).
    """

    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        timeout: float = 60.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self._http = httpx.Client(
            base_url=base_url.rstrip("/"),
            headers={"Authorization": f"Bearer {api_key}", "User-Agent": "koinon-client/0.1"},
            timeout=timeout,
            transport=transport,
        )
        self.answer = AnswerApi(self)
        self.runs = RunsApi(self)
        self.documents = DocumentsApi(self)
        self.log = LogApi(self)

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def request(self, method: str, path: str, **kwargs: Any) -> Any:
        """One JSON request; the decoded body, or the typed exception of the error."""
        response = self._http.request(method, path, **kwargs)
        if response.is_error:
            raise error_from_response(response)
        return response.json() if response.content else None

    def search(
        self,
        query: str,
        *,
        spaces: list[int] | None = None,
        tools: list[str] | None = None,
        limit: int | None = None,
    ) -> SearchResults:
        """Raw retrieval candidates (`GET /v1/search`), labelled `unverified`.

        >>> client.search("service reviews", limit=5).results[0]["text"]  # doctest: +SKIP
        """
        params: dict[str, Any] = {"q": query}
        if spaces:
            params["space"] = spaces
        if tools:
            params["tools"] = ",".join(tools)
        if limit is not None:
            params["limit"] = limit
        return SearchResults.from_body(self.request("GET", "/v1/search", params=params))


class AnswerApi:
    """`client.answer`: ask (`create`), start a streamed run (`start`), follow its events
    (`events`), or wait for its sealed body (`collect`)."""

    def __init__(self, client: Client) -> None:
        self._client = client

    @staticmethod
    def _request_body(
        query: str, evidence_policy: EvidencePolicy | dict | None, fields: dict[str, Any]
    ) -> dict[str, Any]:
        body: dict[str, Any] = {"query": query}
        if evidence_policy is not None:
            body["evidence_policy"] = (
                evidence_policy.to_dict()
                if isinstance(evidence_policy, EvidencePolicy)
                else evidence_policy
            )
        body.update({name: value for name, value in fields.items() if value is not None})
        return body

    def create(
        self,
        query: str,
        *,
        evidence_policy: EvidencePolicy | dict | None = None,
        space_ids: list[int] | None = None,
        selected_sources: list[int] | None = None,
        language: str | None = None,
        mode: str | None = None,
        conversation_id: int | None = None,
    ) -> Answer:
        """Ask and wait for the sealed answer (`POST /v1/answer`).

        >>> answer = client.answer.create("Who owns service reviews?")  # doctest: +SKIP
        >>> answer.evidence.answer_status, answer.release.verify(answer.body)  # doctest: +SKIP
        ('evidence_backed', True)
        """
        body = self._request_body(
            query,
            evidence_policy,
            {
                "space_ids": space_ids,
                "selected_sources": selected_sources,
                "language": language,
                "mode": mode,
                "conversation_id": conversation_id,
            },
        )
        return Answer.from_body(self._client.request("POST", "/v1/answer", json=body))

    def start(
        self,
        query: str,
        *,
        evidence_policy: EvidencePolicy | dict | None = None,
        space_ids: list[int] | None = None,
        selected_sources: list[int] | None = None,
        language: str | None = None,
    ) -> str:
        """Start a streamed run (executed by the server's worker) and return its run id at
        once; follow it with `events(run_id)` or `collect(run_id)`."""
        body = self._request_body(
            query,
            evidence_policy,
            {
                "space_ids": space_ids,
                "selected_sources": selected_sources,
                "language": language,
            },
        )
        body.update(stream=True, stream_version=STREAM_VERSION)
        http = self._client._http
        with http.stream(
            "POST", "/v1/answer", json=body, headers={"Accept": "text/event-stream"}
        ) as response:
            if response.is_error:
                response.read()
                raise error_from_response(response)
            run_id = response.headers.get("Koinon-Run-Id")
        if not run_id:
            raise StreamError("The server named no run.", code="no_run_id")
        return run_id

    def events(
        self, run_id: str, last_event_id: str | None = None, *, max_reconnects: int = 5
    ) -> Iterator[Event]:
        """The run's events (`GET /v1/runs/<id>/events`, version 1) up to its final one.

        When the connection drops, it reconnects with `Last-Event-ID` set to the last
        event received, so no event is lost or repeated (an event id seen before is never
        yielded twice); after `max_reconnects` attempts in a row that bring no new event
        it raises `StreamError`. Pass `last_event_id` to resume a
        stream read earlier.

        >>> for event in client.answer.events(run_id):  # doctest: +SKIP
        ...     print(event.id, event.event)
        """
        cursor = last_event_id
        seen: set[str] = set()
        failures = 0
        while True:
            headers = {"Accept": "text/event-stream"}
            if cursor:
                headers["Last-Event-ID"] = cursor
            try:
                with connect_sse(
                    self._client._http,
                    "GET",
                    f"/v1/runs/{run_id}/events",
                    params={"stream_version": STREAM_VERSION},
                    headers=headers,
                ) as source:
                    if source.response.is_error:
                        source.response.read()
                        raise error_from_response(source.response)
                    for sse in source.iter_sse():
                        event = Event(id=sse.id or None, event=sse.event, data=_data(sse.data))
                        if event.id:
                            if event.id in seen:  # a server or proxy replaying: skip it
                                continue
                            seen.add(event.id)
                            cursor = event.id
                        failures = 0  # progress: a new event
                        yield event
                        if event.is_final:
                            return
            except _DISCONNECTS:
                pass
            failures += 1  # dropped, or ended without a final event: resume after cursor
            if failures > max_reconnects:
                raise StreamError(
                    f"The event stream of run {run_id} ended without a final event.",
                    code="stream_interrupted",
                )

    def collect(self, run_id: str, last_event_id: str | None = None) -> Answer:
        """Follow the run's events to the end and return its sealed answer.

        Raises `RunFailedError` for a failed run and `StreamError` when the stream timed
        out or could not be resumed.
        """
        for event in self.events(run_id, last_event_id):
            if event.event == "completed":
                return Answer.from_body(event.data["payload"]["result"])
            if event.event == "failed":
                code = (
                    str(event.data.get("code", "failed"))
                    if isinstance(event.data, dict)
                    else "failed"
                )
                raise RunFailedError(f"Run {run_id} failed.", code=code)
            if event.event in ("timeout", "error"):
                raise StreamError(
                    f"The stream of run {run_id} ended: {event.event}.", code=event.event
                )
        raise StreamError(f"Run {run_id} ended without an answer.", code="stream_interrupted")


def _data(raw: str) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return raw


class RunsApi:
    """`client.runs`: a run's latest sealed body, its audit, and retries."""

    def __init__(self, client: Client) -> None:
        self._client = client

    def get(self, run_id: str) -> Answer:
        """`GET /v1/runs/<id>`: the latest published body, as you may read it now."""
        return Answer.from_body(self._client.request("GET", f"/v1/runs/{run_id}"))

    def audit(self, run_id: str) -> dict:
        """`GET /v1/runs/<id>/audit`: plan, steps, retrieval manifest, SQL, and
        `output_release` only where a release row exists."""
        return self._client.request("GET", f"/v1/runs/{run_id}/audit")

    def retry(self, run_id: str) -> Answer:
        """`POST /v1/runs/<id>/retry`: generation n+1; earlier receipts remain."""
        return Answer.from_body(self._client.request("POST", f"/v1/runs/{run_id}/retry"))


class LogApi:
    """`client.log`: koinon's answer log (docs/releases.md), checked with only its public
    key. Keep the checkpoints you verify (their `note`): a later one must extend them."""

    def __init__(self, client: Client) -> None:
        self._client = client

    def checkpoint(self, *, verifier_key: str) -> Checkpoint:
        """`GET /v1/log/checkpoint`: the latest checkpoint, verified with `verifier_key`
        (never with the key the server sends along)."""
        body = self._client.request("GET", "/v1/log/checkpoint")
        return checkpoint_open(body["note"], verifier_key)

    def verify_consistency(
        self,
        old_checkpoint: str | Checkpoint,
        new_checkpoint: str | Checkpoint,
        *,
        verifier_key: str,
    ) -> Checkpoint:
        """Check that the log of `new_checkpoint` extends the log of `old_checkpoint`, both
        signed notes the key signed (RFC 9162 §2.1.4, the proof from
        `GET /v1/log/consistency`): nothing the old one covered was rewritten, removed or
        reordered. Returns the new checkpoint; LogVerificationError for a fork."""
        old, new = (
            checkpoint_open(c.note if isinstance(c, Checkpoint) else c, verifier_key)
            for c in (old_checkpoint, new_checkpoint)
        )
        if old.size > new.size:
            raise LogVerificationError("the newer checkpoint is smaller", code="inconsistent")
        proof: list[bytes] = []
        if 0 < old.size < new.size:
            served = self._client.request(
                "GET", "/v1/log/consistency", params={"from": old.size, "to": new.size}
            )
            proof = proof_hashes(served.get("proof"))
        if old.size == 0:
            return new  # every tree extends the empty one
        verify_consistency(
            old_size=old.size, new_size=new.size, old_root=old.root, new_root=new.root, proof=proof
        )
        return new


class DocumentsApi:
    """`client.documents`: upload files into a space or as private files."""

    def __init__(self, client: Client) -> None:
        self._client = client

    def upload(
        self,
        file: str | Path | bytes | BinaryIO,
        *,
        filename: str | None = None,
        space: int | None = None,
        private: bool = False,
        title: str | None = None,
        document: int | None = None,
    ) -> dict:
        """`POST /v1/documents` (multipart). Give `space` (curators) or `private=True`.

        >>> client.documents.upload("handbook.md", space=1)["revision"]  # doctest: +SKIP
        """
        if isinstance(file, str | Path):
            path = Path(file)
            content: bytes | BinaryIO = path.read_bytes()
            filename = filename or path.name
        else:
            content = file
        if not filename:
            raise ValueError("Name the file: filename='…'.")
        data: dict[str, str] = {}
        if space is not None:
            data["space"] = str(space)
        if private:
            data["private"] = "true"
        if title is not None:
            data["title"] = title
        if document is not None:
            data["document"] = str(document)
        return self._client.request(
            "POST", "/v1/documents", data=data, files={"file": (filename, content)}
        )
