"""The SQLite backend: one file on a local disk, in WAL mode, shared by the service's processes.

Where each mechanism lives:
- database.py: `SqliteDatabase`, the `Database` of interface.py: reads, write transactions (the
  writer queue, COMMIT between the file guard's two checks, the WAL synced outside the lock),
  /healthz's check, init-db.
- connections.py: one connection per process and thread, made on first use and again after a fork,
  replaced when opened read-only or when its files are lost; those of ended threads closed; only a
  file init-db made (PRAGMA application_id) is opened, with the database's PRAGMAs.
- file_guard.py: `FileGuard`, which files the process serves (pinned by inode) and what happens when
  a path stops naming them: checked at a request's first use, before COMMIT and after it; the
  commits still only in the WAL rescued into the database file; the process refuses until restarted.
- file_identity.py: the files a process has open, under shared flocks that tell processes starting
  later which files the service uses (none joins a mix of old and new).
- writer_queue.py: writers wait on a flock in the kernel rather than polling SQLite's busy lock.
- errors.py: `DatabaseUnavailable`, and which of SQLite's errors mean "cannot serve now".
How an operator sees and repairs the failures: docs/operations.md; what the mechanisms cost:
bench/README.md, "Storage".
"""
from app.db.sqlite.database import SqliteDatabase

__all__ = ["SqliteDatabase"]
