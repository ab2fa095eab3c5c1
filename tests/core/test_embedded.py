from types import SimpleNamespace

import psutil
import pytest

from core import embedded
from core.embedded import EmbeddedRedis


def test_a_redis_whose_pid_file_vanished_is_still_found_and_stopped(tmp_path):
    redis = EmbeddedRedis(tmp_path / "redis")
    assert redis.start() is True
    pid = redis.pid()
    assert redis.start() is False  # a second start reuses the running server
    redis.pidfile.unlink()
    assert redis.pid() == pid  # found by its socket path instead
    redis.stop()
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    assert not redis.is_running()


def test_the_runtime_role_owns_nothing_and_cannot_touch_receipts_or_their_triggers(
    test_database_name,
):
    import psycopg
    import pytest
    from django.conf import settings
    from psycopg import sql

    from core.embedded import PG_SUPERUSER, EmbeddedPostgres

    if not settings.EMBEDDED_POSTGRES:
        pytest.skip("the runtime role is created by koinon_up on the embedded PostgreSQL")
    postgres = EmbeddedPostgres(settings.EMBEDDED_PG_DIR)
    role = f"koinon_app_{test_database_name}"[:60]
    postgres.ensure_runtime_role(database=test_database_name, role=role)
    postgres.ensure_runtime_role(database=test_database_name, role=role)  # idempotent
    host = str(postgres.socket_dir)
    try:
        with psycopg.connect(
            host=host, dbname=test_database_name, user=role, autocommit=True
        ) as app:
            assert app.execute(
                "SELECT rolsuper FROM pg_roles WHERE rolname = current_user"
            ).fetchone() == (False,)
            assert app.execute(
                "SELECT count(*) FROM pg_tables WHERE schemaname = 'public' "
                "AND tableowner = current_user"
            ).fetchone() == (0,)
            assert app.execute("SELECT count(*) FROM audit_outputrelease").fetchone() == (0,)
            can = "SELECT has_table_privilege(current_user, %s, %s)"
            assert app.execute(can, ["knowledge_document", "INSERT"]).fetchone() == (True,)
            assert app.execute(can, ["knowledge_extraction", "UPDATE"]).fetchone() == (True,)
            assert app.execute(can, ["audit_outputrelease", "INSERT"]).fetchone() == (True,)
            for record in ("audit_streamevent", "mcp_server_toolcall", "knowledge_erasure"):
                assert app.execute(can, [record, "INSERT"]).fetchone() == (True,)
                for write in ("UPDATE", "DELETE", "TRUNCATE"):
                    assert app.execute(can, [record, write]).fetchone() == (False,), record
            for statement in (
                "ALTER TABLE audit_outputrelease DISABLE TRIGGER USER",
                "SET session_replication_role = replica",
                "UPDATE audit_outputrelease SET kind = 'refusal'",
                "DELETE FROM audit_outputrelease",
                "TRUNCATE audit_outputrelease",
                "DROP TRIGGER audit_release_no_update ON audit_outputrelease",
            ):
                with pytest.raises(psycopg.errors.InsufficientPrivilege):
                    app.execute(statement)
    finally:
        with psycopg.connect(
            host=host, dbname=test_database_name, user=PG_SUPERUSER, autocommit=True
        ) as owner:
            owner.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(role)))
            owner.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


@pytest.mark.parametrize(
    ("memory_mb", "expected_mb"), [(256, 128), (2048, 512), (8192, 2048), (24576, 4096)]
)
def test_embedded_shared_buffers_are_a_quarter_of_the_memory_within_bounds(
    monkeypatch, memory_mb, expected_mb
):
    monkeypatch.delenv("KOINON_PG_SHARED_BUFFERS_MB", raising=False)
    memory = SimpleNamespace(total=memory_mb * 2**20)
    monkeypatch.setattr(embedded.psutil, "virtual_memory", lambda: memory)
    assert embedded.shared_buffers_mb() == expected_mb


@pytest.mark.parametrize("raw", ["64", "1GB", "-5", "1.5", "lots"])
def test_a_bad_shared_buffers_setting_is_refused_by_name(monkeypatch, raw):
    monkeypatch.setenv("KOINON_PG_SHARED_BUFFERS_MB", raw)
    with pytest.raises(embedded.EmbeddedServiceError, match="KOINON_PG_SHARED_BUFFERS_MB"):
        embedded.shared_buffers_mb()


def test_the_embedded_server_starts_with_those_shared_buffers(tmp_path, monkeypatch):
    import psycopg

    monkeypatch.setenv("KOINON_PG_SHARED_BUFFERS_MB", "160")
    postgres = embedded.EmbeddedPostgres(tmp_path / "pg")
    assert postgres.start() is True
    try:
        with psycopg.connect(
            host=str(postgres.socket_dir), dbname="postgres", user=embedded.PG_SUPERUSER
        ) as conn:
            assert conn.execute("SHOW shared_buffers").fetchone() == ("160MB",)
    finally:
        postgres.stop()
