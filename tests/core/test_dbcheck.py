"""The database self-check (core.dbcheck, issue 46): on the suite's database, and on
throwaway databases of the same server whose vector extension is missing or kills its
backend at the first distance."""

import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
import pytest
from django.db import connection, connections
from django.db.backends.postgresql.base import DatabaseWrapper

from core.dbcheck import backend_death_signal, database_self_check

pytestmark = pytest.mark.django_db

# What a pgvector built for AVX-512 does on a CPU without it, short of the signal: the
# backend computing the distance ends (here by its own hand, as an administrator's
# pg_terminate_backend would end it).
DISTANCE_KILLS_ITS_BACKEND = """
CREATE OR REPLACE FUNCTION l2_distance(vector, vector) RETURNS float8 LANGUAGE sql AS
$$ SELECT pg_terminate_backend(pg_backend_pid())::int::float8 $$
"""


@pytest.fixture
def throwaway_database(db) -> Iterator[tuple[str, dict]]:
    """A database of its own on the suite's server: its name and psycopg's connection
    keywords (for its setup, as the owner)."""
    params = connection.get_connection_params()
    params.pop("cursor_factory", None)
    params.pop("context", None)
    name = f"selfcheck_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(**{**params, "dbname": "postgres"}, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield name, {**params, "dbname": name}
    finally:
        with psycopg.connect(**{**params, "dbname": "postgres"}, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextmanager
def django_connection(name: str) -> Iterator[DatabaseWrapper]:
    """A Django connection to the database `name`, known to `connections` meanwhile (the
    probes' transactions find it there)."""
    settings_dict = {**connection.settings_dict, "NAME": name}
    settings_dict["OPTIONS"] = {k: v for k, v in settings_dict["OPTIONS"].items() if k != "pool"}
    wrapper = DatabaseWrapper(settings_dict, alias=name)
    connections[name] = wrapper
    try:
        yield wrapper
    finally:
        wrapper.close()
        del connections[name]


def test_the_self_check_passes_on_the_migrated_database_and_leaves_nothing_behind():
    assert database_self_check(connection=connection) == []
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_class WHERE relname LIKE 'koinon_self_check%'")
        assert cursor.fetchone() == (0,)


def test_a_database_without_the_vector_extension_is_named_with_the_remedy(throwaway_database):
    name, params = throwaway_database
    with psycopg.connect(**params, autocommit=True) as owner:
        owner.execute("CREATE EXTENSION pg_trgm")
    with django_connection(name) as checked:
        failures = database_self_check(connection=checked)
    assert [(f.probe, f.kind) for f in failures] == [("the vector extension", "extension_missing")]
    assert "install pgvector" in failures[0].line and "migrate" in failures[0].line


def test_a_backend_that_dies_computing_a_vector_distance_is_reported_as_died(throwaway_database):
    name, params = throwaway_database
    with psycopg.connect(**params, autocommit=True) as owner:
        owner.execute("CREATE EXTENSION vector")
        owner.execute("CREATE EXTENSION pg_trgm")
        owner.execute(DISTANCE_KILLS_ITS_BACKEND)
    with django_connection(name) as checked:
        failures = database_self_check(connection=checked)
    # The check stops there: the connection is gone, nothing after it is tried.
    assert [(f.probe, f.kind) for f in failures] == [("computing a vector distance", "died")]
    line = failures[0].line
    assert line.startswith("the database process died while computing a vector distance")
    assert "signal 4" in line and "AVX-512" in line and "remedy" in line
    assert "\n" not in line


def test_the_server_log_names_the_signal_that_killed_the_checking_backend(tmp_path):
    log = tmp_path / "log"
    log.write_text(
        "LOG:  server process (PID 77) was terminated by signal 4: Illegal instruction\n"
    )
    start = log.stat().st_size
    with log.open("a") as appended:
        appended.write(
            "LOG:  server process (PID 76) was terminated by signal 9: Killed\n"
            "LOG:  client backend (PID 77) was terminated by signal 4: Illegal instruction\n"
            "DETAIL:  Failed process was running: SELECT '[3,4,0]'::vector <-> ...\n"
        )
    assert backend_death_signal(log, start, 77) == (4, "Illegal instruction")
    # Only what was logged after the check began, and only for its own backend.
    assert backend_death_signal(log, log.stat().st_size, 77, wait=0) is None
    assert backend_death_signal(log, start, 78, wait=0) is None
