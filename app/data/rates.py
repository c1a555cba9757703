"""SQL for exchange rates: one row per pair, its source (a feed or a manual rate) and the last
answer read or set (app/domain/rates.py says when it counts)."""
from app.core.records import Rate

_COLUMNS = (
    "pair, source, network_id, feed, feed_decimals, sequencer_feed, max_age, max_depeg, value,"
    " round_id, answered_in_round, updated_at, sequencer_answer, sequencer_since, problem, read_at,"
    " reported, created_at"
)


def _rate(row):
    return Rate(**{k: row[k] for k in row.keys()})


def put(conn, r: Rate):
    """Add the pair, or replace its source (a pair has one)."""
    conn.execute("DELETE FROM rates WHERE pair = ?", (r.pair,))
    conn.execute(
        f"INSERT INTO rates ({_COLUMNS})"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (r.pair, r.source, r.network_id, r.feed, r.feed_decimals, r.sequencer_feed, r.max_age,
         r.max_depeg, r.value, r.round_id, r.answered_in_round, r.updated_at, r.sequencer_answer,
         r.sequencer_since, r.problem, r.read_at, r.reported, r.created_at),
    )


def get(conn, pair) -> Rate | None:
    row = conn.execute(f"SELECT {_COLUMNS} FROM rates WHERE pair = ?", (pair,)).fetchone()
    return _rate(row) if row else None


def all_rates(conn) -> dict[str, Rate]:
    """Every pair's rate, by pair (a handful of rows: read whole where a quote is made)."""
    return {row["pair"]: _rate(row) for row in
            conn.execute(f"SELECT {_COLUMNS} FROM rates ORDER BY pair")}


def feeds_of(conn, network_id) -> list[Rate]:
    """The feeds read through a network's node, by pair."""
    rows = conn.execute(f"SELECT {_COLUMNS} FROM rates WHERE network_id = ? AND source = 'feed'"
                        " ORDER BY pair", (network_id,))
    return [_rate(row) for row in rows]


def record_read(conn, r: Rate):
    """What the watcher read of a feed (its answer, round, sequencer and problem), only while the
    row is still this feed: a `rates add` of another source in between wins."""
    conn.execute(
        "UPDATE rates SET value = ?, round_id = ?, answered_in_round = ?, updated_at = ?,"
        " sequencer_answer = ?, sequencer_since = ?, problem = ?, read_at = ?, reported = ?"
        " WHERE pair = ? AND source = 'feed' AND feed = ? AND created_at = ?",
        (r.value, r.round_id, r.answered_in_round, r.updated_at, r.sequencer_answer,
         r.sequencer_since, r.problem, r.read_at, r.reported, r.pair, r.feed, r.created_at),
    )


def set_reported(conn, pair, reported):
    conn.execute("UPDATE rates SET reported = ? WHERE pair = ?", (reported, pair))


def remove(conn, pair) -> bool:
    return conn.execute("DELETE FROM rates WHERE pair = ?", (pair,)).rowcount == 1
