"""The answer log's stored subtrees (issue 33): integration stores exactly the complete,
aligned subtrees above the leaves, in the transaction of the entries that complete them;
tree heads and proofs read O(log n) rows of them and give what the whole tree gives;
`log verify` does not trust them; they are records like the log's other tables."""

import base64
import json

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from audit.log import (
    log_consistency_proof,
    log_export_proofs,
    log_inclusion_proof,
    log_integrate,
    log_root,
    log_tree,
)
from audit.merkle import MerkleTree, verify_inclusion
from audit.models import LogCheckpoint, LogEntry, LogSubtree, OutputRelease
from tests.audit.helpers import as_owner, more_releases
from tests.helpers import client_for


@pytest.fixture
def log_key(log_key, settings):
    """The shared key, with a checkpoint allowed after every batch."""
    settings.KOINON_LOG_CHECKPOINT_SECONDS = 0
    return log_key


def stored() -> dict[tuple[int, int], bytes]:
    rows = LogSubtree.objects.values_list("level", "index", "hash")
    return {(level, index): bytes.fromhex(value) for level, index, value in rows}


def expected(tree: MerkleTree) -> dict[tuple[int, int], bytes]:
    return {(level, index): value for level, index, value in tree.perfect_subtrees()}


def rows_read(*tables: str) -> int:
    """Rows this transaction has read from tables so far (PostgreSQL's own per-transaction
    counters: sequential-scan tuples plus index-fetched tuples), however they were read."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT coalesce(sum(coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0)), 0) "
            "FROM pg_stat_xact_user_tables WHERE relname = ANY(%s)",
            [list(tables)],
        )
        return int(cursor.fetchone()[0])


def _b64(text: str) -> bytes:
    return base64.b64decode(text)


@pytest.mark.django_db
def test_integration_stores_exactly_the_complete_subtrees_batch_after_batch(published, log_key):
    for count, batch in [(0, 1), (1, 1), (5, 3), (30, 7), (100, 1000), (0, 1000)]:
        more_releases(count)
        while log_integrate(batch=batch):
            tree = log_tree()  # from every leaf: the reference
            assert stored() == expected(tree)
            assert LogSubtree.objects.count() == len(tree) - len(tree).bit_count()
    assert LogEntry.objects.count() == 137
    # Every checkpoint signed along the way has the whole tree's root of its size.
    tree = log_tree()
    for size, root in LogCheckpoint.objects.values_list("size", "root_hash"):
        assert bytes.fromhex(root) == tree.root(size), size


@pytest.mark.django_db
def test_heads_and_proofs_from_the_database_are_the_whole_trees(published, log_key):
    """Every size 1..70, every leaf and every old size: what the API serves equals the whole
    tree's (the Merkle module's, checked against the RFC in test_merkle.py)."""
    more_releases(69)
    log_integrate(batch=13)
    while log_integrate(batch=13):
        pass
    tree = log_tree()
    entries = list(LogEntry.objects.order_by("index"))
    for n in range(1, 71):
        assert log_root(n) == tree.root(n), n
        for entry in entries[:n]:
            body = log_inclusion_proof(entry=entry, tree_size=n)
            assert [_b64(node) for node in body["proof"]] == tree.inclusion_proof(entry.index, n)
        for m in range(1, n + 1):
            body = log_consistency_proof(old_size=m, new_size=n)
            assert [_b64(node) for node in body["proof"]] == tree.consistency_proof(m, n)


@pytest.mark.django_db
def test_a_log_from_before_the_table_gets_its_subtrees_at_the_next_integration(published, log_key):
    more_releases(40)
    log_integrate()
    tree = log_tree()
    as_owner("DELETE FROM audit_logsubtree")  # a log integrated before migration 0006
    # Until then, proofs compute the missing subtrees from their leaves: the same proofs.
    entry = LogEntry.objects.get(index=7)
    body = log_inclusion_proof(entry=entry, tree_size=41)
    assert [_b64(node) for node in body["proof"]] == tree.inclusion_proof(7, 41)
    assert log_root(33) == tree.root(33)
    assert log_integrate() == 0  # nothing new, yet the subtrees are filled
    assert stored() == expected(tree)
    as_owner("DELETE FROM audit_logsubtree WHERE level > 2")  # partly filled
    more_releases(9)
    assert log_integrate() == 9
    assert stored() == expected(log_tree())


def _proof_cost(client, entry_id: str, size: int) -> tuple[int, int]:
    """(statements on the log's tables, rows read from them) of one GET /v1/releases/<id>/
    proof (the request's other statements, authentication and access, are not the log's)."""
    tables = ("audit_logentry", "audit_logsubtree")
    before = rows_read(*tables)
    with CaptureQueriesContext(connection) as queries:
        response = client.get(f"/v1/releases/{entry_id}/proof?tree_size={size}")
    assert response.status_code == 200, response.content
    statements = sum('"audit_log' in query["sql"] for query in queries.captured_queries)
    return statements, rows_read(*tables) - before


@pytest.mark.django_db
def test_an_api_proof_reads_a_constant_number_of_statements_and_o_log_n_rows(
    published, log_key, member
):
    """At 100 and at 1,000 entries: the same number of statements, and rows read that grow
    with log n, not n (the log's whole-tree read would be ≥ n rows). Sequential scans are
    off, as the planner turns them off by itself at any size where they would cost: on a
    table of a few pages it rightly prefers to read it all."""
    client = client_for(member)
    release = published["release"]["id"]
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
    costs = {}
    for size in (100, 1000):
        more_releases(size - OutputRelease.objects.count())
        while log_integrate():
            pass
        assert LogEntry.objects.count() == size
        costs[size] = _proof_cost(client, release, size)
    (statements_100, rows_100), (statements_1000, rows_1000) = costs[100], costs[1000]
    assert statements_100 == statements_1000
    # 2 rows per level at most (the proof's nodes: subtrees and leaves), plus the entry and
    # the size's lookups; far below the n a whole-tree read costs.
    assert rows_1000 <= 2 * (1000).bit_length() + 4, costs
    assert rows_100 <= 2 * (100).bit_length() + 4, costs
    # The same holds for the consistency endpoint.
    before = rows_read("audit_logentry", "audit_logsubtree")
    response = client.get("/v1/log/consistency?from=333&to=1000")
    assert response.status_code == 200
    assert rows_read("audit_logentry", "audit_logsubtree") - before <= 2 * 10 + 4


@pytest.mark.django_db
def test_log_verify_reports_a_tampered_stored_subtree_that_proofs_would_carry(published, log_key):
    from io import StringIO

    from django.core.management import CommandError, call_command

    more_releases(19)
    log_integrate()
    tree = log_tree()
    forged = "ab" * 32
    as_owner(("UPDATE audit_logsubtree SET hash = %s WHERE level = 2 AND index = 1", [forged]))
    # What a proof then carries no longer leads to the signed root.
    entry = LogEntry.objects.get(index=0)
    body = log_inclusion_proof(entry=entry, tree_size=20)
    assert _b64(body["proof"][2]) == bytes.fromhex(forged)
    with pytest.raises(Exception, match="does not lead to the root"):
        verify_inclusion(
            leaf=_b64(body["leaf_hash"]),
            index=0,
            tree_size=20,
            proof=[_b64(node) for node in body["proof"]],
            root=tree.root(20),
        )
    out = StringIO()
    with pytest.raises(CommandError):
        call_command("log", "verify", stdout=out)
    report = out.getvalue()
    assert "PROBLEM stored subtree 2/1: not the hash its entries give" in report, report
    assert report.count("PROBLEM") == 1, report
    # A subtree beyond the log, and a missing one: the first a problem, the second counted.
    as_owner(
        (
            "UPDATE audit_logsubtree SET hash = %s WHERE level = 2 AND index = 1",
            [tree.perfect(2, 1).hex()],
        ),
        "INSERT INTO audit_logsubtree (level, index, hash) VALUES (3, 7, repeat('0', 64))",
        "DELETE FROM audit_logsubtree WHERE level = 1 AND index = 0",
    )
    out = StringIO()
    with pytest.raises(CommandError):
        call_command("log", "verify", stdout=out)
    report = out.getvalue()
    assert "PROBLEM stored subtree 3/7: no such subtree" in report, report
    assert report.count("PROBLEM") == 1, report
    assert "(1 not stored yet)" in report, report


@pytest.mark.django_db
def test_an_export_carries_the_same_proofs_from_the_stored_subtrees(published, log_key):
    more_releases(12)
    log_integrate()
    ids = list(LogEntry.objects.values_list("release_id", flat=True))
    exported = log_export_proofs(ids)
    assert exported is not None and exported["tree_size"] == 13
    tree = log_tree()
    for item in exported["proofs"].values():
        proof = [_b64(node) for node in item["proof"]]
        assert proof == tree.inclusion_proof(item["index"], 13)
    assert len(exported["proofs"]) == 13
    assert json.dumps(exported)
