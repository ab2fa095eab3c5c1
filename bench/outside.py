"""What the outside channels cost an answer (issue 50's last goal): answer time with the
default policy (the baseline: no outside code runs), with the four outside kinds that no
channel is enabled for allowed (what an answer pays for looking up channels it cannot use),
and with the one `fetch_url` channel enabled, serving a page from a local server (a real
fetch, snapshot and extraction per question),
each question asked in each variant in turn, in one run.

Run: .venv/bin/python bench/outside.py [--rounds 5]
Uses its own embedded PostgreSQL and Redis under var/bench-outside (the database is
recreated). The demo documents are the library; the page is served on 127.0.0.1, which the
bench allowlists for itself.
"""

import argparse
import http.server
import secrets
import statistics
import threading
import time

from common.bootstrap import ROOT, django_setup

BENCH_DIR = ROOT / "var" / "bench-outside"
django_setup(
    BENCH_DIR,
    KOINON_MODEL_PROVIDER="extractive",
    KOINON_OUTSIDE_ALLOWED_NETWORKS="127.0.0.1/32",
)
from common.services import embedded_services, recreate_database  # noqa: E402
from common.stats import percentile  # noqa: E402
from django.contrib.auth import get_user_model  # noqa: E402

from answers.pipeline.lifecycle import answer_create  # noqa: E402
from answers.pipeline.request import answer_request_parse  # noqa: E402
from knowledge.documents.extraction import revision_extract  # noqa: E402
from knowledge.documents.upload import document_upload  # noqa: E402
from knowledge.services import space_create, space_member_set  # noqa: E402
from outside.channels import OUTSIDE_TOOLS  # noqa: E402
from outside.models import Channel, ChannelKind  # noqa: E402
from outside.services import channel_save, space_channel_enable  # noqa: E402

LIBRARY = ("vector_search", "keyword_search", "dataset_query")
QUESTIONS = [
    "Who owns service reviews?",
    "When are production databases backed up?",
    "How long are invoices retained?",
    "What currency are the invoice amounts in?",
    "How long are invoices kept?",
]
PAGE = (
    b"<!doctype html><html><head><title>Retention</title></head><body><h1>Retention</h1>"
    b"<p>Invoices are kept for seven years after the financial year ends.</p>"
    b"<p>Receipts older than that are shredded by the records office.</p></body></html>"
)
VARIANTS = {
    "default policy (baseline)": None,
    # The four kinds no channel is enabled for: each is looked up, none is called.
    "4 outside kinds allowed, none enabled": {
        "allowed_tools": [*LIBRARY, *(kind for kind in OUTSIDE_TOOLS if kind != "fetch_url")]
    },
    "fetch_url enabled (a real fetch)": {"allowed_tools": [*LIBRARY, "fetch_url"]},
}


class Page(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # the name http.server calls
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(PAGE)))
        self.end_headers()
        self.wfile.write(PAGE)

    def log_message(self, *args: object) -> None:
        pass


def library(reader, curator):
    space = space_create(name="Bench", created_by=curator)
    space_member_set(space=space, username=reader.username, role="reader")
    for path in sorted((ROOT / "knowledge" / "demo").iterdir()):
        if path.suffix in {".md", ".txt"}:
            upload = document_upload(
                user=curator, filename=path.name, data=path.read_bytes(), space=space
            )
            revision_extract(revision_id=upload.revision.pk)
    return space


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Page)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    with embedded_services(BENCH_DIR) as postgres:
        recreate_database(postgres, clear_media=True)
        users = get_user_model().objects
        root = users.create_superuser(username="root", password=secrets.token_urlsafe(16), email="")
        curator = users.create_user(
            username="curator", password=secrets.token_urlsafe(16), is_staff=True
        )
        reader = users.create_user(username="reader", password=secrets.token_urlsafe(16))
        space = library(reader, curator)
        channel = channel_save(
            user=root,
            channel=Channel(
                name="Pages",
                kind=ChannelKind.FETCH_URL,
                options={"urls": [f"http://127.0.0.1:{server.server_address[1]}/page"]},
            ),
        )
        space_channel_enable(user=curator, space=space, channel=channel)
        times: dict[str, list[float]] = {name: [] for name in VARIANTS}
        statuses: dict[str, list[str]] = {name: [] for name in VARIANTS}
        for question in QUESTIONS:  # warm every cache once, unmeasured
            answer_create(user=reader, request=answer_request_parse({"query": question}))
        for _ in range(args.rounds):
            for question in QUESTIONS:
                for name, policy in VARIANTS.items():
                    raw = {"query": question, **({"evidence_policy": policy} if policy else {})}
                    started = time.perf_counter()
                    body = answer_create(user=reader, request=answer_request_parse(raw))
                    times[name].append((time.perf_counter() - started) * 1000)
                    statuses[name].append(body["evidence"]["answer_status"])
    server.shutdown()
    print(f"{len(QUESTIONS)} questions x {args.rounds} rounds, each variant in turn (ms)")
    print(f"{'variant':<40}{'p50':>8}{'p95':>8}{'mean':>8}  evidence-backed")
    for name in VARIANTS:
        values = times[name]
        backed = statuses[name].count("evidence_backed")
        print(
            f"{name:<40}{percentile(values, 0.5):>8.1f}{percentile(values, 0.95):>8.1f}"
            f"{statistics.fmean(values):>8.1f}  {backed}/{len(values)}"
        )


if __name__ == "__main__":
    main()
