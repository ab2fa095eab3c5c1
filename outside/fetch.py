"""One URL read within limits, for `fetch_url` and the pages `web_search` finds (SPEC §5).

Each hop of a redirect chain is checked by `outside.addresses` and connected to the address
checked there, never to a second resolution of its name; the request carries the URL's own
name in `Host` and, for https, in SNI and the certificate check. One deadline bounds the whole
chain (every name resolution, connect, TLS handshake, write and read), and the body is read
as a stream up to a byte cap. Nothing is sent that the caller could leak: no credentials,
cookies or Authorization, ever.

Errors are `OutsideError`s whose text koinon writes (a status code, a limit); logs hold the
host and the outcome code only, never a URL (its query may carry a secret).
"""

import hashlib
import logging
import ssl
import time
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from urllib.parse import urljoin, urlsplit

import httpx

from outside.addresses import (
    CheckedAddress,
    IPNetwork,
    Resolver,
    address_check,
    allowed_networks_configured,
    system_resolver,
)
from outside.errors import OutsideError

logger = logging.getLogger(__name__)

USER_AGENT = "koinon-fetch/1"
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
# Asked for the body as stored, so that the byte cap counts what the server sends and the hash
# is of its bytes; a server that compresses anyway is decoded, and the cap counts the result.
_HEADERS = {"User-Agent": USER_AGENT, "Accept": "*/*", "Accept-Encoding": "identity"}


@dataclass(frozen=True)
class FetchLimits:
    """How much one fetch may take: bytes of body, seconds for the whole redirect chain, and
    redirects followed."""

    max_bytes: int = 5 * 1024 * 1024
    timeout_seconds: float = 10.0
    max_redirects: int = 5


@dataclass(frozen=True)
class Fetched:
    """A body read whole from a 2xx answer, and where it came from."""

    requested_url: str
    final_url: str  # after redirects
    status: int
    content_type: str  # the Content-Type header as sent, "" when absent
    content: bytes
    sha256: str  # hex, of `content`
    fetched_at: datetime  # aware, UTC


@dataclass(frozen=True)
class _Redirect:
    location: str


DEFAULT_LIMITS = FetchLimits()


def fetch(
    url: str,
    *,
    limits: FetchLimits = DEFAULT_LIMITS,
    resolver: Resolver = system_resolver,
    allowed_networks: Sequence[IPNetwork] | None = None,
    verify: ssl.SSLContext | bool = True,
) -> Fetched:
    """GET `url` and return its body, following at most `limits.max_redirects` redirects.

    `allowed_networks` defaults to `KOINON_OUTSIDE_ALLOWED_NETWORKS`; `verify` is the TLS
    trust (True: the system's CA bundle as httpx loads it), given only by tests and
    administrators. Raises OutsideError: `refused_address` (any hop's address refused, before
    connecting to it), `timeout` (the deadline passed), `too_large` (the body or its declared
    length passed the cap; reading stops there), `access_denied` (401, 403),
    `provider_unavailable` (another status, a redirect over the limit or without a target, a
    connection or TLS failure; retryable for 429, 5xx and connection failures)."""
    networks = allowed_networks_configured() if allowed_networks is None else allowed_networks
    deadline = time.monotonic() + limits.timeout_seconds
    bounded_resolver = _resolver_until(resolver, deadline)
    current = url
    host = "-"
    try:
        for _hop in range(limits.max_redirects + 1):
            checked = address_check(current, allowed_networks=networks, resolver=bounded_resolver)
            host = checked.host
            answer = _get(checked, limits=limits, deadline=deadline, verify=verify)
            if isinstance(answer, _Redirect):
                current = answer.location
                continue
            status, content_type, content = answer
            logger.info("fetch_url %s ok", host)
            return Fetched(
                requested_url=url,
                final_url=current,
                status=status,
                content_type=content_type,
                content=content,
                sha256=hashlib.sha256(content).hexdigest(),
                fetched_at=datetime.now(UTC),
            )
        raise OutsideError("provider_unavailable", f"more than {limits.max_redirects} redirects")
    except OutsideError as error:
        logger.info("fetch_url %s %s", host, error.code)
        raise


