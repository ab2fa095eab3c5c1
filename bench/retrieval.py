"""Retrieval latency and quality: hybrid vs vector-only vs keyword-only on NQ-open questions.

Corpus: the Natural Questions gold passages of ../shared/data/nq-open-oracle.jsonl.gz
(deduplicated by text, embedded with the local model, cached under var/bench), topped up to
the target size with FILLER passages: random unit vectors as embeddings, text sampled from
the real passages' words. Filler is realistic noise for keyword search but almost never
near a real query in vector space, so vector-only figures at the large sizes are optimistic.
hybrid runs the keyword channel on its own connection while the query embeds (the product's
way); hybrid-1 is the baseline with both channels on one connection. A diagnostic row
(vector*) runs vector-only with sorting priced out so that the HNSW index is used even where
the planner would pick an exact scan and sort.

Run: .venv/bin/python bench/retrieval.py [--quick | --sizes 1000000]
     (sizes 10k and 100k; --quick 2k and 10k)
Uses its own embedded PostgreSQL and Redis under var/bench; the database is recreated.
Latencies are measured warm: every question runs once, unmeasured, before any is measured.
"""

import argparse
import math
import re
import statistics
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import numpy as np
from common.bootstrap import NQ_FILE, ROOT, django_setup

BENCH_DIR = ROOT / "var" / "bench"
# Before any project import: the bench drops and recreates the database of this data dir.
django_setup(BENCH_DIR)
# The imports below need the configured Django (models, settings): hence after setup().
from common.corpus import (  # noqa: E402
    BUILD_MAINTENANCE_WORK_MEM,
    NQCorpus,
    Question,
    bench_space,
    build_hnsw,
    clear_corpus,
    drop_hnsw,
    groups_of,
    load_passages,
    nq_embeddings,
    read_nq,
)
from common.services import embedded_services, recreate_database, vacuum_analyze  # noqa: E402
from common.stats import percentile  # noqa: E402
from django.contrib.auth.models import AbstractBaseUser  # noqa: E402
from django.db import connection  # noqa: E402
from django.test import override_settings  # noqa: E402
from django.test.utils import CaptureQueriesContext  # noqa: E402

from core.embedded import EmbeddedPostgres  # noqa: E402
from knowledge.embeddings import get_embedding_provider  # noqa: E402
from knowledge.models import Space  # noqa: E402
from knowledge.retrieval import KEYWORD_SEARCH, VECTOR_SEARCH, retrieve  # noqa: E402
from knowledge.scope import access_scope_build  # noqa: E402

QUESTIONS = 200
SEED = 20240501
PASSAGES_PER_DOCUMENT = 50
WARMUP = 10
CONFIGS: dict[str, tuple[str, ...]] = {
    "hybrid": (VECTOR_SEARCH, KEYWORD_SEARCH),
    # Baseline: hybrid with both channels one after the other on one connection.
    "hybrid-1": (VECTOR_SEARCH, KEYWORD_SEARCH),
    "vector": (VECTOR_SEARCH,),
    "keyword": (KEYWORD_SEARCH,),
    # Diagnostic, not the product path: the same vector-only retrieve with sorting priced out
    # (enable_sort = off), which leaves the HNSW index as the only way to order by distance.
    # Shows what the index would give where the planner prefers an exact scan and sort.
    "vector*": (VECTOR_SEARCH,),
}
FORCED_HNSW = {"vector*"}
ONE_CONNECTION = {"hybrid-1"}


# --- data --------------------------------------------------------------------------


def load(
    space: Space, user: AbstractBaseUser, texts: list[str], vectors: np.ndarray
) -> dict[str, int]:
    """Documents of PASSAGES_PER_DOCUMENT passages each, bulk-created; text -> passage id."""
    groups = groups_of(0, len(texts), PASSAGES_PER_DOCUMENT)
    titles = [f"bench {n}" for n in range(len(groups))]
    created = load_passages(space, user, groups, titles, texts, vectors)
    return {passage.text: passage.pk for passage in created}


# --- measurement -------------------------------------------------------------------


