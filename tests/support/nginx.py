"""Debian's nginx as a normal process in front of a test's gunicorn, with the shipped site config.

`deploy/nginx.conf` is the file an operator installs in /etc/nginx/conf.d/; `render_site` changes
only its addresses, certificate paths and access log's path (each replacement must apply, so the
test follows the file); the access log is `access.log` in the test's directory.
The main config around it stands in for Debian's /etc/nginx/nginx.conf: everything in a temp dir,
`daemon off`, so the test owns the process. `write_certificates` and `https_session` give a test
the certificate nginx serves for pay.example.com and a client that trusts it.
"""
import contextlib
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

import requests
import trustme

ROOT = Path(__file__).resolve().parent.parent.parent
SITE = ROOT / "deploy" / "nginx.conf"


def nginx_binary():
    """The nginx executable; a test that needs it fails (never skips) when it is missing."""
    path = shutil.which("nginx") or (
        "/usr/sbin/nginx" if os.path.exists("/usr/sbin/nginx") else None)
    assert path, "nginx is not installed (apt-get install nginx; .ci/run installs it)"
    return path


def render_site(*, upstream, https_port, http_port, cert, key, access_log):
    text = SITE.read_text()
    replacements = [
        ("server 127.0.0.1:8000;", f"server {upstream};"),
        ("listen 443 ssl default_server;", f"listen 127.0.0.1:{https_port} ssl default_server;"),
        ("listen [::]:443 ssl default_server;\n", ""),
        ("listen 80;", f"listen 127.0.0.1:{http_port};"),
        ("listen [::]:80;\n", ""),
        ("/etc/letsencrypt/live/pay.example.com/fullchain.pem", str(cert)),
        ("/etc/letsencrypt/live/pay.example.com/privkey.pem", str(key)),
        ("access_log /var/log/nginx/access.log ", f"access_log {access_log} "),
    ]
    for old, new in replacements:
        assert text.count(old) == 1, f"deploy/nginx.conf no longer has {old!r} exactly once"
        text = text.replace(old, new)
    return text


MAIN = """\
{user}daemon off;
worker_processes 1;
pid {dir}/nginx.pid;
error_log {dir}/error.log warn;
events {{ worker_connections 1024; }}
http {{
    default_type application/octet-stream;
    access_log {dir}/access.log;
    client_body_temp_path {dir}/client_body;
    proxy_temp_path {dir}/proxy;
    fastcgi_temp_path {dir}/fastcgi;
    uwsgi_temp_path {dir}/uwsgi;
    scgi_temp_path {dir}/scgi;
    include {dir}/preorder.conf;
}}
"""


def _port_open(port):
    with socket.socket() as s:
        s.settimeout(0.2)
        return s.connect_ex(("127.0.0.1", port)) == 0


@contextlib.contextmanager
def nginx(directory, *, upstream, https_port, http_port, cert, key):
    """nginx on 127.0.0.1:https_port (TLS with cert/key) and :http_port, proxying to `upstream`."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "preorder.conf").write_text(
        render_site(upstream=upstream, https_port=https_port, http_port=http_port, cert=cert,
                    key=key, access_log=directory / "access.log"))
    # Run as root (as tests do), its workers would become `nobody`, who cannot enter the temp dir.
    user = "user root root;\n" if os.geteuid() == 0 else ""
    (directory / "nginx.conf").write_text(MAIN.format(user=user, dir=directory))
    binary = nginx_binary()
    command = [binary, "-p", str(directory), "-c", str(directory / "nginx.conf"),
               "-e", str(directory / "error.log")]
    check = subprocess.run(command + ["-t"], capture_output=True, text=True)
    assert check.returncode == 0, check.stderr
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 10
        while not _port_open(https_port):
            assert proc.poll() is None, (directory / "error.log").read_text()
            assert time.monotonic() < deadline, "nginx did not listen within 10 s"
            time.sleep(0.05)
        yield proc
    finally:
        proc.terminate()  # SIGTERM: nginx's fast shutdown
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def write_certificates(directory):
    """key.pem and cert.pem for pay.example.com, and ca.pem that signed it, in `directory`."""
    ca = trustme.CA()
    cert = ca.issue_cert("pay.example.com")
    cert.private_key_pem.write_to_path(directory / "key.pem")
    cert.cert_chain_pems[0].write_to_path(directory / "cert.pem")
    ca.cert_pem.write_to_path(directory / "ca.pem")


def https_session(port, ca):
    """A requests session for https://pay.example.com, connected to nginx on 127.0.0.1:port."""
    session = requests.Session()
    session.trust_env = False
    session.verify = str(ca)
    # The certificate names pay.example.com: connect to loopback, present that name.
    session.mount("https://", _PinnedHost(port))
    return session


class _PinnedHost(requests.adapters.HTTPAdapter):
    """Connects every https://pay.example.com request to 127.0.0.1:port, with SNI and certificate
    checks for pay.example.com (no resolver or /etc/hosts involved)."""

    def __init__(self, port):
        self.port = port
        super().__init__()

    def send(self, request, **kwargs):
        url = request.url
        request.url = url.replace("https://pay.example.com", f"https://127.0.0.1:{self.port}", 1)
        request.headers["Host"] = "pay.example.com"
        try:
            response = super().send(request, **kwargs)
        finally:
            request.url = url  # the session keeps cookies and follows redirects for pay.example.com
        response.url = url
        return response

    def init_poolmanager(self, *args, **kwargs):
        kwargs["server_hostname"] = "pay.example.com"
        kwargs["assert_hostname"] = "pay.example.com"
        super().init_poolmanager(*args, **kwargs)
