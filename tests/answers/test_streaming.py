"""Answers as server-sent events, against the suite's real Daphne and Celery worker
(SPEC §6, issue 11): stream=true runs in the worker; replay honours Last-Event-ID and the
boundary check; only sealed output leaves before `completed`."""

import json

import httpx
import jsonschema
import pytest
from guardian.shortcuts import remove_perm

from core.services import api_key_create
from knowledge.documents.extraction import revision_extract
from knowledge.documents.upload import document_upload

pytestmark = pytest.mark.django_db(transaction=True)

TEXT = "The platform operations team owns service reviews."
QUESTION = "Who owns service reviews?"
SSE = {"Accept": "text/event-stream"}


def parse(raw: str) -> list[dict]:
    """Events of an SSE body: {"id", "event", "data"}; comments are skipped."""
    events = []
    for block in raw.split("\n\n"):
        fields: dict = {}
        for line in block.splitlines():
            if not line or line.startswith(":"):
                continue
            name, _, value = line.partition(": ")
            fields[name] = value
        if fields:
            events.append(
                {
                    "id": fields.get("id"),
                    "event": fields["event"],
                    "data": json.loads(fields["data"]),
                }
            )
    return events


def assert_documented(url: str, events: list[dict], version: str) -> None:
    """Every event's data has the shape the served OpenAPI schema documents for it."""
    accept = {"Accept": "application/vnd.oai.openapi+json"}
    schema = httpx.get(f"{url}/v1/schema/", headers=accept, timeout=30).json()
    stream = schema["paths"]["/v1/runs/{run_id}/events"]["get"]["responses"]["200"]
    shapes = stream["content"]["text/event-stream"]["schema"]["x-event-data"]
    known = {**shapes[version], **shapes["both"]}
    for event in events:
        assert event["event"] in known, event["event"]
        jsonschema.validate(
            event["data"], {**known[event["event"]], "components": schema["components"]}
        )


@pytest.fixture
def corpus(space, owner):
    result = document_upload(user=owner, filename="ops.txt", data=TEXT.encode(), space=space)
    revision_extract(revision_id=result.revision.pk)
    return result


@pytest.fixture
def auth(member) -> dict:
    return {"Authorization": f"Bearer {api_key_create(user=member).secret}"}


def stream(url: str, auth: dict, **body) -> tuple[httpx.Response, list[dict]]:
    response = httpx.post(
        f"{url}/v1/answer", json={"query": QUESTION, **body}, headers={**auth, **SSE}, timeout=60
    )
    return response, parse(response.text)


def replay(url: str, auth: dict, run_id: str, *, version: str | None = "1", cursor=None):
    params = {"stream_version": version} if version else {}
    headers = {**auth, **SSE, **({"Last-Event-ID": cursor} if cursor else {})}
    response = httpx.get(
        f"{url}/v1/runs/{run_id}/events", params=params, headers=headers, timeout=60
    )
    return response, parse(response.text)


def test_a_streamed_answer_runs_in_the_worker_and_ends_with_the_sealed_body(
    live_server_url, celery_worker, corpus, auth
):
    response, events = stream(live_server_url, auth, stream=True, stream_version="1")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    assert response.headers["cache-control"] == "no-cache"
    assert response.headers["x-accel-buffering"] == "no"
    names = [e["event"] for e in events]
    assert names[0] == "started" and names[-1] == "completed"
    assert set(names[1:-1]) == {"tool", "step"}
    run_id = events[0]["data"]["run_id"]
    assert [e["id"] for e in events] == [f"{run_id}:1:{n}" for n in range(1, len(events) + 1)]
    # Before `completed` nothing but activity: each step the run enters (the default
    # provider, which has no model, planning first, then after the tools selecting, the
    # verification, the judgement) and each tool's tool, state, code, count.
    steps = [e["data"]["step"] for e in events if e["event"] == "step"]
    assert steps[0] == "plan" and names[1] == "step"
    assert steps[1:4] == ["select", "verify", "judge"]
    for event in events[1:-1]:
        keys = {"step"} if event["event"] == "step" else {"tool", "state", "code", "result_count"}
        assert set(event["data"]) == keys
    assert TEXT not in response.text.split("event: completed")[0]
    body = events[-1]["data"]["payload"]["result"]
    assert body["evidence"]["answer_status"] == "evidence_backed"
    assert f"“{TEXT}”" in body["answer"]["text"]
    detail = httpx.get(f"{live_server_url}/v1/runs/{run_id}", headers=auth).json()
    assert body == detail
    assert_documented(live_server_url, events, "v1")


