r"""The delivery baseline: a plain loop of `requests.Session.post`, one event body after another.

    python -m bench.delivery_baseline --url http://127.0.0.1:8001/hook --count 20000 \
        --body-bytes 343

Each POST carries a distinct `webhook-id` (`bench_<n>`, n from --start) so the receiver's
exactly-once check applies to it as to the service. Prints one JSON line: {"sent", "non2xx",
"seconds"}; exits 1 if any answer was not 2xx.
"""
import argparse
import json
import sys
import time

import requests

from bench.bodies import event_body


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--count", type=int, required=True)
    parser.add_argument("--start", type=int, default=0)
    parser.add_argument("--body-bytes", type=int, default=None)
    args = parser.parse_args(argv)
    body = event_body(args.body_bytes)
    non2xx = 0
    started = time.perf_counter()
    with requests.Session() as session:
        for n in range(args.start, args.start + args.count):
            response = session.post(args.url, data=body, timeout=10, headers={
                "Content-Type": "application/json", "webhook-id": f"bench_{n}"})
            non2xx += not 200 <= response.status_code < 300
    seconds = time.perf_counter() - started
    print(json.dumps({"sent": args.count, "non2xx": non2xx, "seconds": round(seconds, 3)}))
    return 1 if non2xx else 0


if __name__ == "__main__":
    sys.exit(main())
