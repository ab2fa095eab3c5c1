"""The bounded fetch of fetch_url (SPEC §5) against a real server on 127.0.0.1, which these
tests allowlist (as an administrator would) and nothing else. Names go to an injected
resolver; no test asks DNS or leaves the machine."""

import hashlib
import logging
import socket
import time
from datetime import UTC

import pytest

from outside.addresses import allowed_networks_parse
from outside.errors import OutsideError
from outside.fetch import USER_AGENT, FetchLimits, fetch
from tests.knowledge.helpers import BACKUP_POLICY, GAP_BOTH_CLEAN, kerned_pdf
from tests.outside.helpers import (
    PAGE,
    SECRET,
    LocalServer,
    Resolver,
    certificates,
    connections_recorded,
    no_connections,
)

LOOPBACK = allowed_networks_parse(["127.0.0.1/32"])
LIMITS = FetchLimits(max_bytes=256 * 1024, timeout_seconds=5, max_redirects=5)


@pytest.fixture(scope="module")
def pdf():
    return kerned_pdf(BACKUP_POLICY, gap=GAP_BOTH_CLEAN)


@pytest.fixture
def server(pdf):
    with LocalServer(pdf) as running:
        yield running


def get(url, *, limits=LIMITS, resolver=None, **kwargs):
    return fetch(
        url,
        limits=limits,
        resolver=resolver or Resolver(["127.0.0.1"]),
        allowed_networks=kwargs.pop("allowed_networks", LOOPBACK),
        **kwargs,
    )


def test_it_fetches_a_page_with_its_hash_type_and_time(server):
    before = time.time()
    page = get(server.url("/page.html"))
    assert page.content == PAGE
    assert page.sha256 == hashlib.sha256(PAGE).hexdigest()
    assert (page.status, page.content_type) == (200, "text/html; charset=utf-8")
    assert page.requested_url == page.final_url == server.url("/page.html")
    assert page.fetched_at.tzinfo is UTC
    assert page.fetched_at.timestamp() >= before - 1


def test_it_fetches_a_pdf_byte_for_byte(server, pdf):
    document = get(server.url("/doc.pdf"))
    assert document.content == pdf
    assert document.content.startswith(b"%PDF-")
    assert document.content_type == "application/pdf"


def test_a_name_is_resolved_once_per_hop_and_sent_as_the_host(server, monkeypatch):
    for proxy in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "all_proxy"):
        monkeypatch.setenv(proxy, "http://10.9.9.9:3128")  # ignored: each hop goes direct
    resolver = Resolver(["127.0.0.1"])
    with connections_recorded() as opened:
        page = get(server.url("/page.html?token=abc", host="docs.example"), resolver=resolver)
    assert page.content == PAGE
    assert resolver.asked == [("docs.example", server.port)]
    assert opened == [("127.0.0.1", server.port)]
    path, headers = server.requests[-1]
    assert path == "/page.html?token=abc"
    assert headers["Host"] == f"docs.example:{server.port}"


def test_it_sends_no_credentials_or_cookies_and_only_its_own_headers(server):
    location = server.url("/page.html", host="other.example")
    get(server.url(f"/to?{location}"))
    assert [path for path, _ in server.requests] == [f"/to?{location}", "/page.html"]
    for _, headers in server.requests:
        assert set(headers) == {"Host", "User-Agent", "Accept", "Accept-Encoding"}
        assert headers["User-Agent"] == USER_AGENT
    assert server.requests[1][1]["Host"] == f"other.example:{server.port}"


def test_a_url_with_credentials_is_refused_before_any_connection(server):
    with no_connections() as attempts, pytest.raises(OutsideError) as refused:
        get(server.url("/page.html", host="user:password@127.0.0.1"))
    assert refused.value.code == "refused_address"
    assert attempts == []
    assert server.requests == []


def test_a_redirect_chain_within_the_limit_is_followed(server):
    page = get(server.url("/redirect/5"))
    assert page.content == PAGE
    assert page.final_url == server.url("/page.html")
    assert page.requested_url == server.url("/redirect/5")
    assert len(server.requests) == 6


