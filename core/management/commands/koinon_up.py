"""Run the whole product: embedded services, migrations, Celery workers and Daphne.

The terminal shows a line per step (core.startlog); the full output of every step and
child process goes to the data directory's log/koinon.log.
"""

import fcntl
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from io import StringIO
from pathlib import Path
from typing import IO

import psutil
import redis
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connections

from core.dbcheck import database_self_check, self_check_line
from core.embedded import RUNTIME_ROLE, EmbeddedPostgres, EmbeddedRedis
from core.health import documents_being_indexed
from core.processes import extraction_processes_default, terminate_tree
from core.startlog import StartLog, shown_path
from core.worker import redis_client, workers_alive_names

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
# Seconds before restarting a dead worker: doubling up to the maximum, back to the
# minimum once a worker has stayed up for RESTART_BACKOFF_RESET.
RESTART_BACKOFF_MIN = 1.0
RESTART_BACKOFF_MAX = 60.0
RESTART_BACKOFF_RESET = 60.0
DEMO_INDEXING_TIMEOUT = 300.0  # seconds koinon_up --demo waits for the demo to be searchable
# Restarted when they exit; anything else stops koinon. Hostnames as Celery names them.
WORKERS = {"celery": "koinon@", "celery-answers": "koinon-answers@"}


def worker_commands(*, concurrency: int, answer_concurrency: int) -> dict[str, list[str]]:
    """The two Celery workers: answers have processes of their own, so extractions and
    embeddings (minutes for a large upload) never delay a streamed answer (issue 27, item 4);
    extraction has `concurrency` processes, documents extracted side by side (issue 51,
    item 6). Keys are WORKERS' names."""
    worker = [sys.executable, "-m", "celery", "-A", "koinon", "--quiet", "worker"]
    return {
        "celery": [
            *worker,
            "--loglevel=INFO",
            f"--concurrency={max(1, concurrency)}",
            f"--hostname={WORKERS['celery']}%h",
            "--queues=celery",
        ],
        "celery-answers": [
            *worker,
            "--loglevel=INFO",
            f"--concurrency={max(1, answer_concurrency)}",
            f"--hostname={WORKERS['celery-answers']}%h",
            "--queues=answers",
        ],
    }


