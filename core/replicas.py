"""Which database a replica-safe read uses now: a streaming replica when one is up and
fresh enough, else the primary (docs/decisions.md, "Replicas").

Only reads whose result the primary checks again before anything is published may use a
replica: an answer run's gathering (its scope, both retrieval channels, the document
frequencies). The claim, the recheck, publication, receipts, writes and every read that is
shown to a reader without a recheck stay on the primary (`default`). A stale replica can
then cost an answer (a passage not yet replicated is not found) but never publish what the
primary would refuse: the recheck builds a fresh scope on the primary under its locks.

Each process keeps what it last learnt of each replica (up or down, its lag) for
KOINON_REPLICA_CHECK_SECONDS, so a read costs no extra round trip; a replica that fails a
read is marked down at once and the read runs again on the primary (`replica_read`).
"""

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, DatabaseError, InterfaceError, OperationalError, connections

logger = logging.getLogger(__name__)


# How far the replica's replay is behind what it has received, in seconds; 0 when it has
# replayed everything it received (an idle primary sends nothing, so the time since the
# last replayed transaction is no lag then). NULL on a server that is not in recovery.
LAG_SQL = (
    "SELECT pg_is_in_recovery(), CASE WHEN pg_last_wal_receive_lsn() IS NOT DISTINCT FROM "
    "pg_last_wal_replay_lsn() THEN 0 ELSE coalesce(extract(epoch FROM now() - "
    "pg_last_xact_replay_timestamp()), 0) END"
)


@dataclass(frozen=True)
class ReplicaState:
    alias: str
    up: bool
    lag: float | None  # seconds; None when it could not be asked
    checked_at: float  # time.monotonic()
    detail: str

    @property
    def usable(self) -> bool:
        return self.up and self.lag is not None and self.lag <= settings.DATABASE_REPLICA_MAX_LAG


_states: dict[str, ReplicaState] = {}
_lock = threading.Lock()


def replica_aliases() -> list[str]:
    """The configured replicas' database aliases, in DATABASE_REPLICA_URLS order."""
    return [alias for alias in settings.DATABASES if alias.startswith("replica_")]


def replica_check(alias: str) -> ReplicaState:
    """Ask the replica now whether it is in recovery and how far it lags."""
    now = time.monotonic()
    try:
        with connections[alias].cursor() as cursor:
            cursor.execute(LAG_SQL)
            in_recovery, lag = cursor.fetchone()
    except DatabaseError:
        connections[alias].close()
        return ReplicaState(alias, False, None, now, "unreachable")
    if not in_recovery:
        # A promoted replica is a primary of its own: its rows no longer follow `default`.
        return ReplicaState(alias, False, None, now, "not in recovery (promoted?)")
    lag = float(lag)
    if lag > settings.DATABASE_REPLICA_MAX_LAG:
        return ReplicaState(alias, True, lag, now, f"lagging {lag:.1f} s")
    return ReplicaState(alias, True, lag, now, f"streaming, {lag:.1f} s behind")


def replica_states(*, fresh: bool = False) -> list[ReplicaState]:
    """Every replica's state, asked again when older than KOINON_REPLICA_CHECK_SECONDS
    (or `fresh`)."""
    states = []
    for alias in replica_aliases():
        with _lock:
            known = _states.get(alias)
        if (
            fresh
            or known is None
            or time.monotonic() - known.checked_at > settings.KOINON_REPLICA_CHECK_SECONDS
        ):
            known = replica_check(alias)
            with _lock:
                _states[alias] = known
        states.append(known)
    return states


def read_database() -> str:
    """The alias for a replica-safe read now: the first usable replica, else `default`."""
    for state in replica_states():
        if state.usable:
            return state.alias
    return DEFAULT_DB_ALIAS


def replica_failed(alias: str) -> None:
    """A read on `alias` failed: count it down until its next check, drop its connection."""
    logger.warning("replica %s failed a read; reading from the primary", alias)
    with _lock:
        _states[alias] = ReplicaState(alias, False, None, time.monotonic(), "failed a read")
    connections[alias].close()


def replica_read[T](read: Callable[[str], T], *, database: str | None = None) -> T:
    """`read(alias)` on `database` (default: `read_database()`); when a replica fails it
    (down, restarted, a statement cancelled by recovery), once more on the primary. A
    failure on the primary is raised as it is."""
    alias = database or read_database()
    if alias == DEFAULT_DB_ALIAS:
        return read(alias)
    try:
        return read(alias)
    except (OperationalError, InterfaceError):
        replica_failed(alias)
        return read(DEFAULT_DB_ALIAS)
