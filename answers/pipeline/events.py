"""Live events of a running answer: sent as they happen to the run's Channels group, so
that every web process streaming the run forwards them at once.

Only what may leave before sealing is sent: `started` and each `tool` outcome (tool,
state, code, count) — with the very sequence numbers the sealed events get in the
publication transaction, so a stream de-duplicates live and stored events by `seq`. Live
events are a convenience: the stored, sealed events stay the record, and a layer that is
down costs the live view only, never the answer.
"""

import logging
from typing import Protocol

from asgiref.sync import async_to_sync

logger = logging.getLogger(__name__)

TOOL_FIELDS = ("tool", "state", "code", "result_count")


def run_group(run_id: object) -> str:
    return f"run-{run_id}"


class EventSink(Protocol):
    def started(self, *, run_id: object, generation: int) -> None: ...

    def tools(self, *, run_id: object, generation: int, first: int, outcomes: list[dict]) -> None:
        """Outcomes numbered from `first` (their index among the run's outcomes, from 0)."""
        ...

    def sealed(self, *, run_id: object, generation: int) -> None: ...


class NullSink:
    def started(self, *, run_id: object, generation: int) -> None:
        return None

    def tools(self, *, run_id: object, generation: int, first: int, outcomes: list[dict]) -> None:
        return None

    def sealed(self, *, run_id: object, generation: int) -> None:
        return None


class ChannelsSink:
    """Sends to the run's group on the configured channel layer."""

    def _send(self, run_id: object, message: dict) -> None:
        from channels.layers import get_channel_layer

        layer = get_channel_layer()
        if layer is None:
            return
        try:
            async_to_sync(layer.group_send)(run_group(run_id), message)
        except Exception:  # the live view is best effort; the sealed events are the record
            logger.warning("live event for run %s not sent", run_id, exc_info=True)

    def started(self, *, run_id: object, generation: int) -> None:
        self._send(run_id, {"type": "run.event", "generation": generation, "seq": 1,
                            "event": "started",
                            "data": {"run_id": str(run_id), "generation": generation}})  # fmt: skip

    def tools(self, *, run_id: object, generation: int, first: int, outcomes: list[dict]) -> None:
        for index, outcome in enumerate(outcomes, start=first):
            self._send(run_id, {"type": "run.event", "generation": generation, "seq": index + 2,
                                "event": "tool",
                                "data": {key: outcome[key] for key in TOOL_FIELDS}})  # fmt: skip

    def sealed(self, *, run_id: object, generation: int) -> None:
        self._send(run_id, {"type": "run.sealed", "generation": generation})