class Command(BaseCommand):
    help = "Start (or reuse) the embedded services, migrate, and run Celery and Daphne."
    # Some model checks need the database, which this command starts: check afterwards.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8000)
        parser.add_argument("--demo", action="store_true", help="load demo data if empty")
        parser.add_argument(
            "--concurrency",
            type=int,
            default=extraction_processes_default(),
            help="Celery processes for extraction, embedding and upkeep (queue `celery`); "
            "default: the cores this process may use, at most 8, so uploads extract side by side",
        )
        parser.add_argument(
            "--answer-concurrency",
            type=int,
            default=2,
            help="Celery processes that only execute streamed answers (queue `answers`): "
            "uploads never hold them",
        )
        parser.add_argument(
            "--web-processes",
            type=int,
            default=os.cpu_count() or 1,
            help="Daphne processes sharing one listening socket (default: the number of cores)",
        )

    def handle(
        self,
        *args: object,
        host: str,
        port: int,
        demo: bool,
        concurrency: int,
        web_processes: int,
        answer_concurrency: int = 2,
        **options: object,
    ) -> None:
        if not 1 <= web_processes <= 64:
            raise CommandError("--web-processes must be between 1 and 64")
        self._web_processes = web_processes
        run_dir = settings.DATA_DIR / "run"
        run_dir.mkdir(parents=True, exist_ok=True)
        lock = self._acquire_lock(run_dir / "koinon_up.lock")
        self._stopping = False
        for signum in STOP_SIGNALS:
            signal.signal(signum, self._request_stop)

        self.children: list[tuple[str, subprocess.Popen[bytes]]] = []
        postgres = (
            EmbeddedPostgres(settings.EMBEDDED_PG_DIR) if settings.EMBEDDED_POSTGRES else None
        )
        # Not `redis`: that is the client library, which the health wait uses.
        redis_server = (
            EmbeddedRedis(settings.EMBEDDED_REDIS_DIR) if settings.EMBEDDED_REDIS else None
        )
        exit_code = 0
        self._log = StartLog(settings.DATA_DIR, self.stdout)
        self._say(f"full log: {shown_path(self._log.path)}")
        try:
            with self._log.logging_to_file():
                self._stop_stale_children(run_dir)
                self._check_port_free(host, port)
                self._start_services(postgres, redis_server)
                self._migrate(postgres)
                if demo:
                    out = StringIO()
                    call_command("loaddemo", if_empty=True, stdout=out)
                    self._say(out.getvalue().strip())
                if postgres is not None:
                    postgres.ensure_runtime_role(database=settings.DATABASES["default"]["NAME"])
                    self._note(f"runtime role {RUNTIME_ROLE} granted")
                self._log_key = self._ensure_log_key()
                connections.close_all()
                self._start_children(run_dir, host, port, concurrency, answer_concurrency)
                self._wait_until_healthy(host, port)
                if demo:
                    self._wait_until_searchable()
                base = f"http://{host}:{port}"
                self._say(f"koinon is up: {base}/  API {base}/v1/  health {base}/v1/health")
                self._say(f"admin {base}/admin/  API docs {base}/v1/schema/docs/  (Ctrl-C stops)")
                exit_code = self._supervise()
        finally:
            if self.children:
                self._say("stopping (the workers finish the task in hand)")
            with self._log.logging_to_file():
                self._stop_children(run_dir)
                if redis_server is not None:
                    redis_server.stop()
                if postgres is not None:
                    connections.close_all()
                    postgres.stop()
            self._say("koinon stopped")
            self._log.close()
            lock.close()
        if exit_code:
            raise CommandError(
                f"a koinon process exited unexpectedly; see {shown_path(self._log.path)}"
            )

    # --- steps ---------------------------------------------------------------------

    def _start_services(
        self, postgres: EmbeddedPostgres | None, redis_server: EmbeddedRedis | None
    ) -> None:
        said = []
        if postgres is not None:
            reused = not postgres.start()
            postgres.ensure_database(settings.DATABASES["default"]["NAME"])
            said.append(f"PostgreSQL (embedded) {'reused' if reused else 'started'}")
            for update in postgres.update_extensions(settings.DATABASES["default"]["NAME"]):
                self._note(f"extension updated: {update}")
        if redis_server is not None:
            reused = not redis_server.start()
            said.append(f"Redis (embedded) {'reused' if reused else 'started'}")
        self._say(f"database: {', '.join(said) or 'configured servers'}")

    def _migrate(self, postgres: EmbeddedPostgres | None) -> None:
        """Checks, migrations, the database self-check and static files; what the commands
        print goes to the log."""
        output = self._log.stream
        call_command("check", stdout=output, stderr=output)
        call_command("migrate", interactive=False, verbosity=1, stdout=output, stderr=output)
        self._say("migrations: database migrated")
        self._check_database(postgres)
        call_command("collectstatic", interactive=False, verbosity=1, stdout=output, stderr=output)

    def _ensure_log_key(self) -> str:
        """The answer log's key file: KOINON_LOG_KEY_FILE, or else one under the data
        directory, created on first use (`manage.py log key`), for local use only. Says
        which, with the public key; never the private one."""
        path = settings.DATA_DIR / "log.key"
        if settings.KOINON_LOG_KEY_FILE and Path(settings.KOINON_LOG_KEY_FILE) != path:
            self._note("answer log key: KOINON_LOG_KEY_FILE")
            return settings.KOINON_LOG_KEY_FILE
        out = StringIO()
        call_command("log", "key", str(path), stdout=out)
        self._say(
            f"answer log key (local use; set KOINON_LOG_KEY_FILE to your own): "
            f"{path.name} in the data directory, {out.getvalue().strip()}"
        )
        return str(path)

    def _check_database(self, postgres: EmbeddedPostgres | None) -> None:
        """Refuse to start on a database that cannot do what koinon needs (core.dbcheck):
        before the demo data is embedded and before anything serves a user."""
        failures = database_self_check(
            connection=connections["default"],
            server_log=postgres.log_file if postgres is not None else None,
        )
        if failures:
            raise CommandError(self_check_line(failures))
        self._say("database self-check passed (vectors, HNSW, trigrams, full text)")

    def _say(self, message: str) -> None:
        """A progress line: the terminal and the log."""
        self._log.progress(message)

    def _note(self, message: str) -> None:
        """A detail: the log only."""
        self._log.note(message)

    def _acquire_lock(self, path: Path) -> IO[str]:
        handle = path.open("a+")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "unknown"
            handle.close()
            raise CommandError(
                f"koinon is already running on this data directory (pid {holder}); "
                "stop it first or set KOINON_DATA_DIR to another directory"
            ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(str(os.getpid()))
        handle.flush()
        return handle

    def _request_stop(self, signum: int, frame: object) -> None:
        self._stopping = True

    def _check_port_free(self, host: str, port: int) -> None:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind((host, port))
            except OSError:
                raise CommandError(
                    f"port {port} on {host} is in use; choose another with --port"
                ) from None

    def _stop_stale_children(self, run_dir: Path) -> None:
        """Children of a koinon_up that was killed outright keep running: end them."""
        for pidfile in run_dir.glob("*.pid"):
            try:
                pid = int(pidfile.read_text())
                process = psutil.Process(pid)
                command = " ".join(process.cmdline())
                if "koinon" in command or "core.llm_server" in command:
                    self._note(f"stopping a leftover {pidfile.stem} process ({pid})")
                    terminate_tree(pid)
            except (ValueError, psutil.NoSuchProcess, psutil.AccessDenied):
                pass
            pidfile.unlink(missing_ok=True)

    def _start_children(
        self, run_dir: Path, host: str, port: int, concurrency: int, answer_concurrency: int
    ) -> None:
        env = dict(os.environ)
        env["DJANGO_SETTINGS_MODULE"] = os.environ.get("DJANGO_SETTINGS_MODULE", "koinon.settings")
        env["KOINON_LOG_KEY_FILE"] = self._log_key
        if settings.EMBEDDED_POSTGRES:
            # Migrations ran as the owner; the processes serving users own nothing.
            env["KOINON_DATABASE_USER"] = RUNTIME_ROLE
        self._env, self._run_dir = env, run_dir
        # One listening socket for every web process: each Daphne accepts on the same
        # file descriptor, so one port serves them all and the kernel spreads connections.
        self._listener = socket.create_server((host, port), backlog=2048)
        self._listener.set_inheritable(True)
        fd = self._listener.fileno()
        self._commands: dict[str, list[str]] = {}
        if settings.KOINON_LLM_GGUF:
            self._start_model_server(env)
        self._commands |= worker_commands(
            concurrency=concurrency, answer_concurrency=answer_concurrency
        )
        for number in range(1, self._web_processes + 1):
            self._commands[f"daphne-{number}"] = [
                sys.executable,
                "-m",
                "core.server",
                "--fd",
                str(fd),
                "koinon.asgi:application",
            ]
        for name in self._commands:
            if name != "llm":
                self.children.append((name, self._start_child(name)))
        self._say(
            f"workers: {max(1, concurrency)} extraction process(es), "
            f"{max(1, answer_concurrency)} answer process(es) of their own"
        )
        self._say(f"web: {self._web_processes} process(es) on {host}:{port}")

    def _start_model_server(self, env: dict[str, str]) -> None:
        """The embedded local model (`KOINON_LLM_GGUF`): llama.cpp's OpenAI-compatible server
        (core.llm_server) on a free loopback port; Daphne and Celery use it as the `openai`
        provider. Started and healthy before them, stopped after them."""
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        self._commands["llm"] = [
            sys.executable,
            "-m",
            "core.llm_server",
            "--model",
            settings.KOINON_LLM_GGUF,
            "--port",
            str(port),
            "--threads",
            str(settings.KOINON_LLM_THREADS),
            "--context",
            str(settings.KOINON_LLM_CONTEXT),
        ]
        process = self._start_child("llm")
        self.children.append(("llm", process))
        deadline = time.monotonic() + 300
        while not self._stopping:
            if process.poll() is not None:
                raise CommandError(
                    f"the model server exited during start-up ({process.returncode})"
                )
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise CommandError("the model server did not become healthy within 300 s")
            time.sleep(0.5)
        env.pop("KOINON_LLM_GGUF", None)
        env["KOINON_MODEL_PROVIDER"] = "openai"
        env["KOINON_LLM_BASE_URL"] = f"http://127.0.0.1:{port}/v1"
        env["KOINON_LLM_MODEL"] = "local"
        self._say("model server (embedded llama.cpp) is serving on a loopback port")

    def _start_child(self, name: str) -> subprocess.Popen[bytes]:
        # A session of its own: a terminal's Ctrl-C reaches only us, and we stop the
        # children in order. Their whole output goes to the log; llama.cpp's (every request,
        # the model file's path) to a file of its own beside it.
        own = self._log.path.with_name("llm.log").open("ab") if name == "llm" else None
        process = subprocess.Popen(  # noqa: S603 - our own interpreter and arguments
            self._commands[name],
            env=self._env,
            cwd=settings.BASE_DIR,
            start_new_session=True,
            pass_fds=(self._listener.fileno(),) if name.startswith("daphne") else (),
            stdin=subprocess.DEVNULL,
            stdout=own if own is not None else self._log.stream,
            stderr=subprocess.STDOUT,
        )
        if own is not None:
            own.close()  # the child holds its own copy
        (self._run_dir / f"{name}.pid").write_text(str(process.pid))
        self._note(f"{name} started (pid {process.pid})")
        return process

    def _wait_until_healthy(self, host: str, port: int, timeout: float = 90) -> None:
        """Health is asked once every worker heartbeats: asked earlier it answers 503,
        which the web process logs as an error, on every start."""
        url = f"http://{host}:{port}/v1/health"
        deadline = time.monotonic() + timeout
        client = redis_client()
        try:
            while time.monotonic() < deadline and not self._stopping:
                self._check_children_alive()
                if self._workers_beating(client):
                    try:
                        with urllib.request.urlopen(url, timeout=5) as response:
                            if response.status == 200:
                                return
                    except OSError:
                        pass
                time.sleep(0.3)
        finally:
            client.close()
        if not self._stopping:
            self._say(f"warning: {url} did not report healthy within {timeout:.0f}s")

    def _check_children_alive(self) -> None:
        for name, process in self.children:
            if process.poll() is not None:
                raise CommandError(
                    f"{name} exited during start-up (code {process.returncode}); "
                    f"see {shown_path(self._log.path)}"
                )

    def _workers_beating(self, client: redis.Redis) -> bool:
        """Whether each worker started here writes its heartbeat (core.worker)."""
        started = {WORKERS[name] for name, _ in self.children if name in WORKERS}
        try:
            beating = workers_alive_names(client)
        except redis.RedisError:
            return False
        return all(any(name.startswith(prefix) for name in beating) for prefix in started)

    def _wait_until_searchable(self, timeout: float = DEMO_INDEXING_TIMEOUT) -> None:
        """--demo: the URLs are printed once every document is searchable by both channels
        (extracted, every passage with its vector), so the first question after `make run`
        is answered from the whole demo. Says how many are left meanwhile; after `timeout`
        it goes on with a warning (answers say which channel is still catching up)."""
        deadline = time.monotonic() + timeout
        said = None
        while not self._stopping:
            for name, process in self.children:
                if process.poll() is not None and name not in WORKERS:
                    raise CommandError(f"{name} exited during start-up (code {process.returncode})")
            left = documents_being_indexed.call()
            connections.close_all()  # not held while the worker writes
            if not left:
                if said is not None:
                    self._say("demo data indexed: searchable by keyword and semantic search")
                return
            if left != said:
                self._say(f"demo data: indexing, {left} document(s) left")
                said = left
            if time.monotonic() > deadline:
                self._say(
                    f"warning: {left} document(s) still being indexed after {timeout:.0f}s; "
                    "answers say so until they are searchable"
                )
                return
            time.sleep(0.5)

    def _supervise(self) -> int:
        """Wait for a stop signal. A worker that dies is restarted with backoff (answers
        need no worker, and its lost work is recovered by the sweeper); Daphne exiting
        stops koinon."""
        backoff: dict[str, float] = {}
        restart_at: dict[str, float] = {}
        worker_started: dict[str, float] = {}
        while not self._stopping:
            for index, (name, process) in enumerate(self.children):
                if process.poll() is None:
                    continue
                if name not in WORKERS:
                    self._say(f"{name} exited (code {process.returncode}); stopping koinon")
                    return 1
                if name not in restart_at:
                    since = time.monotonic() - worker_started.get(name, 0.0)
                    if since > RESTART_BACKOFF_RESET:
                        backoff[name] = RESTART_BACKOFF_MIN
                    wait = backoff.setdefault(name, RESTART_BACKOFF_MIN)
                    self._say(
                        f"{name} exited (code {process.returncode}); restarting it in "
                        f"{wait:.0f}s, the web server keeps serving"
                    )
                    restart_at[name] = time.monotonic() + wait
                    backoff[name] = min(wait * 2, RESTART_BACKOFF_MAX)
                elif time.monotonic() >= restart_at[name]:
                    self.children[index] = (name, self._start_child(name))
                    del restart_at[name]
                    worker_started[name] = time.monotonic()
            time.sleep(0.3)
        return 0

    def _stop_children(self, run_dir: Path) -> None:
        for name, process in reversed(self.children):
            if process.poll() is None:
                self._note(f"stopping {name}")
                terminate_tree(process.pid)
            process.wait()
            (run_dir / f"{name}.pid").unlink(missing_ok=True)
        listener = getattr(self, "_listener", None)
        if listener is not None:
            listener.close()