def test_the_legacy_stream_has_status_and_complete_events(
    live_server_url, celery_worker, corpus, auth
):
    _, events = stream(live_server_url, auth, stream=True)
    names = [e["event"] for e in events]
    assert set(names[:-1]) == {"status"} and names[-1] == "complete"
    assert [e["data"]["status"] for e in events[:3]] == ["started", "step", "tool"]
    run_id = events[0]["data"]["run_id"]
    assert (
        events[-1]["data"]["payload"]
        == httpx.get(f"{live_server_url}/v1/runs/{run_id}", headers=auth).json()
    )
    assert_documented(live_server_url, events, "legacy")


def test_replay_after_each_event_yields_exactly_the_rest(live_server_url, corpus, auth):
    answered = httpx.post(
        f"{live_server_url}/v1/answer", json={"query": QUESTION}, headers=auth, timeout=60
    ).json()
    _, events = replay(live_server_url, auth, answered["run_id"])
    assert events[-1]["event"] == "completed"
    assert events[-1]["data"]["payload"]["result"] == answered
    for index, event in enumerate(events):
        _, rest = replay(live_server_url, auth, answered["run_id"], cursor=event["id"])
        assert [e["id"] for e in rest] == [e["id"] for e in events[index + 1 :]]
    # A browser's first connection passes the cursor as a parameter.
    first = events[0]["id"]
    via_parameter = httpx.get(
        f"{live_server_url}/v1/runs/{answered['run_id']}/events",
        params={"stream_version": "1", "last_event_id": first},
        headers={**auth, **SSE},
    )
    assert [e["id"] for e in parse(via_parameter.text)] == [e["id"] for e in events[1:]]


def test_a_cursor_of_an_earlier_generation_moves_to_the_current_one(live_server_url, corpus, auth):
    first = httpx.post(
        f"{live_server_url}/v1/answer", json={"query": QUESTION}, headers=auth, timeout=60
    ).json()
    run_id = first["run_id"]
    _, old = replay(live_server_url, auth, run_id)
    retried = httpx.post(f"{live_server_url}/v1/runs/{run_id}/retry", headers=auth, timeout=60)
    assert retried.json()["generation"] == 2
    _, events = replay(live_server_url, auth, run_id, cursor=old[1]["id"])
    assert events[0]["event"] == "generation" and events[0]["data"] == {"from": 1, "to": 2}
    assert all(e["id"].split(":")[1] == "2" for e in events[1:])
    assert events[-1]["data"]["payload"]["result"]["generation"] == 2


def test_a_reader_removed_from_the_space_gets_the_access_failure_on_replay(
    live_server_url, corpus, auth, member, space
):
    answered = httpx.post(
        f"{live_server_url}/v1/answer", json={"query": QUESTION}, headers=auth, timeout=60
    ).json()
    assert answered["evidence"]["answer_status"] == "evidence_backed"
    remove_perm("knowledge.view_space", member, space)
    response, events = replay(live_server_url, auth, answered["run_id"])
    body = events[-1]["data"]["payload"]["result"]
    assert body["answer"]["text"].startswith("A source needed for this answer")
    assert body["answer"]["citations"] == []
    assert TEXT not in response.text


@pytest.mark.parametrize("cursor", ["garbage", "x:1:1", "{run}:9:1", "{run}:1:²", "{run}:1"])
def test_a_bad_cursor_is_a_typed_400(live_server_url, corpus, auth, cursor):
    answered = httpx.post(
        f"{live_server_url}/v1/answer", json={"query": QUESTION}, headers=auth, timeout=60
    ).json()
    response = httpx.get(
        f"{live_server_url}/v1/runs/{answered['run_id']}/events",
        params={"last_event_id": cursor.format(run=answered["run_id"])},
        headers={**auth, **SSE},
    )
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_last_event_id"


def test_another_users_run_has_no_events(live_server_url, corpus, auth, outsider):
    answered = httpx.post(
        f"{live_server_url}/v1/answer", json={"query": QUESTION}, headers=auth, timeout=60
    ).json()
    other = {"Authorization": f"Bearer {api_key_create(user=outsider).secret}"}
    response = httpx.get(
        f"{live_server_url}/v1/runs/{answered['run_id']}/events", headers={**other, **SSE}
    )
    assert response.status_code == 404
    assert TEXT not in response.text


@pytest.fixture
def second_daphne(test_database_name, logs_dir):
    """Another Daphne process on the same database and Redis: a second web process."""
    from tests.services import daphne_process

    with daphne_process(test_database_name, logs_dir / "daphne-second.log") as url:
        yield url


def test_a_stream_on_one_web_process_replays_the_same_on_another(
    live_server_url, second_daphne, celery_worker, corpus, auth
):
    _, streamed = stream(live_server_url, auth, stream=True, stream_version="1")
    run_id = streamed[0]["data"]["run_id"]
    _, replayed = replay(second_daphne, auth, run_id)
    assert replayed == streamed
    _, resumed = replay(second_daphne, auth, run_id, cursor=streamed[1]["id"])
    assert resumed == streamed[2:]


