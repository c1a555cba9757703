"""How the project is installed and started: setup.cfg's runtime floors admit no version that lacks
what the code uses (an install at the floor must not fail at the first pinned HTTPS delivery), and
`make run` takes the address the README says."""
import configparser
import subprocess
from pathlib import Path

import requests.adapters
import urllib3.exceptions
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parent.parent


def install_requires():
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    lines = config["options"]["install_requires"].splitlines()
    requirements = [Requirement(line) for line in map(str.strip, lines) if line and not line.startswith("#")]
    return {r.name: r.specifier for r in requirements}


def test_requests_and_urllib3_floors_cover_what_the_webhook_transport_uses():
    floors = install_requires()
    # app/webhooks/transport.py overrides build_connection_pool_key_attributes, which requests
    # 2.32.3 added (with get_connection_with_tls_context, which calls it).
    assert hasattr(requests.adapters.HTTPAdapter, "build_connection_pool_key_attributes")
    assert hasattr(requests.adapters.HTTPAdapter, "get_connection_with_tls_context")
    assert "2.32.3" in floors["requests"] and "2.32.2" not in floors["requests"]
    # ... and catches urllib3 2's NameResolutionError (urllib3 1.26 has none).
    assert hasattr(urllib3.exceptions, "NameResolutionError")
    assert "urllib3" in floors, "urllib3 is imported directly: it must be a declared dependency"
    assert "2.0.0" in floors["urllib3"] and "1.26.20" not in floors["urllib3"]


def test_make_run_takes_the_host_and_port_the_readme_says():
    readme = (ROOT / "README.md").read_text()
    assert "make run HOST=0.0.0.0 PORT=8080" in readme
    plan = subprocess.run(["make", "-n", "run", "HOST=0.0.0.0", "PORT=8080"], cwd=ROOT,
                          capture_output=True, text=True, check=True).stdout
    assert "run --host 0.0.0.0 --port 8080" in plan
    assert "demo-merchant --webhook-url http://127.0.0.1:8080/demo/webhooks" in plan
