"""What every Celery worker does besides tasks: a heartbeat and the sweeper.

A thread of the worker's main process writes `koinon:worker:<hostname>` to Redis
(its own connection, not the broker pool) so that `/v1/health` reads a key instead
of broadcasting a ping; the same thread runs the sweep steps the apps add to `sweep_steps`
in their `AppConfig.ready()`: knowledge re-queues extraction work that was lost
(knowledge.documents.extraction.extractions_recover), queues again the embedding no worker is moving
(embeddings_resume) and that of passages whose vectors came from another model
(embeddings_refresh_schedule); answers settles lost answer runs (answers.recovery.runs_recover);
audit queues the answer log's integration, for releases whose queueing was lost
(audit.services.log_integration_queue).
Several workers may sweep at once: the sweep locks the rows it changes and skips
locked ones.

A worker is named by its hostname *and* this start of it (`worker_claim_name`: a token
made when the worker process starts, before its pool forks, so every child shares it).
The heartbeat key and every claim carry that name: a worker killed whole and started
again under the same hostname (koinon_up, a container restart) heartbeats under a new
name, so what the dead one had claimed is seen as lost (issue 48, item 3).
"""

import contextlib
import logging
import os
import threading
import time
import uuid
from collections.abc import Callable

import redis
import redis.sentinel
from celery.signals import worker_init, worker_ready, worker_shutdown
from django.conf import settings
from django.db import connection

from core.ports import Hooks

logger = logging.getLogger(__name__)

HEARTBEAT_PREFIX = "koinon:worker:"
INCARNATION_ENV = "KOINON_WORKER_INCARNATION"  # set by the worker process at its start
# What a sweep does, in order; each step takes no argument and may fail on its own.
sweep_steps: Hooks[Callable[[], object]] = Hooks("worker sweep steps")


def redis_client() -> redis.Redis:
    """A connection of its own (not the broker pool), with the health timeout. Behind
    Sentinel, a client of the current master: after a failover its next command asks the
    sentinels again and reaches the promoted one."""
    timeout = settings.KOINON_HEALTH_TIMEOUT
    if settings.REDIS_SENTINELS:
        sentinel = redis.sentinel.Sentinel(
            settings.REDIS_SENTINELS,
            socket_timeout=timeout,
            socket_connect_timeout=timeout,
            sentinel_kwargs={"socket_timeout": timeout, "socket_connect_timeout": timeout},
        )
        master: redis.Redis = sentinel.master_for(settings.REDIS_SENTINEL_MASTER)
        return master
    return redis.Redis.from_url(
        settings.REDIS_URL, socket_timeout=timeout, socket_connect_timeout=timeout
    )


def worker_claim_name(hostname: str) -> str:
    """What this worker process heartbeats and claims work under: `hostname#token`, the
    token made at this start of the worker (a pool child inherits its parent's). Without
    one (work run in a web process or a test), the hostname alone."""
    incarnation = os.environ.get(INCARNATION_ENV, "")
    return f"{hostname}#{incarnation}" if hostname and incarnation else hostname


def workers_alive_names(client: redis.Redis) -> set[str]:
    """Claim names (`worker_claim_name`) of workers whose heartbeat has not expired (the
    key's TTL is the staleness bound)."""
    keys = client.scan_iter(match=f"{HEARTBEAT_PREFIX}*", count=100)
    return {key.decode()[len(HEARTBEAT_PREFIX) :] for key in keys}


def workers_alive(client: redis.Redis) -> int:
    """Workers alive, by hostname: one restarted a moment ago is not counted twice while
    its former heartbeat expires."""
    return len({name.split("#", 1)[0] for name in workers_alive_names(client)})


class WorkerMaintenance(threading.Thread):
    def __init__(self, hostname: str) -> None:
        super().__init__(name="koinon-maintenance", daemon=True)
        self.key = f"{HEARTBEAT_PREFIX}{worker_claim_name(hostname)}"
        self.stopped = threading.Event()

    def run(self) -> None:
        client = redis_client()
        next_sweep = (
            0.0
            if settings.KOINON_SWEEP_AT_START
            else time.monotonic() + settings.KOINON_SWEEP_INTERVAL
        )
        while not self.stopped.is_set():
            try:
                ttl = max(1, settings.KOINON_WORKER_STALE_AFTER)
                client.set(self.key, str(time.time()), ex=ttl)
            except redis.RedisError as error:
                logger.warning("worker heartbeat not written: %s", type(error).__name__)
            if time.monotonic() >= next_sweep:
                next_sweep = time.monotonic() + settings.KOINON_SWEEP_INTERVAL
                self.sweep()
            self.stopped.wait(settings.KOINON_WORKER_HEARTBEAT_INTERVAL)
        with contextlib.suppress(redis.RedisError):
            client.delete(self.key)

    def sweep(self) -> None:
        try:
            for step in sweep_steps:
                try:
                    step()
                except Exception:
                    # The sweeper must outlive a database or broker outage; it tries again.
                    logger.exception("sweep step %s failed", step.__name__)
        finally:
            connection.close()


_maintenance: WorkerMaintenance | None = None


@worker_init.connect
def _name_this_start(**kwargs: object) -> None:
    """A new token for each start of a worker process (before its pool forks)."""
    os.environ[INCARNATION_ENV] = uuid.uuid4().hex[:16]


@worker_ready.connect
def _start_maintenance(sender: object = None, **kwargs: object) -> None:
    global _maintenance
    hostname = getattr(sender, "hostname", None) or "worker"
    _maintenance = WorkerMaintenance(hostname)
    _maintenance.start()


@worker_shutdown.connect
def _stop_maintenance(**kwargs: object) -> None:
    if _maintenance is not None:
        _maintenance.stopped.set()
        _maintenance.join(timeout=5)
