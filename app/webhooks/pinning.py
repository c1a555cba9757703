"""Where a webhook delivery connects: to the address the SSRF check vetted (ssrf.py), never to a
second DNS answer, while the Host header, TLS SNI and the certificate check use the URL's host name.

`pin(request, address, host)` marks a prepared request; `PinningAdapter` (a requests HTTPAdapter)
connects it there. The address and the TLS name are part of the connection pool's key, so a kept
connection only carries an attempt to the very address vetted for it. The connections are urllib3's,
extended by deadline.Watched so that the attempt's deadline can shut their sockets down.
"""
from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

from .deadline import Watched

DESTINATIONS = 16  # destinations kept connected (least recently used closed beyond)
CONNECTIONS_PER_DESTINATION = 32  # idle connections kept per destination: one per worker thread


def pin(request, address, host):
    """Send the prepared `request` to `address` (an ipaddress object; None: resolve `host` as
    usual), naming `host` (the URL's, without brackets) over TLS."""
    request.pin = None if address is None else (str(address), host)


class PinningAdapter(HTTPAdapter):
    """No retries; a request with a `pin` (address, host name) connects to that address, and over
    TLS sends SNI for, and checks the certificate against, the host name."""

    def __init__(self):
        super().__init__(pool_connections=DESTINATIONS, pool_maxsize=CONNECTIONS_PER_DESTINATION,
                         max_retries=0)
        self.poolmanager.pool_classes_by_scheme = {"http": _HTTPPool, "https": _HTTPSPool}

    def build_connection_pool_key_attributes(self, request, verify, cert=None):
        host_params, pool_kwargs = super().build_connection_pool_key_attributes(
            request, verify, cert)
        if getattr(request, "pin", None):
            host_params["host"], name = request.pin
            if host_params["scheme"] == "https":
                pool_kwargs["server_hostname"] = pool_kwargs["assert_hostname"] = name
        return host_params, pool_kwargs


class _HTTPConnection(Watched, HTTPConnection):
    pass


class _HTTPSConnection(Watched, HTTPSConnection):
    pass


class _HTTPPool(HTTPConnectionPool):
    ConnectionCls = _HTTPConnection


class _HTTPSPool(HTTPSConnectionPool):
    ConnectionCls = _HTTPSConnection
