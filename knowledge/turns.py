"""Whose turn it is to extract (issue 27, item 4): at most KOINON_EXTRACT_PER_USER
revisions of one uploader extract at once, so two large private uploads cannot hold
every extraction process while others wait.

A slot is a PostgreSQL session advisory lock on (namespace + slot, uploader id): taken
without waiting, held for the extraction, released after it — and by PostgreSQL itself
when the worker's connection dies, so a killed worker never keeps a slot. A session lock
lives on one server connection: behind PgBouncer in transaction mode it is taken on the
`direct` alias (DATABASE_DIRECT_URL, PostgreSQL itself), never through the pooler.
"""

from collections.abc import Iterator
from contextlib import contextmanager

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connections

NAMESPACE = 0x6B6F0000  # "ko" in the high bytes: koinon's advisory locks
LOCKS_DATABASE = "direct"


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
    with connection.cursor() as cursor:
        for slot in range(settings.KOINON_EXTRACT_PER_USER):
            cursor.execute("SELECT pg_try_advisory_lock(%s, %s)", [NAMESPACE + slot, uploader_id])
            if cursor.fetchone()[0]:
                held = slot
                break
    try:
        yield held is not None
    finally:
        if held is not None:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_unlock(%s, %s)", [NAMESPACE + held, uploader_id])
