"""Cost of governance: governed execution vs plain DuckDB on the same 1M-row snapshot file.

Governed = datasets.governed.execute (parse + allow-list + lineage + locked read-only
connection + watchdog + JSON-safe rows + proof). Plain = duckdb.connect(read_only=True,
threads=1) + execute + fetch of the same SQL. Both open the file each run, as a request would,
and both use one thread (the governed default). Median of 5 runs after one warm-up.

Run: .venv/bin/python bench/datasets.py   (no database, no Django settings needed)
"""

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


def plain(snapshot: LoadedSnapshot, sql: str) -> list[tuple]:
    # The governed connection runs with threads=1 by default; give plain DuckDB the same.
    with duckdb.connect(str(snapshot.path), read_only=True, config={"threads": 1}) as conn:
        return conn.execute(sql).fetchall()


def main() -> None:
    with tempfile.TemporaryDirectory() as directory:
        snapshot = build(Path(directory))
        print(f"duckdb {duckdb.__version__}, {ROWS:,} rows, median of {RUNS} runs, threads=1")
        print(f"{'query':<18} {'governed ms':>12} {'plain ms':>10} {'ratio':>7}")
        for name, sql in QUERIES.items():
            governed = median_ms(lambda sql=sql: execute(sql, snapshot=snapshot, timeout_s=60))
            baseline = median_ms(lambda sql=sql: plain(snapshot, sql))
            print(f"{name:<18} {governed:>12.2f} {baseline:>10.2f} {governed / baseline:>6.2f}x")


if __name__ == "__main__":
    main()