def test_a_redirect_chain_over_the_limit_is_refused_without_a_further_request(server):
    with pytest.raises(OutsideError) as failed:
        get(server.url("/redirect/6"))
    assert (failed.value.code, failed.value.retryable) == ("provider_unavailable", False)
    assert failed.value.detail == "more than 5 redirects"
    assert len(server.requests) == 6


def test_a_redirect_without_a_location_is_unavailable(server):
    with pytest.raises(OutsideError) as failed:
        get(server.url("/no-location"))
    assert failed.value.code == "provider_unavailable"


@pytest.mark.parametrize(
    ("location", "resolved"),
    [
        ("http://10.0.0.1/admin", []),
        ("http://169.254.169.254/latest/meta-data/", []),
        ("http://[::1]:{port}/page.html", []),
        ("http://0x7f000002:{port}/page.html", []),
        ("http://internal.example/", ["10.0.0.5"]),
        ("http://rebound.example/", ["93.184.215.14", "192.168.0.10"]),
        ("ftp://127.0.0.1/file", []),
    ],
)
def test_a_redirect_to_a_refused_address_is_refused_without_connecting_there(
    server, location, resolved
):
    target = location.format(port=server.port)
    with connections_recorded() as opened, pytest.raises(OutsideError) as refused:
        get(server.url(f"/to?{target}"), resolver=Resolver(resolved))
    assert refused.value.code == "refused_address"
    assert opened == [("127.0.0.1", server.port)]  # the first hop only
    assert len(server.requests) == 1


@pytest.mark.parametrize(
    ("url", "resolved"),
    [
        ("http://127.0.0.1:{port}/page.html", []),
        ("http://2130706433:{port}/page.html", []),
        ("http://0177.0.0.1:{port}/page.html", []),
        ("http://[::ffff:127.0.0.1]:{port}/page.html", []),
        ("http://169.254.169.254/latest/meta-data/", []),
        ("http://intranet.example:{port}/", ["127.0.0.1"]),
        ("http://mixed.example:{port}/", ["93.184.215.14", "127.0.0.1"]),
    ],
)
def test_without_an_allowlist_loopback_and_private_hosts_are_never_connected(server, url, resolved):
    with no_connections() as attempts, pytest.raises(OutsideError) as refused:
        get(url.format(port=server.port), resolver=Resolver(resolved), allowed_networks=())
    assert refused.value.code == "refused_address"
    assert attempts == []
    assert server.requests == []


def test_the_connection_guard_sees_a_connection_when_one_is_made(server):
    # The guard above is live: a fetch that would connect is stopped by it.
    with no_connections() as attempts, pytest.raises(OutsideError):
        get(server.url("/page.html"))
    assert attempts != []


def test_a_body_over_the_cap_stops_the_read_early(server):
    with pytest.raises(OutsideError) as failed:
        get(server.url("/huge"))
    assert (failed.value.code, failed.value.retryable) == ("too_large", False)
    ended, written = server.wait_ended("/huge")
    assert ended == "client gone"
    # All of it would be 64 MiB; the cap is 256 KiB and loopback socket buffers take a few MiB.
    assert written < 16 * 1024 * 1024


def test_a_declared_length_over_the_cap_is_refused_before_the_body_is_read(server):
    with pytest.raises(OutsideError) as failed:
        get(server.url("/huge-declared"))
    assert failed.value.code == "too_large"
    assert failed.value.detail.startswith("declared length")
    assert server.wait_ended("/huge-declared")[0] == "client gone"


def test_a_body_that_trickles_in_is_stopped_at_the_deadline(server):
    started = time.monotonic()
    with pytest.raises(OutsideError) as failed:
        get(server.url("/slow"), limits=FetchLimits(timeout_seconds=1))
    assert (failed.value.code, failed.value.retryable) == ("timeout", True)
    assert time.monotonic() - started < 30  # a guard: the body alone would take 5000 s
    assert server.wait_ended("/slow")[0] == "client gone"


def test_an_answer_that_never_starts_is_stopped_at_the_deadline(server):
    started = time.monotonic()
    with pytest.raises(OutsideError) as failed:
        get(server.url("/slow-headers"), limits=FetchLimits(timeout_seconds=1))
    assert failed.value.code == "timeout"
    assert time.monotonic() - started < 30  # a guard: the server waits 60 s


