"""`/v1/answer` (stream=false) throughput with one and with two web processes (issue 16).

The web processes are started as `koinon_up --web-processes N` starts them: one listening
socket bound here, handed to N Daphne processes (`python -m core.server --fd`). Embedded
PostgreSQL and Redis under var/bench-streams (shared with bench/streams.py; the database
is recreated), the demo corpus, reader's API key, loopback only. For each N: REQUESTS
answers at concurrency 4 and at concurrency 16, a new connection per request (a kept-alive
connection stays with the process that accepted it: behind a proxy or with many clients
the kernel spreads new connections); throughput (answers per second), p50/p95, errors
(non-200 or no release). The two runs are in the same process, one after the other.

Goals (issue 16): 2 processes >= 1.7x the throughput of 1 at concurrency 16, 0 errors;
p95 at concurrency 4 <= 300 ms.

Run: .venv/bin/python bench/web.py [--requests 200]
"""

import argparse
import asyncio
import logging
import os
import socket
import sys

from common.services import embedded_services, recreate_database
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=REQUESTS)
    args = parser.parse_args()
    logging.getLogger("httpx").setLevel(logging.WARNING)
    with embedded_services(BENCH_DIR) as postgres:
        recreate_database(postgres, clear_media=True)
        call_command("loaddemo", verbosity=0)
        from django.contrib.auth import get_user_model
        from django.db import connections

        key = api_key_create(user=get_user_model().objects.get(username="reader")).secret
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
                    print(f"\n{processes} web process(es), {os.cpu_count()} cores, "
                          f"load {os.getloadavg()[0]:.2f}")  # fmt: skip
                    print(f"{'':<34} {'n':>5} {'p50 ms':>8} {'p95 ms':>8} {'max ms':>8}")
                    for concurrency in (4, 16):
                        asyncio.run(
                            answers_load(url, key, concurrency, 10, keepalive=False)
                        )  # warm every process
                        timings, errors, took = asyncio.run(
                            answers_load(url, key, concurrency, args.requests, keepalive=False)
                        )
                        rate = len(timings) / took
                        if concurrency == 16:
                            throughput[processes] = rate
                        print(row(f"concurrency {concurrency}", timings)
                              + f"   {rate:.1f} answers/s, errors {errors}")  # fmt: skip
                        if concurrency == 4:
                            p95 = percentile(timings, 0.95)
                            verdict = "met" if p95 <= 300 else "NOT met"
                            print(f"  goal p95 at concurrency 4 <= 300 ms: {verdict} "
                                  f"({p95:.0f} ms)")  # fmt: skip
                finally:
                    for web in webs:
                        stop(web)
            ratio = throughput[2] / throughput[1]
            print(f"\nthroughput at concurrency 16: 2 processes / 1 = {ratio:.2f}x "
                  f"(goal >= 1.7x: {'met' if ratio >= 1.7 else 'NOT met'})")  # fmt: skip
        finally:
            stop(worker)
            listener.close()


if __name__ == "__main__":
    main()
