"""Retrieval latency and quality: hybrid vs vector-only vs keyword-only on NQ-open questions.

Corpus: the Natural Questions gold passages of ../shared/data/nq-open-oracle.jsonl.gz
(deduplicated by text, embedded with the local model, cached under var/bench), topped up to
the target size with FILLER passages: random unit vectors as embeddings, text sampled from
the real passages' words. Filler is realistic noise for keyword search but almost never
near a real query in vector space, so vector-only figures at the large sizes are optimistic.
A fourth, diagnostic row (vector*) runs vector-only with sorting priced out so that the HNSW
index is used even where the planner would pick an exact scan and sort.

Run: .venv/bin/python bench/retrieval.py [--quick]   (sizes 10k and 100k; --quick 2k and 10k)
Uses its own embedded PostgreSQL and Redis under var/bench; the database is recreated.
"""

import argparse
import gzip
import hashlib
import json
import math
import os
import re
import statistics
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import django  # importing it reads no settings yet: setup() below does
import numpy as np

ROOT = Path(__file__).resolve().parent.parent
BENCH_DIR = ROOT / "var" / "bench"
NQ_FILE = ROOT.parent / "shared" / "data" / "nq-open-oracle.jsonl.gz"
sys.path.insert(0, str(ROOT))
# Before Django is set up: the bench must never reach a configured (real) server, because
# it drops and recreates its database.
os.environ["KOINON_DATA_DIR"] = str(BENCH_DIR)
os.environ["DJANGO_SETTINGS_MODULE"] = "koinon.settings"
os.environ.pop("DATABASE_URL", None)
os.environ.pop("REDIS_URL", None)
os.environ.pop("KOINON_DATABASE_NAME", None)

django.setup()
# The imports below need the configured Django (models, settings): hence after setup().
from django.conf import settings  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402
from django.test.utils import CaptureQueriesContext  # noqa: E402

from core.embedded import PG_SUPERUSER, EmbeddedPostgres, EmbeddedRedis  # noqa: E402
from knowledge.embeddings import get_embedding_provider  # noqa: E402
from knowledge.models import (  # noqa: E402
    Document,
    DocumentRevision,
    EmbeddingStatus,
    Extraction,
    ExtractionRole,
    ExtractionStatus,
    Passage,
    Space,
)
from knowledge.retrieval import KEYWORD_SEARCH, VECTOR_SEARCH, retrieve  # noqa: E402

QUESTIONS = 200
SEED = 20240501
PASSAGES_PER_DOCUMENT = 50
LOAD_BATCH = 2000
WARMUP = 10
HNSW_INDEX = "passage_embedding_hnsw"
# Without enough memory the HNSW build spills out of RAM and slows several-fold; this is
# the standard pgvector advice for a bulk build, applied to the build statement only.
BUILD_MAINTENANCE_WORK_MEM = "1GB"
CONFIGS: dict[str, tuple[str, ...]] = {
    "hybrid": (VECTOR_SEARCH, KEYWORD_SEARCH),
    "vector": (VECTOR_SEARCH,),
    "keyword": (KEYWORD_SEARCH,),
    # Diagnostic, not the product path: the same vector-only retrieve with sorting priced out
    # (enable_sort = off), which leaves the HNSW index as the only way to order by distance.
    # Shows what the index would give where the planner prefers an exact scan and sort.
    "vector*": (VECTOR_SEARCH,),
}
FORCED_HNSW = {"vector*"}
# The cache is invalid when the passage text recipe changes, not just the source file.
TEXT_RECIPE = "title-newline-text-v1"


# --- services and database ---------------------------------------------------------


def start_services() -> tuple[EmbeddedPostgres, list]:
    postgres = EmbeddedPostgres(settings.EMBEDDED_PG_DIR)
    redis = EmbeddedRedis(settings.EMBEDDED_REDIS_DIR)
    started = [service for service in (postgres, redis) if service.start()]
    return postgres, started


