"""koinon beyond one machine (issue 32): the real topology of tools/topology — PostgreSQL
primary and streaming replica, PgBouncer in transaction mode, Redis behind three Sentinels,
two web hosts and two workers behind HAProxy — each part broken on purpose.

The tests run in file order: the last ones kill parts (a replica, a web host, the Redis
master) and bring them back or leave a failed-over topology behind."""

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time

import httpx
import psycopg
import pytest
from koinon_client import Client
from koinon_client.errors import KoinonError

from tests.topology.helpers import QUESTION, headers, member_remove, seed, seed_on_primary
from tools.topology.harness import DATABASE, ROOT, Topology

pytestmark = pytest.mark.slow

FINAL = ("published", "failed")


def ask(topology: Topology, key: str, query: str = QUESTION, **fields: object) -> dict:
    response = httpx.post(
        f"{topology.url}/v1/answer",
        json={"query": query, **fields},
        headers=headers(key),
        timeout=120,
    )
    assert response.status_code == 200, (response.text, hosts_health(topology))
    return response.json()


def hosts_health(topology: Topology) -> list:
    """What each web host reports (for a failure's message)."""
    reports = []
    for number in range(topology.web_hosts):
        try:
            reports.append(health(topology.web_url(number)))
        except httpx.HTTPError as error:
            reports.append(type(error).__name__)
    return reports


def health(url: str) -> dict:
    return httpx.get(f"{url}/v1/health", timeout=30).json()


