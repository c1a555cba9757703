"""The preorder baseline: a bare Flask app with the service's route and no work behind it.

It answers `POST /payment-button/process/preorder` with `{"processId": <uuid4>}`: no authentication,
no validation, no storage. Served under the same gunicorn settings as the service, it measures what
the machine, gunicorn, Flask and wrk cost on their own, so the service's figures can be given as a
ratio against it (absolute figures on a shared 2-core machine drift from run to run).

    GUNICORN_APP=bench.baseline_app:app gunicorn -c gunicorn.conf.py
"""
from uuid import uuid4

from flask import Flask

app = Flask(__name__)


@app.post("/payment-button/process/preorder")
def preorder():
    return {"processId": str(uuid4())}
