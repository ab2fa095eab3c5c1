"""The multi-host deployment in deploy/ (docs/deploy.md): no database, no Docker daemon.

The compose file, HAProxy's, PgBouncer's and Sentinel's configurations are checked against
one another and against the app's contract (the README's configuration table, the runtime
role's record tables), so a rename on either side fails here rather than in production.
"""

import configparser
import gzip
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from core.embedded import RECORD_TABLES, RUNTIME_ROLE
from tests.helpers import compose_command

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy"
COMPOSE_FILE = DEPLOY / "docker-compose.yml"
HAPROXY_CFG = DEPLOY / "haproxy.cfg"
PGBOUNCER_INI = DEPLOY / "pgbouncer" / "pgbouncer.ini"
SENTINEL_CONF = DEPLOY / "sentinel" / "sentinel.conf"
GRANT_SQL = DEPLOY / "postgres" / "grant-runtime-role.sql"
KOINON_IMAGE = "koinon:latest"
SECRETS = {
    "POSTGRES_PASSWORD": "owner-secret",
    "KOINON_APP_PASSWORD": "app-secret",
    "REPLICATION_PASSWORD": "replication-secret",
    "SECRET_KEY": "example",
    "ALLOWED_HOSTS": "koinon.example.org",
}


def compose() -> dict[str, Any]:
    with COMPOSE_FILE.open() as file:
        return yaml.safe_load(file)


def koinon_services() -> dict[str, dict[str, Any]]:
    """The services that run koinon's own image (web, workers, the migration)."""
    return {
        name: service
        for name, service in compose()["services"].items()
        if service.get("image") == KOINON_IMAGE
    }


def interpolated(value: str) -> str:
    """`${NAME:?…}` / `${NAME:-default}` as compose would fill them in with SECRETS set."""

    def fill(match: re.Match[str]) -> str:
        name, operator, rest = match[1], match[2] or "", match[3] or ""
        if name in SECRETS:
            return SECRETS[name]
        return rest if operator == ":-" else ""

    return re.sub(r"\$\{([A-Z][A-Z0-9_]*)(?:(:[-?])([^}]*))?\}", fill, value)


def database_url(service: dict[str, Any], variable: str = "DATABASE_URL") -> Any:
    return urlsplit(interpolated(service["environment"][variable]))


def pgbouncer_ini() -> configparser.ConfigParser:
    parser = configparser.ConfigParser(inline_comment_prefixes=None, comment_prefixes=(";", "#"))
    parser.read(PGBOUNCER_INI)
    return parser


def readme_configuration_variables() -> set[str]:
    """Every variable named in the first column of the README's configuration table."""
    readme = (ROOT / "README.md").read_text()
    section = readme.split("\n## Configuration\n", 1)[1].split("\n## ", 1)[0]
    names: set[str] = set()
    for line in section.splitlines():
        if line.startswith("| `"):
            first_cell = line.split("|")[1]
            names.update(re.findall(r"`([A-Z][A-Z0-9_]+)`", first_cell))
    return names


def test_the_topology_has_every_tier():
    services = compose()["services"]
    assert {
        "postgres-primary",
        "postgres-replica",
        "pgbouncer",
        "migrate",
        "redis-primary",
        "redis-replica",
        "redis-sentinel-1",
        "redis-sentinel-2",
        "redis-sentinel-3",
        "haproxy",
        "web-1",
        "web-2",
        "worker-1",
        "worker-2",
        "answers-1",
        "answers-2",
    } <= set(services)
    assert services["postgres-primary"]["image"].startswith("pgvector/pgvector:pg")
    assert services["postgres-replica"]["image"] == services["postgres-primary"]["image"]
    assert set(koinon_services()) >= {"migrate", "web-1", "web-2", "worker-1", "answers-1"}


def test_every_variable_set_on_koinon_services_is_documented_in_the_readme():
    documented = readme_configuration_variables()
    assert {"DATABASE_URL", "SECRET_KEY", "KOINON_DB_POOL"} <= documented  # the parser works
    undocumented = {
        variable
        for service in koinon_services().values()
        for variable in service["environment"]
        if variable not in documented
    }
    assert sorted(undocumented) == []


