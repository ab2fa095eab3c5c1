"""`/v1/answer` (stream=false) throughput with one and with two web processes (issue 16).

The web processes are started as `koinon_up --web-processes N` starts them: one listening
socket bound here, handed to N Daphne processes (`python -m core.server --fd`). Embedded
PostgreSQL and Redis under var/bench-streams (shared with bench/streams.py; the database
is recreated), the demo corpus, reader's API key, loopback only. For each N: REQUESTS
answers at concurrency 4 and at concurrency 16, each after WARM_WAVES x its concurrency
unmeasured answers (so that pools and threads have grown), a new connection per request
(a kept-alive connection stays with the process that accepted it: behind a proxy or with
many clients the kernel spreads new connections); throughput (answers per second), p50/p95, errors
(non-200 or no release). The two runs are in the same process, one after the other.

`--passages N` adds N filler passages to the demo space first (text drawn from the NQ
passages' words, random vectors), so retrieval and judging work on a corpus of that size.
For each level the CPU it cost is read from /proc: the web processes, PostgreSQL (the
postmaster's tree, with the backends of closed connections), the worker and this load
generator; per answer, and the ceiling that gives on this machine's cores.

Goals (issue 16): 2 processes >= 1.7x the throughput of 1 at concurrency 16, 0 errors;
p95 at concurrency 4 <= 300 ms at 10k passages.

Run: .venv/bin/python bench/web.py [--requests 200] [--passages 10000]
"""

import argparse
import asyncio
import logging
import os
import socket
import sys

from common.cpu import own_cpu, tree_cpu
from common.services import embedded_services, recreate_database, vacuum_analyze
from common.stats import percentile
from django.core.management import call_command
from streams import (  # the same bench directory, services and helpers
    BENCH_DIR,
    answers_load,
    demo_ready,
    row,
    start,
    start_worker,
    stop,
    wait_healthy,
)

from core.services import api_key_create

