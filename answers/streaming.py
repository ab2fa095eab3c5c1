"""Server-sent events for answer runs (SPEC §6): the sealed events of a run, replayed from
the database, honouring a Last-Event-ID cursor.

Every event has `id: <run_id>:<generation>:<seq>`. Version 1 (`stream_version=1`):
`started`, `tool`, `completed` (`data.payload.result` = the body of GET /v1/runs/<id>),
`failed`. Legacy (no stream_version): `status` for each of started/tool/failed and
`complete` (`data.payload` = the body). Only the current generation is streamed: a cursor
from an earlier generation first gets an explicit `generation` event. The completed body
passes the same boundary check as GET /v1/runs/<id>.

Events are read from the database, polled while the run executes (in the worker, maybe
on another host): every web process sees the same stream, and no connection is held
while waiting.
"""

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass

from asgiref.sync import sync_to_async
from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import connection
from django.db.models import Max

from answers.boundary import sealed_answer_read
from answers.models import AnswerRun
from answers.pipeline.events import run_group
from audit.models import StreamEvent
from core.errors import ApiError

logger = logging.getLogger(__name__)

POLL_SECONDS = 0.25
LIVE_WAIT_SECONDS = 1.0
KEEPALIVE_SECONDS = 15.0
FINAL_EVENTS = frozenset({"completed", "failed"})


class CursorInvalid(ApiError):
    status_code = 400
    default_code = "invalid_last_event_id"
    default_detail = "Last-Event-ID is not an event id of this run."


@dataclass(frozen=True)
class Cursor:
    generation: int
    sequence: int


def cursor_parse(raw: str | None, run: AnswerRun) -> Cursor | None:
    """`<run_id>:<generation>:<seq>` of this run, or None for no cursor."""
    if raw is None or not raw.strip():
        return None
    parts = raw.strip().split(":")
    if len(parts) != 3 or parts[0] != str(run.pk):
        raise CursorInvalid()
    generation, sequence = parts[1], parts[2]
    if not (generation.isascii() and generation.isdigit() and len(generation) <= 6):
        raise CursorInvalid()
    if not (sequence.isascii() and sequence.isdigit() and len(sequence) <= 6):
        raise CursorInvalid()
    if int(generation) > (run.generations.aggregate(top=Max("number"))["top"] or 1):
        raise CursorInvalid()
    return Cursor(int(generation), int(sequence))


def frame(event: str, data: dict, event_id: str | None = None) -> str:
    lines = [f"id: {event_id}"] if event_id else []
    lines += [f"event: {event}", "data: " + json.dumps(data, separators=(",", ":"))]
    return "\n".join(lines) + "\n\n"


def _legacy(event: str, data: dict) -> tuple[str, dict]:
    if event == "completed":
        return "complete", {"payload": data["payload"]["result"]}
    return "status", {"status": event, **data}


def frames_after(
    *, user: AbstractBaseUser, run_id: object, cursor: Cursor | None, version: str | None
) -> tuple[list[str], Cursor | None, bool]:
    """The frames after `cursor` of the run's current generation, the new cursor, and
    whether the stream is over. Precondition: the run is the caller's (selector)."""
    run = AnswerRun.objects.get(pk=run_id)
    current = run.generations.aggregate(top=Max("number"))["top"] or 1
    frames: list[str] = []
    after = 0
    if cursor is not None and cursor.generation < current:
        # Never presented as the answer: the client is told it moves on.
        frames.append(frame("generation", {"from": cursor.generation, "to": current}))
    elif cursor is not None:
        after = cursor.sequence
    stored = StreamEvent.objects.filter(run=run, generation=current)
    # Over once the generation's final event is stored: sent now, or before the cursor.
    finished = stored.filter(event__in=FINAL_EVENTS).exists()
    last = Cursor(current, after)
    for event in stored.filter(sequence__gt=after).order_by("sequence"):
        name, data = event.event, event.data
        if name == "completed":
            data = {"payload": {"result": sealed_answer_read(user=user, run=run)}}
        if version != "1":
            name, data = _legacy(name, data)
        frames.append(frame(name, data, f"{run.pk}:{current}:{event.sequence}"))
        last = Cursor(current, event.sequence)
    return frames, last, finished


