"""The SSRF rules of fetch_url (SPEC §5): which hosts an outside call may reach. No test here
asks DNS: every name goes to an injected resolver."""

import ipaddress

import pytest

from outside.addresses import (
    CheckedAddress,
    address_check,
    allowed_networks_configured,
    allowed_networks_parse,
)
from outside.errors import OutsideError
from tests.outside.helpers import Resolver, no_connections
from tests.settings_checks import django_setup_with

PUBLIC = "93.184.215.14"

REFUSED_ADDRESSES = [
    "http://127.0.0.1/",
    "http://127.0.0.1:8000/admin",
    "http://10.0.0.1/",
    "http://172.16.5.4/",
    "http://192.168.1.1/",
    "http://169.254.1.1/",
    "http://169.254.169.254/latest/meta-data/",
    "http://100.64.0.1/",
    "http://224.0.0.1/",
    "http://0.0.0.0/",
    "http://255.255.255.255/",
    "http://240.0.0.1/",
    "http://192.0.2.1/",
    "http://[::1]/",
    "http://[::]/",
    "http://[fe80::1]/",
    "http://[fc00::1]/",
    "http://[fd00:ec2::254]/",
    "http://[ff02::1]/",
    # Other spellings of 127.0.0.1, as a resolver reads them.
    "http://2130706433/",
    "http://0x7f000001/",
    "http://0x7f.0.0.1/",
    "http://0X7F.0x0.0.0x1/",
    "http://0177.0.0.1/",
    "http://0177.0000.0000.0001/",
    "http://127.1/",
    "http://127.0.1/",
    "http://127.0.0.1./",
    "http://１２７．０．０．１/",  # full-width digits and dots, which IDNA maps to ASCII
    # IPv6 spellings of IPv4 loopback and private addresses.
    "http://[::ffff:127.0.0.1]/",
    "http://[::ffff:7f00:1]/",
    "http://[::ffff:10.0.0.1]/",
    "http://[::127.0.0.1]/",
    "http://[2002:7f00:1::]/",
    "http://[2002:a00:1::1]/",
    "http://[64:ff9b::7f00:1]/",
    "http://[64:ff9b::a9fe:a9fe]/",
]


@pytest.mark.parametrize("url", REFUSED_ADDRESSES)
def test_it_refuses_an_address_that_is_not_public_however_it_is_written(url):
    resolver = Resolver(["127.0.0.1"])
    with no_connections() as attempts, pytest.raises(OutsideError) as refused:
        address_check(url, resolver=resolver)
    assert refused.value.code == "refused_address"
    assert not refused.value.retryable
    assert attempts == []


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("http://2130706433/", "loopback address"),
        ("http://0x7f.0.0.1/", "loopback address"),
        ("http://0177.0.0.1/", "loopback address"),
        ("http://[::ffff:127.0.0.1]/", "loopback address"),
        ("http://169.254.169.254/", "cloud metadata address"),
        ("http://[fd00:ec2::254]/", "cloud metadata address"),
        ("http://100.64.0.1/", "shared address"),
        ("http://255.255.255.255/", "broadcast address"),
        ("http://[2002:7f00:1::]/", "embeds a loopback address"),
        ("http://[64:ff9b::a00:1]/", "embeds a private address"),
    ],
)
def test_a_refusal_names_its_reason(url, reason):
    with pytest.raises(OutsideError) as refused:
        address_check(url, resolver=Resolver([]))
    assert refused.value.detail == reason


@pytest.mark.parametrize(
    "resolved",
    [
        ["127.0.0.1"],
        ["10.1.2.3"],
        ["169.254.169.254"],
        ["::1"],
        ["::ffff:192.168.0.1"],
        ["fe80::1%eth0"],
        [PUBLIC, "10.0.0.7"],  # one public, one private: refused whole
        ["2606:2800:21f:cb07:6820:80da:af6b:8b2c", "fd12::1"],
    ],
)
def test_a_name_resolving_to_a_refused_address_is_refused_without_connecting(resolved):
    resolver = Resolver(resolved)
    with no_connections() as attempts, pytest.raises(OutsideError) as refused:
        address_check("https://intranet.example/report?token=s3cret", resolver=resolver)
    assert refused.value.code == "refused_address"
    assert attempts == []
    assert resolver.asked == [("intranet.example", 443)]


def test_a_name_resolving_to_loopback_is_refused():
    with pytest.raises(OutsideError) as refused:
        address_check("http://localhost/", resolver=Resolver(["127.0.0.1", "::1"]))
    assert refused.value.detail == "loopback address"


def test_a_public_name_is_resolved_once_and_its_checked_address_kept():
    resolver = Resolver([PUBLIC, "2606:2800:21f:cb07:6820:80da:af6b:8b2c"])
    checked = address_check("https://Example.COM./a/b?q=1#top", resolver=resolver)
    assert checked == CheckedAddress(
        url="https://Example.COM./a/b?q=1#top",
        scheme="https",
        host="example.com",
        port=443,
        ip=ipaddress.ip_address(PUBLIC),
    )
    assert resolver.asked == [("example.com", 443)]
    assert checked.host_header == "example.com"
    assert checked.is_name


