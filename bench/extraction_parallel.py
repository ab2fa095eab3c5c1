"""Extraction side by side (issue 51, item 6): 12 mixed uploads through a real Celery
worker, extracted one after another (1 process) and side by side (one per core), same run.

The documents are the repository's own texts (knowledge/demo, tests/data/structured_docs),
each of the 12 built from them at about --kib KiB and written as PDF, DOCX, HTML, Markdown,
plain text or WebVTT (3, 2, 2, 2, 2, 1). One user uploads all 12 at once, as after
`make run` or a drag of 12 files: the time is from the first upload to every document
searchable by both channels (extracted by both readers, every passage embedded), measured
by the worker as `koinon_up` starts it (`--queues=celery`), fresh (its model loads count).
Each measurement runs on a freshly created database; the load average is printed because
another process on the same cores skews absolute figures (compare the ratio).

Run: .venv/bin/python bench/extraction_parallel.py [--kib 24] [--processes 2] [--rounds 1]
Uses its own embedded PostgreSQL and Redis under var/bench-extraction.
"""

import argparse
import html
import io
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

from common.bootstrap import ROOT, django_setup

BENCH_DIR = ROOT / "var" / "bench-extraction"
# Before any project import: the bench drops and recreates the database of this data dir.
django_setup(BENCH_DIR)
# The imports below need the configured Django (models, settings): hence after setup().
from common.corpus import bench_curator  # noqa: E402
from common.services import embedded_services, recreate_database  # noqa: E402
from django.db import connections  # noqa: E402

from core.embedded import EmbeddedPostgres  # noqa: E402
from core.processes import extraction_processes_default, terminate_tree  # noqa: E402
from core.worker import redis_client, workers_alive_names  # noqa: E402
from knowledge.documents.upload import document_upload  # noqa: E402
from knowledge.models import Extraction, ExtractionStatus, Passage  # noqa: E402
from knowledge.selectors import documents_being_indexed  # noqa: E402
from knowledge.services import space_create  # noqa: E402

SOURCES = [
    *sorted((ROOT / "knowledge" / "demo").iterdir()),
    *sorted(
        path
        for path in (ROOT / "tests" / "data" / "structured_docs").iterdir()
        if path.suffix in {".md", ".txt", ".html"} and path.name != "README.md"
    ),
]
FORMATS = ["pdf", "docx", "html", "md", "txt", "pdf", "vtt", "docx", "md", "html", "txt", "pdf"]
TIMEOUT = 900.0  # seconds one measurement may take before the bench gives up


# --- documents ---------------------------------------------------------------------


def paragraphs_of(path: Path) -> list[str]:
    """The source's prose as paragraphs: tags, cue timings and Markdown marks dropped."""
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".html":
        text = html.unescape(re.sub(r"<[^>]+>", "\n", text))
    if path.suffix == ".vtt":
        text = re.sub(r"^(WEBVTT|\d\d:\d\d.*-->.*)$", "", text, flags=re.MULTILINE)
    blocks = (re.sub(r"\s+", " ", block).strip(" #*-") for block in re.split(r"\n\s*\n", text))
    return [block for block in blocks if len(block) > 40]


def document_text(number: int, kib: int) -> list[str]:
    """Paragraphs for document `number`: the sources in an order of its own, each
    paragraph marked with the document and part so that no two documents are alike."""
    pool = [p for path in SOURCES[number:] + SOURCES[:number] for p in paragraphs_of(path)]
    out: list[str] = []
    size = 0
    while size < kib * 1024:
        paragraph = f"Part {len(out) + 1} of file {number + 1}. {pool[len(out) % len(pool)]}"
        out.append(paragraph)
        size += len(paragraph) + 2
    return out


def as_format(kind: str, title: str, paragraphs: list[str]) -> bytes:
    if kind == "pdf":
        from fpdf import FPDF

        pdf = FPDF()
        pdf.set_font("Helvetica", size=11)
        for start in range(0, len(paragraphs), 6):
            pdf.add_page()
            for paragraph in paragraphs[start : start + 6]:
                pdf.multi_cell(0, 6, paragraph.encode("latin-1", "replace").decode("latin-1"))
                pdf.ln(3)
        return bytes(pdf.output())
    if kind == "docx":
        import docx

        document = docx.Document()
        document.add_heading(title, level=1)
        for paragraph in paragraphs:
            document.add_paragraph(paragraph)
        buffer = io.BytesIO()
        document.save(buffer)
        return buffer.getvalue()
    if kind == "html":
        body = "".join(f"<p>{html.escape(p)}</p>\n" for p in paragraphs)
        return f"<html><body><h1>{html.escape(title)}</h1>\n{body}</body></html>\n".encode()
    if kind == "md":
        return (f"# {title}\n\n" + "\n\n".join(paragraphs) + "\n").encode()
    if kind == "vtt":
        cues = [
            f"00:{i // 60:02d}:{i % 60:02d}.000 --> 00:{i // 60:02d}:{i % 60:02d}.900\n{p}"
            for i, p in enumerate(paragraphs)
        ]
        return ("WEBVTT\n\n" + "\n\n".join(cues) + "\n").encode()
    return (title + "\n\n" + "\n\n".join(paragraphs) + "\n").encode()


