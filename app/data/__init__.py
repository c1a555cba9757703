"""The data layer: every SQL statement of the service lives in this package.

Each function takes an open connection (from `db.connection()` or `db.transaction()`, SQLite or
PostgreSQL: app/db/) and returns records from app.core.records, so views, the CLI and the webhook
worker never see SQL or driver types. The SQL is written once for both backends (`?` and `:name`
placeholders, rows read by name); where the semantics differ a function branches on
`schema.dialect(conn)` (docs/storage.md).
"""