def test_a_public_literal_is_not_resolved():
    resolver = Resolver([])
    checked = address_check("http://[2606:4700::1111]:8080/", resolver=resolver)
    assert (checked.host, checked.port, checked.host_header) == (
        "2606:4700::1111",
        8080,
        "[2606:4700::1111]:8080",
    )
    assert not checked.is_name
    assert resolver.asked == []


def test_an_ipv4_mapped_public_address_is_its_ipv4_address():
    checked = address_check("http://[::ffff:8.8.8.8]/", resolver=Resolver([]))
    assert checked.ip == ipaddress.IPv4Address("8.8.8.8")


def test_an_international_name_is_asked_in_its_ascii_form():
    resolver = Resolver([PUBLIC])
    checked = address_check("http://bücher.example/", resolver=resolver)
    assert checked.host == "xn--bcher-kva.example"
    assert resolver.asked == [("xn--bcher-kva.example", 80)]


@pytest.mark.parametrize(
    ("url", "detail"),
    [
        ("ftp://example.com/file", "scheme is not http or https"),
        ("file:///etc/passwd", "scheme is not http or https"),
        ("gopher://example.com/", "scheme is not http or https"),
        ("http://user:pass@example.com/", "credentials in the URL"),
        ("http://user@example.com/", "credentials in the URL"),
        ("http://example.com@127.0.0.1/", "credentials in the URL"),
        ("http://example.com:99999/", "malformed URL"),
        ("http://example.com:0/", "port out of range"),
        ("http://１２７．０．０．１/", "loopback address"),
        ("http://[::1/", "malformed URL"),
        ("http://exa mple.com/", "whitespace, control character or backslash"),
        ("http://example.com\\@127.0.0.1/", "whitespace, control character or backslash"),
        ("http://example.com\t/", "whitespace, control character or backslash"),
        ("http:///path", "malformed host"),
        ("http://exa_mple.com/", "malformed host"),
        ("http://1.2.3.4.5/", "malformed IPv4 address"),
        ("http://08.0.0.1/", "malformed IPv4 address"),
        ("http://256.0.0.1/", "malformed IPv4 address"),
        ("http://1.16777216/", "malformed IPv4 address"),
        ("http://example.123/", "malformed IPv4 address"),
        ("http://[fe80::1%25eth0]/", "IPv6 zone identifier"),
    ],
)
def test_it_refuses_a_url_it_does_not_fetch_without_resolving_it(url, detail):
    resolver = Resolver([PUBLIC])
    with no_connections() as attempts, pytest.raises(OutsideError) as refused:
        address_check(url, resolver=resolver)
    assert (refused.value.code, refused.value.detail) == ("refused_address", detail)
    assert resolver.asked == []
    assert attempts == []


def test_an_allowlisted_network_opens_its_addresses_and_no_others():
    allowed = allowed_networks_parse(["127.0.0.1/32", "10.20.0.0/16"])
    assert address_check("http://127.0.0.1:8000/", allowed_networks=allowed).port == 8000
    assert address_check("http://0x7f000001/", allowed_networks=allowed).host == "127.0.0.1"
    assert address_check("http://[::ffff:10.20.3.4]/", allowed_networks=allowed).ip == (
        ipaddress.IPv4Address("10.20.3.4")
    )
    for url in (
        "http://127.0.0.2/",
        "http://[::1]/",
        "http://10.21.0.1/",
        "http://[2002:7f00:1::]/",
    ):
        with pytest.raises(OutsideError):
            address_check(url, allowed_networks=allowed)
    resolver = Resolver(["10.20.0.5", "10.30.0.5"])
    with pytest.raises(OutsideError):
        address_check("http://intranet.example/", allowed_networks=allowed, resolver=resolver)


def test_a_name_that_does_not_resolve_is_a_retryable_unavailable_provider():
    def failing(host, port):
        raise OSError("[Errno -2] Name or service not known: secret.internal")

    with pytest.raises(OutsideError) as failed:
        address_check("http://nowhere.example/", resolver=failing)
    assert (failed.value.code, failed.value.retryable) == ("provider_unavailable", True)
    assert "secret" not in repr(failed.value)
    with pytest.raises(OutsideError) as empty:
        address_check("http://nowhere.example/", resolver=Resolver([]))
    assert empty.value.code == "provider_unavailable"


def test_the_allowlist_is_read_from_the_settings(settings):
    settings.KOINON_OUTSIDE_ALLOWED_NETWORKS = ["127.0.0.1/32", "fd12::/64"]
    assert allowed_networks_configured() == (
        ipaddress.ip_network("127.0.0.1/32"),
        ipaddress.ip_network("fd12::/64"),
    )


def test_the_allowlist_is_empty_unless_configured(settings):
    assert allowed_networks_configured() == ()


@pytest.mark.parametrize("value", ["10.0.0.0/33", "10.1.2.3/16", "intranet", "10.0.0.0/8,nope"])
def test_a_bad_allowlist_stops_the_start_naming_it(value):
    started = django_setup_with("KOINON_OUTSIDE_ALLOWED_NETWORKS", value)
    assert started.returncode != 0
    assert "KOINON_OUTSIDE_ALLOWED_NETWORKS must list networks in CIDR notation" in started.stderr