def stop_services(started: list) -> None:
    """Stop only what this run started: a server someone else runs is left alone."""
    from django.db import connections

    connections.close_all()
    for service in reversed(started):
        service.stop()


def recreate_database(postgres: EmbeddedPostgres) -> None:
    import psycopg
    from psycopg import sql

    name = settings.DATABASES["default"]["NAME"]
    with psycopg.connect(
        host=str(postgres.socket_dir), dbname="postgres", user=PG_SUPERUSER, autocommit=True
    ) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )
    postgres.ensure_database(name)
    call_command("migrate", interactive=False, verbosity=0)


# --- data --------------------------------------------------------------------------


@dataclass(frozen=True)
class Question:
    text: str
    gold: str  # the text of its gold passage (ctxs[0])


def read_nq() -> tuple[list[str], list[Question]]:
    """Distinct gold passages ("title\\ntext", first occurrence order) and all questions."""
    passages: dict[str, None] = {}
    questions = []
    with gzip.open(NQ_FILE, "rt", encoding="utf-8") as handle:
        for line in handle:
            record = json.loads(line)
            gold = record["ctxs"][0]
            text = f"{gold['title']}\n{gold['text'].strip()}"
            passages.setdefault(text, None)
            questions.append(Question(record["question"], text))
    return list(passages), questions


def nq_embeddings(texts: list[str]) -> np.ndarray:
    """Embeddings of the real passages, cached by the source file's sha256 and the model."""
    provider = get_embedding_provider()
    key = {
        "source_sha256": hashlib.sha256(NQ_FILE.read_bytes()).hexdigest(),
        "model_id": provider.model_id,
        "recipe": TEXT_RECIPE,
        "count": len(texts),
    }
    cache, meta = BENCH_DIR / "nq_embeddings.npy", BENCH_DIR / "nq_embeddings.json"
    if cache.exists() and meta.exists() and json.loads(meta.read_text()) == key:
        print(f"NQ embeddings: cached ({cache.relative_to(ROOT)})")
        return np.load(cache)
    started = time.perf_counter()
    vectors = np.asarray(provider.embed(texts), dtype=np.float32)
    seconds = time.perf_counter() - started
    print(
        f"NQ embeddings: computed {len(texts)} in {seconds:.1f} s "
        f"({len(texts) / seconds:.0f}/s), cached for the next run"
    )
    np.save(cache, vectors)
    meta.write_text(json.dumps(key))
    return vectors


