"""Server-side request forgery guard for merchant webhook URLs.

A merchant chooses the URL we POST to, so a webhook URL must never make the service talk to
itself, its cloud metadata endpoint or its private network, and what a delivery attempt reports
(status, error, duration: the console shows them) must not map the operator's network.
`check_url` is run when the URL is set and at delivery time (DNS can change after the URL was
set) and returns the vetted addresses, which the transport then connects to directly (see
`pinning.py`) so a second DNS answer cannot swap in another address.

Decisions:
- Only `http` and `https` are ever accepted; live mode accepts `https` only.
- URLs carrying credentials (`https://user:pass@host/`) are refused in both
  modes: requests would turn them into an `Authorization` header, they end up
  in logs and operator screens, and `user@host` is a classic parser-confusion
  trick. A merchant who wants a shared secret in the URL can put it in the path.
- In both modes every address the host resolves to must be a public unicast
  address, with one exception: in test mode, loopback where the operator allows
  it (WEBHOOK_ALLOW_LOOPBACK: on when unset, for `http://localhost:5000` on a
  tester's machine and the demos; off in deploy/preorder.env). Link-local (the
  cloud metadata address 169.254.169.254), private and reserved addresses are
  refused in both modes. IPv4 addresses wrapped in IPv6 (IPv4-mapped,
  IPv4-compatible, 6to4, NAT64 64:ff9b::/96) are judged by the IPv4 address
  they carry. The classification does not rely on `ipaddress.is_global`
  alone because its answers for wrapped and multicast addresses differ
  between Python versions.
- A refusal names a literal address, but for a host name only the kind of
  address it resolves to: the addresses of the operator's internal names are
  not told to whoever sets a URL.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from urllib.parse import urlsplit

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

ALLOWED_SCHEMES = ("http", "https")
_WHITESPACE_OR_CONTROL = re.compile(r"[\x00-\x20\x7f]")

# Ranges refused on top of the `ipaddress` flags, explicit so the guard does
# not change with the Python version.
_EXTRA_BLOCKED = tuple(
    (ipaddress.ip_network(net), reason)
    for net, reason in (
        ("0.0.0.0/8", "unspecified network"),
        ("100.64.0.0/10", "shared address space (carrier-grade NAT)"),
        ("192.0.0.0/24", "IETF protocol assignments"),
        ("192.0.2.0/24", "documentation range"),
        ("198.18.0.0/15", "benchmarking range"),
        ("198.51.100.0/24", "documentation range"),
        ("203.0.113.0/24", "documentation range"),
        ("240.0.0.0/4", "reserved"),
        ("::/96", "IPv4-compatible IPv6 (deprecated)"),
        ("64:ff9b:1::/48", "local-use NAT64"),
        ("100::/64", "discard-only range"),
        ("2001::/23", "IETF protocol assignments (incl. Teredo)"),
        ("2001:db8::/32", "documentation range"),
        ("fc00::/7", "unique local (private)"),
        ("fec0::/10", "site-local (deprecated)"),
    )
)
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_IPV4_COMPATIBLE = ipaddress.ip_network("::/96")


class UnsafeURL(Exception):
    """The URL must not be called; str(exc) says why, for an operator."""


class Unresolvable(UnsafeURL):
    """The host name does not resolve now (no answer, or none in time)."""


def unsafe_reason(addr: IPAddress) -> str | None:
    """Why `addr` is not a public unicast address, or None when it is."""
    if isinstance(addr, ipaddress.IPv6Address):
        embedded = _embedded_ipv4(addr)
        if embedded is not None:
            inner = unsafe_reason(embedded)
            return f"wraps {embedded}, {inner}" if inner else None
        if addr in _IPV4_COMPATIBLE and int(addr) > 1:
            embedded = ipaddress.IPv4Address(int(addr))
            inner = unsafe_reason(embedded)
            return f"wraps {embedded}, {inner}" if inner else "IPv4-compatible IPv6 (deprecated)"
    for flag, reason in (
        ("is_unspecified", "unspecified"),
        ("is_loopback", "loopback"),
        ("is_link_local", "link-local"),
        ("is_multicast", "multicast"),
        ("is_reserved", "reserved"),
        ("is_private", "private"),
    ):
        if getattr(addr, flag):
            return reason
    if getattr(addr, "is_site_local", False):
        return "site-local (deprecated)"
    for net, reason in _EXTRA_BLOCKED:
        if addr.version == net.version and addr in net:
            return reason
    if not addr.is_global:
        return "not globally routable"
    return None


def _embedded_ipv4(addr: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    if addr.ipv4_mapped is not None:
        return addr.ipv4_mapped
    if addr.sixtofour is not None:
        return addr.sixtofour
    if addr in _NAT64:
        return ipaddress.IPv4Address(int(addr) & 0xFFFFFFFF)
    return None


def check_form(url: str, livemode: bool) -> tuple[str, int | None]:
    """The rules that need no name resolution (scheme, credentials, host); raise UnsafeURL or
    return (host, port). Also what a merchant's URL must pass when it is set."""
    if not isinstance(url, str) or not url:
        raise UnsafeURL("no webhook URL")
    if _WHITESPACE_OR_CONTROL.search(url):
        raise UnsafeURL("URL contains whitespace or control characters")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise UnsafeURL(f"malformed URL ({exc})") from None
    scheme = parts.scheme.lower()
    if scheme not in ALLOWED_SCHEMES:
        raise UnsafeURL(f"scheme {scheme or '(none)'!r} is not allowed, use https")
    if livemode and scheme != "https":
        raise UnsafeURL("live-mode webhook URLs must use https")
    if parts.username is not None or parts.password is not None:
        raise UnsafeURL("credentials in the URL are not allowed")
    host = parts.hostname
    if not host:
        raise UnsafeURL("URL has no host")
    return host, port


def check_url(url: str, livemode: bool, *, allow_loopback: bool,
              resolve=socket.getaddrinfo) -> list[IPAddress]:
    """Vet a webhook URL; raise UnsafeURL (Unresolvable when the name does not resolve) or return
    the addresses to connect to: every resolved address, in resolver order, duplicates removed,
    each public, or loopback in test mode when `allow_loopback`. `resolve` has the signature of
    `socket.getaddrinfo` (tests inject one)."""
    host, port = check_form(url, livemode)
    if port is None:
        port = 443 if urlsplit(url).scheme.lower() == "https" else 80
    addresses = _resolve(host, port, resolve)
    for addr in addresses:
        reason = unsafe_reason(addr)
        if reason is None or (reason == "loopback" and allow_loopback and not livemode):
            continue
        if _literal(host):
            raise UnsafeURL(f"{addr} ({reason}), only public addresses are allowed")
        kind = reason.rpartition(", ")[2]  # "wraps 10.0.0.1, private": the kind alone
        raise UnsafeURL(f"{host} resolves to a {kind} address, only public addresses are allowed")
    return addresses


def _literal(host: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


def _resolve(host: str, port: int, resolve) -> list[IPAddress]:
    literal = _literal(host)
    if literal is not None:
        return [literal]
    try:
        infos = resolve(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        raise Unresolvable(f"cannot resolve {host} ({exc.__class__.__name__})") from None
    found: list[IPAddress] = []
    for info in infos:
        sockaddr = info[4]
        try:
            addr = ipaddress.ip_address(str(sockaddr[0]).split("%", 1)[0])
        except ValueError:
            raise UnsafeURL(f"{host} resolves to a non-IP address") from None
        if addr not in found:
            found.append(addr)
    if not found:
        raise Unresolvable(f"cannot resolve {host} (no addresses)")
    return found
