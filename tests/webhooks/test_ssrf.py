import ipaddress
import socket

import pytest

from app.webhooks import transport
from app.webhooks.ssrf import UnsafeURL, check_url, unsafe_reason

PUBLIC = "93.184.216.34"


def resolver(*addresses):
    """A stand-in for socket.getaddrinfo answering `addresses` (no network)."""
    def resolve(host, port, type=0, **kwargs):
        return [
            (socket.AF_INET6 if ":" in a else socket.AF_INET, socket.SOCK_STREAM, 6, "",
             (a, port, 0, 0) if ":" in a else (a, port))
            for a in addresses
        ]
    return resolve


def no_dns(host, port, **kwargs):
    raise AssertionError(f"resolver must not be called for {host}")


def failing_dns(host, port, **kwargs):
    raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")


# (url, resolver, expected reason fragment): live mode must refuse all of these.
LIVE_REFUSED = [
    ("https://127.0.0.1/hook", no_dns, "127.0.0.1 (loopback)"),
    ("https://127.1.2.3:8443/hook", no_dns, "loopback"),
    ("https://10.0.0.1/hook", no_dns, "10.0.0.1 (private)"),
    ("https://172.16.5.4/", no_dns, "private"),
    ("https://192.168.1.1/", no_dns, "private"),
    ("https://[::1]/hook", no_dns, "::1 (loopback)"),
    ("https://169.254.169.254/latest/meta-data/", no_dns, "link-local"),
    ("https://[fe80::1]/", no_dns, "link-local"),
    ("https://[fd00::1]/", no_dns, "private"),
    ("https://[::ffff:127.0.0.1]/", no_dns, "wraps 127.0.0.1, loopback"),
    ("https://[::ffff:10.1.2.3]/", no_dns, "wraps 10.1.2.3, private"),
    ("https://[::ffff:169.254.169.254]/", no_dns, "wraps 169.254.169.254, link-local"),
    ("https://[2002:7f00:1::]/", no_dns, "wraps 127.0.0.1, loopback"),   # 6to4
    ("https://[64:ff9b::a00:1]/", no_dns, "wraps 10.0.0.1, private"),   # NAT64
    ("https://[::127.0.0.1]/", no_dns, "wraps 127.0.0.1, loopback"),    # IPv4-compatible
    ("https://[::5db8:d822]/", no_dns, "IPv4-compatible IPv6 (deprecated)"),
    ("https://100.64.0.1/", no_dns, "shared address space"),
    ("https://0.0.0.0/", no_dns, "unspecified"),
    ("https://[::]/", no_dns, "unspecified"),
    ("https://224.0.0.1/", no_dns, "multicast"),
    ("https://[ff02::1]/", no_dns, "multicast"),
    ("https://240.0.0.1/", no_dns, "reserved"),
    ("https://255.255.255.255/", no_dns, ""),
    ("https://192.0.2.10/", no_dns, ""),
    ("https://[2001:db8::1]/", no_dns, ""),
    ("https://localhost/hook", socket.getaddrinfo, ""),    # /etc/hosts, no network
    ("https://hooks.example/", resolver("127.0.0.1"),
     "hooks.example resolves to a loopback address"),
    ("https://hooks.example/", resolver("::1"), "loopback"),
    ("https://hooks.example/", resolver(PUBLIC, "10.0.0.7"),
     "hooks.example resolves to a private address"),
    ("https://hooks.example/", resolver("fe80::1%eth0"), "link-local"),
    ("https://hooks.example/", resolver("::ffff:169.254.169.254"),
     "resolves to a link-local address,"),
    ("https://hooks.example/", failing_dns, "cannot resolve hooks.example"),
    ("https://hooks.example/", resolver(), "cannot resolve hooks.example"),
    ("http://example.com/hook", no_dns, "must use https"),
    ("http://93.184.216.34/hook", no_dns, "must use https"),
    ("ftp://example.com/", no_dns, "scheme 'ftp' is not allowed"),
    ("file:///etc/passwd", no_dns, "scheme 'file' is not allowed"),
    ("gopher://example.com/", no_dns, "not allowed"),
    ("example.com/hook", no_dns, "scheme"),
    ("https:///hook", no_dns, "no host"),
    ("https://user:pass@example.com/", no_dns, "credentials in the URL"),
    ("https://example.com@127.0.0.1/", no_dns, "credentials in the URL"),
    ("https://example.com:99999/", no_dns, "malformed URL"),
    ("https://exa mple.com/", no_dns, "whitespace"),
    ("", no_dns, "no webhook URL"),
]


