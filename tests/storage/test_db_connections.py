"""SQLite connections under a server that runs each request in a new thread (`flask run`, as under
`make run`): the connection of a finished thread is closed, not kept until the process ends."""
import os

import pytest
import requests

FD_DIR = "/proc/self/fd"


@pytest.mark.skipif(not os.path.isdir(FD_DIR), reason="counts file descriptors through /proc")
def test_finished_request_threads_leave_no_open_connections(live_server):
    session = requests.Session()
    session.trust_env = False

    def serve(count):
        for _ in range(count):
            assert session.get(f"{live_server.url}/healthz", timeout=10).status_code == 200

    serve(5)
    before = len(os.listdir(FD_DIR))
    serve(200)
    # Without the clean-up each request left its connection open: two descriptors (file and WAL).
    assert len(os.listdir(FD_DIR)) - before < 10
