"""Readiness of every component koinon needs, each reported on its own."""

from dataclasses import dataclass

import redis
from celery import Celery
from django.conf import settings
from django.db import connection

from koinon.celery import app as celery_app


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


def check_redis() -> ComponentStatus:
    try:
        client = redis.Redis.from_url(
            settings.REDIS_URL,
            socket_timeout=settings.KOINON_HEALTH_TIMEOUT,
            socket_connect_timeout=settings.KOINON_HEALTH_TIMEOUT,
        )
        try:
            client.ping()
        finally:
            client.close()
    except (redis.RedisError, OSError):
        return ComponentStatus("redis", False, "unreachable")
    return ComponentStatus("redis", True, "reachable")


def check_celery(app: Celery = celery_app) -> ComponentStatus:
    timeout = settings.KOINON_HEALTH_TIMEOUT
    try:
        with app.connection_for_read() as broker:
            broker.ensure_connection(max_retries=1, interval_start=0, timeout=timeout)
    except Exception:
        return ComponentStatus("celery", False, "broker unreachable")
    try:
        replies = app.control.ping(timeout=settings.KOINON_HEALTH_TIMEOUT)
    except Exception:
        return ComponentStatus("celery", False, "broker unreachable")
    if not replies:
        return ComponentStatus("celery", False, "no worker answered")
    return ComponentStatus("celery", True, f"{len(replies)} worker(s) answered")


def health_check() -> tuple[bool, dict[str, dict]]:
    components = check_database()
    components.append(check_redis())
    components.append(check_celery())
    healthy = all(component.ok for component in components)
    return healthy, {component.name: component.as_dict() for component in components}
