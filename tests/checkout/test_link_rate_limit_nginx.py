"""A payment link's rate limit in the production layout: Debian's nginx with deploy/nginx.conf in
front of gunicorn (gunicorn.conf.py). nginx passes the client's address in X-Forwarded-For, which
the service believes from its local proxy only (app/web/http.py client_address): two customers on
two addresses (127.0.0.1 and 127.0.0.2, both loopback, as the sources of their connections to nginx)
are counted apart, LINK_PROCESSES_PER_MINUTE (10) processes each, the 11th click a 429 page with
Retry-After that creates nothing. A missing nginx fails this test (.ci/run installs it)."""
import re

import pytest
from support import dbutil
from support.nginx import https_session, nginx, write_certificates
from support.servers import create_merchant, flask, free_port, gunicorn, service_env

BASE = "https://pay.example.com"


@pytest.fixture(scope="module")
def layout(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("links-proxy")
    database = tmp / "links.sqlite3"
    env = service_env(database)
    flask(env, "init-db")
    keys = create_merchant(env)
    write_certificates(tmp)
    https_port, http_port = free_port(), free_port()
    with gunicorn(env, tmp / "gunicorn.log", workers=3) as direct:
        with nginx(tmp / "nginx", upstream=direct.removeprefix("http://"), https_port=https_port,
                   http_port=http_port, cert=tmp / "cert.pem", key=tmp / "key.pem"):
            yield {"keys": keys, "port": https_port, "ca": tmp / "ca.pem",
                   "database": str(database)}
    log = (tmp / "gunicorn.log").read_text()
    assert "Traceback" not in log


def customer(layout, source):
    """A browser on `source` (a loopback address): its connections to nginx come from there."""
    session = https_session(layout["port"], layout["ca"])
    session.get_adapter(BASE).poolmanager.connection_pool_kw["source_address"] = (source, 0)
    return session


def processes_of(layout, link_id):
    return dbutil.scalar(layout["database"], "SELECT count(*) FROM processes WHERE link_id = ?",
                         link_id)


def test_two_client_addresses_behind_nginx_are_counted_apart(layout):
    merchant = https_session(layout["port"], layout["ca"])
    made = merchant.post(f"{BASE}/payment-button/links", timeout=10, headers={
        "x-secret-key": layout["keys"]["secretKey"]}, json={"amount": 5, "description": "Coffee"})
    assert made.status_code == 200, made.text
    link = made.json()
    assert link["url"] == f"{BASE}/l/{link['linkId']}"  # the forwarded scheme and host

    first, second = customer(layout, "127.0.0.1"), customer(layout, "127.0.0.2")
    page = first.get(link["url"], timeout=10)
    assert page.status_code == 200 and "Coffee" in page.text
    assert processes_of(layout, link["linkId"]) == 0  # showing it creates nothing
    for n in range(10):
        clicked = first.post(link["url"], timeout=10, allow_redirects=False)
        assert clicked.status_code == 303, (n, clicked.text)
        assert re.fullmatch(r"/checkout/[0-9a-f-]{36}", clicked.headers["Location"])
    refused = first.post(link["url"], timeout=10, allow_redirects=False)
    assert refused.status_code == 429
    # the service's page, not nginx's
    assert refused.headers["Content-Type"].startswith("text/html")
    assert 1 <= int(refused.headers["Retry-After"]) <= 60
    assert "Too many attempts" in refused.text
    assert processes_of(layout, link["linkId"]) == 10
    # Another address through the same nginx: its own count.
    for _ in range(10):
        assert second.post(link["url"], timeout=10, allow_redirects=False).status_code == 303
    assert second.post(link["url"], timeout=10, allow_redirects=False).status_code == 429
    assert processes_of(layout, link["linkId"]) == 20
    # The forwarded address is nginx's own ($remote_addr): a header the client sends is overwritten.
    forged = first.post(link["url"], timeout=10, allow_redirects=False,
                        headers={"X-Forwarded-For": "203.0.113.50"})
    assert forged.status_code == 429
    # The checkout page it leads to, through nginx, with the console's headers.
    checkout = first.get(BASE + clicked.headers["Location"], timeout=10)
    assert checkout.status_code == 200 and "<payment-button" in checkout.text
    assert "'unsafe-inline'" not in checkout.headers["Content-Security-Policy"]
    assert checkout.headers["X-Frame-Options"] == "DENY"
