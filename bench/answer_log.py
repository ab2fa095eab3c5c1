"""The answer log (issue 33): integration throughput, proof sizes and latencies, and the cost
each sealed answer pays for the log.

On the bench's own embedded PostgreSQL and Redis under var/bench-answer-log. In one run:

1. The cost per sealed answer: `answer_create` (extractive provider, a one-document space)
   alternately without and with the log's after-commit hook (KOINON_LOG_INTEGRATE_AFTER_COMMIT),
   p50/p95 of both, and p50/p95 of the hook itself (`log_integration_queue`: publishing the
   integration task to Redis after commit; it runs outside the publication transaction,
   which takes no lock and writes nothing of the log). Goal: ≤ 2 ms at p95.
2. Integration at 10k entries in the database: 10,000 synthetic releases (inserted in SQL,
   as copies of the one real receipt), integrated by `log_integrate_all` (batches of 1,000,
   one signed checkpoint per batch): entries per second, next to the baseline of plainly
   inserting the same rows. Then inclusion and consistency proofs as the API builds them
   (`log_inclusion_proof`, `log_consistency_proof`: O(log n) stored subtree hashes and
   leaves, audit_logsubtree): p50/p95 latency, size and rows read, next to the baseline of
   reading every leaf hash (what each proof cost before the stored subtrees).
3. The database path at a larger size (--large, default 100,000): the further release rows
   and their log entries inserted in SQL in bulk (synthetic entries, leaf hashes computed by
   PostgreSQL; integrating them one by one would take the bench longer than the measurement),
   then the one-time fill of their stored subtrees (what the first integration after
   migration 0006 does for an existing log), one integration batch of 1,000 real entries
   on top, and API proofs as in 2.
4. 1M entries: through the Merkle module directly (synthetic leaf hashes, no database),
   tree build time, proof generation and verification p50/p95, and proof sizes.

Run: .venv/bin/python bench/answer_log.py [--entries 10000] [--large 100000]
     [--million 1000000] [--answers 40]
"""

import argparse
import hashlib
import json
import os
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common.bootstrap import ROOT, django_setup

BENCH_DIR = ROOT / "var" / "bench-answer-log"
django_setup(BENCH_DIR, KOINON_MODEL_PROVIDER="extractive")
from common.services import embedded_services, recreate_database, vacuum_analyze  # noqa: E402
from common.stats import percentile  # noqa: E402
from django.conf import settings  # noqa: E402
from django.contrib.auth import get_user_model  # noqa: E402
from django.db import connection  # noqa: E402

from answers.pipeline.lifecycle import answer_create  # noqa: E402
from answers.pipeline.request import answer_request_parse  # noqa: E402
from audit.log import (  # noqa: E402
    log_consistency_proof,
    log_inclusion_proof,
    log_integrate,
    log_integrate_all,
    log_tree,
)
from audit.merkle import (  # noqa: E402
    MerkleTree,
    leaf_hash,
    subtrees_needed,
    verify_consistency,
    verify_inclusion,
)
from audit.models import LogEntry, LogSubtree  # noqa: E402
from audit.services import log_integration_queue  # noqa: E402
from audit.signed_note import NoteSigner  # noqa: E402
from knowledge.documents.extraction import revision_extract  # noqa: E402
from knowledge.documents.upload import document_upload  # noqa: E402
from knowledge.services import space_create, space_member_set  # noqa: E402

TEXT = "The platform operations team owns service reviews."
QUESTION = "Who owns service reviews?"
PROOFS = 200


def ms(seconds: float) -> float:
    return seconds * 1000


def line(name: str, values: list[float]) -> str:
    return (
        f"{name:<44} p50 {ms(statistics.median(values)):8.3f} ms  "
        f"p95 {ms(percentile(values, 0.95)):8.3f} ms  (n={len(values)})"
    )


def setup_corpus():
    user = get_user_model().objects.create_user("bench-log")
    space = space_create(name="Bench", created_by=user)
    space_member_set(space=space, username=user.username, role="curator")
    result = document_upload(user=user, filename="ops.txt", data=TEXT.encode(), space=space)
    revision_extract(revision_id=result.revision.pk)
    return user


