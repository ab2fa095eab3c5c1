"""`manage.py koinon_up` end to end: its own data directory, real processes."""

import os
import signal
import subprocess
import sys
import time
import uuid

import httpx
import psutil
import pytest
from django.conf import settings

from core.embedded import remove_data_directory
from core.processes import extraction_processes_default
from core.startlog import shown_path
from tests.services import ROOT, free_port, stop_process

pytestmark = pytest.mark.slow


def up_env(data_dir) -> dict[str, str]:
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in {"DATABASE_URL", "REDIS_URL", "KOINON_DATABASE_NAME", "CELERY_BROKER_URL"}
    }
    env.update(
        DJANGO_SETTINGS_MODULE="koinon.settings",
        KOINON_DATA_DIR=str(data_dir),
        PYTHONUNBUFFERED="1",
    )
    return env


def start_up(
    data_dir, port: int, log, web_processes: int = 1, concurrency: int | None = 1
) -> subprocess.Popen:
    """koinon_up --demo; `concurrency` None leaves the extraction processes at the default."""
    extraction = [] if concurrency is None else ["--concurrency", str(concurrency)]
    return subprocess.Popen(
        [
            sys.executable,
            "manage.py",
            "koinon_up",
            "--port",
            str(port),
            "--demo",
            *extraction,
            "--web-processes",
            str(web_processes),
        ],
        cwd=ROOT,
        env=up_env(data_dir),
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def wait_healthy(url: str, process: subprocess.Popen, timeout: float = 150) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert process.poll() is None, "koinon_up exited during start-up"
        try:
            response = httpx.get(f"{url}/v1/health", timeout=5)
            if response.status_code == 200:
                return response.json()
        except httpx.TransportError:
            pass
        time.sleep(0.5)
    raise AssertionError("koinon_up did not become healthy")


def processes_using(data_dir) -> list[psutil.Process]:
    """Every live process whose command line or working files name the data directory."""
    found = []
    marker = str(data_dir)
    for process in psutil.process_iter(["cmdline", "status"]):
        if process.info["status"] == psutil.STATUS_ZOMBIE:
            continue
        cmdline = " ".join(process.info["cmdline"] or [])
        if marker in cmdline:
            found.append(process)
    return found


def children_named_in_pidfiles(data_dir) -> list[int]:
    return [int(path.read_text()) for path in (data_dir / "run").glob("*.pid")]


@pytest.fixture
def up_data_dir():
    # Under var/ (short, traversable by the postgres system user), not the dev data.
    path = settings.BASE_DIR / "var" / f"up-{uuid.uuid4().hex[:8]}"
    yield path
    for process in processes_using(path):
        process.kill()
    remove_data_directory(path)


def test_koinon_up_serves_refuses_a_second_copy_and_stops_cleanly(up_data_dir):
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log_path = up_data_dir.parent / f"{up_data_dir.name}.log"
    up_data_dir.mkdir(parents=True)
    with log_path.open("w") as log:
        first = start_up(up_data_dir, port, log, web_processes=2, concurrency=None)
        try:
            # Health once koinon_up says it is up: asked earlier, it answers 503 (no worker
            # heartbeat yet), which the web process logs as an error.
            wait_said(log_path, "koinon is up", first)
            health = wait_healthy(url, first)
            assert {name: part["status"] for name, part in health["components"].items()} == {
                "database": "ok",
                "vector": "ok",
                "redis": "ok",
                "celery": "ok",
                "extractions": "ok",
                "embeddings": "ok",
                "runs": "ok",
                "answer_log": "ok",
                "database_pool": "ok",
            }
            # No KOINON_LOG_KEY_FILE: a key for local use, created under the data directory
            # and announced by its public half only.
            key = (up_data_dir / "log.key").read_text()
            assert (up_data_dir / "log.key").stat().st_mode & 0o777 == 0o600
            said = log_path.read_text()
            assert "answer log key (local use" in said and key.strip() not in said
            # Answers have worker processes of their own (issue 27, item 4); extraction has
            # one per available core, up to 8, to extract side by side (issue 51, item 6).
            queues = {}
            for name in ("celery", "celery-answers"):
                pid = int((up_data_dir / "run" / f"{name}.pid").read_text())
                queues[name] = [
                    a
                    for a in psutil.Process(pid).cmdline()
                    if a.startswith(("--queues", "--concurrency"))
                ]
            assert queues == {
                "celery": [f"--concurrency={extraction_processes_default()}", "--queues=celery"],
                "celery-answers": ["--concurrency=2", "--queues=answers"],
            }
            children = children_named_in_pidfiles(up_data_dir)
            postmaster = int((up_data_dir / "pg" / "postmaster.pid").read_text().split()[0])
            # Two web processes accept on the one listening socket of the port.
            webs = [int((up_data_dir / "run" / f"daphne-{n}.pid").read_text()) for n in (1, 2)]
            for pid in webs:
                sockets = psutil.Process(pid).net_connections(kind="tcp")
                listening = [
                    c for c in sockets if c.status == psutil.CONN_LISTEN and c.laddr.port == port
                ]
                assert listening, f"web process {pid} does not listen on {port}"
            served = {httpx.get(f"{url}/v1/health", timeout=10).status_code for _ in range(6)}
            assert served == {200}

            second = subprocess.run(
                [sys.executable, "manage.py", "koinon_up", "--port", str(free_port())],
                cwd=ROOT,
                env=up_env(up_data_dir),
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert second.returncode != 0
            assert "already running on this data directory" in second.stderr
            assert "Traceback" not in second.stderr
            postmasters = [
                p for p in processes_using(up_data_dir) if p.name() == "postgres" and p.ppid() == 1
            ]
            assert int((up_data_dir / "pg" / "postmaster.pid").read_text().split()[0]) == postmaster
            assert len({p.pid for p in postmasters}) <= 1

            first.send_signal(signal.SIGTERM)
            assert first.wait(timeout=90) == 0
        finally:
            stop_process(first)
    output = log_path.read_text()
    log_path.unlink()
    assert "koinon stopped" in output
    assert processes_using(up_data_dir) == []
    # A short progress on the terminal, the whole output in the data directory's log/
    # (issue 51, item 6); a healthy start logs no traceback and no error, in either.
    full = (up_data_dir / "log" / "koinon.log").read_text()
    assert output.splitlines()[0] == f"full log: {shown_path(up_data_dir / 'log' / 'koinon.log')}"
    steps = [line.split(":")[0] for line in output.splitlines()]
    for step in ("database", "migrations", "demo data", "workers", "web", "koinon is up"):
        assert step in steps, step
    assert len(output.splitlines()) <= 20, output
    assert "started (pid" not in output and "started (pid" in full
    assert "koinon@" not in output and "koinon@" in full  # the workers' own output
    assert "initialising embedded PostgreSQL" in full
    for text in (output, full):
        assert "Traceback" not in text
        assert not [line for line in text.splitlines() if " ERROR " in line or "ERROR/" in line]
    assert not any(
        psutil.pid_exists(pid) and psutil.Process(pid).status() != "zombie"
        for pid in [*children, postmaster]
    )

    # A second run reuses the data: no new cluster, the demo data is already there.
    with log_path.open("w") as log:
        again = start_up(up_data_dir, port, log)
        try:
            wait_healthy(url, again)
            again.send_signal(signal.SIGINT)
            assert again.wait(timeout=90) == 0
        finally:
            stop_process(again)
    output = log_path.read_text()
    log_path.unlink()
    assert "initialising embedded PostgreSQL" not in output
    assert "demo data: skipped" in output
    assert processes_using(up_data_dir) == []


def test_koinon_up_refuses_a_port_in_use(up_data_dir):
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = subprocess.run(
            [sys.executable, "manage.py", "koinon_up", "--port", str(port)],
            cwd=ROOT,
            env=up_env(up_data_dir),
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert result.returncode != 0
    assert f"port {port}" in result.stderr and "in use" in result.stderr
    assert processes_using(up_data_dir) == []


# What a pgvector built for AVX-512 does on a CPU without it (issue 46): the backend that
# computes a vector distance dies of signal 4. Here it sends the signal to itself, through a
# shell whose parent it is (COPY TO PROGRAM), so the server logs what it logs on such a CPU.
DISTANCE_DIES_OF_SIGILL = """
CREATE OR REPLACE FUNCTION l2_distance(vector, vector) RETURNS float8 LANGUAGE plpgsql AS
$body$ BEGIN COPY (SELECT 1) TO PROGRAM 'kill -ILL $PPID'; PERFORM pg_sleep(30); RETURN 0; END
$body$
"""


def test_koinon_up_refuses_a_database_that_dies_at_the_first_vector_distance(up_data_dir):
    from core.embedded import EmbeddedPostgres

    postgres = EmbeddedPostgres(up_data_dir / "pg")
    postgres.start()
    try:
        postgres.ensure_database("koinon")
        with postgres.connect("koinon", autocommit=True) as owner:
            owner.execute("CREATE EXTENSION vector")
            owner.execute(DISTANCE_DIES_OF_SIGILL)
        result = subprocess.run(
            [sys.executable, "manage.py", "koinon_up", "--port", str(free_port()), "--demo"],
            cwd=ROOT,
            env=up_env(up_data_dir),
            capture_output=True,
            text=True,
            timeout=300,
        )
    finally:
        postgres.stop()
    assert result.returncode != 0
    # One line: what failed, the likely cause, the remedy; no traceback.
    assert result.stderr.strip().splitlines() == [
        "CommandError: database self-check failed: the database process died while "
        "computing a vector distance (signal 4: Illegal instruction): the CPU lacks an "
        "instruction set this PostgreSQL build needs (e.g. AVX-512); remedy: run a PostgreSQL "
        "with a pgvector build made for this CPU (set DATABASE_URL to such a server, or install "
        "an embedded PostgreSQL package built for this machine)"
    ]
    # Stopped before the demo data was embedded and before anything served a user.
    assert "database migrated" in result.stdout
    assert "demo data" not in result.stdout and "started (pid" not in result.stdout
    assert "koinon stopped" in result.stdout
    assert processes_using(up_data_dir) == []


def test_a_killed_worker_is_restarted_while_daphne_keeps_serving(up_data_dir):
    from celery import Celery

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log_path = up_data_dir.parent / f"{up_data_dir.name}.log"
    up_data_dir.mkdir(parents=True)
    pool_children: list[psutil.Process] = []
    broker = f"redis+socket://{up_data_dir / 'redis' / 'redis.sock'}"
    probe = Celery("probe", broker=broker, backend=broker, set_as_current=False)
    with log_path.open("w") as log:
        up = start_up(up_data_dir, port, log)
        try:
            wait_healthy(url, up)
            # koinon_up itself has finished starting (it polls health on its own).
            deadline = time.monotonic() + 60
            while "koinon is up" not in log_path.read_text():
                assert time.monotonic() < deadline, "koinon_up did not finish starting"
                time.sleep(0.2)
            # --demo: the URLs came once the demo was searchable by both channels (issue 46).
            from core.embedded import EmbeddedPostgres

            with EmbeddedPostgres(up_data_dir / "pg").connect("koinon") as database:
                passages, waiting = database.execute(
                    "SELECT count(*), count(*) FILTER (WHERE embedding_status <> 'embedded') "
                    "FROM knowledge_passage"
                ).fetchone()
            assert passages > 0 and waiting == 0
            pidfile = up_data_dir / "run" / "celery.pid"
            worker = psutil.Process(int(pidfile.read_text()))
            pool_children = worker.children(recursive=True)
            beating = heartbeats(up_data_dir)
            (killed,) = {name for name in beating if name.startswith("koinon@")}
            worker.kill()  # SIGKILL, as the review did

            deadline = time.monotonic() + 120
            while int(pidfile.read_text()) == worker.pid or not wait_quietly(url):
                assert up.poll() is None, "koinon_up stopped with the worker"
                # Daphne answers all along (503 while no worker has a heartbeat).
                assert httpx.get(f"{url}/v1/health", timeout=5).status_code in {200, 503}
                assert time.monotonic() < deadline, "the worker was not restarted"
                time.sleep(0.5)
            # Started again under the same hostname, it heartbeats under a new name, so what
            # the killed process had claimed is lost to the sweeper (issue 48, item 3).
            deadline = time.monotonic() + 60
            while not (started := {n for n in heartbeats(up_data_dir) - beating if "@" in n}):
                assert time.monotonic() < deadline, "the new worker wrote no heartbeat"
                time.sleep(0.5)
            (restarted,) = started
            assert restarted.split("#")[0] == killed.split("#")[0] and restarted != killed
            # The new worker serves tasks, connected as the role that owns nothing.
            answer = probe.send_task("knowledge.worker_probe", args=["after-restart"]).get(
                timeout=60
            )
            assert answer["role"] == "koinon_app"

            up.send_signal(signal.SIGTERM)
            assert up.wait(timeout=90) == 0
        finally:
            stop_process(up)
            probe.close()
            for child in pool_children:
                if child.is_running():
                    child.kill()
    output = log_path.read_text()
    log_path.unlink()
    assert "celery exited" in output and "restarting it in" in output
    assert processes_using(up_data_dir) == []


def wait_said(log_path, text: str, process: subprocess.Popen, timeout: float = 150) -> None:
    """Wait until koinon_up has printed `text` (it polls health on its own)."""
    deadline = time.monotonic() + timeout
    while text not in log_path.read_text():
        assert process.poll() is None, "koinon_up exited during start-up"
        assert time.monotonic() < deadline, f"koinon_up did not say {text!r}"
        time.sleep(0.2)


def heartbeats(data_dir) -> set[str]:
    """The claim names of the workers heartbeating in koinon_up's embedded Redis."""
    import redis

    from core.worker import HEARTBEAT_PREFIX

    client = redis.Redis(unix_socket_path=str(data_dir / "redis" / "redis.sock"))
    try:
        keys = client.scan_iter(match=f"{HEARTBEAT_PREFIX}*")
        return {key.decode().removeprefix(HEARTBEAT_PREFIX) for key in keys}
    finally:
        client.close()


def wait_quietly(url: str) -> bool:
    try:
        return httpx.get(f"{url}/v1/health", timeout=5).status_code == 200
    except httpx.TransportError:
        return False


def test_koinon_up_serves_the_embedded_model_and_stops_it(up_data_dir):
    """KOINON_LLM_GGUF: the model server starts first, the provider points at it, health
    reports it, and it stops with the rest."""
    from core.llm_server import packaged_smollm2

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log_path = up_data_dir.parent / f"{up_data_dir.name}.log"
    up_data_dir.mkdir(parents=True)
    env = {**up_env(up_data_dir), "KOINON_LLM_GGUF": str(packaged_smollm2())}
    with log_path.open("w") as log:
        process = subprocess.Popen(
            [sys.executable, "manage.py", "koinon_up", "--port", str(port), "--concurrency", "1"],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            health = wait_healthy(url, process, timeout=240)
            assert health["components"]["model"] == {"status": "ok", "detail": "reachable"}
            model_pid = int((up_data_dir / "run" / "llm.pid").read_text())
            assert "core.llm_server" in " ".join(psutil.Process(model_pid).cmdline())
            process.send_signal(signal.SIGTERM)
            assert process.wait(timeout=90) == 0
        finally:
            stop_process(process)
    output = log_path.read_text()
    log_path.unlink()
    assert "model server (embedded llama.cpp) is serving" in output
    assert str(packaged_smollm2()) not in output  # no machine path in what koinon prints
    # llama.cpp's own output (every request, the model's path) in a log of its own.
    assert str(packaged_smollm2()) not in (up_data_dir / "log" / "koinon.log").read_text()
    assert (up_data_dir / "log" / "llm.log").exists()
    assert not (psutil.pid_exists(model_pid) and psutil.Process(model_pid).status() != "zombie")
