"""DuckDB snapshot files: strict loading, locked read-only execution, and execution proof.

Defence in depth: the allow-list in ``parse`` decides what may run, and the connection that runs
it could not touch anything outside the snapshot even if the allow-list had a hole (read-only
file, no external access, no extensions, configuration locked).
"""

from __future__ import annotations

import codecs
import csv
import hashlib
import io
import json
import math
import os
import re
import secrets
import threading
import time
import uuid
from collections import OrderedDict
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, timedelta
from datetime import time as time_of_day
from decimal import Decimal
from functools import cache, lru_cache
from pathlib import Path

import duckdb
import sqlglot
from sqlglot import exp

from core.json_value import JsonValue
from datasets.governed.lineage import OutputColumn, analyse
from datasets.governed.parse import GovernedSqlError

_TABLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")
# Types a reader can compare against the source file; nested, binary and enum types are not.
_SUPPORTED_TYPE = re.compile(
    r"BOOLEAN|U?(TINYINT|SMALLINT|INTEGER|BIGINT|HUGEINT)|FLOAT|DOUBLE|DECIMAL\(\d+,\d+\)"
    r"|VARCHAR|DATE|TIME|TIMESTAMP(_S|_MS|_NS| WITH TIME ZONE)?|INTERVAL|UUID"
)
# Set at connect time, so there is no moment the connection runs with defaults.
_NO_EXTENSIONS = {
    "autoinstall_known_extensions": False,
    "autoload_known_extensions": False,
    "python_enable_replacements": False,  # no scanning of Python variables named like tables
}
# Strict CSV: fixed RFC 4180 dialect, every row must have the header's width, no skipped or
# comment lines, types inferred from all rows (not a sample) so a late odd value fails loading.
_CSV_OPTIONS = (
    "header = true, delim = ',', quote = '\"', escape = '\"', comment = '', skip = 0, "
    "strict_mode = true, null_padding = false, ignore_errors = false, sample_size = -1"
)