def test_a_client_that_disconnects_mid_run_leaves_a_run_that_still_seals(
    live_server_url, celery_worker, corpus, auth
):
    with httpx.stream(
        "POST",
        f"{live_server_url}/v1/answer",
        json={"query": QUESTION, "stream": True, "stream_version": "1"},
        headers={**auth, **SSE},
        timeout=60,
    ) as response:
        assert response.status_code == 200
        run_id = response.headers["koinon-run-id"]
    # Closed after the headers, before any event: the run is still executing.
    # The worker finishes and seals regardless; the replay (waiting for it) is complete.
    _, events = replay(live_server_url, auth, run_id)
    assert events[0]["event"] == "started" and events[-1]["event"] == "completed"
    body = events[-1]["data"]["payload"]["result"]
    assert body["evidence"]["answer_status"] == "evidence_backed", body["quality"]
    assert [e["id"] for e in events] == [f"{run_id}:1:{n}" for n in range(1, len(events) + 1)]


def test_live_tool_activity_reaches_the_stream_before_the_run_is_sealed(
    live_server_url, member, auth
):
    """The run's group on the real Redis channel layer: events sent as a worker sends
    them reach a stream on Daphne while nothing is stored yet; the stored events that
    follow are not sent twice."""
    import threading
    import time

    from answers.pipeline.events import ChannelsSink, tool_event
    from answers.pipeline.lifecycle import run_fail, run_start
    from answers.pipeline.request import answer_request_parse
    from audit.models import StreamEvent
    from tests.answers.providers import ScriptedProvider

    run = run_start(
        user=member,
        request=answer_request_parse({"query": QUESTION}),
        provider=ScriptedProvider([]),
    )
    received: list[str] = []

    def listen() -> None:
        with httpx.stream(
            "GET",
            f"{live_server_url}/v1/runs/{run.pk}/events",
            params={"stream_version": "1"},
            headers={**auth, **SSE},
            timeout=30,
        ) as response:
            for text in response.iter_text():
                received.append(text)

    listener = threading.Thread(target=listen)
    listener.start()
    outcome = {
        "tool": "keyword_search",
        "state": "succeeded",
        "code": "matched",
        "result_count": 3,
        "retryable": False,
    }
    shown = {k: outcome[k] for k in ("tool", "state", "code", "result_count")}
    sink = ChannelsSink()
    deadline = time.monotonic() + 15
    # Until the stream has subscribed, a group message reaches nobody: send again.
    while "event: tool" not in "".join(received) and time.monotonic() < deadline:
        sink.started(run_id=run.pk, generation=1)
        sink.event(run_id=run.pk, generation=1, seq=2, name="tool", data=shown)
        time.sleep(0.3)
    live = parse("".join(received))
    assert [e["event"] for e in live][:2] == ["started", "tool"]
    assert live[1] == {"id": f"{run.pk}:1:2", "event": "tool", "data": shown}
    # Nothing sealed yet: the tool event was live; only `started` is stored, at run_start.
    assert list(StreamEvent.objects.filter(run=run).values_list("event", flat=True)) == ["started"]

    run_fail(run_id=run.pk, generation=1, reason="internal_error", events=[tool_event(outcome)])
    sink.sealed(run_id=run.pk, generation=1)
    listener.join(30)
    assert not listener.is_alive()
    events = parse("".join(received))
    assert [e["id"] for e in events] == [f"{run.pk}:1:{n}" for n in (1, 2, 3)]
    assert [e["event"] for e in events] == ["started", "tool", "failed"]


def test_started_is_stored_with_the_run_so_a_stream_shows_it_before_the_worker_begins(
    live_server_url, auth, member
):
    from answers.pipeline.lifecycle import run_start
    from answers.pipeline.request import answer_request_parse
    from tests.answers.providers import ScriptedProvider

    # Stored but never executed: nothing but the run itself exists.
    run = run_start(
        user=member,
        request=answer_request_parse({"query": QUESTION}),
        provider=ScriptedProvider([]),
    )
    first = ""
    with httpx.stream(
        "GET",
        f"{live_server_url}/v1/runs/{run.pk}/events",
        params={"stream_version": "1"},
        headers={**auth, **SSE},
        timeout=30,
    ) as response:
        for text in response.iter_text():
            first += text
            if "\n\n" in first:
                break
    [started] = parse(first.split("\n\n")[0] + "\n\n")
    assert started == {
        "id": f"{run.pk}:1:1",
        "event": "started",
        "data": {"run_id": str(run.pk), "generation": 1},
    }


