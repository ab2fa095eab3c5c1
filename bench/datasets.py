"""Cost of governance: governed execution vs plain DuckDB on the same 1M-row snapshot file.

Governed = datasets.governed.execute (parse + allow-list + lineage + a cursor on the warm,
locked read-only connection of the snapshot + watchdog + JSON-safe rows + proof). Two
baselines of the same SQL, both with one thread (the governed default): plain DuckDB on a
warm connection opened once (the issue 16 goal: governed within 1.2x of it), and plain
DuckDB opening the file on every run (what governed execution did before the warm
connection cache). Median of 5 runs after one warm-up.

Run: .venv/bin/python bench/datasets.py   (no database, no Django settings needed)
"""

import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import duckdb

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from datasets.governed import ColumnSchema, LoadedSnapshot, execute

ROWS = 1_000_000
RUNS = 5
QUERIES = {
    "SUM": "SELECT SUM(amount) AS total FROM orders",
    "GROUP BY + COUNT": (
        "SELECT region, COUNT(*) AS n, COUNT(DISTINCT customer) AS customers "
        "FROM orders GROUP BY region ORDER BY region"
    ),
    "WHERE filter": (
        "SELECT invoice, amount FROM orders WHERE amount > 990 AND region = 'north' "
        "ORDER BY invoice LIMIT 100"
    ),
}


def build(directory: Path) -> LoadedSnapshot:
    path = directory / "orders.duckdb"
    with duckdb.connect(str(path)) as conn:
        conn.execute(
            "CREATE TABLE orders AS SELECT i AS invoice, i % 5000 AS customer, "
            "(i * 7919) % 1000 + 0.5 AS amount, "
            "['north', 'south', 'east', 'west'][i % 4 + 1] AS region "
            "FROM range(?) t(i)",
            [ROWS],
        )
        described = conn.execute("DESCRIBE orders").fetchall()
    columns = [ColumnSchema(name, kind) for name, kind, *_ in described]
    return LoadedSnapshot(path=path, table="orders", row_count=ROWS, columns=columns, sha256="-")


def median_ms(run: Callable[[], object]) -> float:
    run()  # warm-up: file cache, sqlglot's and DuckDB's first-call costs
    timings = []
    for _ in range(RUNS):
        started = time.perf_counter()
        run()
        timings.append((time.perf_counter() - started) * 1000)
    return statistics.median(timings)


def plain(path: Path, sql: str) -> list[tuple]:
    # The governed connection runs with threads=1 by default; give plain DuckDB the same.
    with duckdb.connect(str(path), read_only=True, config={"threads": 1}) as conn:
        return conn.execute(sql).fetchall()


def warm(conn: duckdb.DuckDBPyConnection, sql: str) -> list[tuple]:
    return conn.execute(sql).fetchall()


def main() -> None:
    with tempfile.TemporaryDirectory() as directory:
        snapshot = build(Path(directory))
        print(f"duckdb {duckdb.__version__}, {ROWS:,} rows, median of {RUNS} runs, threads=1")
        print(
            f"{'query':<18} {'governed ms':>12} {'warm ms':>8} {'ratio':>6} "
            f"{'cold ms':>8} {'ratio':>6}   goal <= 1.2x warm"
        )
        # Copies: DuckDB allows one configuration per open file in a process, and a file
        # already open elsewhere in the process would make the cold baseline warm.
        copies = {name: Path(directory) / f"orders-{name}.duckdb" for name in ("warm", "cold")}
        for copy in copies.values():
            shutil.copyfile(snapshot.path, copy)
        conn = duckdb.connect(str(copies["warm"]), read_only=True, config={"threads": 1})
        for name, sql in QUERIES.items():
            governed = median_ms(lambda sql=sql: execute(sql, snapshot=snapshot, timeout_s=60))
            hot = median_ms(lambda sql=sql: warm(conn, sql))
            cold = median_ms(lambda sql=sql: plain(copies["cold"], sql))
            verdict = "met" if governed <= 1.2 * hot else "NOT met"
            print(
                f"{name:<18} {governed:>12.2f} {hot:>8.2f} {governed / hot:>5.2f}x "
                f"{cold:>8.2f} {governed / cold:>5.2f}x   {verdict}"
            )
        conn.close()


if __name__ == "__main__":
    main()