class LoadError(Exception):
    """An upload could not become a snapshot; ``str(error)`` is safe to show the uploader."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class ColumnSchema:
    name: str
    type: str  # DuckDB type name, e.g. BIGINT, VARCHAR, DECIMAL(18,3)


@dataclass(frozen=True)
class LoadedSnapshot:
    path: Path
    table: str
    row_count: int
    columns: list[ColumnSchema]
    sha256: str  # of the uploaded bytes


@dataclass(frozen=True)
class ExecutionProof:
    engine: str
    engine_version: str
    snapshot_sha256: str
    normalised_sql: str  # exactly the SQL that ran
    result_sha256: str  # see result_digest()
    row_count: int  # rows returned (after truncation)
    duration_ms: float  # execute + fetch on the open connection
    executed_at: str  # UTC ISO-8601, when execution started


@dataclass(frozen=True)
class GovernedResult:
    columns: list[OutputColumn]
    rows: list[list[JsonValue]]  # each value as json_safe gives it
    truncated: bool
    proof: ExecutionProof


# -- loading ----------------------------------------------------------------------------------


@cache
def _reserved_words() -> frozenset[str]:
    with duckdb.connect() as conn:
        rows = conn.execute(
            "SELECT keyword_name FROM duckdb_keywords() WHERE keyword_category <> 'unreserved'"
        ).fetchall()
    return frozenset(row[0].lower() for row in rows)


def _check_table_name(table: str) -> None:
    ok = bool(_TABLE_NAME.fullmatch(table)) and table.lower() not in _reserved_words()
    if ok:  # the name must also read back as a bare table name when sqlglot parses queries
        try:
            # Parsed only, never executed; `table` already matched _TABLE_NAME.
            probe = f"SELECT 1 FROM {table}"  # noqa: S608
            source = sqlglot.parse_one(probe, read="duckdb").args["from_"].this
            ok = isinstance(source, exp.Table) and source.name == table
        except (sqlglot.errors.SqlglotError, KeyError, AttributeError):
            ok = False
    if not ok:
        message = "a table name is letters, digits and _ (not first), and not an SQL keyword"
        raise LoadError("invalid_table_name", message)


def _check_csv(data: bytes) -> bytes:
    """UTF-8 and header checks DuckDB would not make (it renames duplicate columns)."""
    payload = data.removeprefix(codecs.BOM_UTF8)
    decoder = codecs.getincrementaldecoder("utf-8")(errors="strict")
    try:  # chunked, so a large upload is never held twice as a str
        for start in range(0, len(payload), 1 << 20):
            decoder.decode(payload[start : start + (1 << 20)])
        decoder.decode(b"", final=True)
    except UnicodeDecodeError as exc:
        raise LoadError("bad_encoding", "the file is not valid UTF-8") from exc
    if b"\x00" in payload:  # DuckDB loads it, but no result holding it can be recorded
        raise LoadError("malformed_csv", "the file contains a NUL byte")
    head = payload[: 1 << 20].decode("utf-8", errors="ignore")
    if not head.strip():
        raise LoadError("empty_file", "the file is empty")
    header = next(csv.reader(io.StringIO(head)), [])
    if not any(name.strip() for name in header):
        raise LoadError("empty_file", "the file has no columns")
    if not all(name.strip() for name in header):
        raise LoadError("malformed_csv", "a column in the header has no name")
    # DuckDB identifiers are case-insensitive, so "Amount" and "amount" would collide.
    if len({name.casefold() for name in header}) != len(header):
        raise LoadError("duplicate_columns", "the header names a column twice")
    return payload


def _sql_string(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _build(database: Path, source: Path, fmt: str, table: str, max_rows: int) -> LoadedSnapshot:
    with duckdb.connect(str(database), config=dict(_NO_EXTENSIONS)) as conn:
        # Only the uploaded bytes (and DuckDB's own files for `database`) may be read.
        conn.execute(f"SET allowed_paths = [{_sql_string(str(source))}]")
        conn.execute("SET enable_external_access = false")
        conn.execute("SET lock_configuration = true")
        reader = f"read_csv(?, {_CSV_OPTIONS})" if fmt == "csv" else "read_parquet(?)"
        # `table` matched _TABLE_NAME, `reader` is one of two constants, the path is a parameter.
        # LIMIT max_rows + 1 bounds the work on an oversized upload.
        create = f'CREATE TABLE "{table}" AS SELECT * FROM {reader} LIMIT {max_rows + 1}'  # noqa: S608
        try:
            conn.execute(create, [str(source)])
        except duckdb.OutOfMemoryException as exc:
            raise LoadError("too_large", "the file needs more memory than allowed") from exc
        except duckdb.Error as exc:
            if fmt == "csv":
                raise LoadError("malformed_csv", "the CSV could not be read strictly") from exc
            raise LoadError("unsupported_type", "the file is not a readable Parquet file") from exc
        count = conn.execute(f'SELECT count(*) FROM "{table}"').fetchall()[0][0]  # noqa: S608 (checked name)
        if count > max_rows:
            raise LoadError("too_large", f"the file has more than {max_rows} rows")
        described = conn.execute(
            "SELECT column_name, data_type FROM duckdb_columns() WHERE table_name = ? "
            "ORDER BY column_index",
            [table],
        ).fetchall()
        columns = [ColumnSchema(name, data_type) for name, data_type in described]
        if not columns:
            raise LoadError("empty_file", "the file has no columns")
        for column in columns:
            if not _SUPPORTED_TYPE.fullmatch(column.type):
                raise LoadError("unsupported_type", f"column {column.name} has type {column.type}")
        _refuse_nul(conn, table, columns, fmt)
        conn.execute("CHECKPOINT")  # everything in the main file, no WAL left to publish
    return LoadedSnapshot(path=database, table=table, row_count=count, columns=columns, sha256="")


def _refuse_nul(
    conn: duckdb.DuckDBPyConnection, table: str, columns: list[ColumnSchema], fmt: str
) -> None:
    """No NUL in a column name or text cell: DuckDB holds it, PostgreSQL cannot record it."""
    error = "malformed_csv" if fmt == "csv" else "unsupported_type"
    for column in columns:
        if "\x00" in column.name:
            raise LoadError(error, "a column name contains a NUL byte")
        if column.type != "VARCHAR":
            continue
        quoted = '"' + column.name.replace('"', '""') + '"'
        found = conn.execute(
            f'SELECT 1 FROM "{table}" WHERE contains({quoted}, chr(0)) LIMIT 1'  # noqa: S608 (checked/quoted names)
        ).fetchone()
        if found:
            raise LoadError(error, f"column {column.name} contains a NUL byte")


def _publish(temporary: Path, path: Path) -> None:
    with temporary.open("rb+") as handle:
        os.fsync(handle.fileno())
    try:
        os.link(temporary, path)  # atomic and refuses to overwrite a file that appeared since
    except FileExistsError:
        raise
    except OSError:  # a file system without hard links
        if path.exists():
            raise FileExistsError(path) from None
        os.replace(temporary, path)


def load_snapshot(
    *, data: bytes, fmt: str, table: str, path: Path, max_rows: int = 50_000_000
) -> LoadedSnapshot:
    """Create a new DuckDB file at ``path`` holding ``data`` as table ``table``.

    ``fmt`` is "csv" (UTF-8, comma-separated, header row, strictly rectangular) or "parquet".
    The file appears at ``path`` complete or not at all. Raises ``LoadError`` for bad input,
    ``FileExistsError`` if ``path`` exists, ``ValueError`` for an unknown ``fmt``.
    """
    if fmt not in ("csv", "parquet"):
        raise ValueError(f"unknown format: {fmt}")
    _check_table_name(table)
    path = Path(path).absolute()
    if path.exists():
        raise FileExistsError(path)
    if not data:
        raise LoadError("empty_file", "the file is empty")
    digest = hashlib.sha256(data).hexdigest()
    payload = _check_csv(data) if fmt == "csv" else data
    # Temporary names in the same directory: os.link/os.replace are atomic only within one.
    stem = path.parent / f".{path.name}.{secrets.token_hex(8)}"
    source, database = Path(f"{stem}.{fmt}"), Path(f"{stem}.loading")
    try:
        with source.open("xb") as handle:
            handle.write(payload)
        loaded = _build(database, source, fmt, table, max_rows)
        _publish(database, path)
    finally:
        for leftover in (source, database, Path(f"{database}.wal")):
            leftover.unlink(missing_ok=True)
    return replace(loaded, path=path, sha256=digest)


# -- execution --------------------------------------------------------------------------------


def open_locked_connection(
    path: Path, *, memory_limit: str = "256MB", threads: int = 1
) -> duckdb.DuckDBPyConnection:
    """A read-only connection to a snapshot that can reach nothing else and change no setting."""
    config: dict[str, str | bool | int | float | list[str]] = {
        **_NO_EXTENSIONS,
        "memory_limit": memory_limit,
        "threads": threads,
        "enable_external_access": False,
    }
    conn = duckdb.connect(str(path), read_only=True, config=config)
    conn.execute("SET lock_configuration = true")  # last: nothing above can be undone after it
    return conn


# Warm connections, one per snapshot file per process (bounded, least recently used first
# out). Snapshots are immutable files, and each connection is locked down as above; a query
# runs on its own cursor (a connection of the same database, which keeps the locked
# configuration), so concurrent queries never share a cursor. DuckDB refuses a second
# connection to an open file with another configuration, so the limits are those of the
# first query (in the app they are process-wide settings).
CONNECTION_CACHE_SIZE = 8
_connections: OrderedDict[str, duckdb.DuckDBPyConnection] = OrderedDict()
_connections_lock = threading.Lock()


def snapshot_cursor(
    path: Path, *, memory_limit: str = "256MB", threads: int = 1
) -> duckdb.DuckDBPyConnection:
    """A fresh cursor on the warm, locked, read-only connection of a snapshot."""
    key = str(path)
    with _connections_lock:
        conn = _connections.get(key)
        if conn is None:
            conn = open_locked_connection(path, memory_limit=memory_limit, threads=threads)
            _connections[key] = conn
            while len(_connections) > CONNECTION_CACHE_SIZE:
                _, oldest = _connections.popitem(last=False)
                oldest.close()
        _connections.move_to_end(key)
        return conn.cursor()


DICTIONARY_MAX_VALUES = 100
DICTIONARY_MAX_CHARS = 80


def value_dictionary(
    snapshot: LoadedSnapshot, *, memory_limit: str = "256MB", threads: int = 1
) -> dict[str, list[str]]:
    """Text column → its distinct values, for each text column with at most
    DICTIONARY_MAX_VALUES of them (values longer than DICTIONARY_MAX_CHARS left out): what a
    question may name to restrict a value ("the total for customer zeta")."""
    cursor = snapshot_cursor(snapshot.path, memory_limit=memory_limit, threads=threads)
    dictionary: dict[str, list[str]] = {}
    try:
        for column in snapshot.columns:
            if not column.type.upper().startswith("VARCHAR"):
                continue
            name = '"' + column.name.replace('"', '""') + '"'
            rows = cursor.execute(
                f'SELECT DISTINCT {name} FROM "{snapshot.table}" '  # noqa: S608 (checked names)
                f"WHERE {name} IS NOT NULL LIMIT {DICTIONARY_MAX_VALUES + 1}"
            ).fetchall()
            if len(rows) <= DICTIONARY_MAX_VALUES:
                dictionary[column.name] = sorted(
                    value for (value,) in rows if len(value) <= DICTIONARY_MAX_CHARS
                )
    finally:
        cursor.close()
    return dictionary


def connections_clear() -> None:
    """Close every warm connection (tests, and a snapshot file that must be released)."""
    with _connections_lock:
        while _connections:
            _, conn = _connections.popitem()
            conn.close()


class _Watchdog:
    """DuckDB has no statement timeout: interrupt from another thread once time is up.

    One thread per process watches every running query (a thread started and joined per
    query cost ~0.2 ms, a tenth of a small governed query). A query past its deadline is
    interrupted, and again every INTERRUPT_EVERY seconds until it is over, because an
    interrupt that lands just before DuckDB starts the query would otherwise be lost. Made
    again in a forked child (a Celery prefork worker), where the parent's thread does not
    exist (its lock and watched queries are the child's no more either).
    """

    INTERRUPT_EVERY = 0.05

    def __init__(self) -> None:
        self._forget()
        # A fork may catch the parent's thread holding the lock: the child starts afresh.
        os.register_at_fork(after_in_child=self._forget)

    def _forget(self) -> None:
        self._changed = threading.Condition()
        self._watched: dict[int, list] = {}  # id -> [deadline, connection, fired]
        self._next_id = 0
        self._running = False

    def watch(self, conn: duckdb.DuckDBPyConnection, timeout_s: float) -> _Watch:
        with self._changed:
            if not self._running:
                threading.Thread(
                    target=self._run,
                    args=(self._changed, self._watched),
                    name="governed-sql-timeout",
                    daemon=True,
                ).start()
                self._running = True
            self._next_id += 1
            self._watched[self._next_id] = [time.monotonic() + timeout_s, conn, False]
            self._changed.notify()
            return _Watch(self, self._next_id)

    def done(self, watch_id: int) -> bool:
        """Stop watching; whether the query was interrupted for its time."""
        with self._changed:
            return self._watched.pop(watch_id)[2]

    def _run(self, changed: threading.Condition, watched: dict[int, list]) -> None:
        with changed:
            while True:
                now = time.monotonic()
                for entry in watched.values():
                    if entry[0] <= now:
                        entry[1].interrupt()  # thread-safe in DuckDB; the query fails
                        entry[2] = True
                        entry[0] = now + self.INTERRUPT_EVERY
                wake = min((entry[0] for entry in watched.values()), default=None)
                changed.wait(None if wake is None else max(wake - now, 0))


class _Watch:
    """One query's watch: `with WATCHDOG.watch(conn, timeout_s) as watch:`; afterwards
    `watch.fired` says whether it was interrupted for its time."""

    def __init__(self, watchdog: _Watchdog, watch_id: int) -> None:
        self._watchdog, self._id = watchdog, watch_id
        self.fired = False

    def __enter__(self) -> _Watch:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.fired = self._watchdog.done(self._id)


WATCHDOG = _Watchdog()


def json_safe(value: object) -> JsonValue:
    """A JSON value that loses nothing: Decimal as str, dates as ISO-8601, bytes as hex."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)  # NaN/inf are not JSON
    if isinstance(value, Decimal | uuid.UUID | timedelta):
        return str(value)
    if isinstance(value, datetime | date | time_of_day):
        return value.isoformat()
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).hex()
    if isinstance(value, list | tuple):
        return [json_safe(item) for item in value]
    if isinstance(value, dict):
        return {str(key): json_safe(item) for key, item in value.items()}
    return str(value)


