"""Live events of a running answer: sent as they happen to the run's Channels group, so
that every web process streaming the run forwards them at once.

Only what may leave before sealing is sent: `started`, each `tool` outcome (tool, state,
code, count) and each `step` the run enters (`model`: waiting for a model provider, which
plans and then selects; without a model, as the default extractive provider, `plan`:
planning the searches and `select`: choosing the quotes; `verify`: checking quotes against
the source; `judge`: judging whether they answer) —
with the very sequence numbers the sealed events get in the publication transaction, so
a stream de-duplicates live and stored events by `seq`. Live events are a convenience:
the stored, sealed events stay the record, and a layer that is down costs the live view
only, never the answer.
"""

import logging
from typing import Literal, Protocol

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

from core.json_value import JsonValue
from core.outcomes import OutcomeRecord

logger = logging.getLogger(__name__)

TOOL_FIELDS = ("tool", "state", "code", "result_count")
STEPS = ("model", "plan", "select", "verify", "judge")


# An event as named in the stream (`tool`, `step`, …) with the JSON of its `data:`.
type StreamEvent = tuple[str, dict[str, JsonValue]]


def tool_event(outcome: OutcomeRecord) -> StreamEvent:
    # The fields of TOOL_FIELDS, in that order.
    return "tool", {
        "tool": outcome["tool"],
        "state": outcome["state"],
        "code": outcome["code"],
        "result_count": outcome["result_count"],
    }


def step_event(step: str) -> StreamEvent:
    if step not in STEPS:
        raise ValueError(f"unknown step {step!r}")
    return "step", {"step": step}


def provider_step(*, waits_for_model: bool, step: Literal["plan", "select"]) -> StreamEvent:
    """The step of a provider's planning or selecting: `model` when a model is waited for
    (so a person is not told of a model that the default provider does not have)."""
    return step_event("model" if waits_for_model else step)


def run_group(run_id: object) -> str:
    return f"run-{run_id}"


class EventSink(Protocol):
    def started(self, *, run_id: object, generation: int) -> None: ...

    def event(
        self, *, run_id: object, generation: int, seq: int, name: str, data: dict[str, JsonValue]
    ) -> None:
        """A `tool` or `step` event, numbered as it will be stored (`started` is 1)."""
        ...

    def sealed(self, *, run_id: object, generation: int) -> None: ...


class NullSink:
    def started(self, *, run_id: object, generation: int) -> None:
        return None

    def event(
        self, *, run_id: object, generation: int, seq: int, name: str, data: dict[str, JsonValue]
    ) -> None:
        return None

    def sealed(self, *, run_id: object, generation: int) -> None:
        return None


class ChannelsSink:
    """Sends to the run's group on the configured channel layer."""

    def _send(self, run_id: object, message: dict[str, object]) -> None:
        layer = get_channel_layer()
        if layer is None:
            return
        try:
            async_to_sync(layer.group_send)(run_group(run_id), message)
        except Exception:  # the live view is best effort; the sealed events are the record
            logger.warning("live event for run %s not sent", run_id, exc_info=True)

    def started(self, *, run_id: object, generation: int) -> None:
        self._send(
            run_id,
            {
                "type": "run.event",
                "generation": generation,
                "seq": 1,
                "event": "started",
                "data": {"run_id": str(run_id), "generation": generation},
            },
        )

    def event(
        self, *, run_id: object, generation: int, seq: int, name: str, data: dict[str, JsonValue]
    ) -> None:
        self._send(
            run_id,
            {
                "type": "run.event",
                "generation": generation,
                "seq": seq,
                "event": name,
                "data": data,
            },
        )

    def sealed(self, *, run_id: object, generation: int) -> None:
        self._send(run_id, {"type": "run.sealed", "generation": generation})
