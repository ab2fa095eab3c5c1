"""Helpers of the answer log's tests: receipts made in SQL, and what a database owner can do."""

from django.db import connection

ORIGIN = "koinon.test/answers"
# Entries 1 and 2 swapped, through a free index: each row's index is unique on its own.
SWAP = (
    "UPDATE audit_logentry SET index = 1000000 WHERE index = 1; "
    "UPDATE audit_logentry SET index = 1 WHERE index = 2; "
    "UPDATE audit_logentry SET index = 2 WHERE index = 1000000"
)


def more_releases(count: int) -> None:
    """count further receipts, as refusals without a generation of the one published run
    (unique per reset context), straight in SQL: the log reads receipts, however made."""
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO audit_outputrelease (id, run_id, message_id, generation_id, kind, "
            "reset_context, policy_version, publication_sequence, selected_fact_ids, "
            "source_refs, result_hashes, text_sha256, citations_sha256, cards_sha256, "
            "policy_sha256, searched, created_at) "
            "SELECT gen_random_uuid(), r.run_id, r.message_id, NULL, 'refusal', "
            "1000 + n + (SELECT count(*) FROM audit_outputrelease), '1', "
            "nextval('audit_publication_sequence'), '[]', '[]', '{}', md5(n::text) || "
            "md5(n::text), r.citations_sha256, r.cards_sha256, r.policy_sha256, '{}', now() "
            "FROM (SELECT * FROM audit_outputrelease ORDER BY publication_sequence LIMIT 1) r, "
            "generate_series(1, %s) n",
            [count],
        )


def as_owner(*statements: str | tuple[str, list]) -> None:
    """What a database owner can do: change records with the triggers bypassed."""
    with connection.cursor() as cursor:
        cursor.execute("SET session_replication_role = replica")
        for statement in statements:
            sql, params = statement if isinstance(statement, tuple) else (statement, [])
            cursor.execute(sql, params)
        cursor.execute("SET session_replication_role = DEFAULT")