def answer_cost(user, count: int) -> None:
    """Sealed answers alternately without and with the after-commit hook."""
    request = answer_request_parse({"query": QUESTION})
    answer_create(user=user, request=request)  # warm-up
    timings: dict[bool, list[float]] = {False: [], True: []}
    for n in range(2 * count):
        hooked = n % 2 == 1
        settings.KOINON_LOG_INTEGRATE_AFTER_COMMIT = hooked
        started = time.perf_counter()
        answer_create(user=user, request=request)
        timings[hooked].append(time.perf_counter() - started)
    settings.KOINON_LOG_INTEGRATE_AFTER_COMMIT = False
    hook = []
    for _ in range(PROOFS):
        started = time.perf_counter()
        log_integration_queue()
        hook.append(time.perf_counter() - started)
    print("1. cost per sealed answer")
    print("   " + line("answer_create, baseline (no log hook)", timings[False]))
    print("   " + line("answer_create, with the log hook", timings[True]))
    print("   " + line("the hook alone (after commit)", hook))
    p95 = ms(percentile(hook, 0.95))
    print(f"   goal ≤ 2 ms p95 for the hook: {'met' if p95 <= 2 else 'not met'} ({p95:.3f} ms)")


def insert_releases(count: int) -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO audit_outputrelease (id, run_id, message_id, generation_id, kind, "
            "reset_context, policy_version, publication_sequence, selected_fact_ids, "
            "source_refs, result_hashes, text_sha256, citations_sha256, cards_sha256, "
            "policy_sha256, searched, created_at) "
            "SELECT gen_random_uuid(), r.run_id, r.message_id, NULL, 'refusal', "
            "100000 + n + %s, '2', nextval('audit_publication_sequence'), '[]', "
            "r.source_refs, '{}', md5(n::text) || md5(n::text), r.citations_sha256, "
            "r.cards_sha256, r.policy_sha256, '{}', now() "
            "FROM (SELECT * FROM audit_outputrelease ORDER BY publication_sequence LIMIT 1) r, "
            "generate_series(1, %s) n",
            [random.randrange(10**9), count],
        )


def integration(entries: int) -> None:
    print(f"2. {entries:,} entries in the database")
    # Baseline: inserting the same number of rows, nothing else.
    started = time.perf_counter()
    insert_releases(entries)
    insert_seconds = time.perf_counter() - started
    started = time.perf_counter()
    integrated = log_integrate_all()
    integrate_seconds = time.perf_counter() - started
    print(
        f"   baseline: inserting {entries:,} release rows  {entries / insert_seconds:10,.0f} rows/s"
    )
    print(
        f"   integration (hash, insert, sign per 1,000)  "
        f"{integrated / integrate_seconds:10,.0f} entries/s ({integrate_seconds:.2f} s)"
    )
    proofs(LogEntry.objects.count(), reads=PROOFS)


def proofs(size: int, *, reads: int) -> None:
    """API proofs at the log's size, next to reading every leaf hash `reads` times."""
    read, inclusion, consistency, sizes, rows = [], [], [], [], []
    entries = list(LogEntry.objects.order_by("?")[:PROOFS])
    for n, entry in enumerate(entries):
        if n < reads:
            started = time.perf_counter()
            log_tree()
            read.append(time.perf_counter() - started)
        started = time.perf_counter()
        proof = log_inclusion_proof(entry=entry, tree_size=size)
        inclusion.append(time.perf_counter() - started)
        sizes.append(len(proof["proof"]))
        rows.append(len(subtrees_needed(size, lambda t, i=entry.index: t.inclusion_proof(i, size))))
        old = random.randint(1, size)
        started = time.perf_counter()
        log_consistency_proof(old_size=old, new_size=size)
        consistency.append(time.perf_counter() - started)
    body = json.dumps(log_inclusion_proof(entry=entries[0], tree_size=size))
    print("   " + line("baseline: reading every leaf hash", read))
    print("   " + line("inclusion proof (as the API builds it)", inclusion))
    print("   " + line("consistency proof (as the API builds it)", consistency))
    print(
        f"   inclusion proof: {max(sizes)} hashes at most, {max(rows)} stored hashes read at "
        f"most, a response of ~{len(body):,} bytes (with its entry and checkpoint)"
    )