def filler(count: int, real: list[str], rng: np.random.Generator) -> tuple[list[str], np.ndarray]:
    """Texts drawn from the real passages' word bag (a real passage's length each) and
    random unit vectors: keyword noise that shares the vocabulary, vector noise that doesn't."""
    words = np.asarray([word for text in real for word in text.split()])
    lengths = rng.choice([len(text.split()) for text in real], size=count)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    drawn = words[rng.integers(0, len(words), size=int(offsets[-1]))]
    texts = [" ".join(drawn[offsets[i] : offsets[i + 1]]) for i in range(count)]
    vectors = rng.standard_normal((count, 384), dtype=np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return texts, vectors


def clear_corpus() -> None:
    tables = [m._meta.db_table for m in (Passage, Extraction, DocumentRevision, Document)]
    with connection.cursor() as cursor:
        # One statement: documents and revisions reference each other.
        cursor.execute(f"TRUNCATE {', '.join(tables)} CASCADE")


def load(space: Space, user: object, texts: list[str], vectors: np.ndarray) -> dict[str, int]:
    """Documents of PASSAGES_PER_DOCUMENT passages each, bulk-created; text -> passage id."""
    model_id = get_embedding_provider().model_id
    groups = [
        range(i, min(i + PASSAGES_PER_DOCUMENT, len(texts)))
        for i in range(0, len(texts), PASSAGES_PER_DOCUMENT)
    ]
    documents = Document.objects.bulk_create(
        [
            Document(space=space, title=f"bench {n}", kind="text", created_by=user)
            for n in range(len(groups))
        ]
    )
    revisions = DocumentRevision.objects.bulk_create(
        [
            DocumentRevision(
                document=document,
                number=1,
                sha256=f"{document.pk:064d}",
                file="bench/x.txt",
                filename="x.txt",
                size=1,
                uploaded_by=user,
            )
            for document in documents
        ]
    )
    for document, revision in zip(documents, revisions, strict=True):
        document.current_revision = revision
    Document.objects.bulk_update(documents, ["current_revision"], batch_size=LOAD_BATCH)
    extractions = Extraction.objects.bulk_create(
        [
            Extraction(
                revision=revision,
                role=ExtractionRole.PRIMARY,
                text="\n".join(texts[i] for i in group),
                status=ExtractionStatus.ADMITTED,
            )
            for revision, group in zip(revisions, groups, strict=True)
        ]
    )
    rows = []
    for extraction, group in zip(extractions, groups, strict=True):
        start = 0
        for ordinal, i in enumerate(group):
            rows.append(
                Passage(
                    is_current=True,
                    extraction=extraction,
                    revision_id=extraction.revision_id,
                    document_id=extraction.revision.document_id,
                    space=space,
                    ordinal=ordinal,
                    char_start=start,
                    char_end=start + len(texts[i]),
                    text=texts[i],
                    embedding=vectors[i],
                    embedding_model=model_id,
                    embedding_dimension=vectors.shape[1],
                    embedding_status=EmbeddingStatus.EMBEDDED,
                )
            )
            start += len(texts[i]) + 1
    created = Passage.objects.bulk_create(rows, batch_size=LOAD_BATCH)
    return {passage.text: passage.pk for passage in created}


def hnsw_index() -> object:
    return next(index for index in Passage._meta.indexes if index.name == HNSW_INDEX)


def drop_hnsw() -> None:
    with connection.schema_editor() as editor:
        editor.remove_index(Passage, hnsw_index())


def build_hnsw() -> float:
    """Recreate the index from the model's own definition (the migration's); seconds taken."""
    with connection.cursor() as cursor:
        cursor.execute(f"SET maintenance_work_mem = '{BUILD_MAINTENANCE_WORK_MEM}'")
    started = time.perf_counter()
    with connection.schema_editor() as editor:
        editor.add_index(Passage, hnsw_index())
    seconds = time.perf_counter() - started
    with connection.cursor() as cursor:
        cursor.execute("RESET maintenance_work_mem")
    return seconds


# --- measurement -------------------------------------------------------------------


def passage_scans(user: object, query: str, tools: tuple[str, ...]) -> str:
    """How the plan of each ranked passage query reads knowledge_passage (which index)."""
    with CaptureQueriesContext(connection) as queries:
        retrieve(user=user, query=query, tools=tools)
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


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(fraction * len(ordered)) - 1)]


