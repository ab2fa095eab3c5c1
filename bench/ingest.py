"""Ingest throughput: real documents through document_upload + revision_extract.

Documents: Natural Questions gold passages as .txt and SQuAD 2.0 paragraphs as .md (one
in six), built from ../shared/data. Each ingesting process is a separate OS process that
does what a Celery prefork child does (no broker): the upload's queueing is replaced by a
direct `revision_extract` call. With 2 processes each ingests every second document, as
`koinon_up --concurrency=2` would spread them.

One run measures, each on a freshly created database: the old way to isolate extraction
(KOINON_EXTRACT_ISOLATION=spawn, one interpreter per extraction) with 1 process, as the
baseline, then the fork server with each of --processes; the load average is printed
because another bench on the same cores skews absolute figures (compare ratios).

With --fp32-baseline it also measures the fork server with the embedding of before the
int8 kernels (fp32 MatMuls, length-sorted batches), in the same run.

Run: .venv/bin/python bench/ingest.py [--quick] [--processes 1 2] [--no-baseline]
[--fp32-baseline]
(500 documents; --quick 50). Uses its own embedded PostgreSQL and Redis under var/bench.
"""

import argparse
import json
import os
import subprocess
import sys
import time

from common.bootstrap import NQ_FILE, ROOT, SHARED_DATA, django_setup

BENCH_DIR = ROOT / "var" / "bench"
SQUAD_FILE = SHARED_DATA / "squad2-dev-sample.json"
# Before any project import: the bench drops and recreates the database of this data dir.
# An ingesting process gets its isolation mode from its parent through the environment.
django_setup(BENCH_DIR)
# The imports below need the configured Django (models, settings): hence after setup().
from common.corpus import bench_curator, nq_records  # noqa: E402
from common.services import embedded_services, recreate_database  # noqa: E402
from django.db import connections  # noqa: E402
from django.db.models import Avg  # noqa: E402
from django.db.models.functions import Length  # noqa: E402