def build_documents(kib: int) -> list[tuple[str, bytes]]:
    documents = []
    for number, kind in enumerate(FORMATS):
        title = f"Bench file {number + 1}"
        documents.append(
            (f"file-{number + 1:02d}.{kind}", as_format(kind, title, document_text(number, kib)))
        )
    return documents


# --- measurement -------------------------------------------------------------------


def start_worker(processes: int) -> subprocess.Popen[bytes]:
    """The extraction worker as koinon_up starts it, with `processes` processes; returns
    once it heartbeats (core.worker), before anything is uploaded."""
    hostname = f"bench-extraction-{processes}@"
    log = (BENCH_DIR / f"worker-{processes}.log").open("ab")
    worker = subprocess.Popen(  # noqa: S603 - our own interpreter and arguments
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "koinon",
            "--quiet",
            "worker",
            "--loglevel=WARNING",
            f"--concurrency={processes}",
            f"--hostname={hostname}%h",
            "--queues=celery",
        ],
        cwd=ROOT,
        env=os.environ.copy(),
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    log.close()
    client = redis_client()
    deadline = time.monotonic() + 120
    try:
        while not any(name.startswith(hostname) for name in workers_alive_names(client)):
            if worker.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the worker did not start; see {log.name}")
            time.sleep(0.2)
    finally:
        client.close()
    return worker


def measure(documents: list[tuple[str, bytes]], processes: int, postgres: EmbeddedPostgres) -> dict:
    connections.close_all()  # the drop below would cut this process's connection
    recreate_database(postgres, clear_media=True)
    space = space_create(name=f"Bench extraction x{processes}", created_by=bench_curator())
    worker = start_worker(processes)
    try:
        load_before = os.getloadavg()[0]
        postgres_before = tree_cpu_seconds(postgres.pid())
        began = time.monotonic()
        for filename, data in documents:
            document_upload(user=space.created_by, filename=filename, data=data, space=space)
        peak = 0  # revisions seen extracting at the same moment
        while documents_being_indexed():
            if time.monotonic() - began > TIMEOUT:
                raise RuntimeError(f"not indexed within {TIMEOUT:.0f} s")
            running = Extraction.objects.filter(status=ExtractionStatus.RUNNING)
            peak = max(peak, running.values("revision_id").distinct().count())
            time.sleep(0.1)
        seconds = time.monotonic() - began
        load_after = os.getloadavg()[0]
        cpu = tree_cpu_seconds(worker.pid)
        postgres_cpu = tree_cpu_seconds(postgres.pid()) - postgres_before
    finally:
        terminate_tree(worker.pid)
    return {
        "processes": processes,
        "seconds": seconds,
        "passages": Passage.objects.filter(document__space=space).count(),
        "failed": Extraction.objects.filter(status=ExtractionStatus.FAILED).count(),
        "load": (load_before, load_after),
        "peak": peak,
        "cpu": cpu,
        "postgres_cpu": postgres_cpu,
    }


def tree_cpu_seconds(pid: int | None) -> float:
    """CPU seconds so far of a process and its descendants alive now (the worker: its pool
    processes stay alive, and extraction children, reaped by their fork server, count in
    its children's times; PostgreSQL: the backends of connections still open)."""
    import psutil

    if pid is None:
        return 0.0
    root = psutil.Process(pid)
    total = 0.0
    for process in [root, *root.children(recursive=True)]:
        try:
            times = process.cpu_times()
        except psutil.NoSuchProcess:
            continue
        total += times.user + times.system + times.children_user + times.children_system
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kib", type=int, default=24, help="text per document, in KiB")
    parser.add_argument(
        "--processes",
        type=int,
        default=max(2, extraction_processes_default()),
        help="processes side by side (default: koinon_up's default, at least 2)",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="measure both this many times, alternating (a shared machine's load moves)",
    )
    args = parser.parse_args()
    documents = build_documents(args.kib)
    kinds = sorted({name.rsplit(".", 1)[1] for name, _ in documents})
    size = sum(len(data) for _, data in documents)
    with embedded_services(BENCH_DIR) as postgres:
        print(
            f"{len(documents)} documents ({', '.join(kinds)}; {size / 1024:.0f} KiB as files, "
            f"about {args.kib} KiB of text each); {os.cpu_count()} cpus, load average "
            + " ".join(f"{x:.2f}" for x in os.getloadavg())
        )
        results = [
            measure(documents, n, postgres) for _ in range(args.rounds) for n in (1, args.processes)
        ]
    for result in results:
        print(
            f"{result['processes']} process(es): {result['seconds']:6.1f} s, "
            f"{result['passages']} passages, {result['failed']} failed extractions; "
            f"at most {result['peak']} extracting at once; CPU: worker {result['cpu']:.1f} s, "
            f"PostgreSQL {result['postgres_cpu']:.1f} s, "
            f"{(result['cpu'] + result['postgres_cpu']) / result['seconds']:.2f} cores busy on "
            f"average (load {result['load'][0]:.2f} -> {result['load'][1]:.2f})"
        )
    one = statistics.median(r["seconds"] for r in results if r["processes"] == 1)
    side = statistics.median(r["seconds"] for r in results if r["processes"] != 1)
    print(
        f"side by side ({args.processes} processes) vs one after another, median of "
        f"{args.rounds}: {one:.1f} s vs {side:.1f} s, {one / side:.2f}x faster "
        "(goal: 1.6x on 2 cores)"
    )


if __name__ == "__main__":
    main()
