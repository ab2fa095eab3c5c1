"""Embedded PostgreSQL and Redis for one bench run, and the bench's own database.

Import after `common.bootstrap.django_setup`.
"""

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
from django.conf import settings
from django.core.management import call_command
from django.db import connection, connections
from psycopg import sql

from core.embedded import PG_SUPERUSER, EmbeddedPostgres, EmbeddedRedis

type Service = EmbeddedPostgres | EmbeddedRedis


def start_services() -> tuple[EmbeddedPostgres, list[Service]]:
    """Start the embedded PostgreSQL and Redis of the data directory where not running.

    Returns the PostgreSQL handle and the services this call started (only those are to
    be stopped).
    """
    postgres = EmbeddedPostgres(settings.EMBEDDED_PG_DIR)
    redis = EmbeddedRedis(settings.EMBEDDED_REDIS_DIR)
    started = [service for service in (postgres, redis) if service.start()]
    return postgres, started


def stop_services(started: list[Service]) -> None:
    """Stop only what this run started: a server someone else runs is left alone."""
    connections.close_all()
    for service in reversed(started):
        service.stop()


@contextmanager
def embedded_services(bench_dir: Path) -> Iterator[EmbeddedPostgres]:
    """Create `bench_dir`, start its services, yield PostgreSQL, stop what was started."""
    bench_dir.mkdir(parents=True, exist_ok=True)
    postgres, started = start_services()
    try:
        yield postgres
    finally:
        stop_services(started)


def recreate_database(postgres: EmbeddedPostgres, *, clear_media: bool = False) -> None:
    """Drop (forcing out connections) and recreate the configured database, then migrate.

    `clear_media` also removes the stored revision bytes of earlier runs (MEDIA_ROOT/
    revisions): they belong to rows that no longer exist.
    """
    name = settings.DATABASES["default"]["NAME"]
    with psycopg.connect(
        host=str(postgres.socket_dir), dbname="postgres", user=PG_SUPERUSER, autocommit=True
    ) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )
    postgres.ensure_database(name)
    call_command("migrate", interactive=False, verbosity=0)
    if clear_media:
        shutil.rmtree(Path(settings.MEDIA_ROOT) / "revisions", ignore_errors=True)


def vacuum_analyze(*tables: str) -> None:
    """VACUUM ANALYZE each table (fresh planner statistics after a bulk load)."""
    with connection.cursor() as cursor:
        for table in tables:
            cursor.execute(f"VACUUM ANALYZE {table}")
