"""Server-sent events for answer runs (SPEC §6): the sealed events of a run, replayed from
the database, honouring a Last-Event-ID cursor.

Every event has `id: <run_id>:<generation>:<seq>`. Version 1 (`stream_version=1`):
`started`, `tool`, `completed` (`data.payload.result` = the body of GET /v1/runs/<id>),
`failed`. Legacy (no stream_version): `status` for each of started/tool/failed and
`complete` (`data.payload` = the body). Only the current generation is streamed: a cursor
from an earlier generation first gets an explicit `generation` event. The completed body
passes the same boundary check as GET /v1/runs/<id>.

Events are read from the database (in the worker, maybe on another host, the run sends
live tool activity to the run's Channels group): every web process sees the same
stream. A waiting stream holds no database connection: the request's own is closed
before streaming, and the reads of all streams of a process go through one thread.
"""

import asyncio
import contextlib
import functools
import json
import logging
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import InterfaceError, OperationalError, connection
from django.db.models import Max

from answers.boundary import sealed_answer_read
from answers.models import AnswerRun, Generation
from answers.pipeline.events import run_group
from audit.models import StreamEvent
from audit.services import stream_started_data
from core.errors import ApiError

logger = logging.getLogger(__name__)

POLL_SECONDS = 0.25
# Between two reads of the store while live events flow: a safety net for a lost
# `sealed` message, rare enough that a thousand open streams cost little (bench/streams.py).
LIVE_WAIT_SECONDS = 60.0
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
    whether the stream is over. Precondition: the run is the caller's (selector).

    Two queries while the run executes (its current generation, that generation's few
    events); the run itself is read only for `completed`, through the boundary check."""
    current = Generation.objects.filter(run_id=run_id).aggregate(top=Max("number"))["top"] or 1
    frames: list[str] = []
    after = 0
    if cursor is not None and cursor.generation < current:
        # Never presented as the answer: the client is told it moves on.
        frames.append(frame("generation", {"from": cursor.generation, "to": current}))
    elif cursor is not None:
        after = cursor.sequence
    stored = list(
        StreamEvent.objects.filter(run_id=run_id, generation=current)
        .order_by("sequence")
        .values_list("sequence", "event", "data")
    )
    # Over once the generation's final event is stored: sent now, or before the cursor.
    finished = any(event in FINAL_EVENTS for _, event, _ in stored)
    last = Cursor(current, after)
    for sequence, name, data in stored:
        if sequence <= after:
            continue
        if name == "completed":
            run = AnswerRun.objects.get(pk=run_id)
            data = {"payload": {"result": sealed_answer_read(user=user, run=run)}}
        frames.append(event_frame(run_id, current, sequence, name, data, version))
        last = Cursor(current, sequence)
    return frames, last, finished


def event_frame(
    run_id: object, generation: int, sequence: int, name: str, data: dict, version: str | None
) -> str:
    """One stored (or just stored) event as its frame in the stream's version."""
    if version != "1":
        name, data = _legacy(name, data)
    return frame(name, data, f"{run_id}:{generation}:{sequence}")


# Every stream of this process reads through one thread and its one connection: a
# waiting stream holds no connection of its own, and a read costs no new connection.
_READER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="stream-reader")


def _read(**kwargs: object) -> tuple[list[str], Cursor | None, bool]:
    try:
        return frames_after(**kwargs)
    except (InterfaceError, OperationalError):
        connection.close()  # a connection the server dropped: once more on a new one
        return frames_after(**kwargs)


async def _stored(**kwargs: object) -> tuple[list[str], Cursor | None, bool]:
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(_READER, functools.partial(_read, **kwargs))


def live_frame(message: dict, *, run_id: object, version: str | None) -> str:
    return event_frame(
        run_id, message["generation"], message["seq"], message["event"], message["data"], version
    )


def started_frame(run_id: object, version: str | None) -> tuple[str, Cursor]:
    """The `started` event `run_start` has just stored (seq 1 of generation 1), and the
    cursor after it: what a new stream sends at once, with no read."""
    data = stream_started_data(run_id=run_id, generation=1)
    return event_frame(run_id, 1, 1, "started", data, version), Cursor(1, 1)


async def event_stream(
    *,
    user: AbstractBaseUser,
    run_id: object,
    cursor: Cursor | None,
    version: str | None,
    first: str | None = None,
) -> AsyncIterator[str]:
    """Frames until the run's final event (or KOINON_STREAM_TIMEOUT), with a keep-alive
    comment every 15 s.

    Subscribes to the run's group first, then reads the stored events, then forwards live
    tool activity as it arrives; a `sealed` message (or, as a fallback, every 60 s)
    reads the stored events after the cursor again. Live and stored events share their
    sequence numbers, so nothing is sent twice. A client that goes away cancels this
    (CancelledError): the run, executing elsewhere, is not affected. `first` is a frame
    already known to be stored up to `cursor`, sent before anything else.
    """
    from channels.layers import get_channel_layer

    loop = asyncio.get_running_loop()
    deadline = loop.time() + settings.KOINON_STREAM_TIMEOUT
    last_sent = loop.time()
    read = _stored
    layer, channel, group = get_channel_layer(), None, run_group(run_id)
    channel_gap = False
    layer_failed = False
    if first is not None:
        yield first
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
                frames, cursor, finished = await read(
                    user=user, run_id=run_id, cursor=cursor, version=version
                )
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
            if channel is None or layer_failed:
                await asyncio.sleep(POLL_SECONDS)
                continue
            # Forward live events until the run is sealed or LIVE_WAIT_SECONDS pass, with
            # a keep-alive when nothing was sent for KEEPALIVE_SECONDS; no store read
            # in between (a thousand waiting streams cost the database nothing).
            read_at = loop.time() + LIVE_WAIT_SECONDS
            while True:
                now = loop.time()
                if now >= read_at or now >= deadline:
                    break
                if now - last_sent >= KEEPALIVE_SECONDS:
                    yield ": keep-alive\n\n"
                    last_sent = now
                wake = min(read_at, last_sent + KEEPALIVE_SECONDS, deadline)
                try:
                    message = await asyncio.wait_for(
                        layer.receive(channel), timeout=max(0.01, wake - now)
                    )
                except TimeoutError:
                    continue
                except Exception:  # the layer failed (e.g. Redis timed out): poll instead
                    logger.warning("live events lost for run %s", run_id, exc_info=True)
                    channel_gap = True
                    layer_failed = True
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
