"""Deposit addresses under concurrency: 200 processes each confirmed twice, 400 confirms from 16
threads against a real gunicorn with 4 workers on one SQLite file. Never two processes with one
address, every process keeps its address, and no index is skipped or given twice."""
import random
from concurrent.futures import ThreadPoolExecutor

import requests
from support import dbutil
from support.servers import create_merchant, flask, gunicorn, service_env

from app.evm.addresses import deposit_address

XPUB = ("xpub6DCoCpSuQZB2jawqnGMEPS63ePKWkwWPH4TU45Q7LPXWuNd8TMtVxRrgjtEshuqpK3mdhaWHPFsBngh5GFZaM6"
        "si3yZdUsT8ddYM3PwnATt")
PROCESSES, THREADS = 200, 16


def test_concurrent_confirms_never_share_an_address(tmp_path, make_database):
    database = make_database("confirm")
    env = service_env(database)
    flask(env, "init-db")
    merchant = create_merchant(env, "--live")
    flask(env, "networks", "add", "local", "--name", "Local", "--chain-id", "137", "--rpc-url",
          "http://127.0.0.1:1/", "--start-block", "1")
    flask(env, "assets", "add", "usdc", "--network", "local", "--symbol", "USDC", "--name",
          "USD Coin", "--contract", "0x5FbDB2315678afecb367f032d93F642f64180aa3", "--decimals", "6",
          "--skip-contract-check")
    flask(env, "assets", "add", "usdt", "--network", "local", "--symbol", "USDT", "--name",
          "Tether", "--contract", "0xe7f1725E7734CE288F8367e1Bb143E90bb3F0512", "--decimals", "6",
          "--skip-contract-check")
    flask(env, "merchants", "set-xpub", merchant["merchantId"], XPUB)
    log_path = tmp_path / "gunicorn.log"

    with gunicorn(env, log_path, workers=4) as base:
        session = requests.Session()
        ids = []
        for i in range(PROCESSES):
            response = session.post(base + "/payment-button/process/preorder",
                                     data=f'{{"amount": {10 + i}.{i % 100:02d}}}',
                                     headers={"x-secret-key": merchant["secretKey"],
                                              "Content-Type": "application/json"}, timeout=30)
            assert response.status_code == 200, response.text
            ids.append(response.json()["processId"])
        # Each process twice, once per asset, in a shuffled order across the threads.
        calls = [(pid, asset) for pid in ids for asset in ("usdc", "usdt")]
        random.Random(7).shuffle(calls)

        def confirm(batch):
            s, results = requests.Session(), []
            for pid, asset in batch:
                response = s.post(base + f"/payment-button/process/{pid}/confirm",
                                  json={"assetId": asset, "networkId": "local"},
                                  headers={"x-public-key": merchant["publicKey"]}, timeout=30)
                results.append((pid, response.status_code, response.json()))
            return results

        with ThreadPoolExecutor(THREADS) as pool:
            results = [r for batch in pool.map(confirm, [calls[i::THREADS] for i in range(THREADS)])
                       for r in batch]

    assert [status for _, status, _ in results] == [200] * len(calls)
    seen = {}
    for pid, _, body in results:
        seen.setdefault(pid, set()).add(body["payment"]["address"])
    assert all(len(addresses) == 1 for addresses in seen.values())  # a process keeps its address
    assert len({a for addresses in seen.values() for a in addresses}) == PROCESSES

    conn = dbutil.open_connection(database)
    rows = conn.execute("SELECT process_id, address_index, address FROM payments").fetchall()
    assert sorted(index for _, index, _ in rows) == list(range(PROCESSES))  # none skipped
    assert all(address == deposit_address(XPUB, index) and seen[pid] == {address}
               for pid, index, address in rows)
    assert conn.execute("SELECT next_index FROM merchant_wallets").fetchone()[0] == PROCESSES
    conn.close()
    log = log_path.read_text()
    assert "database is locked" not in log
    assert "Traceback" not in log
    assert XPUB not in log