@pytest.mark.parametrize("url, resolve, reason", LIVE_REFUSED)
def test_live_mode_refuses(url, resolve, reason):
    with pytest.raises(UnsafeURL) as info:
        check_url(url, True, allow_loopback=True, resolve=resolve)  # never loopback in live mode
    assert reason in str(info.value)


# What test mode refuses too, whatever WEBHOOK_ALLOW_LOOPBACK says: every non-public address but
# loopback itself (loopback wrapped in another form included).
TEST_REFUSED = [
    ("http://10.0.0.1/hook", no_dns, "10.0.0.1 (private)"),
    ("http://192.168.1.1:8080/", no_dns, "private"),
    ("http://[fd00::1]/", no_dns, "private"),
    ("http://[fe80::1]/", no_dns, "link-local"),
    ("http://[::ffff:127.0.0.1]/", no_dns, "wraps 127.0.0.1, loopback"),
    ("http://100.64.0.1/", no_dns, "shared address space"),
    ("http://0.0.0.0:5000/", no_dns, "unspecified"),
    ("http://224.0.0.1/", no_dns, "multicast"),
    ("http://240.0.0.1/", no_dns, "reserved"),
    ("http://192.0.2.10/", no_dns, "192.0.2.10 ("),
    ("http://hooks.example/", resolver("10.0.0.7"), "hooks.example resolves to a private address"),
    ("http://hooks.example/", resolver("127.0.0.1", "169.254.169.254"), "a link-local address"),
    ("http://hooks.example/", failing_dns, "cannot resolve hooks.example"),
]


@pytest.mark.parametrize("url, resolve, reason", TEST_REFUSED)
def test_test_mode_refuses_every_other_non_public_address(url, resolve, reason):
    with pytest.raises(UnsafeURL) as info:
        check_url(url, False, allow_loopback=True, resolve=resolve)
    assert reason in str(info.value)


def test_the_cloud_metadata_address_is_refused_in_both_modes():
    for livemode, scheme in ((True, "https"), (False, "http")):
        with pytest.raises(UnsafeURL, match=r"169\.254\.169\.254 \(link-local\)"):
            check_url(f"{scheme}://169.254.169.254/latest/meta-data/", livemode,
                      allow_loopback=True, resolve=no_dns)


@pytest.mark.parametrize("url, resolve, expected", [
    ("https://hooks.example/webhooks", resolver(PUBLIC), [PUBLIC]),
    ("https://hooks.example:8443/x?y=1", resolver(PUBLIC, PUBLIC), [PUBLIC]),
    ("https://HOOKS.example/", resolver(PUBLIC, "2606:2800:220:1:248:1893:25c8:1946"),
     [PUBLIC, "2606:2800:220:1:248:1893:25c8:1946"]),
    ("https://93.184.216.34/hook", no_dns, [PUBLIC]),
    ("https://[::ffff:93.184.216.34]/", no_dns, ["::ffff:93.184.216.34"]),
    ("https://[64:ff9b::5db8:d822]/", no_dns, ["64:ff9b::5db8:d822"]),  # NAT64 of PUBLIC
])
def test_public_addresses_are_allowed_in_both_modes(url, resolve, expected):
    for livemode in (True, False):
        assert check_url(url, livemode, allow_loopback=False, resolve=resolve) == [
            ipaddress.ip_address(a) for a in expected]


def test_the_url_port_or_the_scheme_default_is_resolved():
    seen = []

    def resolve(host, port, **kwargs):
        seen.append((host, port, kwargs.get("type")))
        return resolver(PUBLIC)(host, port)

    check_url("https://hooks.example/a", True, allow_loopback=False, resolve=resolve)
    check_url("https://hooks.example:8443/a", True, allow_loopback=False, resolve=resolve)
    check_url("http://hooks.example/a", False, allow_loopback=False, resolve=resolve)
    assert seen == [("hooks.example", 443, socket.SOCK_STREAM),
                    ("hooks.example", 8443, socket.SOCK_STREAM),
                    ("hooks.example", 80, socket.SOCK_STREAM)]