def _get(
    checked: CheckedAddress,
    *,
    limits: FetchLimits,
    deadline: float,
    verify: ssl.SSLContext | bool,
) -> _Redirect | tuple[int, str, bytes]:
    """One GET to the checked address: a redirect to follow, or a 2xx's status, type and body.
    A fresh transport for each hop: no connection, cookie or TLS session carries over, and
    no proxy or netrc from the environment applies (httpx's Client would read them)."""
    extensions: dict[str, object] = {"timeout": _UntilDeadline(deadline)}
    if checked.scheme == "https" and checked.is_name:
        extensions["sni_hostname"] = checked.host
    try:
        request = httpx.Request(
            "GET",
            _connect_url(checked),
            headers={"Host": checked.host_header, **_HEADERS},
            extensions=extensions,
        )
    except httpx.InvalidURL:
        raise OutsideError("refused_address", "malformed URL") from None
    try:
        with httpx.HTTPTransport(verify=verify, retries=0) as transport:
            response = transport.handle_request(request)
            try:
                return _answer(response, checked, limits=limits, deadline=deadline)
            finally:
                response.close()
    except httpx.TimeoutException:
        raise OutsideError("timeout", "deadline passed", retryable=True) from None
    except httpx.TransportError as error:
        if _certificate_refused(error):
            raise OutsideError("provider_unavailable", "TLS certificate not accepted") from None
        raise OutsideError("provider_unavailable", "connection failed", retryable=True) from None
    except httpx.DecodingError:
        raise OutsideError("provider_unavailable", "body could not be decoded") from None


def _answer(
    response: httpx.Response, checked: CheckedAddress, *, limits: FetchLimits, deadline: float
) -> _Redirect | tuple[int, str, bytes]:
    """What one response means. A body is read only from a 2xx: an error page's text is never
    looked at (it is the provider's words)."""
    status = response.status_code
    if status in REDIRECT_STATUSES:
        location = response.headers.get("location", "").strip()
        if not location:
            raise OutsideError("provider_unavailable", f"HTTP {status} without a Location")
        return _Redirect(urljoin(checked.url, location))
    if status in (401, 403):
        raise OutsideError("access_denied", f"HTTP {status}")
    if status == 429 or status >= 500:
        raise OutsideError("provider_unavailable", f"HTTP {status}", retryable=True)
    if not 200 <= status < 300:
        raise OutsideError("provider_unavailable", f"HTTP {status}")
    declared = response.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limits.max_bytes:
        raise OutsideError("too_large", f"declared length over {limits.max_bytes} bytes")
    body = bytearray()
    for chunk in response.iter_bytes():
        body += chunk
        if len(body) > limits.max_bytes:
            raise OutsideError("too_large", f"body over {limits.max_bytes} bytes")
        if time.monotonic() > deadline:
            # A body trickling in never lets one read time out: the deadline is checked here.
            raise OutsideError("timeout", "deadline passed", retryable=True)
    return status, response.headers.get("content-type", ""), bytes(body)


def _connect_url(checked: CheckedAddress) -> str:
    """The URL with its host replaced by the checked address (what httpx connects to); path
    and query as written."""
    parts = urlsplit(checked.url)
    host = f"[{checked.ip}]" if checked.ip.version == 6 else str(checked.ip)
    query = f"?{parts.query}" if parts.query else ""
    return f"{checked.scheme}://{host}:{checked.port}{parts.path or '/'}{query}"


class _UntilDeadline(Mapping[str, float]):
    """httpcore's timeouts for one request (connect, read, write, pool), each looked up when
    an operation starts: the time left until the deadline, so no operation outlives it.
    httpx's own timeouts restart with every operation."""

    _KEYS = ("connect", "read", "write", "pool")

    def __init__(self, deadline: float) -> None:
        self._deadline = deadline

    def __getitem__(self, key: str) -> float:
        if key not in self._KEYS:
            raise KeyError(key)
        # Past the deadline, a millisecond: the operation then times out as httpx reports it
        # (0 would make the socket non-blocking instead).
        return max(self._deadline - time.monotonic(), 0.001)

    def __iter__(self) -> Iterator[str]:
        return iter(self._KEYS)

    def __len__(self) -> int:
        return len(self._KEYS)


def _resolver_until(resolver: Resolver, deadline: float) -> Resolver:
    """`resolver` bounded by the deadline: `getaddrinfo` has no timeout of its own, so it runs
    on a thread of its own, left to finish in the background when the deadline passes."""

    def bounded(host: str, port: int) -> Sequence[str]:
        left = deadline - time.monotonic()
        if left <= 0:
            raise OutsideError("timeout", "deadline passed", retryable=True)
        executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="outside-resolve")
        try:
            future = executor.submit(resolver, host, port)
            try:
                return future.result(timeout=left)
            except TimeoutError:
                raise OutsideError("timeout", "name resolution", retryable=True) from None
        finally:
            executor.shutdown(wait=False)

    return bounded


def _certificate_refused(error: BaseException) -> bool:
    """Whether a certificate check failed somewhere in `error`'s chain: not retryable, unlike
    a connection that failed."""
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, ssl.SSLCertVerificationError):
            return True
        seen = seen.__cause__ or seen.__context__
    return False
