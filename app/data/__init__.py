"""The data layer: every SQL statement of the service lives in this package.

Each function takes an open connection (from app.db.Database) and returns records from app.models,
so views, the CLI and the webhook worker never see SQL or sqlite3 types. A PostgreSQL backend would
be a sibling of these modules with the same functions.
"""
