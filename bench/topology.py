"""Beyond one machine (issue 32): answers through HAProxy with one web host and with two, and
retrieval on the replica against the primary, in one run on the topology of tools/topology.

    .venv/bin/python bench/topology.py [--answers 40] [--clients 4] [--searches 60]

The baseline of each figure is measured in the same run: answers/s and p95 with one web host
(the other stopped, HAProxy routing everything to the first), then with both; retrieval p95 on
the primary, then on the streaming replica (one process, the same queries, warm). Each answer
is a synchronous `POST /v1/answer` (executed in the web host), so the web tier does the work.
On a 2-core machine every process shares the same two cores: expect little gain from a second
host; the ratio says how much the balancer and pooler cost and where the time goes.
"""

import argparse
import json
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402

from bench.common.stats import percentile  # noqa: E402
from tests.topology.helpers import QUESTION, headers, seed  # noqa: E402
from tools.topology.harness import Topology  # noqa: E402

QUESTIONS = [
    QUESTION,
    "When are production databases backed up?",
    "What does each service review cover?",
    "Who is responsible for service reviews?",
]

RETRIEVAL = """
import json, sys, time
import django
django.setup()
from django.contrib.auth import get_user_model
from knowledge.retrieval import retrieve
from knowledge.scope import access_scope_build
user = get_user_model().objects.get(username=sys.argv[1])
queries = json.loads(sys.argv[2])
rounds = int(sys.argv[3])
out = {}
for database in ("default", "replica_0", "default", "replica_0"):  # warm, then measured
    scope = access_scope_build(user=user, database=database)
    timings = []
    for n in range(rounds):
        started = time.perf_counter()
        retrieve(scope=scope, query=queries[n % len(queries)])
        timings.append((time.perf_counter() - started) * 1000)
    out[database] = timings
print(json.dumps(out))
"""


def answers(topology: Topology, key: str, count: int, clients: int) -> tuple[float, list[float]]:
    """`count` answers from `clients` concurrent callers through HAProxy: answers/s, ms each."""

    def one(number: int) -> float:
        started = time.perf_counter()
        response = httpx.post(
            f"{topology.url}/v1/answer",
            json={"query": QUESTIONS[number % len(QUESTIONS)]},
            headers=headers(key),
            timeout=300,
        )
        response.raise_for_status()
        return (time.perf_counter() - started) * 1000

    started = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        timings = list(pool.map(one, range(count)))
    return count / (time.perf_counter() - started), timings


def routed_to_one(topology: Topology) -> None:
    """Wait until HAProxy has seen the second host go (its health checks)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        response = httpx.get(f"{topology.url}/v1/health", timeout=10)
        if response.headers.get("x-koinon-host") == "web_0":
            hosts = {
                httpx.get(f"{topology.url}/v1/health", timeout=10).headers.get("x-koinon-host")
                for _ in range(6)
            }
            if hosts == {"web_0"}:
                return
        time.sleep(0.5)
    raise RuntimeError("HAProxy kept routing to the stopped host")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--answers", type=int, default=40)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--searches", type=int, default=60)
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="topo-bench-", dir="/tmp"))
    topology = Topology(base)
    try:
        started = time.perf_counter()
        topology.start()
        print(f"topology up in {time.perf_counter() - started:.1f} s")
        seeded = seed(topology, "bench")
        key = seeded["member_key"]
        answers(topology, key, 4, 2)  # warm both hosts' models

        topology.processes["web_1"].stop()
        routed_to_one(topology)
        one_rate, one_timings = answers(topology, key, args.answers, args.clients)
        topology.web_start(1)
        two_rate, two_timings = answers(topology, key, args.answers, args.clients)

        script = subprocess.run(  # noqa: S603 - the project's own interpreter and code
            [
                sys.executable,
                "-c",
                RETRIEVAL,
                seeded["member"],
                json.dumps(QUESTIONS),
                str(args.searches),
            ],
            cwd=ROOT,
            env=topology.app_env("bench"),
            capture_output=True,
            text=True,
            check=True,
        )
        retrieval = json.loads(script.stdout.strip().splitlines()[-1])
    finally:
        topology.stop()

    print(f"\nanswers through HAProxy ({args.answers} answers, {args.clients} clients)")
    print(f"{'':<22}{'answers/s':>10}{'p50 ms':>10}{'p95 ms':>10}")
    for name, rate, timings in (
        ("one web host (base)", one_rate, one_timings),
        ("two web hosts", two_rate, two_timings),
    ):
        p50, p95 = percentile(timings, 0.5), percentile(timings, 0.95)
        print(f"{name:<22}{rate:>10.2f}{p50:>10.0f}{p95:>10.0f}")
    print(f"ratio two/one: {two_rate / one_rate:.2f}x answers/s")
    print(f"\nretrieval ({args.searches} searches each, hybrid, one process)")
    print(f"{'':<22}{'p50 ms':>10}{'p95 ms':>10}")
    for name, database in (("primary (base)", "default"), ("replica", "replica_0")):
        timings = retrieval[database]
        print(f"{name:<22}{percentile(timings, 0.5):>10.1f}{percentile(timings, 0.95):>10.1f}")


if __name__ == "__main__":
    main()
