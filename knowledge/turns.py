"""Whose turn it is to extract (issue 27, item 4; issue 51, item 6): while another
uploader's revision waits, at most KOINON_EXTRACT_PER_USER revisions of one uploader
extract at once, so two large private uploads cannot hold every extraction process while
others wait. While nobody else waits, an uploader's revisions take every free extraction
process: twelve files uploaded at once are extracted side by side, not one after another.

A slot is a PostgreSQL session advisory lock on (namespace + slot, uploader id): taken
without waiting, held for the extraction, released after it — and by PostgreSQL itself
when the worker's connection dies, so a killed worker never keeps a slot. A session lock
lives on one server connection: behind PgBouncer in transaction mode it is taken on the
`direct` alias (DATABASE_DIRECT_URL, PostgreSQL itself), never through the pooler.

The share is approximate by design: two processes deciding at the same moment may both
see nobody waiting; the next revision of that uploader, once someone waits, is deferred
until the uploader is back within the share. What the share bounds is how long another
uploader waits: one extraction at most, not the uploader's whole queue.
"""

from collections.abc import Iterator
from contextlib import contextmanager

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connections
from django.db.backends.base.base import BaseDatabaseWrapper

from knowledge.models import Extraction, ExtractionStatus

NAMESPACE = 0x6B6F0000  # "ko" in the high bytes: koinon's advisory locks
LOCKS_DATABASE = "direct"
# Slots an uploader alone may try: more than any worker pool has processes, so the pool,
# not this number, bounds an uploader alone.
MAX_SLOTS = 256


@contextmanager
def extraction_turn(uploader_id: int | None) -> Iterator[bool]:
    """Yields whether this uploader has a free slot now (True: it is held until the
    block ends). Revisions without an uploader always have a turn."""
    if uploader_id is None:
        yield True
        return
    held = None
    connection = connections[
        LOCKS_DATABASE if LOCKS_DATABASE in settings.DATABASES else DEFAULT_DB_ALIAS
    ]
    share = settings.KOINON_EXTRACT_PER_USER
    others_wait = others_waiting(uploader_id)
    if not others_wait or _slots_held(connection, uploader_id) < share:
        with connection.cursor() as cursor:
            for slot in range(share if others_wait else MAX_SLOTS):
                cursor.execute(
                    "SELECT pg_try_advisory_lock(%s, %s)", [NAMESPACE + slot, uploader_id]
                )
                if cursor.fetchone()[0]:
                    held = slot
                    break
    try:
        yield held is not None
    finally:
        if held is not None:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_unlock(%s, %s)", [NAMESPACE + held, uploader_id])


def others_waiting(uploader_id: int) -> bool:
    """Whether a revision of another uploader (or of none) has an extraction not yet
    started: then this uploader keeps to KOINON_EXTRACT_PER_USER slots."""
    return (
        Extraction.objects.filter(status=ExtractionStatus.PENDING)
        .exclude(revision__uploaded_by_id=uploader_id)
        .exists()
    )


def _slots_held(connection: BaseDatabaseWrapper, uploader_id: int) -> int:
    """Slots of this uploader held now, by any session (two-key advisory locks show as
    classid = first key, objid = second key, objsubid = 2 in pg_locks)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted "
            "AND objsubid = 2 AND classid::bigint BETWEEN %s AND %s AND objid::bigint = %s",
            [NAMESPACE, NAMESPACE + MAX_SLOTS - 1, uploader_id],
        )
        count: int = cursor.fetchone()[0]
    return count
