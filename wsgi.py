"""The production WSGI entry point: `gunicorn -c gunicorn.conf.py` serves `wsgi:app`."""
from app import create_app

app = create_app()