def insert_entries(count: int) -> None:
    """count releases and their log entries straight in SQL, at the next indices: synthetic
    entries (not what log_entry_json would give: `log verify` would refuse them), leaf hashes
    by PostgreSQL's sha256, as audit.merkle.leaf_hash takes them."""
    insert_releases(count)
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO audit_logentry (index, release_id, entry, leaf_hash, integrated_at) "
            "SELECT (SELECT coalesce(max(index) + 1, 0) FROM audit_logentry) - 1 "
            "+ row_number() OVER (ORDER BY r.publication_sequence), r.id, e.entry, "
            "encode(sha256('\\x00'::bytea || convert_to(e.entry, 'UTF8')), 'hex'), now() "
            "FROM audit_outputrelease r CROSS JOIN LATERAL "
            "(SELECT '{\"synthetic\":\"' || r.id::text || '\"}' AS entry) e "
            "WHERE NOT EXISTS (SELECT 1 FROM audit_logentry l WHERE l.release_id = r.id)"
        )


def large(total: int) -> None:
    start = LogEntry.objects.count()
    if total <= start:
        return
    print(f"3. {total:,} entries in the database")
    started = time.perf_counter()
    insert_entries(total - start)
    print(
        f"   {total - start:,} releases and entries inserted in SQL: "
        f"{time.perf_counter() - started:.1f} s"
    )
    vacuum_analyze("audit_outputrelease", "audit_logentry")
    started = time.perf_counter()
    log_integrate()  # nothing pending: fills every stored subtree of the inserted entries
    fill = time.perf_counter() - started
    print(
        f"   one-time fill of the stored subtrees ({LogSubtree.objects.count():,} rows, as "
        f"after migration 0006): {fill:.1f} s"
    )
    vacuum_analyze("audit_logsubtree")
    insert_releases(1000)
    started = time.perf_counter()
    integrated = log_integrate()
    batch = time.perf_counter() - started
    print(f"   one integration batch of {integrated:,} at {total:,}: {batch * 1000:.0f} ms")
    proofs(LogEntry.objects.count(), reads=5)


def million(count: int) -> None:
    print(f"4. {count:,} entries through the Merkle module (no database)")
    leaves = [hashlib.sha256(n.to_bytes(8, "big")).digest() for n in range(count)]
    started = time.perf_counter()
    tree = MerkleTree(leaf_hash(leaf) for leaf in leaves)
    build = time.perf_counter() - started
    print(f"   tree build: {build:.2f} s ({count / build:,.0f} leaves/s, leaf hashing included)")
    root = tree.root()
    generate, check, generate_c, check_c, sizes = [], [], [], [], []
    for _ in range(PROOFS):
        index = random.randrange(count)
        started = time.perf_counter()
        proof = tree.inclusion_proof(index, count)
        generate.append(time.perf_counter() - started)
        sizes.append(len(proof))
        started = time.perf_counter()
        verify_inclusion(
            leaf=leaf_hash(leaves[index]), index=index, tree_size=count, proof=proof, root=root
        )
        check.append(time.perf_counter() - started)
        old = random.randint(1, count)
        started = time.perf_counter()
        consistency = tree.consistency_proof(old, count)
        generate_c.append(time.perf_counter() - started)
        started = time.perf_counter()
        verify_consistency(
            old_size=old, new_size=count, old_root=tree.root(old), new_root=root, proof=consistency
        )
        check_c.append(time.perf_counter() - started)
    print("   " + line("inclusion proof, generated", generate))
    print("   " + line("inclusion proof, verified", check))
    print("   " + line("consistency proof, generated", generate_c))
    print("   " + line("consistency proof, verified", check_c))
    print(f"   inclusion proof: {max(sizes)} hashes ({max(sizes) * 32} bytes) at most")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--entries", type=int, default=10_000)
    parser.add_argument("--large", type=int, default=100_000)
    parser.add_argument("--million", type=int, default=1_000_000)
    parser.add_argument("--answers", type=int, default=40)
    options = parser.parse_args()
    key = BENCH_DIR / "log.key"
    BENCH_DIR.mkdir(parents=True, exist_ok=True)
    if not key.exists():
        key.write_text(NoteSigner.generate("bench.koinon/answers").key_string() + "\n")
        os.chmod(key, 0o600)
    settings.KOINON_LOG_KEY_FILE = str(key)
    settings.KOINON_LOG_CHECKPOINT_SECONDS = 0
    with embedded_services(BENCH_DIR) as postgres:
        recreate_database(postgres, clear_media=True)
        user = setup_corpus()
        answer_cost(user, options.answers)
        integration(options.entries)
        large(options.large)
    million(options.million)


if __name__ == "__main__":
    main()
