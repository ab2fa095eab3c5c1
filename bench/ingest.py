"""Ingest throughput: real documents through document_upload + revision_extract, in-process.

Documents: Natural Questions gold passages as .txt and SQuAD 2.0 paragraphs as .md (one
in six), built from ../shared/data. Extraction runs in this process (no Celery worker): the
upload's queueing is replaced by a direct `revision_extract` call, as a worker would make.

Run: .venv/bin/python bench/ingest.py [--quick]   (500 documents; --quick 50)
Uses its own embedded PostgreSQL and Redis under var/bench; the database is recreated.
"""

import argparse
import json
import os
import time

from common.bootstrap import NQ_FILE, ROOT, SHARED_DATA, django_setup

BENCH_DIR = ROOT / "var" / "bench"
SQUAD_FILE = SHARED_DATA / "squad2-dev-sample.json"
# Before any project import: the bench drops and recreates the database of this data dir.
django_setup(BENCH_DIR)
# The imports below need the configured Django (models, settings): hence after setup().
from common.corpus import bench_curator, nq_records  # noqa: E402
from common.services import embedded_services, recreate_database  # noqa: E402
from django.db.models import Avg  # noqa: E402
from django.db.models.functions import Length  # noqa: E402

import knowledge.documents as documents_module  # noqa: E402
from knowledge.embeddings import get_embedding_provider  # noqa: E402
from knowledge.models import (  # noqa: E402
    EmbeddingStatus,
    Extraction,
    ExtractionStatus,
    Passage,
)
from knowledge.services import space_create  # noqa: E402

SQUAD_EVERY = 6  # every sixth document is a SQuAD paragraph, the rest NQ passages


# --- documents ---------------------------------------------------------------------


def build_documents(count: int) -> list[tuple[str, bytes]]:
    """(filename, bytes): NQ gold passages (distinct texts) as .txt, SQuAD paragraphs as .md."""
    nq: list[tuple[str, bytes]] = []
    seen: set[str] = set()
    for record in nq_records():
        gold = record["ctxs"][0]
        if gold["text"] in seen:
            continue  # identical bytes would be the same document, not a new one
        seen.add(gold["text"])
        body = f"{gold['title']}\n\n{gold['text'].strip()}\n"
        nq.append((f"nq-{len(nq):04d}.txt", body.encode()))
    squad: list[tuple[str, bytes]] = []
    for article in json.loads(SQUAD_FILE.read_text(encoding="utf-8"))["data"]:
        title = article["title"].replace("_", " ")
        for paragraph in article["paragraphs"]:
            body = f"# {title}\n\n{paragraph['context'].strip()}\n"
            squad.append((f"squad-{len(squad):03d}.md", body.encode()))
    documents = []
    for i in range(count):
        source = squad if i % SQUAD_EVERY == SQUAD_EVERY - 1 and squad else nq
        documents.append(source.pop(0))
    return documents


# --- measurement -------------------------------------------------------------------


class EmbedTimer:
    """Wraps knowledge.documents.passages_embed (looked up at call time by revision_extract)
    so that the embedding share can be split from extraction and chunking."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.original = documents_module.passages_embed

    def __call__(self, *, extraction: Extraction) -> None:
        started = time.perf_counter()
        self.original(extraction=extraction)
        self.seconds += time.perf_counter() - started


def ingest(documents: list[tuple[str, bytes]]) -> dict[str, float]:
    user = bench_curator()
    space = space_create(name="Bench ingest", created_by=user)
    timer = EmbedTimer()
    documents_module.passages_embed = timer
    # No worker runs here: a queued task would wait forever, so the bench calls
    # revision_extract itself, right after each upload, as the worker would.
    documents_module.revision_queue_extraction = lambda *, revision: None
    upload_seconds = extract_seconds = 0.0
    for filename, data in documents:
        started = time.perf_counter()
        result = documents_module.document_upload(
            user=user, filename=filename, data=data, space=space
        )
        uploaded = time.perf_counter()
        documents_module.revision_extract(revision_id=result.revision.pk)
        upload_seconds += uploaded - started
        extract_seconds += time.perf_counter() - uploaded
    return {
        "upload": upload_seconds,
        "extract_chunk": extract_seconds - timer.seconds,
        "embed": timer.seconds,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="50 documents instead of 500")
    args = parser.parse_args()
    if not (NQ_FILE.exists() and SQUAD_FILE.exists()):
        print(f"skipped: {SHARED_DATA} (NQ and SQuAD files) is absent; see its README.md")
        return
    count = 50 if args.quick else 500
    with embedded_services(BENCH_DIR) as postgres:
        recreate_database(postgres, clear_media=True)
        documents = build_documents(count)
        began = time.perf_counter()
        get_embedding_provider().embed(["warm-up"])  # model load and hash check, not ingest
        print(
            f"embedding model loaded in {time.perf_counter() - began:.1f} s "
            f"(threads {os.environ.get('KOINON_EMBEDDING_THREADS', '1')}, "
            f"cpus {os.cpu_count()})"
        )
        split = ingest(documents)
        report(documents, split)


def report(documents: list[tuple[str, bytes]], split: dict[str, float]) -> None:
    total = sum(split.values())
    passages = Passage.objects.count()
    embedded = Passage.objects.filter(embedding_status=EmbeddingStatus.EMBEDDED).count()
    failed = Extraction.objects.filter(status=ExtractionStatus.FAILED).count()
    # Short passages embed faster: the mean length explains the embedding rate.
    mean_chars = Passage.objects.aggregate(chars=Avg(Length("text")))["chars"] or 0
    markdown = sum(name.endswith(".md") for name, _ in documents)
    size = sum(len(data) for _, data in documents)
    print(
        f"{len(documents)} documents ({len(documents) - markdown} NQ .txt, {markdown} SQuAD "
        f".md, {size / 1024:.0f} KiB): {passages} passages, {embedded} embedded, "
        f"{failed} failed extractions; {passages / len(documents):.1f} passages per document, "
        f"{mean_chars:.0f} characters each on average"
    )
    print(f"documents per minute:      {len(documents) / total * 60:8.0f}")
    print(f"passages per second:       {passages / total:8.1f}  (end to end)")
    print(f"passages embedded per s:   {embedded / split['embed']:8.1f}  (embedding step only)")
    print(f"total {total:.1f} s, of which")
    for name, label in (
        ("upload", "upload (store bytes, rows)"),
        ("extract_chunk", "extract + chunk (2 extractors)"),
        ("embed", "embed + store vectors"),
    ):
        print(f"  {label:<32} {split[name]:7.1f} s  {split[name] / total:6.1%}")


if __name__ == "__main__":
    main()