def test_a_resolver_that_hangs_is_stopped_at_the_deadline():
    def hanging(host, port):
        time.sleep(5)
        return ["93.184.215.14"]

    with pytest.raises(OutsideError) as failed:
        fetch("http://slow-dns.example/", limits=FetchLimits(timeout_seconds=0.2), resolver=hanging)
    assert failed.value.code == "timeout"


@pytest.mark.parametrize(
    ("status", "code", "retryable"),
    [
        (401, "access_denied", False),
        (403, "access_denied", False),
        (404, "provider_unavailable", False),
        (410, "provider_unavailable", False),
        (429, "provider_unavailable", True),
        (500, "provider_unavailable", True),
        (503, "provider_unavailable", True),
        (300, "provider_unavailable", False),
    ],
)
def test_an_error_status_maps_to_its_outcome(server, status, code, retryable):
    with pytest.raises(OutsideError) as failed:
        get(server.url(f"/status/{status}"))
    assert (failed.value.code, failed.value.retryable) == (code, retryable)
    assert failed.value.detail == f"HTTP {status}"


@pytest.mark.parametrize("status", [401, 403, 404, 500])
def test_an_error_carries_no_text_the_server_sent(server, status):
    with pytest.raises(OutsideError) as failed:
        get(server.url(f"/status/{status}"))
    error = failed.value
    for text in (str(error), repr(error), error.detail, repr(error.args)):
        assert SECRET not in text
    assert error.__cause__ is None


def test_a_refused_connection_is_a_retryable_unavailable_provider():
    with socket.socket() as placeholder:
        placeholder.bind(("127.0.0.1", 0))
        port = placeholder.getsockname()[1]
    with pytest.raises(OutsideError) as failed:
        get(f"http://127.0.0.1:{port}/")
    assert (failed.value.code, failed.value.retryable) == ("provider_unavailable", True)
    assert failed.value.detail == "connection failed"


def test_the_log_names_the_host_and_outcome_and_never_the_query(server, caplog):
    caplog.set_level(logging.DEBUG)
    get(server.url("/page.html?api_key=hunter2-secret", host="docs.example"))
    with pytest.raises(OutsideError):
        get(server.url("/status/404?api_key=hunter2-secret"))
    assert "hunter2" not in caplog.text
    outcomes = [r.getMessage() for r in caplog.records if r.name == "outside.fetch"]
    assert outcomes == ["fetch_url docs.example ok", "fetch_url 127.0.0.1 provider_unavailable"]


def test_https_checks_the_certificate_against_the_name_while_connecting_to_the_address(
    tmp_path, pdf
):
    server_tls, trusted = certificates(tmp_path, ["docs.example"])
    with LocalServer(pdf, tls=server_tls) as server, connections_recorded() as opened:
        page = get(server.url("/page.html", host="docs.example"), verify=trusted)
        assert page.content == PAGE
        assert server.server_names == ["docs.example"]
        assert server.requests[0][1]["Host"] == f"docs.example:{server.port}"
        assert opened == [("127.0.0.1", server.port)]


def test_https_refuses_a_certificate_for_another_name(tmp_path, pdf):
    server_tls, trusted = certificates(tmp_path, ["other.example"])
    with LocalServer(pdf, tls=server_tls) as server, pytest.raises(OutsideError) as failed:
        get(server.url("/page.html", host="docs.example"), verify=trusted)
    assert (failed.value.code, failed.value.retryable) == ("provider_unavailable", False)
    assert failed.value.detail == "TLS certificate not accepted"
    assert server.requests == []


def test_a_redirect_from_http_to_https_is_followed_with_the_new_hosts_name(tmp_path, server, pdf):
    server_tls, trusted = certificates(tmp_path, ["docs.example"])
    with LocalServer(pdf, tls=server_tls) as secure:
        target = secure.url("/page.html", host="docs.example")
        page = get(server.url(f"/to?{target}"), verify=trusted)
        assert (page.content, page.final_url) == (PAGE, target)
        assert secure.server_names == ["docs.example"]
        assert "Cookie" not in secure.requests[0][1]
