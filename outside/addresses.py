"""Which hosts an outside call may reach: the SSRF rules of `fetch_url` (SPEC §5).

A URL is taken apart once, its host read the way a resolver would read it (every numeric
spelling of an IPv4 address, IPv6 literals and the IPv4 addresses they embed) or resolved
once by DNS, and every address is checked. The caller connects to the checked address
(`CheckedAddress.ip`) and never resolves the name again: a second lookup could answer
differently (DNS rebinding).

Refused, unless inside a network an administrator allowlists
(`KOINON_OUTSIDE_ALLOWED_NETWORKS`): loopback, private, link-local, multicast, unspecified,
broadcast, reserved, shared (100.64/10) and cloud-metadata addresses, and any address that
`ipaddress` does not call global.
"""

import ipaddress
import re
import socket
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Literal
from urllib.parse import urlsplit

from django.conf import settings

from outside.errors import OutsideError

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
Scheme = Literal["http", "https"]
# A host name and port in, the addresses it resolves to out (as text, in the resolver's order).
Resolver = Callable[[str, int], Sequence[str]]

DEFAULT_PORTS: dict[Scheme, int] = {"http": 80, "https": 443}
_SCHEMES: dict[str, Scheme] = {"http": "http", "https": "https"}
# Named although every one is also refused as private or link-local: an allowlisted private
# network must not open the cloud's metadata service (AWS, GCP, Azure, OpenStack; AWS's IPv6).
METADATA_ADDRESSES = frozenset(
    {ipaddress.ip_address("169.254.169.254"), ipaddress.ip_address("fd00:ec2::254")}
)
_SHARED = ipaddress.ip_network("100.64.0.0/10")
_BROADCAST = ipaddress.IPv4Address("255.255.255.255")
_NAT64_WELL_KNOWN = ipaddress.ip_network("64:ff9b::/96")
_IPV4_COMPATIBLE = ipaddress.ip_network("::/96")
_LABEL = re.compile(r"^(?!-)[a-z0-9-]{1,63}(?<!-)$")
# Whitespace and control characters: parsers disagree on them (one strips, another splits).
_UNSAFE_IN_URL = re.compile(r"[\x00-\x20\x7f\\]")


@dataclass(frozen=True)
class CheckedAddress:
    """A URL koinon may fetch, and the address to connect to for it."""

    url: str
    scheme: Scheme
    host: str  # a lower-case ASCII name, or the address's canonical text for a literal
    port: int
    ip: IPAddress  # checked: connect here, never to a second resolution of `host`

    @property
    def host_header(self) -> str:
        """The `Host` header for this URL (RFC 9110 §7.2): the port only when not the
        scheme's default, an IPv6 literal in brackets."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.port == DEFAULT_PORTS[self.scheme] else f"{host}:{self.port}"

    @property
    def is_name(self) -> bool:
        """Whether the host is a DNS name (then TLS checks the certificate against it)."""
        try:
            ipaddress.ip_address(self.host)
        except ValueError:
            return True
        return False


def system_resolver(host: str, port: int) -> list[str]:
    """The system's resolver (`getaddrinfo`), TCP addresses only."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)
    return [str(info[4][0]) for info in infos]


def allowed_networks_parse(values: Iterable[str]) -> tuple[IPNetwork, ...]:
    """Networks in CIDR notation (`10.1.0.0/16`, `fd12::/64`, a bare address for one host);
    raises ValueError on a malformed one or one with host bits set."""
    return tuple(ipaddress.ip_network(value.strip(), strict=True) for value in values)


def allowed_networks_configured() -> tuple[IPNetwork, ...]:
    """The networks an administrator allowlisted (`KOINON_OUTSIDE_ALLOWED_NETWORKS`, checked
    at start by koinon/settings.py)."""
    return allowed_networks_parse(settings.KOINON_OUTSIDE_ALLOWED_NETWORKS)


def address_check(
    url: str,
    *,
    allowed_networks: Sequence[IPNetwork] = (),
    resolver: Resolver = system_resolver,
) -> CheckedAddress:
    """The checked address for `url`, or OutsideError.

    Raises `refused_address` for a URL koinon does not fetch (not http or https, credentials
    in it, a malformed host or port) and for a host any of whose addresses is refused;
    `provider_unavailable` (retryable) when a name does not resolve. The resolver is called
    at most once, and only for a name."""
    scheme, written, port = _url_parts(url)
    if ":" in written:
        ip = _connectable(_ipv6_literal(written))
        _refuse_unless_allowed(ip, allowed_networks)
        return CheckedAddress(url, scheme, str(ip), port, ip)
    # Read as an address after IDNA mapping, which turns full-width digits and dots into ASCII.
    name = _host_name(written)
    literal = _ipv4_literal(name)
    if literal is not None:
        _refuse_unless_allowed(literal, allowed_networks)
        return CheckedAddress(url, scheme, str(literal), port, literal)
    addresses = _resolved(name, port, resolver)
    # Every address, not only the one used: a name that also points inside is refused whole.
    for ip in addresses:
        _refuse_unless_allowed(ip, allowed_networks)
    return CheckedAddress(url, scheme, name, port, addresses[0])


def _url_parts(url: str) -> tuple[Scheme, str, int]:
    """The scheme, the host as written (lower case, IPv6 without brackets) and the port."""
    if _UNSAFE_IN_URL.search(url):
        raise OutsideError("refused_address", "whitespace, control character or backslash")
    try:
        parts = urlsplit(url)
        port_written = parts.port
        written = parts.hostname or ""
    except ValueError:
        raise OutsideError("refused_address", "malformed URL") from None
    scheme = _SCHEMES.get(parts.scheme.lower())
    if scheme is None:
        raise OutsideError("refused_address", "scheme is not http or https")
    if "@" in parts.netloc:
        raise OutsideError("refused_address", "credentials in the URL")
    port = port_written if port_written is not None else DEFAULT_PORTS[scheme]
    if not 0 < port < 65536:
        raise OutsideError("refused_address", "port out of range")
    return scheme, written, port


