"""Running one MCP tool call: parse, call the tool, audit, and shape the result.

Both transports (Streamable HTTP and stdio) end here, in a worker thread: this module is
synchronous Django code.
"""

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from django.conf import settings
from django.utils.module_loading import import_string

from mcp_server.models import ToolCall
from mcp_server.tools import TOOLS, Caller, ToolFailure

logger = logging.getLogger(__name__)

AUDIT_MAX_STRING = 500
AUDIT_MAX_ITEMS = 50
AUDIT_MAX_DEPTH = 4


@dataclass(frozen=True)
class ToolCallOutcome:
    payload: dict
    is_error: bool
    result_count: int | None


def _storable(text: str) -> str:
    """Text JSONB can hold: no NUL, no lone surrogate."""
    return "".join(
        "\ufffd" if char == "\x00" or "\ud800" <= char <= "\udfff" else char for char in text
    )


def arguments_for_audit(value: object, depth: int = 0) -> object:
    """The arguments as the audit stores them: long strings and lists cut, depth bounded,
    text made storable. What was cut is marked, so the record never looks complete when
    it is not."""
    if isinstance(value, str):
        text = _storable(value[:AUDIT_MAX_STRING])
        return text + "…[cut]" if len(value) > AUDIT_MAX_STRING else text
    if value is None or isinstance(value, bool | int | float):
        return value
    if depth >= AUDIT_MAX_DEPTH:
        return "…[cut]"
    if isinstance(value, list):
        items = [arguments_for_audit(item, depth + 1) for item in value[:AUDIT_MAX_ITEMS]]
        return [*items, "…[cut]"] if len(value) > AUDIT_MAX_ITEMS else items
    if isinstance(value, dict):
        pairs = list(value.items())[:AUDIT_MAX_ITEMS]
        return {
            _storable(str(key)[:100]): arguments_for_audit(item, depth + 1) for key, item in pairs
        }
    return _storable(str(value)[:AUDIT_MAX_STRING])


def _hooks() -> Callable[[dict], ToolCallOutcome]:
    """KOINON_MCP_CALL_HOOKS: dotted paths of callables wrapped around each call as Django
    middleware wraps a request (tool calls do not pass Django's middleware). Only the test
    settings set it (their child processes forget cached content types this way); the
    product has none, so koinon/settings.py does not declare it."""
    call = _execute
    for path in reversed(getattr(settings, "KOINON_MCP_CALL_HOOKS", ())):
        call = import_string(path)(call)
    return call


def _execute(call: dict) -> ToolCallOutcome:
    spec = TOOLS.get(call["tool"])
    if spec is None:
        unknown = ToolFailure("unknown_tool", "No such tool.", {"name": "Unknown tool."})
        return ToolCallOutcome(unknown.as_dict(), True, None)
    try:
        result = spec.run(call["caller"], call["arguments"])
    except ToolFailure as failure:
        return ToolCallOutcome(failure.as_dict(), True, None)
    except Exception:
        # A bug: logged with its stack on the server, nothing of it sent to the client.
        logger.exception("MCP tool %s failed", spec.name)
        internal = ToolFailure("internal_error", "The server could not complete the call.")
        return ToolCallOutcome(internal.as_dict(), True, None)
    return ToolCallOutcome(result.payload, False, result.result_count)


def tool_call_run(
    *, caller: Caller, tool: str, arguments: object, transport: str
) -> ToolCallOutcome:
    """Run one tool call as `caller` and record it (`ToolCall`), refused calls included.

    Never raises for anything a client can send: bad arguments, unknown tools and ids,
    service errors are typed error payloads (`is_error`), a bug is `internal_error`. If the
    audit row cannot be written the call answers `internal_error`: no unaudited results.
    """
    started = time.monotonic()
    outcome = _hooks()({"caller": caller, "tool": tool, "arguments": arguments})
    duration_ms = int((time.monotonic() - started) * 1000)
    error_code = outcome.payload["error"]["code"] if outcome.is_error else ""
    try:
        ToolCall.objects.create(
            user=caller.user,
            key_prefix=caller.api_key.prefix if caller.api_key else "",
            transport=transport,
            tool=_storable(str(tool)[:64]),
            arguments=arguments_for_audit(arguments if isinstance(arguments, dict) else {}),
            result_count=outcome.result_count,
            error_code=error_code,
            duration_ms=duration_ms,
        )
    except Exception:
        logger.exception("MCP tool call could not be audited")
        failure = ToolFailure("internal_error", "The server could not complete the call.")
        return ToolCallOutcome(failure.as_dict(), True, None)
    return outcome
