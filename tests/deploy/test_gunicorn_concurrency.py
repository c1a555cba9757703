"""1,000 preorders from 16 threads against a real gunicorn with 4 workers on one database."""
from concurrent.futures import ThreadPoolExecutor

import requests
from support import dbutil
from support.servers import create_merchant, flask, gunicorn, service_env

TOTAL, THREADS = 1000, 16


def test_concurrent_preorders_under_gunicorn(tmp_path, make_database):
    database = make_database("concurrency")
    env = service_env(database)
    flask(env, "init-db")
    merchant = create_merchant(env)
    log_path = tmp_path / "gunicorn.log"

    with gunicorn(env, log_path, workers=4) as base:
        def send(batch):
            session = requests.Session()
            results = []
            for i in batch:
                response = session.post(
                    base + "/payment-button/process/preorder",
                    json={"amount": 19.99,
                          "metadata": {"orderRef": f"A-{i}", "email": "b@example.com"}},
                    headers={"x-secret-key": merchant["secretKey"]},
                    timeout=30,
                )
                results.append((response.status_code, response.json().get("processId")))
            return results

        batches = [range(i, TOTAL, THREADS) for i in range(THREADS)]
        with ThreadPoolExecutor(THREADS) as pool:
            results = [r for batch in pool.map(send, batches) for r in batch]

    assert len(results) == TOTAL
    assert [status for status, _ in results] == [200] * TOTAL
    assert len({pid for _, pid in results}) == TOTAL
    assert dbutil.scalar(database, "SELECT count(*) FROM processes") == TOTAL
    assert dbutil.scalar(database, "SELECT count(DISTINCT metadata) FROM processes") == TOTAL
    log = log_path.read_text()
    assert "database is locked" not in log
    assert "Traceback" not in log
    assert "POST /payment-button/process/preorder" in log  # the access log is the one read here
