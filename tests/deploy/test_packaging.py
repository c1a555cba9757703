"""How the project is installed and started: setup.cfg's runtime floors admit no version that lacks
what the code uses (an install at the floor must not fail at the first pinned HTTPS delivery), a
regular (non-editable) install carries every file the service reads at run time, and `make run`
takes the address the README says, and the documents' links lead to files of the repository."""
import configparser
import os
import re
import subprocess
import sys
from pathlib import Path

import requests.adapters
import urllib3.connection
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parent.parent.parent


def install_requires():
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    lines = config["options"]["install_requires"].splitlines()
    requirements = [Requirement(line) for line in map(str.strip, lines) if line and not line.startswith("#")]
    return {r.name: r.specifier for r in requirements}


def test_requests_and_urllib3_floors_cover_what_the_webhook_transport_uses():
    floors = install_requires()
    # app/webhooks/pinning.py overrides build_connection_pool_key_attributes, which requests
    # 2.32.3 added (with get_connection_with_tls_context, which calls it).
    assert hasattr(requests.adapters.HTTPAdapter, "build_connection_pool_key_attributes")
    assert hasattr(requests.adapters.HTTPAdapter, "get_connection_with_tls_context")
    assert "2.32.3" in floors["requests"] and "2.32.2" not in floors["requests"]
    # ... and app/webhooks/deadline.py's connections extend urllib3's connect and request, and read
    # HTTPConnection.is_closed, which urllib3 2.0 added (urllib3 1.26 has none).
    connection = vars(urllib3.connection.HTTPConnection)
    assert isinstance(connection.get("is_closed"), property)
    assert callable(connection.get("connect")) and callable(connection.get("request"))
    assert "urllib3" in floors, "urllib3 is imported directly: it must be a declared dependency"
    assert "2.0.0" in floors["urllib3"] and "1.26.20" not in floors["urllib3"]


def test_make_run_takes_the_host_and_port_the_readme_says():
    readme = (ROOT / "README.md").read_text()
    assert "make run HOST=0.0.0.0 PORT=8080" in readme
    plan = subprocess.run(["make", "-n", "run", "HOST=0.0.0.0", "PORT=8080"], cwd=ROOT,
                          capture_output=True, text=True, check=True).stdout
    assert "run --host 0.0.0.0 --port 8080" in plan
    assert "demo-merchant --webhook-url http://127.0.0.1:8080/demo/webhooks" in plan


CHECK = """
import app, sys
from app import create_app
assert app.__file__.startswith(sys.argv[1]), app.__file__  # the installed copy, not the checkout
web = create_app({"DATABASE": sys.argv[2], "DEMO_SHOP": True})
assert web.test_cli_runner().invoke(args=["init-db"]).exit_code == 0
client = web.test_client()
for path in ("/healthz", "/payment-button/button.js", "/openapi.json", "/demo/webhooks",
             "/dashboard/login", "/dashboard/static/console.css", "/dashboard/static/console.js"):
    assert client.get(path).status_code == 200, path
from app.chain import forwarder  # the forwarder factory's committed build
assert forwarder.BUILD.is_file() and forwarder.BUILD.is_relative_to(sys.argv[1]), forwarder.BUILD
assert forwarder.is_factory(bytes.fromhex(forwarder._build()["ForwarderFactory"]["deployedBytecode"][2:]))
print("ok")
"""


def test_a_regular_install_has_what_the_service_reads(tmp_path):
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
                    "--disable-pip-version-check", "--target", str(target), str(ROOT)],
                   check=True, capture_output=True, timeout=300)
    env = dict(os.environ, PYTHONPATH=str(target))
    result = subprocess.run([sys.executable, "-c", CHECK, str(target), str(tmp_path / "x.sqlite3")],
                            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr


def test_every_relative_link_of_the_documents_names_a_file_of_the_repository():
    # On GitHub a link that leaves the repository (../shared/API.md) or names a moved file is dead.
    pages = [ROOT / "README.md", ROOT / "bench" / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    dead = []
    for page in pages:
        text = page.read_text()
        # Markdown links, and paths named in code spans that climb out of the page's folder.
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)|`(\.\./[^`\s]+)`", text):
            target = target[0] or target[1]
            if "://" in target or target.startswith("mailto:"):
                continue
            path = (page.parent / target).resolve()
            if not path.exists() or ROOT not in path.parents:
                dead.append(f"{page.relative_to(ROOT)}: {target}")
    assert dead == []