def passage_scans(user: object, query: str, tools: tuple[str, ...]) -> str:
    """How the plan of each ranked passage query reads knowledge_passage (which index)."""
    with CaptureQueriesContext(connection) as queries:
        retrieve(scope=access_scope_build(user=user), query=query, tools=tools)
    found = []
    for captured in queries.captured_queries:
        if "ORDER BY" not in captured["sql"]:
            continue  # the exists() probes
        with connection.cursor() as cursor:
            cursor.execute("EXPLAIN " + captured["sql"])
            plan = "\n".join(row[0] for row in cursor.fetchall())
        found += [
            match.group(0)
            for match in re.finditer(
                r"Seq Scan on knowledge_passage\b|(?:Index|Index Only) Scan using \w+ on "
                r"knowledge_passage\b|Bitmap Index Scan on \w*passage\w*",
                plan,
            )
        ]
    return ", ".join(found) or "?"


def rank_of(candidates: Sequence, gold_id: int) -> int | None:
    for rank, candidate in enumerate(candidates, start=1):
        if candidate.passage_id == gold_id:
            return rank
    return None


@contextmanager
def planner(name: str) -> Iterator[None]:
    """Session setting for the diagnostic config; retrieve's own SET LOCALs still apply.
    The one-connection baseline switches the concurrent keyword channel off."""
    if name in ONE_CONNECTION:
        with override_settings(KOINON_RETRIEVAL_CONCURRENT=False):
            yield
        return
    if name not in FORCED_HNSW:
        yield
        return
    with connection.cursor() as cursor:
        cursor.execute("SET enable_sort = off")
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute("RESET enable_sort")


def measure(user: object, questions: list[Question], ids: dict[str, int]) -> dict[str, dict]:
    """p50/p95 latency, recall@10, nDCG@10 and MRR@10 of each config, interleaved per
    question (the order rotates) so that noise hits every config alike, after a warm pass."""
    names = list(CONFIGS)
    for question in questions[:WARMUP]:
        for name in names:
            with planner(name):
                retrieve(
                    scope=access_scope_build(user=user),
                    query=question.text,
                    tools=CONFIGS[name],
                    limit=10,
                )
    # Every question once, unmeasured, before any is measured: otherwise whichever config
    # comes first for a question reads its pages into shared buffers for the others, and
    # the rotation makes hybrid that config more often than vector-only (it is the first
    # user of the keyword pages in 2 of 5 rotations and of the vector pages in 1, vector-only
    # first of the vector pages in 1). Measured warm, as a server whose corpus fits in its
    # shared buffers runs.
    for question in questions:
        retrieve(
            scope=access_scope_build(user=user),
            query=question.text,
            tools=CONFIGS["hybrid"],
            limit=10,
        )
    latencies: dict[str, list[float]] = {name: [] for name in names}
    ranks: dict[str, list[int | None]] = {name: [] for name in names}
    for number, question in enumerate(questions):
        shift = number % len(names)
        for name in names[shift:] + names[:shift]:
            with planner(name):
                started = time.perf_counter()
                result = retrieve(
                    scope=access_scope_build(user=user),
                    query=question.text,
                    tools=CONFIGS[name],
                    limit=10,
                )
                latencies[name].append((time.perf_counter() - started) * 1000)
            ranks[name].append(rank_of(result.candidates, ids[question.gold]))
    figures = {}
    for name in names:
        found = [rank for rank in ranks[name] if rank is not None]
        figures[name] = {
            "p50": statistics.median(latencies[name]),
            "p95": percentile(latencies[name], 0.95),
            "recall": len(found) / len(questions),
            # One relevant passage per question, so the ideal DCG is 1.
            "ndcg": sum(1 / math.log2(rank + 1) for rank in found) / len(questions),
            "mrr": sum(1 / rank for rank in found) / len(questions),
        }
    return figures