def test_no_secret_is_written_into_the_compose_file():
    text = COMPOSE_FILE.read_text()
    for secret in SECRETS:
        uses = re.findall(rf"\$\{{{secret}(?::([-?]))?", text)
        assert uses and set(uses) == {"?"}, f"{secret} must be required (${{{secret}:?…}})"
    assert "PASSWORD: " not in re.sub(r"PASSWORD: \$\{[A-Z_]+:\?", "", text)


def test_the_migration_runs_straight_to_the_primary_as_the_owner_and_then_grants():
    services = compose()["services"]
    migrate = services["migrate"]
    listen_port = int(pgbouncer_ini()["pgbouncer"]["listen_port"])
    url = database_url(migrate)
    assert url.hostname == "postgres-primary" and url.port == 5432
    assert url.hostname not in {"pgbouncer"} and url.port != listen_port
    assert url.username == services["postgres-primary"]["environment"]["POSTGRES_USER"]
    # Migrations need a session of their own: no pooler mode, no replica.
    assert "DATABASE_POOLER" not in migrate["environment"]
    assert "DATABASE_REPLICA_URLS" not in migrate["environment"]
    command = " ".join(migrate["command"])
    assert command.index("manage.py migrate") < command.index(GRANT_SQL.name)
    assert f"./postgres/{GRANT_SQL.name}:/deploy/{GRANT_SQL.name}:ro" in migrate["volumes"]


def test_web_and_workers_use_pgbouncer_as_the_runtime_role_and_the_primary_for_locks():
    listen_port = int(pgbouncer_ini()["pgbouncer"]["listen_port"])
    runtime = {name: s for name, s in koinon_services().items() if name != "migrate"}
    assert len(runtime) >= 4
    for name, service in runtime.items():
        environment = service["environment"]
        pooled = database_url(service)
        assert (pooled.hostname, pooled.port, pooled.username) == (
            "pgbouncer",
            listen_port,
            RUNTIME_ROLE,
        ), name
        assert environment["DATABASE_POOLER"] == "pgbouncer", name
        direct = database_url(service, "DATABASE_DIRECT_URL")
        assert (direct.hostname, direct.port, direct.username) == (
            "postgres-primary",
            5432,
            RUNTIME_ROLE,
        ), name
        replicas = interpolated(environment["DATABASE_REPLICA_URLS"]).split(",")
        assert [urlsplit(url).hostname for url in replicas] == ["postgres-replica"], name
        assert environment["REDIS_SENTINEL_MASTER"] == "koinon", name
        assert "REDIS_URL" not in environment, name


def test_every_koinon_service_shares_one_volume_for_uploads():
    mounts = set()
    for name, service in koinon_services().items():
        media = service["environment"]["KOINON_MEDIA_DIR"]
        shared = [
            volume
            for volume in service["volumes"]
            if not volume.startswith((".", "/")) and media.startswith(volume.split(":")[1])
        ]
        assert len(shared) == 1, name
        mounts.add((shared[0], media))
    assert len(mounts) == 1, mounts
    assert next(iter(mounts))[0].split(":")[0] in compose()["volumes"]


def test_every_file_the_compose_file_mounts_is_in_the_repository():
    for name, service in compose()["services"].items():
        for volume in service.get("volumes", []):
            source = volume.split(":")[0]
            if source.startswith("."):
                assert (DEPLOY / source).is_file(), f"{name}: {source}"
                if source.endswith(".sh"):
                    assert os.access(DEPLOY / source, os.X_OK), f"{source} is not executable"
        build = service.get("build")
        if build:
            assert (DEPLOY / build / "Dockerfile").is_file(), name


def test_the_runtime_role_grants_revoke_exactly_the_record_tables():
    sql = GRANT_SQL.read_text()
    revoked = re.search(r"REVOKE UPDATE, DELETE, TRUNCATE ON(.*?)FROM (\w+);", sql, re.DOTALL)
    assert revoked is not None
    assert revoked[2] == RUNTIME_ROLE
    assert sorted(table.strip() for table in revoked[1].split(",")) == sorted(RECORD_TABLES)
    assert f"SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO {RUNTIME_ROLE}" in sql
    # No temporary schema and no CREATE: the role can make no function (issue 48, item 1).
    for grantee in ("PUBLIC", RUNTIME_ROLE):
        assert f"REVOKE TEMPORARY ON DATABASE %I FROM {grantee}" in sql
        assert f"REVOKE CREATE ON SCHEMA public FROM {grantee};" in sql