REQUESTS = 200
WARM_WAVES = 3  # unmeasured answers before each level: this many times its concurrency


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=REQUESTS)
    parser.add_argument("--passages", type=int, default=0, help="filler passages to add")
    parser.add_argument(
        "--pool",
        type=int,
        help="KOINON_DB_POOL of the web processes "
        "(default: core.server's; 0 = a new connection per request)",
    )
    args = parser.parse_args()
    if args.pool is not None:
        os.environ["KOINON_DB_POOL"] = str(args.pool)  # the web processes' environment
    logging.getLogger("httpx").setLevel(logging.WARNING)
    with embedded_services(BENCH_DIR) as postgres:
        recreate_database(postgres, clear_media=True)
        call_command("loaddemo", verbosity=0)
        from django.contrib.auth import get_user_model
        from django.db import connections

        key = api_key_create(user=get_user_model().objects.get(username="reader")).secret
        connections.close_all()
        if args.passages:
            add_filler(args.passages)
        connections.close_all()
        worker = start_worker()  # extracts the demo corpus
        listener = socket.create_server(("127.0.0.1", 0), backlog=2048)
        listener.set_inheritable(True)
        url = f"http://127.0.0.1:{listener.getsockname()[1]}"
        throughput: dict[int, float] = {}
        try:
            for processes in (1, 2):
                webs = [
                    start(
                        f"web-{processes}-{n}",
                        [
                            sys.executable,
                            "-m",
                            "core.server",
                            "--fd",
                            str(listener.fileno()),
                            "koinon.asgi:application",
                        ],
                        pass_fds=(listener.fileno(),),
                    )
                    for n in range(processes)
                ]
                try:
                    for web in webs:
                        wait_healthy(url, web)
                    demo_ready(url, key)
                    pool = os.environ.get("KOINON_DB_POOL", "default")
                    print(
                        f"\n{processes} web process(es), {os.cpu_count()} cores, "
                        f"load {os.getloadavg()[0]:.2f}, KOINON_DB_POOL {pool}"
                    )
                    print(f"{'':<34} {'n':>5} {'p50 ms':>8} {'p95 ms':>8} {'max ms':>8}")
                    for concurrency in (4, 16):
                        # Warm at this concurrency first: every process's connection pool
                        # and threads grow to what the level needs (a new PostgreSQL
                        # backend costs ~20-40 ms of its CPU; counted in the measurement,
                        # they were 0.04-0.08 new connections and 1-3 ms per answer).
                        warm = WARM_WAVES * concurrency
                        asyncio.run(answers_load(url, key, concurrency, warm, keepalive=False))
                        trees = {
                            "web": [web.pid for web in webs],
                            "PostgreSQL": [postgres.pid()],
                            "worker": [worker.pid],
                        }
                        before = {name: tree_cpu(pids) for name, pids in trees.items()}
                        before["load generator"] = own_cpu()
                        sessions = database_sessions()
                        timings, errors, took = asyncio.run(
                            answers_load(url, key, concurrency, args.requests, keepalive=False)
                        )
                        cpu = {name: tree_cpu(pids) - before[name] for name, pids in trees.items()}
                        cpu["load generator"] = own_cpu() - before["load generator"]
                        sessions = database_sessions() - sessions
                        rate = len(timings) / took
                        if concurrency == 16:
                            throughput[processes] = rate
                        print(
                            row(f"concurrency {concurrency}", timings)
                            + f"   {rate:.1f} answers/s, errors {errors}"
                        )
                        print(
                            cpu_line(cpu, len(timings), took)
                            + f"; {sessions / len(timings):.2f} new database connections "
                            "per answer"
                        )
                        if concurrency == 4:
                            p95 = percentile(timings, 0.95)
                            verdict = "met" if p95 <= 300 else "NOT met"
                            print(
                                f"  goal p95 at concurrency 4 <= 300 ms: {verdict} ({p95:.0f} ms)"
                            )
                finally:
                    for web in webs:
                        stop(web)
            ratio = throughput[2] / throughput[1]
            print(
                f"\nthroughput at concurrency 16: 2 processes / 1 = {ratio:.2f}x "
                f"(goal >= 1.7x: {'met' if ratio >= 1.7 else 'NOT met'})"
            )
        finally:
            stop(worker)
            listener.close()


def database_sessions() -> int:
    """Sessions (connections) PostgreSQL has opened on this database so far."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT sessions FROM pg_stat_database WHERE datname = current_database()")
        return cursor.fetchone()[0]


def cpu_line(cpu: dict[str, float], answers: int, took: float) -> str:
    """CPU ms per answer by process tree, how busy the cores were, and the throughput the
    whole CPU cost per answer allows on this machine's cores."""
    parts = ", ".join(f"{name} {seconds / answers * 1000:.1f}" for name, seconds in cpu.items())
    total = sum(cpu.values())
    cores = os.cpu_count() or 1
    return (
        f"  CPU ms per answer: {parts}; total {total / answers * 1000:.1f} "
        f"({total / took:.2f} of {cores} cores busy; ceiling {cores * answers / total:.1f} "
        f"answers/s)"
    )


def add_filler(count: int) -> None:
    """`count` passages in the demo space: NQ words, random unit vectors (bench/common)."""
    import numpy as np
    from common.corpus import filler, groups_of, load_passages, read_nq

    from knowledge.models import Space

    passages, _ = read_nq()
    texts, vectors = filler(count, passages, np.random.default_rng(16))
    space = Space.objects.get(name="Demo")
    curator = space.created_by
    groups = groups_of(0, count, 50)
    titles = [f"filler {n}" for n in range(len(groups))]
    load_passages(space, curator, groups, titles, texts, vectors)
    # Vacuumed now, not by autovacuum during the measurement (its CPU would count as
    # PostgreSQL's per answer).
    vacuum_analyze(
        "knowledge_passage",
        "knowledge_extraction",
        "knowledge_document",
        "knowledge_lexemefrequency",
    )
    print(f"{count:,} filler passages added to the demo space")


if __name__ == "__main__":
    main()
