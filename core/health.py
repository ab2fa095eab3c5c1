"""Readiness of every component koinon needs, each reported on its own."""

from dataclasses import dataclass

import redis
from django.db import connection
from django.db.models import Count

from core.worker import redis_client, workers_alive


@dataclass(frozen=True)
class ComponentStatus:
    name: str
    ok: bool
    detail: str

    def as_dict(self) -> dict:
        return {"status": "ok" if self.ok else "failed", "detail": self.detail}


def check_database() -> list[ComponentStatus]:
    """Database reachable, and the vector extension installed in it."""
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
    return [database, ComponentStatus("vector", True, f"pgvector {row[0]}")]


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


def check_extractions() -> ComponentStatus:
    """Extraction work that no worker is finishing (knowledge.selectors.extractions_stale)."""
    from knowledge.selectors import extractions_stale

    try:
        stale = extractions_stale().count()
    except Exception:
        return ComponentStatus("extractions", False, "unknown: database unreachable")
    if stale:
        return ComponentStatus(
            "extractions", False, f"{stale} stale (queued or running, no progress)"
        )
    return ComponentStatus("extractions", True, "none stale")


def check_embeddings() -> ComponentStatus:
    """Passages without a vector (vector search cannot find them): failed while an
    extraction waits with no worker embedding it, or the provider was unavailable."""
    from knowledge.models import EmbeddingStatus, Passage
    from knowledge.selectors import extractions_embedding_stalled

    try:
        counts = dict(
            Passage.objects.exclude(embedding_status=EmbeddingStatus.EMBEDDED)
            .values_list("embedding_status")
            .annotate(count=Count("pk"))
            .order_by()
        )
        stalled = extractions_embedding_stalled().count()
    except Exception:
        return ComponentStatus("embeddings", False, "unknown: database unreachable")
    pending = counts.get(EmbeddingStatus.PENDING, 0)
    unavailable = counts.get(EmbeddingStatus.UNAVAILABLE, 0)
    if not pending and not unavailable:
        return ComponentStatus("embeddings", True, "every passage embedded")
    parts = [f"{pending} passage(s) waiting"]
    if unavailable:
        parts.append(f"{unavailable} keyword-only (provider unavailable)")
    if stalled:
        parts.append(f"{stalled} extraction(s) stalled (no worker embedding them)")
    return ComponentStatus("embeddings", not (unavailable or stalled), ", ".join(parts))


def check_model() -> ComponentStatus:
    """The `openai` provider's endpoint answers `GET /models` (the embedded local model
    included). Only the HTTP status is reported: an endpoint's text never is."""
    import httpx
    from django.conf import settings

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


def check_runs() -> ComponentStatus:
    """Answer runs the sweeper should have settled by now (answers.recovery)."""
    from answers.recovery import generations_stuck

    try:
        stuck = generations_stuck().count()
    except Exception:
        return ComponentStatus("runs", False, "unknown: database unreachable")
    if stuck:
        return ComponentStatus("runs", False, f"{stuck} stuck (queued or executing too long)")
    return ComponentStatus("runs", True, "none stuck")


def health_check() -> tuple[bool, dict[str, dict]]:
    from django.conf import settings

    components = check_database()
    pool = check_database_pool()
    if pool is not None:
        components.append(pool)
    components.extend(check_redis_and_workers())
    components.append(check_extractions())
    components.append(check_embeddings())
    components.append(check_runs())
    if settings.KOINON_MODEL_PROVIDER == "openai":
        components.append(check_model())
    healthy = all(component.ok for component in components)
    return healthy, {component.name: component.as_dict() for component in components}
