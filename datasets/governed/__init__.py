"""Governed SQL over uploaded datasets: one allow-listed SELECT, run read-only on a DuckDB
snapshot, with per-column lineage and a proof of what ran.

Pure Python (no Django), so it can run in a worker, a test or a benchmark alike.

- ``load_snapshot`` turns uploaded CSV/Parquet bytes into a new DuckDB file (atomically).
- ``analyse`` validates a query against table/column names without running it.
- ``execute`` validates, runs the normalised SQL on a locked connection, and returns rows,
  ``OutputColumn`` lineage/eligibility and an ``ExecutionProof``.

Errors: ``GovernedSqlError`` (``code``, ``construct``) and ``LoadError`` (``code``); their
``str()`` is safe to show users.
"""

from datasets.governed.engine import (
    ColumnSchema,
    ExecutionProof,
    GovernedResult,
    LoadedSnapshot,
    LoadError,
    connections_clear,
    execute,
    json_safe,
    load_snapshot,
    open_locked_connection,
    result_digest,
    snapshot_cursor,
    value_dictionary,
)
from datasets.governed.lineage import OutputColumn, analyse
from datasets.governed.parse import GovernedSqlError

__all__ = [
    "ColumnSchema",
    "ExecutionProof",
    "GovernedResult",
    "GovernedSqlError",
    "LoadError",
    "LoadedSnapshot",
    "OutputColumn",
    "analyse",
    "connections_clear",
    "execute",
    "json_safe",
    "load_snapshot",
    "open_locked_connection",
    "result_digest",
    "snapshot_cursor",
    "value_dictionary",
]
