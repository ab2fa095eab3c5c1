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
from typing import TYPE_CHECKING
from uuid import UUID

from channels.layers import get_channel_layer
from django.conf import settings
from django.db import InterfaceError, OperationalError, connection
from django.db.models import Max

from answers.boundary import sealed_answer_read
from answers.models import AnswerRun, Generation
from answers.pipeline.events import run_group
from audit.models import StreamEvent
from audit.services import stream_started_data
from core.errors import ApiError
from core.types import User

if TYPE_CHECKING:
    from channels.layers import BaseChannelLayer

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
    *, user: User, run_id: UUID, cursor: Cursor | None, version: str | None
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
    run_id: UUID, generation: int, sequence: int, name: str, data: dict, version: str | None
) -> str:
    """One stored (or just stored) event as its frame in the stream's version."""
    if version != "1":
        name, data = _legacy(name, data)
    return frame(name, data, f"{run_id}:{generation}:{sequence}")


# Every stream of this process reads through one thread and its one connection: a
# waiting stream holds no connection of its own, and a read costs no new connection.
_READER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="stream-reader")


def _read(
    *, user: User, run_id: UUID, cursor: Cursor | None, version: str | None
) -> tuple[list[str], Cursor | None, bool]:
    try:
        return frames_after(user=user, run_id=run_id, cursor=cursor, version=version)
    except (InterfaceError, OperationalError):
        connection.close()  # a connection the server dropped: once more on a new one
        return frames_after(user=user, run_id=run_id, cursor=cursor, version=version)


async def _stored(
    *, user: User, run_id: UUID, cursor: Cursor | None, version: str | None
) -> tuple[list[str], Cursor | None, bool]:
    loop = asyncio.get_running_loop()
    read = functools.partial(_read, user=user, run_id=run_id, cursor=cursor, version=version)
    return await loop.run_in_executor(_READER, read)


def live_frame(message: dict, *, run_id: UUID, version: str | None) -> str:
    return event_frame(
        run_id, message["generation"], message["seq"], message["event"], message["data"], version
    )


def started_frame(run_id: UUID, version: str | None) -> tuple[str, Cursor]:
    """The `started` event `run_start` has just stored (seq 1 of generation 1), and the
    cursor after it: what a new stream sends at once, with no read."""
    data = stream_started_data(run_id=run_id, generation=1)
    return event_frame(run_id, 1, 1, "started", data, version), Cursor(1, 1)


KEEPALIVE = ": keep-alive\n\n"


class _RunStream:
    """What one event stream carries between its reads of the store and its live waits: the
    cursor, the deadline, when a frame last went out, and the run's group on the layer."""

    def __init__(
        self, *, user: User, run_id: UUID, cursor: Cursor | None, version: str | None
    ) -> None:
        self.user, self.run_id, self.cursor, self.version = user, run_id, cursor, version
        self.loop = asyncio.get_running_loop()
        self.deadline = self.loop.time() + settings.KOINON_STREAM_TIMEOUT
        self.last_sent = self.loop.time()
        self.layer: BaseChannelLayer | None = get_channel_layer()
        self.channel: str | None = None
        self.group = run_group(run_id)
        # A live event missed (subscribed too late, or the layer lost some): from then on
        # only the store's events are sent, so ids stay dense and in order.
        self.channel_gap = False
        self.layer_failed = False

    @property
    def live(self) -> bool:
        return self.channel is not None and not self.layer_failed

    async def subscribe(self) -> None:
        if self.layer is None:
            return
        try:
            self.channel = await self.layer.new_channel()
            await self.layer.group_add(self.group, self.channel)
        except Exception:  # no live view; the stored events still come
            logger.warning("live events unavailable for run %s", self.run_id, exc_info=True)
            self.channel = None

    async def unsubscribe(self) -> None:
        if self.layer is not None and self.channel is not None:
            with contextlib.suppress(Exception):
                await self.layer.group_discard(self.group, self.channel)

    async def read(self) -> tuple[list[str], bool]:
        """The stored frames after the cursor (moving it on), and whether the run is over."""
        frames, self.cursor, finished = await _stored(
            user=self.user, run_id=self.run_id, cursor=self.cursor, version=self.version
        )
        return frames, finished

    def sent(self) -> None:
        self.last_sent = self.loop.time()

    def past_deadline(self) -> bool:
        return self.loop.time() >= self.deadline

    def keepalive_due(self) -> bool:
        return self.loop.time() - self.last_sent >= KEEPALIVE_SECONDS

    async def next_live(self, read_at: float) -> str | None:
        """The next frame while live events flow: a live event, or a keep-alive when nothing
        was sent for KEEPALIVE_SECONDS. None: time to read the store again (the run is
        sealed, `read_at` or the deadline has passed, or the layer failed)."""
        layer, channel = self.layer, self.channel
        if layer is None or channel is None:  # not live
            return None
        while True:
            now = self.loop.time()
            if now >= read_at or now >= self.deadline:
                return None
            if now - self.last_sent >= KEEPALIVE_SECONDS:
                return KEEPALIVE
            wake = min(read_at, self.last_sent + KEEPALIVE_SECONDS, self.deadline)
            try:
                message = await asyncio.wait_for(
                    layer.receive(channel), timeout=max(0.01, wake - now)
                )
            except TimeoutError:
                continue
            except Exception:  # the layer failed (e.g. Redis timed out): poll instead
                logger.warning("live events lost for run %s", self.run_id, exc_info=True)
                self.channel_gap = True
                self.layer_failed = True
                return None
            if message.get("type") == "run.sealed":
                return None
            chunk = self._next_in_order(message)
            if chunk is not None:
                return chunk

    def _next_in_order(self, message: dict) -> str | None:
        """The frame of a live event that comes right after the cursor (moving it on); None
        for another generation's event, one already sent, or any once a gap was seen."""
        current = self.cursor.generation if self.cursor else message["generation"]
        after = self.cursor.sequence if self.cursor else 0
        if message["generation"] != current or message["seq"] <= after:
            return None
        if message["seq"] != after + 1:
            # Subscribed too late for an earlier live event: this stream waits for the
            # stored events instead.
            self.channel_gap = True
        if self.channel_gap:
            return None
        self.cursor = Cursor(message["generation"], message["seq"])
        return live_frame(message, run_id=self.run_id, version=self.version)


async def event_stream(
    *,
    user: User,
    run_id: UUID,
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
    stream = _RunStream(user=user, run_id=run_id, cursor=cursor, version=version)
    if first is not None:
        yield first
    try:
        await stream.subscribe()
        while True:
            try:
                frames, finished = await stream.read()
            except Exception:  # the response has started: end it with a typed event
                logger.exception("event stream of run %s failed", run_id)
                yield frame("error", {"error": {"code": "stream_failed"}})
                return
            for chunk in frames:
                yield chunk
                stream.sent()
            if finished:
                return
            if stream.past_deadline():
                yield frame("timeout", {"code": "stream_timeout"})
                return
            if stream.keepalive_due():
                yield KEEPALIVE
                stream.sent()
            if not stream.live:
                await asyncio.sleep(POLL_SECONDS)
                continue
            # Forward live events until the run is sealed or LIVE_WAIT_SECONDS pass; no
            # store read in between (a thousand waiting streams cost the database nothing).
            read_at = stream.loop.time() + LIVE_WAIT_SECONDS
            while (live_chunk := await stream.next_live(read_at)) is not None:
                yield live_chunk
                stream.sent()
    finally:
        await stream.unsubscribe()


def stream_response_headers() -> dict[str, str]:
    return {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
