"""The SQLite backend (database.py)."""
from app.db.sqlite.database import SqliteDatabase

__all__ = ["SqliteDatabase"]
