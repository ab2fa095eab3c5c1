"""Concurrent SSE answer streams against one Daphne process (issue 11).

One Daphne process (`python -m core.server`, as `koinon_up` runs it) on the bench's own
embedded PostgreSQL and Redis under var/bench-streams, loaded with the demo corpus, and a
Celery worker (queue `answers`). Loopback only. In one run:

1. Baseline: `stream=false` answers (the run executes inside the request), one at a time
   and at concurrency 16: latency p50/p95.
2. For each N (default 10, 100, 1000; at most 1000): N `POST /v1/answer` with
   `stream=true`, opened at RATE per second, while the worker is held back, so that all N
   are open at once (the runs wait in the queue, as they do behind a busy worker). First
   event per stream: request sent → its `started` event read (`started` is stored with
   the run, so it needs no worker). Daphne's resident memory with none and with N open
   gives the memory per open stream. Then the worker starts and drains the N runs; each
   stream gets its live tool events and its sealed `completed`: completion time is
   request sent → `completed`, dominated by the worker's backlog, printed for
   completeness. Errors: a status other than 200, a stream ending without `completed`, a
   transport error.

Goal (issue 11): 1,000 open streams on one process, first event p95 ≤ 50 ms, 0 errors.

Run: .venv/bin/python bench/streams.py [--sizes 10,100,1000] [--rate 50] [--quick]
"""

import argparse
import asyncio
import logging
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from common.bootstrap import ROOT, django_setup

BENCH_DIR = ROOT / "var" / "bench-streams"
django_setup(BENCH_DIR, KOINON_MODEL_PROVIDER="extractive")
from common.services import embedded_services, recreate_database  # noqa: E402
from common.stats import percentile  # noqa: E402
from django.core.management import call_command  # noqa: E402

from core.processes import terminate_tree  # noqa: E402
from core.services import api_key_create  # noqa: E402

QUESTION = "Who owns service reviews?"
MAX_STREAMS = 1000
RATE = 50.0  # streams opened per second
WORKER_CONCURRENCY = 2
BASELINE = 50  # stream=false answers per concurrency level
LOG_DIR = BENCH_DIR / "logs"


def child_env() -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        DJANGO_SETTINGS_MODULE="koinon.settings",
        KOINON_DATA_DIR=str(BENCH_DIR),
        KOINON_MODEL_PROVIDER="extractive",
        PYTHONUNBUFFERED="1",
    )
    return env


def start(name: str, command: list[str], **popen: object) -> subprocess.Popen:
    LOG_DIR.mkdir(parents=True, exist_ok=True)
    log = (LOG_DIR / f"{name}.log").open("w")
    return subprocess.Popen(  # noqa: S603 - our own interpreter and arguments
        command,
        env=child_env(),
        cwd=ROOT,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        **popen,
    )