@pytest.mark.parametrize("url, resolve", [
    ("http://127.0.0.1:5001/hook", no_dns),
    ("http://[::1]:5000/webhooks", no_dns),
    ("http://localhost:5000/webhooks", socket.getaddrinfo),  # /etc/hosts, no network
    ("https://hooks.test/", resolver("127.0.0.1")),
])
def test_test_mode_reaches_loopback_only_where_the_operator_allows_it(url, resolve):
    addresses = check_url(url, False, allow_loopback=True, resolve=resolve)
    assert addresses and all(a.is_loopback for a in addresses)
    with pytest.raises(UnsafeURL, match="loopback"):
        check_url(url, False, allow_loopback=False, resolve=resolve)


@pytest.mark.parametrize("url, reason", [
    ("ftp://127.0.0.1/", "not allowed"),
    ("http:///x", "no host"),
    ("http://u:p@localhost/", "credentials"),
    ("javascript:alert(1)", "not allowed"),
])
def test_test_mode_still_refuses(url, reason):
    with pytest.raises(UnsafeURL, match=reason):
        check_url(url, False, allow_loopback=True, resolve=no_dns)


def test_unsafe_reason_accepts_public_addresses():
    for addr in (PUBLIC, "8.8.8.8", "2606:4700:4700::1111"):
        assert unsafe_reason(ipaddress.ip_address(addr)) is None


def test_live_transport_refuses_loopback_without_contacting_receiver(receiver):
    url = f"https://127.0.0.1:{receiver.port}/hook"
    result = transport.post(transport.new_session(), url, b"{}", {}, timeout=2, livemode=True,
                            allow_loopback=True)
    assert (result.ok, result.status_code, result.retry_after) == (False, None, None)
    assert result.error == "unsafe url: 127.0.0.1 (loopback), only public addresses are allowed"
    http_url = receiver.url("/hook")
    result = transport.post(transport.new_session(), http_url, b"{}", {}, timeout=2,
                            livemode=True, allow_loopback=True)
    assert result.error == "unsafe url: live-mode webhook URLs must use https"
    # A name that resolves to loopback at delivery time is refused too.
    result = transport.post(transport.new_session(), f"https://hooks.example:{receiver.port}/",
                            b"{}", {}, timeout=2, livemode=True, allow_loopback=True,
                            resolve=resolver("127.0.0.1"))
    assert result.error == ("unsafe url: hooks.example resolves to a loopback address, only public"
                            " addresses are allowed")
    assert receiver.requests == []


def test_a_refused_test_mode_url_reports_nothing_of_the_port_it_names(receiver):
    # Without WEBHOOK_ALLOW_LOOPBACK, a port that answers, one that is closed and one that never
    # answers are refused alike, before any connection: same error, no status, no duration.
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(1)  # accepts into its backlog, never answers
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))  # bound, not listening: connection refused
    try:
        results = [transport.post(transport.new_session(), f"http://127.0.0.1:{port}/", b"{}", {},
                                  timeout=2, livemode=False, allow_loopback=False)
                   for port in (receiver.port, closed.getsockname()[1], silent.getsockname()[1])]
    finally:
        silent.close()
        closed.close()
    assert {(r.ok, r.status_code, r.error) for r in results} == {
        (False, None, "unsafe url: 127.0.0.1 (loopback), only public addresses are allowed")}
    assert all(r.duration_ms < 500 for r in results)  # the silent port was not waited for
    assert receiver.requests == []


def test_setting_a_url_refuses_what_deliveries_refuse_and_warns_when_the_name_does_not_resolve():
    from app.domain.merchants import MerchantError, check_webhook_url

    assert check_webhook_url("https://hooks.example/", True, allow_loopback=False,
                             resolve=resolver(PUBLIC)) is None
    with pytest.raises(MerchantError, match="hooks.example resolves to a private address"):
        check_webhook_url("https://hooks.example/", True, allow_loopback=False,
                          resolve=resolver(PUBLIC, "10.0.0.1"))
    with pytest.raises(MerchantError, match=r"169\.254\.169\.254 \(link-local\)"):
        check_webhook_url("http://169.254.169.254/", False, allow_loopback=True, resolve=no_dns)
    # DNS may come later, and every delivery checks again: saved, with a warning.
    assert check_webhook_url("https://hooks.example/", True, allow_loopback=False,
                             resolve=failing_dns) == (
        "deliveries to it would be refused now: cannot resolve hooks.example (gaierror)")