def _read(**kwargs: object) -> tuple[list[str], Cursor | None, bool]:
    try:
        return frames_after(**kwargs)
    finally:
        connection.close()  # a waiting stream must not pin a database connection


def live_frame(message: dict, *, run_id: object, version: str | None) -> str:
    name, data = message["event"], message["data"]
    if version != "1":
        name, data = _legacy(name, data)
    return frame(name, data, f"{run_id}:{message['generation']}:{message['seq']}")


async def event_stream(
    *, user: AbstractBaseUser, run_id: object, cursor: Cursor | None, version: str | None
) -> AsyncIterator[str]:
    """Frames until the run's final event (or KOINON_STREAM_TIMEOUT), with a keep-alive
    comment every 15 s.

    Subscribes to the run's group first, then reads the stored events, then forwards live
    tool activity as it arrives; a `sealed` message (or, as a fallback, every second)
    reads the stored events after the cursor again. Live and stored events share their
    sequence numbers, so nothing is sent twice. A client that goes away cancels this
    (CancelledError): the run, executing elsewhere, is not affected.
    """
    from channels.layers import get_channel_layer

    loop = asyncio.get_running_loop()
    deadline = loop.time() + settings.KOINON_STREAM_TIMEOUT
    last_sent = loop.time()
    read = sync_to_async(_read, thread_sensitive=False)
    layer, channel, group = get_channel_layer(), None, run_group(run_id)
    channel_gap = False
    try:
        if layer is not None:
            try:
                channel = await layer.new_channel()
                await layer.group_add(group, channel)
            except Exception:  # no live view; the stored events still come
                logger.warning("live events unavailable for run %s", run_id, exc_info=True)
                channel = None
        while True:
            try:
                frames, cursor, finished = await read(user=user, run_id=run_id,
                                                      cursor=cursor, version=version)  # fmt: skip
            except Exception:  # the response has started: end it with a typed event
                logger.exception("event stream of run %s failed", run_id)
                yield frame("error", {"error": {"code": "stream_failed"}})
                return
            for chunk in frames:
                yield chunk
                last_sent = loop.time()
            if finished:
                return
            if loop.time() >= deadline:
                yield frame("timeout", {"code": "stream_timeout"})
                return
            if loop.time() - last_sent >= KEEPALIVE_SECONDS:
                yield ": keep-alive\n\n"
                last_sent = loop.time()
            if channel is None:
                await asyncio.sleep(POLL_SECONDS)
                continue
            # Forward live events until the run is sealed or a second passes.
            wait_until = loop.time() + LIVE_WAIT_SECONDS
            while loop.time() < wait_until:
                try:
                    message = await asyncio.wait_for(
                        layer.receive(channel), timeout=wait_until - loop.time()
                    )
                except TimeoutError:
                    break
                if message.get("type") == "run.sealed":
                    break
                current = cursor.generation if cursor else message["generation"]
                after = cursor.sequence if cursor else 0
                if message["generation"] != current or message["seq"] <= after:
                    continue  # another generation, or already sent
                if message["seq"] != after + 1:
                    # Subscribed too late for an earlier live event: ids must stay dense
                    # and in order, so this stream waits for the stored events instead.
                    channel_gap = True
                if channel_gap:
                    continue
                yield live_frame(message, run_id=run_id, version=version)
                last_sent = loop.time()
                cursor = Cursor(message["generation"], message["seq"])
    finally:
        if channel is not None:
            with contextlib.suppress(Exception):
                await layer.group_discard(group, channel)


def stream_response_headers() -> dict[str, str]:
    return {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
