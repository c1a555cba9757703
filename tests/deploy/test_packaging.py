"""How the project is installed and started: setup.cfg's runtime floors admit no version that lacks
what the code uses (an install at the floor must not fail at the first pinned HTTPS delivery),
constraints.txt pins the very set the suite runs with, a
regular (non-editable) install carries every file the service reads at run time, and `make run`
takes the address the README says, and the documents' links lead to files of the repository."""
import configparser
import json
import os
import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import requests.adapters
import urllib3.connection
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent.parent


def requirements(extra=None):
    """setup.cfg's runtime requirements, or those of one extra."""
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    text = (config["options.extras_require"][extra] if extra
            else config["options"]["install_requires"])
    return [Requirement(line) for line in map(str.strip, text.splitlines())
            if line and not line.startswith("#")]


def install_requires():
    return {r.name: r.specifier for r in requirements()}


def constraints():
    """constraints.txt as {canonical name: version}."""
    pins = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        if line and not line.startswith("#"):
            name, version = line.split("==")
            pins[canonicalize_name(name)] = version
    return pins


def reached(requirements):
    """The canonical names of the installed distributions these requirements need, transitively
    (extras followed, environment markers evaluated)."""
    names, seen, todo = set(), set(), list(requirements)
    while todo:
        requirement = todo.pop()
        key = (canonicalize_name(requirement.name), frozenset(requirement.extras))
        if key in seen:
            continue
        seen.add(key)
        names.add(key[0])
        for text in metadata.distribution(requirement.name).requires or []:
            needed = Requirement(text)
            if needed.marker is None or any(needed.marker.evaluate({"extra": e})
                                            for e in requirement.extras or {""}):
                todo.append(needed)
    return names


def test_constraints_pin_every_requirement_within_its_floor():
    pins = constraints()
    for requirement in requirements() + requirements("test"):
        version = pins.get(canonicalize_name(requirement.name))
        assert version is not None, f"{requirement.name} is not pinned in constraints.txt"
        assert requirement.specifier.contains(version), (requirement, version)


def test_constraints_are_the_set_the_suite_runs_with_and_pip_accepts_it():
    """Complete (every distribution the requirements reach is pinned, nothing else), and pip's
    resolver, without an index, takes setup.cfg's requirements under these constraints and has
    nothing to install: the pinned versions are the ones installed here (`make install-test`
    installs with them)."""
    wanted = requirements() + requirements("test")
    assert set(constraints()) == reached(wanted)
    result = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--dry-run", "--no-index", "--quiet", "--report",
         "-", "--disable-pip-version-check", "-c", str(ROOT / "constraints.txt"),
         *map(str, wanted)],
        capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["install"] == [], (
        "run make install-test: the venv is not the pinned set")
    check = subprocess.run([sys.executable, "-m", "pip", "check"], capture_output=True, text=True,
                           timeout=120)
    assert check.returncode == 0, check.stdout


def test_make_and_the_docs_install_with_the_constraints():
    plan = subprocess.run(["make", "-n", "-B", "install-test"], cwd=ROOT, capture_output=True,
                          text=True, check=True).stdout
    assert "pip install --quiet --disable-pip-version-check -c constraints.txt -e '.[test]'" in plan
    plan = subprocess.run(["make", "-n", "-B", "install"], cwd=ROOT, capture_output=True, text=True,
                          check=True).stdout
    assert "pip install --quiet --disable-pip-version-check -c constraints.txt -e ." in plan
    assert "pip install -c constraints.txt" in (ROOT / "docs" / "operations.md").read_text()


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
from app.evm import forwarder  # the forwarder factory's committed build
assert forwarder.BUILD.is_file() and forwarder.BUILD.is_relative_to(sys.argv[1]), forwarder.BUILD
assert forwarder.factory_version(bytes.fromhex(
    forwarder._build()["ForwarderFactory"]["deployedBytecode"][2:])) is not None
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
    pages = [ROOT / "README.md", ROOT / "bench" / "README.md",
             *sorted((ROOT / "docs").glob("*.md"))]
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