def free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_healthy(url: str, process: subprocess.Popen, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"Daphne exited; see {LOG_DIR / 'daphne.log'}")
        try:
            if httpx.get(f"{url}/v1/health", timeout=5).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.5)
    raise SystemExit("Daphne did not become healthy")


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def demo_ready(url: str, key: str, timeout: float = 180) -> None:
    """Wait until the demo corpus answers the question (its extraction ran in the worker)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        headers = {"Authorization": f"Bearer {key}"}
        body = httpx.post(
            f"{url}/v1/answer", json={"query": QUESTION}, headers=headers, timeout=60
        ).json()
        if body.get("evidence", {}).get("answer_status") == "evidence_backed":
            return
        time.sleep(1)
    raise SystemExit("the demo corpus never answered the question")


# --- measurements ----------------------------------------------------------------------


def row(name: str, values: list[float]) -> str:
    if not values:
        return f"{name:<34} {0:>5} {'-':>8} {'-':>8} {'-':>8}"
    return (
        f"{name:<34} {len(values):>5} {statistics.median(values):>8.1f} "
        f"{percentile(values, 0.95):>8.1f} {max(values):>8.1f}"
    )


async def answers_load(
    url: str, key: str, concurrency: int, requests: int = BASELINE, keepalive: bool = True
) -> tuple[list[float], int, float]:
    """`requests` stream=false answers at `concurrency`: timings (ms), errors (not 200 or
    no release), and the seconds they took in all. bench/web.py uses it too (without
    keep-alive: a connection kept open stays with the process that accepted it)."""
    headers = {"Authorization": f"Bearer {key}"}
    gate = asyncio.Semaphore(concurrency)
    timings: list[float] = []
    errors = 0

    async def one(client: httpx.AsyncClient) -> None:
        nonlocal errors
        async with gate:
            started = time.perf_counter()
            try:
                response = await client.post(
                    f"{url}/v1/answer", json={"query": QUESTION}, headers=headers
                )
                ok = response.status_code == 200 and response.json().get("release") is not None
            except httpx.HTTPError:
                ok = False
            timings.append((time.perf_counter() - started) * 1000)
            errors += not ok

    limits = httpx.Limits(
        max_connections=concurrency, max_keepalive_connections=concurrency if keepalive else 0
    )
    started = time.perf_counter()
    async with httpx.AsyncClient(timeout=120, limits=limits) as client:
        await asyncio.gather(*(one(client) for _ in range(requests)))
    return timings, errors, time.perf_counter() - started


@dataclass
class Streams:
    first: list[float] = field(default_factory=list)
    completed: list[float] = field(default_factory=list)
    errors: int = 0
    open_now: int = 0
    peak_open: int = 0
    open_rss_kib: int = 0  # Daphne's RSS with all streams open, before the worker starts


async def streams(
    url: str, key: str, count: int, rate: float, daphne_pid: int, worker_start
) -> Streams:
    headers = {"Authorization": f"Bearer {key}", "Accept": "text/event-stream"}
    body = {"query": QUESTION, "stream": True, "stream_version": "1"}
    result = Streams()
    all_open = asyncio.Event()

    async def one(client: httpx.AsyncClient, delay: float) -> None:
        await asyncio.sleep(delay)
        started = time.perf_counter()
        seen_first = False
        try:
            async with client.stream(
                "POST", f"{url}/v1/answer", json=body, headers=headers
            ) as response:
                if response.status_code != 200:
                    result.errors += 1
                    return
                async for line in response.aiter_lines():
                    if not line.startswith("event: "):
                        continue
                    if not seen_first:
                        seen_first = True
                        result.first.append((time.perf_counter() - started) * 1000)
                        result.open_now += 1
                        result.peak_open = max(result.peak_open, result.open_now)
                        if result.peak_open == count:
                            all_open.set()
                    event = line.removeprefix("event: ")
                    if event in ("completed", "failed", "timeout", "error"):
                        if event == "completed":
                            result.completed.append((time.perf_counter() - started) * 1000)
                        else:
                            result.errors += 1
                        return
                result.errors += 1  # ended without a final event
        except httpx.HTTPError:
            result.errors += 1
        finally:
            result.open_now -= seen_first
            if not seen_first and result.peak_open + result.errors >= count:
                all_open.set()  # nobody left to wait for

    async def release_worker() -> None:
        await all_open.wait()
        await asyncio.sleep(0.5)  # settled: then the memory of N open streams
        result.open_rss_kib = rss_kib(daphne_pid)
        await asyncio.to_thread(worker_start)

    limits = httpx.Limits(max_connections=count + 8, max_keepalive_connections=0)
    timeout = httpx.Timeout(60, connect=60)  # a stream sends a keep-alive every 15 s
    async with httpx.AsyncClient(timeout=timeout, limits=limits) as client:
        releaser = asyncio.create_task(release_worker())
        await asyncio.gather(*(one(client, index / rate) for index in range(count)))
        await releaser
    return result


def start_worker() -> subprocess.Popen:
    from koinon.celery import app

    worker = start(
        "celery",
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "koinon",
            "--quiet",
            "worker",
            "--loglevel=WARNING",
            "--queues=celery,answers",
            f"--concurrency={WORKER_CONCURRENCY}",
            "--hostname=bench-streams@%h",
        ],
    )
    deadline = time.monotonic() + 60
    while not app.control.ping(timeout=0.5):
        if worker.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"the Celery worker did not start; see {LOG_DIR / 'celery.log'}")
    return worker


def stop(process: subprocess.Popen | None) -> None:
    if process is not None and process.poll() is None:
        terminate_tree(process.pid, timeout=20)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10,100,1000")
    parser.add_argument("--rate", type=float, default=RATE, help="streams opened per second")
    parser.add_argument("--quick", action="store_true", help="sizes 10 and 100")
    args = parser.parse_args()
    sizes = [10, 100] if args.quick else [int(s) for s in args.sizes.split(",")]
    if any(not 0 < size <= MAX_STREAMS for size in sizes):
        raise SystemExit(f"sizes must be 1..{MAX_STREAMS}")
    logging.getLogger("httpx").setLevel(logging.WARNING)

    with embedded_services(BENCH_DIR) as postgres:
        recreate_database(postgres, clear_media=True)
        from koinon.celery import app

        app.control.purge()  # tasks of an earlier run name runs that no longer exist
        call_command("loaddemo", verbosity=0)
        from django.contrib.auth import get_user_model
        from django.db import connections

        reader = get_user_model().objects.get(username="reader")
        key = api_key_create(user=reader).secret
        connections.close_all()
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        daphne = start(
            "daphne",
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
        )
        workers: list[subprocess.Popen] = [start_worker()]
        try:
            wait_healthy(url, daphne)
            demo_ready(url, key)
            print(
                f"one Daphne process, Celery worker concurrency {WORKER_CONCURRENCY}, "
                f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}"
            )
            print(f"{'':<34} {'n':>5} {'p50 ms':>8} {'p95 ms':>8} {'max ms':>8}")
            for concurrency in (1, 16):
                timings, errors, _ = asyncio.run(answers_load(url, key, concurrency))
                print(
                    row(f"stream=false, concurrency {concurrency}", timings) + f"   errors {errors}"
                )
            for size in sizes:
                stop(workers.pop())  # held back until all N streams are open
                idle_rss = rss_kib(daphne.pid)
                started = time.perf_counter()
                measured = asyncio.run(
                    streams(
                        url,
                        key,
                        size,
                        args.rate,
                        daphne.pid,
                        lambda: workers.append(start_worker()),
                    )
                )
                took = time.perf_counter() - started
                per_stream = (measured.open_rss_kib - idle_rss) / max(1, measured.peak_open)
                print(
                    f"\n{size} streams opened at {args.rate:.0f}/s, {took:.1f} s in all: "
                    f"peak open {measured.peak_open}, errors {measured.errors}, "
                    f"load {os.getloadavg()[0]:.2f}"
                )
                print(row("  first event", measured.first))
                print(row("  completed (worker backlog)", measured.completed))
                print(
                    f"  Daphne RSS {idle_rss / 1024:.0f} MiB with none open, "
                    f"{measured.open_rss_kib / 1024:.0f} MiB with {measured.peak_open} open: "
                    f"{per_stream:.0f} KiB per open stream"
                )
                first_p95 = percentile(measured.first, 0.95) if measured.first else float("inf")
                goal = first_p95 <= 50 and measured.errors == 0 and measured.peak_open == size
                print(
                    f"  goal {size} open, first-event p95 <= 50 ms, 0 errors: "
                    f"{'met' if goal else 'NOT met'} ({first_p95:.1f} ms, "
                    f"{measured.errors} errors)"
                )
        finally:
            stop(daphne)
            for worker in workers:
                stop(worker)


if __name__ == "__main__":
    main()