def wait_for(what: str, condition, timeout: float = 120) -> None:
    """A generous guard against a hang, not a measured bound."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"{what}: not within {timeout} s"
        time.sleep(0.25)


def served_by(client: Client, log: list[tuple[str, str | None]]) -> None:
    """Record which web host (HAProxy's X-Koinon-Host) served each response of `client`."""
    client._http.event_hooks["response"].append(
        lambda response: log.append(
            (response.request.url.path, response.headers.get("x-koinon-host"))
        )
    )


def run_states(topology: Topology, run_ids: list[str]) -> dict[str, str]:
    rows = topology.primary_sql(
        "SELECT id::text, status FROM answers_answerrun WHERE id = ANY(%s::uuid[])", [run_ids]
    )
    return dict(rows)


# --- through HAProxy and PgBouncer ------------------------------------------------------


def test_an_answer_and_its_stream_pass_through_the_balancer_and_the_pooler(topology):
    seeded = seed(topology, "balancer")
    body = ask(topology, seeded["member_key"])
    assert body["evidence"]["answer_status"] == "evidence_backed", (
        body["evidence"]["outcomes"],
        body["quality"],
    )
    assert "platform operations team" in body["answer"]["text"]
    with Client(topology.url, seeded["member_key"]) as client:
        answer = client.answer.collect(client.answer.start(QUESTION))
    assert answer.evidence.answer_status == "evidence_backed"
    assert answer.release.verify(answer.body)
    # The app's statements went through PgBouncer, as the runtime role.
    with psycopg.connect(
        host="127.0.0.1",
        port=topology.ports["pgbouncer"],
        dbname="pgbouncer",
        user="postgres",
        autocommit=True,
    ) as admin:
        stats = {row[0]: row for row in admin.execute("SHOW STATS").fetchall()}
    assert stats[DATABASE][1] > 0  # total_xact_count


def test_a_stream_read_on_one_host_resumes_on_the_other_after_last_event_id(topology):
    seeded = seed(topology, "replay")
    with Client(topology.url, seeded["member_key"]) as client:
        run_id = client.answer.start(QUESTION)
        client.answer.collect(run_id)
    with Client(topology.web_url(0), seeded["member_key"]) as first:
        events = list(first.answer.events(run_id))
    assert [event.event for event in events][-1] == "completed"
    with Client(topology.web_url(1), seeded["member_key"]) as other:
        resumed = list(other.answer.events(run_id, last_event_id=events[0].id))
    assert [event.id for event in resumed] == [event.id for event in events[1:]]
    assert resumed[-1].data == events[-1].data


def test_an_upload_and_a_dataset_made_on_one_host_are_read_on_the_other(topology):
    """Uploads and dataset snapshots live in shared directories (KOINON_MEDIA_DIR,
    KOINON_DATASETS_DIR), not in a web host's own data directory."""
    seeded = seed(topology, "shared")
    owner = headers(seeded["owner_key"])
    created = httpx.post(
        f"{topology.web_url(0)}/v1/datasets",
        data={"space": str(seeded["space"]), "table": "orders"},
        files={"file": ("invoices.csv", b"invoice,amount\nA-1,1250\nA-2,2750\n", "text/csv")},
        headers=owner,
        timeout=60,
    )
    assert created.status_code == 201, created.text
    queried = httpx.post(
        f"{topology.web_url(1)}/v1/datasets/{created.json()['id']}/query",
        json={"sql": "SELECT sum(amount) AS total FROM orders"},
        headers=owner,
        timeout=60,
    )
    assert queried.status_code == 200, queried.text
    assert queried.json()["rows"] == [[4000]]
    # A file uploaded to one host is extracted by a worker (a data directory of its own).
    uploaded = httpx.post(
        f"{topology.web_url(0)}/v1/documents",
        data={"space": str(seeded["space"])},
        files={"file": ("drills.md", b"# Drills\n\nThe restore drill runs monthly.\n")},
        headers=owner,
        timeout=60,
    )
    assert uploaded.status_code in (201, 202), uploaded.text
    wait_for(
        "the upload extracted",
        lambda: (
            topology.primary_sql(
                "SELECT count(*) FROM knowledge_extraction WHERE revision_id = %s "
                "AND status = 'admitted'",
                [uploaded.json()["revision"]],
            )[0][0]
            > 0
        ),
    )


def test_migrations_ran_direct_and_nothing_is_left_to_migrate(topology):
    result = topology.manage("migrate", "--check", check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_rechecks_row_locks_hold_for_its_transaction_through_pgbouncer(topology):
    """In transaction mode each transaction keeps one server connection: the recheck's
    FOR SHARE locks (answers.pipeline.recheck) still block a revocation until it commits."""
    seeded = seed(topology, "locks")
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import django, sys; django.setup()\n"
            "from django.contrib.auth import get_user_model\n"
            "from django.db import transaction\n"
            "from answers.pipeline.recheck import _lock_access_rows\n"
            f"user = get_user_model().objects.get(username={seeded['member']!r})\n"
            "with transaction.atomic():\n"
            f"    _lock_access_rows(user=user, api_key=None, spaces={{{seeded['space']}}}, "
            "datasets=set())\n"
            "    print('locked', flush=True)\n"
            "    sys.stdin.readline()\n"
            "print('committed', flush=True)\n",
        ],
        cwd=ROOT,
        env=topology.app_env("locks"),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        revoke = (
            "DELETE FROM guardian_userobjectpermission WHERE object_pk = %s AND user_id = "
            "(SELECT id FROM auth_user WHERE username = %s)"
        )
        params = [str(seeded["space"]), seeded["member"]]
        through_pooler = {
            "host": "127.0.0.1",
            "port": topology.ports["pgbouncer"],
            "dbname": DATABASE,
            "user": "koinon_app",
        }
        with psycopg.connect(**through_pooler) as revoker:
            revoker.execute("SET LOCAL lock_timeout = '1s'")
            with pytest.raises(psycopg.errors.LockNotAvailable):
                revoker.execute(revoke, params)
        holder.stdin.write("\n")
        holder.stdin.flush()
        assert holder.stdout.readline().strip() == "committed"
        with psycopg.connect(**through_pooler) as revoker:
            revoker.execute("SET LOCAL lock_timeout = '10s'")
            assert revoker.execute(revoke, params).rowcount >= 1
    finally:
        holder.kill()
        holder.wait(10)


# --- the replica ------------------------------------------------------------------------


def test_a_lagging_replica_never_causes_a_publication_the_primary_refuses(topology):
    seeded = seed(topology, "lag")
    assert health(topology.url)["components"]["database_replica"]["status"] == "ok"
    topology.replica_pause()
    try:
        member_remove(topology, space=seeded["space"], username=seeded["member"])
        # The replica still grants the reader the space and still has its passage: the
        # gathering finds and selects it; the recheck on the primary refuses publication.
        body = ask(topology, seeded["member_key"])
    finally:
        topology.replica_resume()
    assert body["evidence"]["answer_status"] == "abstained"
    assert "access_denied" in body["quality"]["issues"]
    assert body["answer"]["citations"] == []
    cited = topology.primary_sql(
        "SELECT count(*) FROM answers_citation WHERE run_id = %s::uuid", [body["run_id"]]
    )
    assert cited == [(0,)]
    topology.replica_wait()
    # Caught up, the replica agrees with the primary: nothing is in the reader's library.
    again = ask(topology, seeded["member_key"])
    assert again["evidence"]["answer_status"] != "evidence_backed"
    assert "access_denied" not in again["quality"]["issues"]


def test_reads_move_to_the_primary_when_the_replica_goes_down_mid_load(topology):
    seeded = seed(topology, "down")
    results: list[int | str] = []

    def load() -> None:
        for _ in range(6):
            try:
                response = httpx.post(
                    f"{topology.url}/v1/answer",
                    json={"query": QUESTION},
                    headers=headers(seeded["member_key"]),
                    timeout=120,
                )
                status = response.json()["evidence"]["answer_status"]
                results.append(status if response.status_code == 200 else response.status_code)
            except httpx.HTTPError as error:
                results.append(type(error).__name__)

    thread = threading.Thread(target=load)
    thread.start()
    wait_for("the first answers", lambda: len(results) >= 2)
    topology.replica.stop(immediate=True)
    thread.join(600)
    try:
        assert results == ["evidence_backed"] * 6
        report = health(topology.url)
        assert report["status"] == "ok"
        replica = report["components"]["database_replica"]
        assert replica["status"] == "degraded"
        assert "reads on the primary" in replica["detail"]
    finally:
        topology.replica.start()
    wait_for(
        "the replica back in use",
        lambda: health(topology.url)["components"]["database_replica"]["status"] == "ok",
    )


def test_a_replica_lagging_beyond_the_bound_is_skipped_and_reported(topology):
    """A web host whose bound is 1 s: with replay paused and the primary writing, its
    health reports the replica lagging and its reads on the primary."""
    url = topology.web_host_extra("strict", DATABASE_REPLICA_MAX_LAG="1")
    topology.replica_pause()
    try:
        seeded = seed_on_primary(topology, "strict")
        wait_for(
            "the lag reported",
            lambda: health(url)["components"]["database_replica"]["status"] == "degraded",
            60,
        )
        replica = health(url)["components"]["database_replica"]
        assert "lagging" in replica["detail"] and "reads on the primary" in replica["detail"]
        # Its answers read the primary, which has the new space the replica has not seen.
        response = httpx.post(
            f"{url}/v1/answer",
            json={"query": QUESTION},
            headers=headers(seeded["member_key"]),
            timeout=120,
        )
        assert response.json()["evidence"]["answer_status"] == "evidence_backed"
    finally:
        topology.replica_resume()
        topology.processes["strict"].stop()
    topology.replica_wait()


# --- a web host dies --------------------------------------------------------------------


def test_a_stream_on_a_killed_web_host_resumes_on_the_other_with_nothing_lost(topology):
    seeded = seed(topology, "webkill")
    served: list[tuple[str, str | None]] = []
    received: list = []
    workers = [topology.processes[f"worker_{n}"] for n in range(topology.workers)]
    with Client(topology.url, seeded["member_key"], timeout=120) as client:
        served_by(client, served)
        # Workers paused: the run waits, so its stream is open on one host when it dies.
        for worker in workers:
            os.killpg(worker.process.pid, signal.SIGSTOP)
        try:
            run_id = client.answer.start(QUESTION)
            consumer = threading.Thread(
                target=lambda: received.extend(client.answer.events(run_id))
            )
            consumer.start()
            wait_for("the stream", lambda: any("/events" in path for path, _ in served))
            host = next(h for path, h in served if "/events" in path)
            topology.web_kill(int(host.removeprefix("web_")))
        finally:
            for worker in workers:
                os.killpg(worker.process.pid, signal.SIGCONT)
        consumer.join(300)
    hosts = [host for path, host in served if "/events" in path]
    assert len(set(hosts)) == 2, hosts  # read on one host, resumed on the other
    ids = [event.id for event in received]
    assert len(ids) == len(set(ids))
    assert received[-1].event == "completed"
    with Client(topology.url, seeded["member_key"]) as client:
        replayed = list(client.answer.events(run_id))
    assert ids == [event.id for event in replayed]
    topology.web_start(int(host.removeprefix("web_")))


# --- the Redis master dies --------------------------------------------------------------


def test_the_redis_master_killed_mid_load_fails_over_and_no_run_is_lost(topology):
    seeded = seed(topology, "redis")
    master_before = topology.redis_master_port()
    started: list[str] = []
    refused: list[str] = []
    with Client(topology.url, seeded["owner_key"], timeout=120) as client:
        for n in range(6):
            if n == 2:
                topology.redis_master_kill()
            try:
                started.append(client.answer.start(QUESTION))
            except KoinonError as error:
                refused.append(error.code)  # typed: the broker was away at that moment
            if n == 3:
                with contextlib.suppress(KoinonError):
                    client.documents.upload(
                        b"# Failover\n\nThe failover drill runs every quarter.\n",
                        filename="failover.md",
                        space=seeded["space"],
                    )
    wait_for(
        "a promoted master",
        lambda: topology.redis_master_port() not in (None, master_before),
        60,
    )
    # Typed by koinon (never the balancer's own page: no host left the rotation).
    assert set(refused) <= {"queue_unavailable"}, refused
    assert started
    # Every run ends: published, or failed with a typed reason; none stays running.
    wait_for(
        "every run settled",
        lambda: set(run_states(topology, started).values()) <= set(FINAL),
        240,
    )
    states = run_states(topology, started)
    assert "published" in states.values()
    doubled = topology.primary_sql(
        "SELECT generation_id, count(*) FROM audit_outputrelease WHERE run_id = ANY(%s::uuid[]) "
        "GROUP BY generation_id HAVING count(*) > 1",
        [started],
    )
    assert doubled == []
    # Streams resume from the store after the failover.
    with Client(topology.url, seeded["owner_key"]) as client:
        for run_id, state in states.items():
            final = list(client.answer.events(run_id))[-1]
            assert final.event == ("completed" if state == "published" else "failed")
    # An upload made around the failover is extracted (the sweep queues lost work again).
    wait_for(
        "the upload extracted",
        lambda: (
            topology.primary_sql(
                "SELECT count(*) FROM knowledge_extraction e JOIN knowledge_documentrevision r "
                "ON r.id = e.revision_id JOIN knowledge_document d ON d.id = r.document_id "
                "WHERE d.space_id = %s AND e.status = 'admitted' AND d.title ILIKE %s",
                [seeded["space"], "%failover%"],
            )[0][0]
            > 0
        ),
        240,
    )
    # And new answers are published through the promoted master.
    assert ask(topology, seeded["member_key"])["evidence"]["answer_status"] == "evidence_backed"