def test_pgbouncer_pools_transactions_in_front_of_the_primary_with_documented_settings():
    ini = pgbouncer_ini()
    settings = ini["pgbouncer"]
    assert settings["pool_mode"] == "transaction"
    # The app must fail at connect, not silently lose its search settings, if it sends
    # `options` to PgBouncer (DATABASE_POOLER unset).
    ignored = {name.strip() for name in settings.get("ignore_startup_parameters", "").split(",")}
    assert "options" not in ignored
    assert "host=postgres-primary" in ini["databases"]["koinon"]
    assert settings["auth_file"].startswith("/run/")  # written at start, never committed
    manual = Path("/usr/share/man/man5/pgbouncer.5.gz")
    if not manual.exists():
        pytest.skip("PgBouncer's manual is not installed (make topology-tools)")
    with gzip.open(manual, "rt") as page:
        documented = set(re.findall(r"^\.SS (\w+)$", page.read(), re.MULTILINE))
    assert sorted(set(settings) - documented) == []


def test_sentinels_watch_the_master_the_app_asks_for_with_a_quorum_of_two():
    monitor = re.search(
        r"^sentinel monitor (\S+) (\S+) (\d+) (\d+)$", SENTINEL_CONF.read_text(), re.MULTILINE
    )
    assert monitor is not None
    master, host, port, quorum = monitor.groups()
    assert (master, host, port, quorum) == ("koinon", "redis-primary", "6379", "2")
    services = compose()["services"]
    sentinels = sorted(name for name in services if name.startswith("redis-sentinel-"))
    assert len(sentinels) == 3
    for name, service in koinon_services().items():
        listed = service["environment"]["REDIS_SENTINELS"].split(",")
        assert sorted(address.split(":")[0] for address in listed) == sentinels, name
        assert service["environment"]["REDIS_SENTINEL_MASTER"] == master, name


def test_haproxy_accepts_its_configuration():
    haproxy = shutil.which("haproxy", path=os.pathsep.join([os.environ["PATH"], "/usr/sbin"]))
    assert haproxy, "haproxy is missing: `make topology-tools` installs it"
    result = subprocess.run(
        [haproxy, "-c", "-f", str(HAPROXY_CFG)], capture_output=True, text=True, timeout=30
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_haproxy_checks_health_and_passes_streams_through_to_every_web_service():
    config = HAPROXY_CFG.read_text()
    directives = [line.split("#")[0].strip() for line in config.splitlines()]
    assert "option httpchk" in directives
    assert any(line.startswith("http-check send meth GET uri /v1/health") for line in directives)
    assert "http-check expect status 200" in directives
    servers = {line.split()[1] for line in directives if line.startswith("server ")}
    web = {
        name for name, service in koinon_services().items() if "core.server" in service["command"]
    }
    assert servers == web and len(web) >= 2
    # Streams: nothing compressed (held back in a buffer), timeouts past a stream's
    # keep-alive gap and its whole life (KOINON_STREAM_TIMEOUT's default, 300 s).
    assert not any(line.startswith("compression") for line in directives)
    for timeout in ("timeout server", "timeout client", "timeout tunnel"):
        value = next(line.split()[2] for line in directives if line.startswith(timeout))
        seconds = int(value[:-1]) * {"s": 1, "m": 60, "h": 3600}[value[-1]]
        assert seconds > 300, timeout
    for name in web:
        assert "--proxy-headers" in koinon_services()[name]["command"], name
        assert "ports" not in koinon_services()[name], f"{name} must be reached through HAProxy"


def test_the_compose_cli_accepts_the_file_and_refuses_to_start_without_secrets():
    command = compose_command()
    if command is None:
        pytest.skip("no docker compose CLI here")

    def config(**extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*command, "-f", str(COMPOSE_FILE), "config", "--services"],
            capture_output=True,
            text=True,
            cwd=DEPLOY,
            timeout=60,
            env={"PATH": os.environ["PATH"], "HOME": str(ROOT), **extra},
        )

    result = config(**SECRETS)
    assert result.returncode == 0, result.stderr
    assert set(result.stdout.split()) == set(compose()["services"])
    for secret in SECRETS:
        refused = config(**{name: value for name, value in SECRETS.items() if name != secret})
        assert "is missing a value" in refused.stdout + refused.stderr, secret