@contextmanager
def planner(name: str) -> Iterator[None]:
    """Session setting for the diagnostic config; retrieve's own SET LOCALs still apply."""
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
    question (the order rotates) so that caches and noise hit every config alike."""
    names = list(CONFIGS)
    for question in questions[:WARMUP]:
        for name in names:
            with planner(name):
                retrieve(user=user, query=question.text, tools=CONFIGS[name], limit=10)
    latencies: dict[str, list[float]] = {name: [] for name in names}
    ranks: dict[str, list[int | None]] = {name: [] for name in names}
    for number, question in enumerate(questions):
        shift = number % len(names)
        for name in names[shift:] + names[:shift]:
            with planner(name):
                started = time.perf_counter()
                result = retrieve(user=user, query=question.text, tools=CONFIGS[name], limit=10)
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
        f"p95 x{hybrid['p95'] / vector['p95']:.2f}; "
        f"query embedding alone p50 {embed_ms:.1f} ms (inside vector and hybrid)"
    )
    print("vector* = diagnostic only: vector-only with enable_sort=off, which forces the HNSW")
    print("          index (iterative scan) where the planner chose an exact scan + sort")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="sizes 2k and 10k")
    args = parser.parse_args()
    if not NQ_FILE.exists():
        print(f"skipped: {NQ_FILE} is absent (see ../shared/data/README.md)")
        return
    sizes = [2_000, 10_000] if args.quick else [10_000, 100_000]
    BENCH_DIR.mkdir(parents=True, exist_ok=True)
    postgres, started = start_services()
    try:
        run(sizes, postgres)
    finally:
        stop_services(started)


def run(sizes: list[int], postgres: EmbeddedPostgres) -> None:
    from django.contrib.auth import get_user_model

    from knowledge.services import space_create, space_member_set

    began = time.perf_counter()
    recreate_database(postgres)
    print(f"database recreated and migrated in {time.perf_counter() - began:.1f} s")
    passages, all_questions = read_nq()
    rng = np.random.default_rng(SEED)
    questions = [all_questions[i] for i in rng.choice(len(all_questions), QUESTIONS, replace=False)]
    vectors = nq_embeddings(passages)
    index_of = {text: i for i, text in enumerate(passages)}
    # Every evaluated question's gold passage is in the corpus at every size.
    gold = list(dict.fromkeys(question.gold for question in questions))
    gold_set = set(gold)
    rest = [i for i in rng.permutation(len(passages)) if passages[i] not in gold_set]
    print(
        f"{len(passages):,} distinct NQ gold passages ({len(all_questions):,} questions); "
        f"{QUESTIONS} questions sampled (seed {SEED}); filler passages: random unit-vector "
        f"embeddings, text sampled from the real passages' words"
    )

    users = get_user_model().objects
    curator = users.create_user(username="bench-curator", password=None, is_staff=True)
    reader = users.create_user(username="bench-reader", password=None)  # not staff: filtered
    space = space_create(name="Bench", created_by=curator)
    space_member_set(space=space, username=reader.username, role="reader")
    provider = get_embedding_provider()
    provider.embed(["warm-up"])  # loads the model when the corpus embeddings were cached
    embed_ms = []
    for question in questions[:50]:
        started = time.perf_counter()
        provider.embed([question.text])
        embed_ms.append((time.perf_counter() - started) * 1000)

    for size in sizes:
        clear_corpus()
        chosen = [index_of[text] for text in gold] + rest[: max(0, size - len(gold))]
        texts = [passages[i] for i in chosen]
        matrix = vectors[chosen]
        fill_texts, fill_vectors = filler(size - len(texts), passages, rng)
        order = rng.permutation(size)  # real and filler rows interleaved on disk
        all_texts = [(texts + fill_texts)[i] for i in order]
        all_vectors = np.concatenate([matrix, fill_vectors])[order]
        rebuild = size == max(sizes)
        if rebuild:
            drop_hnsw()
        started = time.perf_counter()
        ids = load(space, curator, all_texts, all_vectors)
        loaded = time.perf_counter() - started
        how = "without the HNSW index" if rebuild else "into the live HNSW index"
        print(f"\nloaded {size:,} passages {how} in {loaded:.1f} s ({size / loaded:,.0f}/s)")
        if rebuild:
            seconds = build_hnsw()
            print(
                f"HNSW index build (m=16, ef_construction=64, maintenance_work_mem "
                f"{BUILD_MAINTENANCE_WORK_MEM}): {seconds:.1f} s"
            )
        with connection.cursor() as cursor:
            cursor.execute("VACUUM ANALYZE knowledge_passage")
        for name in ("vector", "keyword", "vector*"):
            with planner(name):
                plan = passage_scans(reader, questions[0].text, CONFIGS[name])
            print(f"plan of {name:<8} {plan}")
        report(size, len(texts), measure(reader, questions, ids), statistics.median(embed_ms))
    print(f"\ntotal {time.perf_counter() - began:.0f} s")


if __name__ == "__main__":
    main()
