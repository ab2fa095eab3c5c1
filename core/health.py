"""Readiness of every component koinon needs, each reported on its own."""

from collections.abc import Callable
from dataclasses import dataclass

import httpx
import redis
from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connection, connections

from core.dbcheck import DISTANCE_PARAMS, DISTANCE_SQL
from core.ports import Hooks, Port
from core.replicas import replica_states
from core.worker import redis_client, workers_alive


@dataclass(frozen=True)
class ComponentStatus:
    """One component's readiness. `degraded`: it works in a lesser way that needs no one
    to act at once (a replica away: reads are on the primary); the server stays healthy,
    so a load balancer keeps sending it requests."""

    name: str
    ok: bool
    detail: str
    degraded: bool = False

    def as_dict(self) -> dict[str, str]:
        state = "failed" if not self.ok else "degraded" if self.degraded else "ok"
        return {"status": state, "detail": self.detail}


# The apps' own components (extractions, embeddings, runs), added in their AppConfig.ready().
health_checks: "Hooks[Callable[[], ComponentStatus]]" = Hooks("health checks")
# How many documents are not yet searchable by both channels (still being extracted or
# embedded): koinon_up --demo waits for none before it prints its URLs. From knowledge.
documents_being_indexed: "Port[Callable[[], int]]" = Port("documents being indexed")


def check_database() -> list[ComponentStatus]:
    """Database reachable, the vector extension installed in it, and a vector distance
    computed by it: a pgvector build that kills its backend at the first distance (a CPU
    without the instructions it was built for, issue 46) is not healthy. One statement more
    than the reachability check, of constants: nothing is read."""
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
            row = cursor.fetchone()
    except Exception:
        return [
            ComponentStatus("database", False, "unreachable"),
            ComponentStatus("vector", False, "unknown: database unreachable"),
        ]
    database = ComponentStatus("database", True, "reachable")
    if row is None:
        return [database, ComponentStatus("vector", False, "extension missing")]
    return [database, check_vector_operation(version=row[0])]


def check_vector_operation(*, version: str, using: str = DEFAULT_DB_ALIAS) -> ComponentStatus:
    """One vector distance of long vectors, checked (core.dbcheck.DISTANCE_SQL: 5)."""
    database = connections[using]
    try:
        with database.cursor() as cursor:
            cursor.execute(DISTANCE_SQL, DISTANCE_PARAMS)
            (distance,) = cursor.fetchone()
    except Exception:
        if database.connection is None or database.connection.closed:
            # The server ended the connection: its backend is gone.
            database.close()
            return ComponentStatus(
                "vector", False, "vector operation failed: the database process died"
            )
        return ComponentStatus("vector", False, "vector operation failed")
    if distance != 5.0:
        return ComponentStatus("vector", False, f"vector operation wrong: {distance} for 5")
    return ComponentStatus("vector", True, f"pgvector {version}")


def check_database_pool() -> ComponentStatus | None:
    """The web process's connection pool (None where there is none): how many
    connections it holds and how many requests wait for one. Requests waiting during a
    burst are normal; failed only while they wait and the pool holds no connection at
    all (it cannot reach the database)."""
    pool = getattr(connection, "pool", None)
    if pool is None:
        return None
    stats = pool.get_stats()
    size, idle = stats.get("pool_size", 0), stats.get("pool_available", 0)
    waiting = stats.get("requests_waiting", 0)
    detail = f"{size} of {pool.max_size} open, {idle} idle, {waiting} waiting"
    return ComponentStatus("database_pool", not (waiting and not size), detail)


def check_replicas() -> list[ComponentStatus]:
    """Each streaming replica (DATABASE_REPLICA_URLS), asked now: in use, or degraded
    (down or lagging beyond DATABASE_REPLICA_MAX_LAG) while reads are on the primary."""
    components = []
    for state in replica_states(fresh=True):
        name = "database_replica" if state.alias == "replica_0" else f"database_{state.alias}"
        if state.usable:
            components.append(ComponentStatus(name, True, f"{state.detail}; reads here"))
        else:
            detail = f"{state.detail}; reads on the primary"
            components.append(ComponentStatus(name, True, detail, degraded=True))
    return components


def check_redis_and_workers() -> list[ComponentStatus]:
    """Redis reachable, and how many workers have a fresh heartbeat in it.

    Never broadcasts through the Celery broker pool: a request thread only reads
    the keys the workers write (core.worker), over a connection of its own.
    """
    try:
        client = redis_client()
        try:
            client.ping()
            alive = workers_alive(client)
        finally:
            client.close()
    except (redis.RedisError, OSError):
        return [
            ComponentStatus("redis", False, "unreachable"),
            ComponentStatus("celery", False, "unknown: redis unreachable"),
        ]
    redis_status = ComponentStatus("redis", True, "reachable")
    if not alive:
        return [redis_status, ComponentStatus("celery", False, "no worker heartbeat")]
    return [redis_status, ComponentStatus("celery", True, f"{alive} worker(s) alive")]


def check_model() -> ComponentStatus:
    """The `openai` provider's endpoint answers `GET /models` (the embedded local model
    included). Only the HTTP status is reported: an endpoint's text never is."""
    headers = {}
    if settings.KOINON_LLM_API_KEY:
        headers["Authorization"] = f"Bearer {settings.KOINON_LLM_API_KEY}"
    url = settings.KOINON_LLM_BASE_URL.rstrip("/") + "/models"
    try:
        response = httpx.get(url, headers=headers, timeout=settings.KOINON_HEALTH_TIMEOUT)
    except httpx.HTTPError:
        return ComponentStatus("model", False, "unreachable")
    if response.status_code != 200:
        return ComponentStatus("model", False, f"HTTP {response.status_code}")
    return ComponentStatus("model", True, "reachable")


def health_check(*, scope: str = "all") -> tuple[bool, dict[str, dict[str, str]]]:
    """Every component (`all`), or whether this web process can serve (`host`: its
    database and pool fail it; replicas and Redis are reported, degraded at worst).

    A load balancer checks `host`. What every host shares alike takes no host out of
    rotation: no worker heartbeat, a stuck run, or Redis during a Sentinel failover (the
    app answers typed 503s meanwhile and streams read the store) would otherwise take every
    host out at once and turn a degraded service into none. `all` is for people and
    monitoring."""
    components = check_database()
    pool = check_database_pool()
    if pool is not None:
        components.append(pool)
    components.extend(check_replicas())
    redis_and_workers = check_redis_and_workers()
    if scope == "host":
        redis_status = redis_and_workers[0]
        if not redis_status.ok:
            redis_status = ComponentStatus("redis", True, redis_status.detail, degraded=True)
        components.append(redis_status)
    else:
        components.extend(redis_and_workers)
        components.extend(check() for check in health_checks)
        if settings.KOINON_MODEL_PROVIDER == "openai":
            components.append(check_model())
    healthy = all(component.ok for component in components)
    return healthy, {component.name: component.as_dict() for component in components}
