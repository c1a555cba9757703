"""SQL about the schema itself: liveness and the destructive reset of `init-db --reset`."""


def ping(conn) -> bool:
    """True when the database answers and holds our schema (not merely a file that opens)."""
    return conn.execute("SELECT count(*) FROM merchants").fetchone()[0] >= 0


def drop_all(conn):
    """Drop every table (init-db --reset)."""
    conn.execute("PRAGMA foreign_keys = OFF")
    tables = [
        row[0]
        for row in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
        )
    ]
    for table in tables:
        conn.execute(f'DROP TABLE IF EXISTS "{table}"')
    conn.execute("PRAGMA foreign_keys = ON")