def report(size: int, real: int, figures: dict[str, dict], embed_ms: float) -> None:
    print(
        f"\n{size:,} passages ({real:,} real NQ gold + {size - real:,} filler), "
        f"{QUESTIONS} questions, limit 10"
    )
    print(
        f"{'tools':<9} {'p50 ms':>8} {'p95 ms':>8} {'recall@10':>10} {'nDCG@10':>8} {'MRR@10':>7}"
    )
    for name, row in figures.items():
        print(
            f"{name:<9} {row['p50']:>8.1f} {row['p95']:>8.1f} {row['recall']:>10.3f} "
            f"{row['ndcg']:>8.3f} {row['mrr']:>7.3f}"
        )
    hybrid, vector = figures["hybrid"], figures["vector"]
    print(
        f"hybrid / vector-only latency: p50 x{hybrid['p50'] / vector['p50']:.2f}, "
        f"p95 x{hybrid['p95'] / vector['p95']:.2f} (goal at 100k: p95 <= x1.30); "
        f"query embedding alone p50 {embed_ms:.1f} ms (inside vector and hybrid)"
    )
    one = figures["hybrid-1"]
    print(
        f"hybrid-1 (baseline, channels one after the other on one connection) / vector-only: "
        f"p50 x{one['p50'] / vector['p50']:.2f}, p95 x{one['p95'] / vector['p95']:.2f}"
    )
    print("vector* = diagnostic only: vector-only with enable_sort=off, which forces the HNSW")
    print("          index (iterative scan) where the planner chose an exact scan + sort")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="sizes 2k and 10k")
    parser.add_argument(
        "--sizes", help="comma-separated corpus sizes instead, e.g. 1000000 (~25 min, ~15 GB)"
    )
    args = parser.parse_args()
    if not NQ_FILE.exists():
        print(f"skipped: {NQ_FILE} is absent (see ../shared/data/README.md)")
        return
    sizes = [2_000, 10_000] if args.quick else [10_000, 100_000]
    if args.sizes:
        sizes = sorted(int(size) for size in args.sizes.split(","))
    with embedded_services(BENCH_DIR) as postgres:
        run(sizes, postgres)


def run(sizes: list[int], postgres: EmbeddedPostgres) -> None:
    began = time.perf_counter()
    recreate_database(postgres)
    with connection.cursor() as cursor:
        cursor.execute("SHOW shared_buffers")
        (buffers,) = cursor.fetchone()
    print(
        f"database recreated and migrated in {time.perf_counter() - began:.1f} s; "
        f"shared_buffers {buffers}"
    )
    passages, all_questions = read_nq()
    rng = np.random.default_rng(SEED)
    questions = [all_questions[i] for i in rng.choice(len(all_questions), QUESTIONS, replace=False)]
    # Every evaluated question's gold passage is in the corpus at every size.
    corpus = NQCorpus.build(passages, nq_embeddings(passages, [BENCH_DIR]), questions, rng)
    print(
        f"{len(passages):,} distinct NQ gold passages ({len(all_questions):,} questions); "
        f"{QUESTIONS} questions sampled (seed {SEED}); filler passages: random unit-vector "
        f"embeddings, text sampled from the real passages' words"
    )

    bench = bench_space()
    reader = bench.reader  # not staff: its retrieval is filtered
    provider = get_embedding_provider()
    provider.embed(["warm-up"])  # loads the model when the corpus embeddings were cached
    embed_ms = []
    for question in questions[:50]:
        started = time.perf_counter()
        provider.embed([question.text])
        embed_ms.append((time.perf_counter() - started) * 1000)

    for size in sizes:
        clear_corpus()
        drawn = corpus.draw(size, rng)
        order = rng.permutation(size)  # real and filler rows interleaved on disk
        all_texts = [drawn.texts[i] for i in order]
        all_vectors = drawn.vectors[order]
        rebuild = size == max(sizes)
        if rebuild:
            drop_hnsw()
        started = time.perf_counter()
        ids = load(bench.space, bench.curator, all_texts, all_vectors)
        loaded = time.perf_counter() - started
        how = "without the HNSW index" if rebuild else "into the live HNSW index"
        print(f"\nloaded {size:,} passages {how} in {loaded:.1f} s ({size / loaded:,.0f}/s)")
        if rebuild:
            seconds = build_hnsw()
            print(
                f"HNSW index build (m=16, ef_construction=64, maintenance_work_mem "
                f"{BUILD_MAINTENANCE_WORK_MEM}): {seconds:.1f} s"
            )
        vacuum_analyze("knowledge_passage", "knowledge_lexemefrequency")
        for name in ("vector", "keyword", "vector*"):
            with planner(name):
                plan = passage_scans(reader, questions[0].text, CONFIGS[name])
            print(f"plan of {name:<8} {plan}")
        report(size, drawn.real, measure(reader, questions, ids), statistics.median(embed_ms))
    print(f"\ntotal {time.perf_counter() - began:.0f} s")


if __name__ == "__main__":
    main()