def _resolved(name: str, port: int, resolver: Resolver) -> list[IPAddress]:
    """The addresses `name` resolves to, asked once; a resolver's error text is dropped."""
    try:
        found = list(resolver(name, port))
    except OSError:
        raise OutsideError("provider_unavailable", "name did not resolve", retryable=True) from None
    if not found:
        raise OutsideError("provider_unavailable", "name did not resolve", retryable=True)
    try:
        return [_connectable(ipaddress.ip_address(text)) for text in found]
    except ValueError:
        raise OutsideError("refused_address", "resolver gave a malformed address") from None


def refusal_reason(ip: IPAddress) -> str | None:
    """Why `ip` is refused when no allowlist admits it, or None for a public address. An IPv6
    address that embeds an IPv4 one (IPv4-compatible, 6to4, NAT64) is refused when the
    embedded one is; a well-known-prefix NAT64 address (64:ff9b::/96, which `ipaddress` does
    not call global) is judged by the IPv4 address it reaches, so that an IPv6-only host
    behind DNS64 can fetch public sites."""
    if ip in METADATA_ADDRESSES:
        return "cloud metadata address"
    if isinstance(ip, ipaddress.IPv6Address):
        embedded = _embedded_ipv4(ip)
        inner = refusal_reason(embedded) if embedded is not None else None
        if inner is not None:
            return f"embeds a {inner}"
        if ip in _NAT64_WELL_KNOWN:
            return None
    return _reason_for(ip)


def _reason_for(ip: IPAddress) -> str | None:
    checks = (
        (ip.is_unspecified, "unspecified address"),
        (ip.is_loopback, "loopback address"),
        (ip.is_link_local, "link-local address"),
        (ip.is_multicast, "multicast address"),
        (ip == _BROADCAST, "broadcast address"),
        (isinstance(ip, ipaddress.IPv4Address) and ip in _SHARED, "shared address"),
        (ip.is_private, "private address"),
        (ip.is_reserved, "reserved address"),
        (not ip.is_global, "non-global address"),
    )
    return next((reason for refused, reason in checks if refused), None)


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip in _NAT64_WELL_KNOWN or ip in _IPV4_COMPATIBLE:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def _refuse_unless_allowed(ip: IPAddress, allowed_networks: Sequence[IPNetwork]) -> None:
    if any(ip.version == network.version and ip in network for network in allowed_networks):
        return
    reason = refusal_reason(ip)
    if reason is not None:
        raise OutsideError("refused_address", reason)


def _connectable(ip: IPAddress) -> IPAddress:
    """The address a connection to `ip` reaches: an IPv4-mapped IPv6 address is its IPv4
    address (the kernel connects there), so it is checked and allowlisted as that."""
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.scope_id is not None:
            raise OutsideError("refused_address", "IPv6 zone identifier")
        if ip.ipv4_mapped is not None:
            return ip.ipv4_mapped
    return ip


def _ipv6_literal(host: str) -> ipaddress.IPv6Address:
    try:
        return ipaddress.IPv6Address(host)
    except ValueError:
        raise OutsideError("refused_address", "malformed IPv6 literal") from None


def _ipv4_literal(name: str) -> ipaddress.IPv4Address | None:
    """The IPv4 address `name` spells, read as a resolver would (`inet_aton`: decimal, octal
    with a leading 0, hex with 0x, one to four parts, the last filling the remaining bytes),
    or None for a DNS name. A name whose last label is numeric is an address or refused, never
    sent to the resolver (WHATWG URL's rule)."""
    labels = name.split(".")
    if not _is_number(labels[-1]):
        return None
    if len(labels) > 4 or not all(_is_number(label) for label in labels):
        raise OutsideError("refused_address", "malformed IPv4 address")
    values = [_number(label) for label in labels]
    last_limit = 256 ** (5 - len(values))
    if any(value > 255 for value in values[:-1]) or values[-1] >= last_limit:
        raise OutsideError("refused_address", "malformed IPv4 address")
    number = values[-1]
    for index, value in enumerate(values[:-1]):
        number += value << (8 * (3 - index))
    return ipaddress.IPv4Address(number)


def _is_number(label: str) -> bool:
    if label[:2] in ("0x", "0X"):
        return all(character in "0123456789abcdefABCDEF" for character in label[2:])
    return label.isascii() and label.isdigit()


def _number(label: str) -> int:
    if label[:2] in ("0x", "0X"):
        return int(label[2:] or "0", 16)
    if len(label) > 1 and label.startswith("0"):
        try:
            return int(label, 8)
        except ValueError:
            raise OutsideError("refused_address", "malformed IPv4 address") from None
    return int(label)


def _host_name(written: str) -> str:
    """`written` as the ASCII name a resolver is asked for (IDNA), or refused_address."""
    if not written or "%" in written:
        raise OutsideError("refused_address", "malformed host")
    try:
        name = written.removesuffix(".").encode("idna").decode("ascii").lower()
    except UnicodeError:
        raise OutsideError("refused_address", "malformed host") from None
    if len(name) > 253 or not all(_LABEL.match(label) for label in name.split(".")):
        raise OutsideError("refused_address", "malformed host")
    return name