def result_digest(names: list[str], rows: list[list[JsonValue]]) -> str:
    """``result_sha256``: the SHA-256 hex of the UTF-8 bytes of

    ``json.dumps([names, rows], sort_keys=True, separators=(",", ":"), default=str)``

    where ``names`` are the output column names and ``rows`` the returned rows after
    ``json_safe`` (so Decimal is a str, dates are ISO-8601 strings). Truncated rows are not in it.
    """
    text = json.dumps([names, rows], sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _failure(exc: duckdb.Error) -> GovernedSqlError:
    # DuckDB's own text can name files and internals, so only its class chooses the message.
    if isinstance(exc, duckdb.OutOfMemoryException):
        return GovernedSqlError("too_large", "the query needs more memory than allowed")
    if isinstance(exc, duckdb.ConversionException | duckdb.OutOfRangeException):
        return GovernedSqlError("execution_failed", "a value could not be converted or overflowed")
    if isinstance(exc, duckdb.BinderException):
        return GovernedSqlError("execution_failed", "the query's columns or types do not fit")
    return GovernedSqlError("execution_failed", "the query could not be executed")


@lru_cache(maxsize=256)
def _analysed(
    sql: str, table: tuple[str, tuple[str, ...]], max_sql_chars: int
) -> tuple[str, tuple[OutputColumn, ...]]:
    """`analyse`, remembered: the same SQL on the same columns parses the same (a refused
    query raises every time: exceptions are not cached)."""
    normalised, columns = analyse(
        sql, tables={table[0]: list(table[1])}, max_sql_chars=max_sql_chars
    )
    return normalised, tuple(columns)


def execute(
    sql: str,
    *,
    snapshot: LoadedSnapshot,
    timeout_s: float = 5.0,
    max_rows: int = 1000,
    memory_limit: str = "256MB",
    threads: int = 1,
    max_sql_chars: int = 20_000,
) -> GovernedResult:
    """Validate ``sql``, run its normalised form on ``snapshot``, and prove what ran.

    Raises ``GovernedSqlError``; its ``str()`` never contains DuckDB's text or file paths.
    """
    names_key = (snapshot.table, tuple(column.name for column in snapshot.columns))
    normalised, analysed = _analysed(sql, names_key, max_sql_chars)
    columns = [replace(column, lineage=list(column.lineage)) for column in analysed]
    try:
        conn = snapshot_cursor(snapshot.path, memory_limit=memory_limit, threads=threads)
    except duckdb.Error as exc:
        raise GovernedSqlError(
            "execution_failed", "the dataset snapshot could not be opened"
        ) from exc
    executed_at = datetime.now(UTC).isoformat()
    try:
        started = time.perf_counter()
        try:
            with WATCHDOG.watch(conn, timeout_s) as watch:
                fetched = conn.execute(normalised).fetchmany(max_rows + 1)
                names = [str(entry[0]) for entry in conn.description or []]
        except duckdb.Error as exc:
            if watch.fired or isinstance(exc, duckdb.InterruptException):
                raise GovernedSqlError(
                    "timeout", f"the query ran longer than {timeout_s}s"
                ) from exc
            raise _failure(exc) from exc
        duration_ms = (time.perf_counter() - started) * 1000
    finally:
        conn.close()
    rows = [[json_safe(value) for value in row] for row in fetched[:max_rows]]
    if len(names) != len(columns):  # cannot happen without a star; never mislabel a column
        raise GovernedSqlError("execution_failed", "the query's columns could not be described")
    proof = ExecutionProof(
        engine="duckdb",
        engine_version=duckdb.__version__,
        snapshot_sha256=snapshot.sha256,
        normalised_sql=normalised,
        result_sha256=result_digest(names, rows),
        row_count=len(rows),
        duration_ms=round(duration_ms, 3),
        executed_at=executed_at,
    )
    return GovernedResult(
        columns=[replace(column, name=name) for column, name in zip(columns, names, strict=True)],
        rows=rows,
        truncated=len(fetched) > max_rows,
        proof=proof,
    )
