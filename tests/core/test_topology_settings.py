"""The settings of a deployment beyond one machine (issue 32) fail loudly at start, naming
the variable, and set the database and Redis up as documented (docs/deploy.md)."""

import json
import os
import subprocess
import sys

import pytest

from tests.services import ROOT

PRINT = (
    "import django, json; django.setup(); from django.conf import settings as s; "
    "print(json.dumps({'databases': s.DATABASES, 'broker': s.CELERY_BROKER_URL, "
    "'transport': s.CELERY_BROKER_TRANSPORT_OPTIONS, "
    "'layer': s.CHANNEL_LAYERS['default']['CONFIG']['hosts'], "
    "'media': str(s.MEDIA_ROOT)}, default=str))"
)
TOPOLOGY = {
    "DATABASE_URL": "postgresql://koinon_app@pooler:6432/koinon",
    "DATABASE_POOLER": "pgbouncer",
    "DATABASE_DIRECT_URL": "postgresql://koinon_app@primary:5432/koinon",
    "DATABASE_REPLICA_URLS": "postgresql://koinon_app@replica-a:5432/koinon,"
    "postgresql://koinon_app@replica-b:5432/koinon",
    "REDIS_SENTINELS": "sentinel-1:26379,sentinel-2:26379,[::1]:26380",
    "REDIS_SENTINEL_MASTER": "koinon",
    "KOINON_MEDIA_DIR": "/srv/koinon-media",
    "KOINON_DB_POOL": "8",
}


def settings_load(code: str = "", **environ: str) -> subprocess.CompletedProcess:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("DATABASE_", "REDIS_", "KOINON_DATABASE", "CELERY_"))
    }
    env.update(environ, DJANGO_SETTINGS_MODULE="koinon.settings")
    return subprocess.run(
        [sys.executable, "-c", code or "import django; django.setup()"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=60,
    )


def test_a_pooled_topology_configures_every_alias_for_transaction_pooling():
    loaded = settings_load(PRINT, **TOPOLOGY)
    assert loaded.returncode == 0, loaded.stderr
    found = json.loads(loaded.stdout)
    databases = found["databases"]
    assert set(databases) == {"default", "replica_0", "replica_1", "direct"}
    default, replica, direct = databases["default"], databases["replica_1"], databases["direct"]
    assert (default["HOST"], default["PORT"]) == ("pooler", "6432")
    assert default["DISABLE_SERVER_SIDE_CURSORS"] is True
    assert default["OPTIONS"]["prepare_threshold"] is None
    assert "options" not in default["OPTIONS"]  # PgBouncer refuses the startup parameter
    assert default["OPTIONS"]["pool"]["max_size"] == 8
    assert replica["HOST"] == "replica-b" and "pool" not in replica["OPTIONS"]
    assert replica["OPTIONS"]["connect_timeout"] >= 1
    # The session locks' connection: PostgreSQL itself, with the HNSW settings, no pool.
    assert direct["HOST"] == "primary" and "pool" not in direct["OPTIONS"]
    assert "hnsw.ef_search" in direct["OPTIONS"]["options"]
    assert found["broker"] == (
        "sentinel://sentinel-1:26379;sentinel://sentinel-2:26379;sentinel://::1:26380"
    )
    assert found["transport"]["master_name"] == "koinon"
    assert found["layer"] == [
        {
            "sentinels": [["sentinel-1", 26379], ["sentinel-2", 26379], ["::1", 26380]],
            "master_name": "koinon",
        }
    ]
    assert found["media"] == "/srv/koinon-media"


def test_without_a_pooler_connections_start_with_the_hnsw_settings():
    loaded = settings_load(PRINT, DATABASE_URL="postgresql://koinon@db:5432/koinon")
    assert loaded.returncode == 0, loaded.stderr
    default = json.loads(loaded.stdout)["databases"]["default"]
    assert "hnsw.ef_search=100" in default["OPTIONS"]["options"]
    assert "DISABLE_SERVER_SIDE_CURSORS" not in default


@pytest.mark.parametrize(
    ("environ", "named"),
    [
        ({"DATABASE_POOLER": "pgbouncer"}, "DATABASE_DIRECT_URL"),
        (
            {"DATABASE_POOLER": "pgbouncer", "DATABASE_URL": "postgresql://a@pooler/koinon"},
            "DATABASE_DIRECT_URL",
        ),
        ({"DATABASE_POOLER": "odyssey"}, "DATABASE_POOLER"),
        ({"DATABASE_REPLICA_MAX_LAG": "0"}, "DATABASE_REPLICA_MAX_LAG"),
        ({"DATABASE_REPLICA_MAX_LAG": "soon"}, "DATABASE_REPLICA_MAX_LAG"),
        ({"DATABASE_REPLICA_URLS": "mysql://replica/koinon"}, "DATABASE_REPLICA_URLS"),
        ({"DATABASE_DIRECT_URL": "redis://primary"}, "DATABASE_DIRECT_URL"),
        ({"REDIS_SENTINELS": "sentinel-1:26379"}, "REDIS_SENTINEL_MASTER"),
        ({"REDIS_SENTINEL_MASTER": "koinon"}, "REDIS_SENTINELS"),
        ({"REDIS_SENTINELS": "sentinel-1", "REDIS_SENTINEL_MASTER": "k"}, "REDIS_SENTINELS"),
        ({"REDIS_SENTINELS": "s:99999", "REDIS_SENTINEL_MASTER": "k"}, "REDIS_SENTINELS"),
        (
            {
                "REDIS_SENTINELS": "s:26379",
                "REDIS_SENTINEL_MASTER": "k",
                "REDIS_URL": "redis://r:6379/0",
            },
            "REDIS_URL",
        ),
    ],
)
def test_a_bad_topology_setting_stops_the_start_naming_it(environ, named):
    loaded = settings_load(**environ)
    assert loaded.returncode != 0
    assert named in loaded.stderr.strip().splitlines()[-1]  # the error's own message
