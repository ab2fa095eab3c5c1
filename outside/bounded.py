"""Every outside call of the search clients runs through here: one deadline over the whole call,
a byte limit on what is read, cancellation, and the mapping from HTTP to SPEC §5 codes.

The clients are synchronous (the answer worker is); each runs its call on a private event loop
so that one deadline covers name resolution, connecting, the request and every byte of the
answer — a slow drip of bytes cannot stretch a call the way a per-read timeout allows. Nothing
the remote side sends is put into an error or a log: only status codes and koinon's own words.
"""

import asyncio
import json
import logging
import threading
from collections.abc import Awaitable, Callable, Mapping

import httpx

from outside.errors import OutsideError
from outside.hits import Bounds

logger = logging.getLogger(__name__)

# How often a waiting call looks at its cancel event.
CANCEL_POLL_SECONDS = 0.05
# How long a cancelled call may take to close its connections or child process.
CLEANUP_SECONDS = 5.0


def run_bounded[T](
    call: Callable[[], Awaitable[T]],
    *,
    timeout_seconds: float,
    cancel: threading.Event | None = None,
) -> T:
    """Run `call()` on a new event loop and return its value, or raise `OutsideError`
    `timeout` once `timeout_seconds` have passed, `cancelled` once `cancel` is set.

    Precondition: the calling thread runs no event loop (a worker, or a thread of its own).
    """
    return asyncio.run(_bounded(call, timeout_seconds, cancel))


async def _bounded[T](
    call: Callable[[], Awaitable[T]], timeout_seconds: float, cancel: threading.Event | None
) -> T:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_seconds
    task = asyncio.ensure_future(call())
    while True:
        remaining = deadline - loop.time()
        if remaining <= 0:
            await _stop(task)
            raise OutsideError("timeout", retryable=True)
        if cancel is not None and cancel.is_set():
            await _stop(task)
            raise OutsideError("cancelled", retryable=True)
        done, _ = await asyncio.wait({task}, timeout=min(remaining, CANCEL_POLL_SECONDS))
        if done:
            return task.result()


async def _stop[T](task: "asyncio.Task[T]") -> None:
    task.cancel()
    await asyncio.wait({task}, timeout=CLEANUP_SECONDS)
    if task.done() and not task.cancelled():
        task.exception()  # retrieved, so that asyncio does not log it as never read


def status_error(status: int) -> OutsideError:
    """The outcome of an HTTP answer other than 200 (SPEC §5): 401 and 403 are
    `access_denied`; anything else — a 404 included, which is an endpoint that is not
    there, never an empty search — is `provider_unavailable`, retryable for 408, 429 and
    5xx."""
    if status in (401, 403):
        return OutsideError("access_denied", f"HTTP {status}")
    retryable = status in (408, 429) or status >= 500
    return OutsideError("provider_unavailable", f"HTTP {status}", retryable=retryable)


async def json_request(
    method: str,
    url: str,
    *,
    bounds: Bounds,
    headers: Mapping[str, str] | None = None,
    params: Mapping[str, str | list[str]] | None = None,
    body: object = None,
) -> object:
    """One HTTP request whose 200 answer is JSON; the decoded body.

    Redirects are not followed (a configured endpoint that moves is unavailable until an
    administrator changes it) and no proxy or credentials come from the environment. The
    body is read as a stream and refused as `too_large` past `bounds.max_bytes` (decoded
    bytes, so a compressed answer cannot slip past). The caller holds the deadline
    (`run_bounded`); httpx's own timeouts are the same length, as a second guard.
    """
    try:
        async with (
            httpx.AsyncClient(
                timeout=bounds.timeout_seconds, follow_redirects=False, trust_env=False
            ) as client,
            client.stream(
                method,
                url,
                headers=dict(headers or {}),
                params=dict(params) if params is not None else None,
                json=body,
            ) as response,
        ):
            if response.status_code != 200:
                logger.warning("outside endpoint answered HTTP %d", response.status_code)
                raise status_error(response.status_code)
            raw = await _read_limited(response, bounds.max_bytes)
    except httpx.TimeoutException:
        raise OutsideError("timeout", retryable=True) from None
    except (httpx.HTTPError, httpx.InvalidURL):
        raise OutsideError("provider_unavailable", "unreachable", retryable=True) from None
    try:
        return json.loads(raw)
    except ValueError:
        raise OutsideError("provider_unavailable", "not JSON") from None


async def _read_limited(response: httpx.Response, max_bytes: int) -> bytes:
    declared = response.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > max_bytes:
        raise OutsideError("too_large", f"over {max_bytes} bytes")
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        size += len(chunk)
        if size > max_bytes:
            raise OutsideError("too_large", f"over {max_bytes} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def bearer(credential: str | None) -> dict[str, str]:
    """The Authorization header for a credential, or none."""
    return {"Authorization": f"Bearer {credential}"} if credential else {}


def as_dict(value: object) -> dict[str, object]:
    """A JSON object, or `provider_unavailable` for any other shape."""
    if not isinstance(value, dict):
        raise OutsideError("provider_unavailable", "unexpected response shape")
    return value


def as_list(value: object) -> list[object]:
    """A JSON array (absent or null is empty), or `provider_unavailable` for another shape."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise OutsideError("provider_unavailable", "unexpected response shape")
    return value


def text_field(item: Mapping[str, object], name: str) -> str:
    """A string field of a result (absent or null is empty; other types are not text)."""
    value = item.get(name)
    return value if isinstance(value, str) else ""


def id_field(item: Mapping[str, object], name: str) -> str:
    """An identity field as a string (a number is written out; anything else is empty)."""
    value = item.get(name)
    if isinstance(value, bool):
        return ""
    if isinstance(value, int | str):
        return str(value)
    return ""


def score_field(item: Mapping[str, object], name: str) -> float | None:
    value = item.get(name)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)