from knowledge.documents import embedding, extraction, upload  # noqa: E402
from knowledge.embeddings import get_embedding_provider  # noqa: E402
from knowledge.models import (  # noqa: E402
    EmbeddingStatus,
    Extraction,
    ExtractionStatus,
    Passage,
    Space,
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
    """Wraps knowledge.documents.embedding.passages_embed (looked up at call time by
    extraction_embed) so that the embedding share can be split from extraction and chunking."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.original = embedding.passages_embed

    def __call__(self, *, extraction: Extraction, seconds: float | None = None) -> str:
        # No worker runs here to take a queued rest: every passage is embedded at once.
        started = time.perf_counter()
        outcome = self.original(extraction=extraction)
        self.seconds += time.perf_counter() - started
        return outcome


def ingest(documents: list[tuple[str, bytes]], space: Space) -> dict[str, float]:
    user = space.created_by
    timer = EmbedTimer()
    embedding.passages_embed = timer
    # No worker runs here: a queued task would wait forever, so the bench calls
    # revision_extract itself, right after each upload, as the worker would.
    upload.revision_queue_extraction = lambda *, revision: None
    upload_seconds = extract_seconds = 0.0
    for filename, data in documents:
        started = time.perf_counter()
        result = upload.document_upload(user=user, filename=filename, data=data, space=space)
        uploaded = time.perf_counter()
        extraction.revision_extract(revision_id=result.revision.pk)
        upload_seconds += uploaded - started
        extract_seconds += time.perf_counter() - uploaded
    return {
        "upload": upload_seconds,
        "extract_chunk": extract_seconds - timer.seconds,
        "embed": timer.seconds,
    }


def ingesting_process(count: int, of: int, share: int, space_id: int) -> None:
    """One ingesting process: warm up, say ready, wait for "go", ingest its share, report.

    Warm-up (model load, the fork server's start) is outside the measurement, as in a
    worker that has been running; the report is one JSON line with monotonic times (one
    clock for all processes of the machine).
    """
    documents = build_documents(count)[share::of]
    space = Space.objects.select_related("created_by").get(pk=space_id)
    if os.environ.get("BENCH_FP32_MATMULS") == "1":
        from common.fp32_embedding import use_fp32_matmuls

        use_fp32_matmuls()
    get_embedding_provider().embed(["warm-up"])  # model load and hash check, not ingest
    from knowledge.extraction import Limits
    from knowledge.extraction.isolated import extract_isolated

    extract_isolated(
        "text",
        b"Warm-up.",
        roles=["primary"],
        limits=Limits(max_chars=100, max_pages=1),
        timeout=60,
        memory_bytes=2**31,
        isolation=os.environ["KOINON_EXTRACT_ISOLATION"],
    )
    print("ready", flush=True)
    sys.stdin.readline()
    began, cpu_began = time.monotonic(), cpu_seconds()
    split = ingest(documents, space)
    ended, cpu_ended = time.monotonic(), cpu_seconds()
    cpu = {name: cpu_ended[name] - cpu_began[name] for name in cpu_began}
    report = {"began": began, "ended": ended, "cpu": cpu, "split": split}
    print(json.dumps(report), flush=True)


def cpu_seconds() -> dict[str, float]:
    """CPU seconds so far of this process, its extraction processes, its PostgreSQL backend.

    What ingestion costs whoever else shares the cores: the figure that another bench's
    load does not change much. Spawned children are reaped by this process; forked ones
    by the fork server, whose own figure includes them once they are reaped.
    """
    import resource

    import psutil
    from django.db import connection

    from knowledge.extraction.forkserver import server

    def seconds(usage: resource.struct_rusage) -> float:
        return usage.ru_utime + usage.ru_stime

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        (backend,) = cursor.fetchone()
    postgres = psutil.Process(backend).cpu_times()
    extraction = seconds(resource.getrusage(resource.RUSAGE_CHILDREN))
    if server.pid is not None:
        times = psutil.Process(server.pid).cpu_times()
        extraction += times.user + times.system + times.children_user + times.children_system
    return {
        "ingesting process": seconds(resource.getrusage(resource.RUSAGE_SELF)),
        "extraction processes": extraction,
        "PostgreSQL backend": postgres.user + postgres.system,
    }


def measure(count: int, isolation: str, processes: int, fp32: bool = False) -> dict:
    """Ingest `count` documents with `processes` parallel ingesting processes."""
    space = space_create(name=f"Bench ingest {isolation} x{processes}", created_by=bench_curator())
    environ = os.environ | {
        "KOINON_EXTRACT_ISOLATION": isolation,
        "BENCH_FP32_MATMULS": "1" if fp32 else "0",
    }
    command = [sys.executable, __file__, "--ingesting-process", str(count), str(processes)]
    children = []
    for share in range(processes):
        children.append(
            subprocess.Popen(  # noqa: S603 - this very script, with our own interpreter
                [*command, str(share), str(space.pk)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
                env=environ,
            )
        )
    for child in children:
        if child.stdout.readline().strip() != "ready":
            raise RuntimeError("an ingesting process failed to start")
    load_before = os.getloadavg()
    for child in children:
        child.stdin.write("go\n")
        child.stdin.flush()
    reports = [json.loads(child.stdout.readline()) for child in children]
    for child in children:
        child.stdin.close()
        if child.wait() != 0:
            raise RuntimeError("an ingesting process failed")
    seconds = max(r["ended"] for r in reports) - min(r["began"] for r in reports)
    passages = Passage.objects.filter(document__space=space)
    return {
        "label": f"{isolation}{', fp32 MatMuls' if fp32 else ''}, {processes} "
        f"process{'es' if processes > 1 else ''}",
        "seconds": seconds,
        "passages": passages.count(),
        "embedded": passages.filter(embedding_status=EmbeddingStatus.EMBEDDED).count(),
        "failed": Extraction.objects.filter(
            revision__document__space=space, status=ExtractionStatus.FAILED
        ).count(),
        # Per process, summed: CPU-seconds-ish shares of the work, not wall-clock time.
        "split": {name: sum(r["split"][name] for r in reports) for name in reports[0]["split"]},
        "cpu": {name: sum(r["cpu"][name] for r in reports) for name in reports[0]["cpu"]},
        "load": (load_before, os.getloadavg()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="50 documents instead of 500")
    parser.add_argument(
        "--processes",
        type=int,
        nargs="+",
        default=[1, 2],
        help="numbers of parallel ingesting processes to measure with the fork server",
    )
    parser.add_argument(
        "--no-baseline",
        action="store_true",
        help="skip the spawn-per-extraction baseline (1 process)",
    )
    parser.add_argument(
        "--fp32-baseline",
        action="store_true",
        help="also the fork server with the fp32 MatMuls of before the int8 kernels",
    )
    parser.add_argument("--ingesting-process", nargs=4, type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.ingesting_process:
        ingesting_process(*args.ingesting_process)
        return
    if not (NQ_FILE.exists() and SQUAD_FILE.exists()):
        print(f"skipped: {SHARED_DATA} (NQ and SQuAD files) is absent; see its README.md")
        return
    count = 50 if args.quick else 500
    runs = [] if args.no_baseline else [("spawn", 1, False)]
    if args.fp32_baseline:
        runs += [("forkserver", processes, True) for processes in args.processes]
    runs += [("forkserver", processes, False) for processes in args.processes]
    with embedded_services(BENCH_DIR) as postgres:
        documents = build_documents(count)
        print(
            f"cpus {os.cpu_count()}, embedding threads per process "
            f"{os.environ.get('KOINON_EMBEDDING_THREADS', '1')}; load average at start "
            + " ".join(f"{x:.2f}" for x in os.getloadavg())
        )
        results = []
        for isolation, processes, fp32 in runs:
            connections.close_all()  # the drop below would cut this process's connection
            recreate_database(postgres, clear_media=True)
            results.append(measure(count, isolation, processes, fp32))
            report(documents, results[-1])
        summary(results)


def report(documents: list[tuple[str, bytes]], result: dict) -> None:
    split, total = result["split"], sum(result["split"].values())
    passages, embedded = result["passages"], result["embedded"]
    # Short passages embed faster: the mean length explains the embedding rate.
    mean_chars = Passage.objects.aggregate(chars=Avg(Length("text")))["chars"] or 0
    markdown = sum(name.endswith(".md") for name, _ in documents)
    size = sum(len(data) for _, data in documents)
    print(f"\n== {result['label']}")
    print(
        f"{len(documents)} documents ({len(documents) - markdown} NQ .txt, {markdown} SQuAD "
        f".md, {size / 1024:.0f} KiB): {passages} passages, {embedded} embedded, "
        f"{result['failed']} failed extractions; {passages / len(documents):.1f} passages per "
        f"document, {mean_chars:.0f} characters each on average"
    )
    print(f"documents per minute:      {len(documents) / result['seconds'] * 60:8.0f}")
    print(f"passages per second:       {passages / result['seconds']:8.1f}  (end to end)")
    print(f"passages embedded per s:   {embedded / split['embed']:8.1f}  (embedding step only)")
    print(f"wall clock {result['seconds']:.1f} s; time in the ingesting processes, summed:")
    for name, label in (
        ("upload", "upload (store bytes, rows)"),
        ("extract_chunk", "extract + chunk (2 extractors)"),
        ("embed", "embed + store vectors"),
    ):
        print(f"  {label:<32} {split[name]:7.1f} s  {split[name] / total:6.1%}")
    cpu_ms = sum(result["cpu"].values()) / passages * 1000
    print(
        f"CPU per passage {cpu_ms:.1f} ms, so 2 idle cores would ingest at most "
        f"{2000 / cpu_ms:.0f} passages/s; of it "
        + ", ".join(
            f"{name} {value / passages * 1000:.1f} ms" for name, value in result["cpu"].items()
        )
    )
    before, after = result["load"]
    print(f"load average before {before[0]:.2f}, after {after[0]:.2f} (1 min)")


def summary(results: list[dict]) -> None:
    print("\npassages per second, end to end (goal: 60 on 2 cores), and CPU ms per passage")
    baseline = results[0]["passages"] / results[0]["seconds"]
    for result in results:
        rate = result["passages"] / result["seconds"]
        cpu_ms = sum(result["cpu"].values()) / result["passages"] * 1000
        print(
            f"  {result['label']:<38} {rate:8.1f}  {rate / baseline:5.1f}x {results[0]['label']}"
            f"  {cpu_ms:6.1f} ms CPU"
        )


if __name__ == "__main__":
    main()