def test_a_stream_returns_its_request_connection_before_it_waits(corpus, member):
    """A waiting stream holds no database connection: the request's own connection is
    closed before the stream starts (it would otherwise stay open until the stream ends:
    a thousand waiting streams, a thousand connections). Checked in-process, where the
    view and the test share one connection."""
    from django.db import connection

    from answers.pipeline.lifecycle import run_start
    from answers.pipeline.request import answer_request_parse
    from tests.answers.providers import ScriptedProvider
    from tests.helpers import client_for

    run = run_start(
        user=member,
        request=answer_request_parse({"query": QUESTION}),
        provider=ScriptedProvider([]),
    )
    connection.ensure_connection()
    response = client_for(member).get(f"/v1/runs/{run.pk}/events", HTTP_ACCEPT=SSE["Accept"])
    assert response.status_code == 200 and response.streaming
    assert connection.connection is None


@pytest.mark.django_db(transaction=True)
def test_a_channel_layer_that_fails_mid_stream_falls_back_to_the_store(member, monkeypatch):
    """Redis timing out under load made `receive` raise inside a stream (the benchmark
    found it): the stream must fall back to reading the store and still end."""
    import asyncio

    from asgiref.sync import sync_to_async
    from django.db import connection

    from answers import streaming
    from answers.pipeline.lifecycle import run_fail, run_start
    from answers.pipeline.request import answer_request_parse
    from tests.answers.providers import ScriptedProvider

    class FailingLayer:
        async def new_channel(self):
            return "specific.test!1"

        async def group_add(self, group, channel):
            return None

        async def group_discard(self, group, channel):
            return None

        async def receive(self, channel):
            raise OSError("Timeout reading from the layer")

    monkeypatch.setattr("channels.layers.get_channel_layer", lambda: FailingLayer())
    monkeypatch.setattr(streaming, "POLL_SECONDS", 0.05)
    run = run_start(
        user=member,
        request=answer_request_parse({"query": QUESTION}),
        provider=ScriptedProvider([]),
    )

    async def collect() -> list[str]:
        frames = []
        stream = streaming.event_stream(user=member, run_id=run.pk, cursor=None, version="1")
        async for chunk in stream:
            frames.append(chunk)
            if len(frames) == 1:  # started is out: the run now fails elsewhere
                await sync_to_async(run_fail, thread_sensitive=False)(
                    run_id=run.pk, generation=1, reason="internal_error"
                )
        return frames

    try:
        frames = asyncio.run(asyncio.wait_for(collect(), timeout=20))
    finally:
        streaming._READER.submit(lambda: connection.close()).result()  # the reader's connection
    assert [parse(f)[0]["event"] for f in frames] == ["started", "failed"]


@pytest.mark.django_db(transaction=True)
def test_a_waiting_stream_sends_keep_alives_without_reading_the_store(member, monkeypatch):
    """While live events can come, a waiting stream wakes for keep-alives only: it reads
    the store again on `sealed` or after LIVE_WAIT_SECONDS (a thousand waiting streams
    cost the database nothing in between)."""
    import asyncio

    from django.db import connection

    from answers import streaming
    from answers.pipeline.lifecycle import run_start
    from answers.pipeline.request import answer_request_parse
    from tests.answers.providers import ScriptedProvider

    class SilentLayer:
        async def new_channel(self):
            return "specific.test!2"

        async def group_add(self, group, channel):
            return None

        async def group_discard(self, group, channel):
            return None

        async def receive(self, channel):
            await asyncio.sleep(3600)

    reads = []
    stored = streaming._stored

    async def counting(**kwargs):
        reads.append(kwargs["cursor"])
        return await stored(**kwargs)

    monkeypatch.setattr("channels.layers.get_channel_layer", lambda: SilentLayer())
    monkeypatch.setattr(streaming, "KEEPALIVE_SECONDS", 0.2)
    monkeypatch.setattr(streaming, "_stored", counting)
    run = run_start(
        user=member,
        request=answer_request_parse({"query": QUESTION}),
        provider=ScriptedProvider([]),
    )

    async def collect() -> list[str]:
        frames = []
        async for chunk in streaming.event_stream(
            user=member, run_id=run.pk, cursor=None, version="1"
        ):
            frames.append(chunk)
            if sum(f.startswith(":") for f in frames) == 3:
                break
        return frames

    try:
        frames = asyncio.run(asyncio.wait_for(collect(), timeout=20))
    finally:
        streaming._READER.submit(lambda: connection.close()).result()
    assert frames[0].startswith("id: ") and "event: started" in frames[0]
    assert frames[1:] == [": keep-alive\n\n"] * 3
    assert len(reads) == 1  # the first read only
