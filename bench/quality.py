"""Answer quality on QA data this project did not write: does a released quote answer?

Two corpora, each in its own space, ingested through the real upload and extraction path
(document_upload + revision_extract: both extractors, the sentence segmenter, chunking,
local embeddings):
- SQuAD 2.0 sample (../shared/data/squad2-dev-sample.json): every paragraph a document,
  all 626 questions asked (333 are `is_impossible`: on-topic, but the paragraph does not
  answer them);
- NQ-open (../shared/data/nq-open-oracle.jsonl.gz): every distinct gold passage a
  document (title as the document title); only the held-out questions are asked
  (tools.judge.data.is_heldout: the judge never trained on them).

Pipelines, side by side in one run, each asked every question through `answer_create`
(mode "debug", to read the steps' timings; the same pipeline as "ask"):
- `old`: the selector before the judge (share of a search's content words, sentences cut
  at every full stop, headings allowed, no judge);
- `new`: the segmenter, label filter, IDF-weighted stems and the support judge with its
  bounded reselection, at each threshold of --thresholds.

Figures (answerable questions for supported/wrong, impossible ones for abstention):
supported = evidence_backed or partial with a quote containing a gold answer;
wrong = evidence_backed or partial with no gold answer in any quote;
abstention = an `is_impossible` question abstained; verbatim = quotes that are exact
slices of their document's admitted text (must be 1.00); label quotes = quotes that are
a heading or title on their own (must be 0); judge ms = the judgement steps per answer.

With `--provider openai`: the local model (SmolLM2-135M on llama.cpp, core.llm_server) is
the provider, next to the extractive one at the default threshold, on `--sample` questions
per corpus (every k-th); no old selector, no threshold sweep.

Run: .venv/bin/python bench/quality.py [--quick] [--thresholds 0.3,0.5] [--plot PATH]
     [--corpus both|squad|nq] [--provider extractive|openai] [--sample 40]
Uses embedded services under var/bench-quality (database recreated each run).
"""

import argparse
import contextlib
import gzip
import json
import re
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from common.bootstrap import NQ_FILE, ROOT, SHARED_DATA, django_setup

BENCH_DIR = ROOT / "var" / "bench-quality"
SQUAD_FILE = SHARED_DATA / "squad2-dev-sample.json"
SQUAD2_EVAL_FILE = SHARED_DATA / "squad2-dev-eval.jsonl.gz"  # measuring only
SQUAD2_TRAIN_FILE = SHARED_DATA / "squad2-dev-train.jsonl.gz"  # its dev articles: tuning
django_setup(BENCH_DIR, KOINON_MODEL_PROVIDER="extractive")

from common.corpus import bench_space  # noqa: E402
from common.services import embedded_services, recreate_database  # noqa: E402

from answers.judge.lexical import TermWeights  # noqa: E402
from answers.pipeline.lifecycle import answer_create  # noqa: E402
from answers.pipeline.planner import DatasetInfo, Plan, content_words, plan_question  # noqa: E402
from answers.pipeline.providers.base import CandidateView  # noqa: E402
from answers.pipeline.providers.extractive import ExtractiveProvider  # noqa: E402
from answers.pipeline.request import answer_request_parse  # noqa: E402
from knowledge.documents import document_upload, revision_extract  # noqa: E402
from knowledge.models import Document, Extraction  # noqa: E402
from knowledge.sentences import is_label  # noqa: E402
from tools.judge.data import contains_answer, is_heldout, nq_records  # noqa: E402

# --- the selector before this change, kept here as the baseline ---------------------

_OLD_SENTENCE = re.compile(r"(?:[^.!?\n]|\n(?!\s*\n))+(?:[.!?]+[\"')\]]*)?")
OLD_THRESHOLD = 0.34


class OldExtractiveProvider(ExtractiveProvider):
    """The previous release's selection (best share of a search's content words over
    sentences cut at any full stop) and no judge: every quote is taken as supported."""

    name = "extractive-old"

    def select(
        self,
        *,
        question: str,
        plan: Plan,
        candidates: list[CandidateView],
        attempt: int,
        **ignored: object,
    ) -> str:
        chosen: list[dict] = []
        for index, search in enumerate(plan.searches):
            wanted = set(content_words(search))
            if not wanted:
                continue
            found = sorted(
                (c for c in candidates if c.kind == "quote" and index in c.searches),
                key=lambda c: -c.score,
            )[:3]
            best: tuple[float, dict] | None = None
            for candidate in found:
                for match in _OLD_SENTENCE.finditer(candidate.text):
                    start, end = match.start(), match.end()
                    while start < end and candidate.text[start].isspace():
                        start += 1
                    while end > start and candidate.text[end - 1].isspace():
                        end -= 1
                    if end <= start:
                        continue
                    words = set(content_words(candidate.text[start:end]))
                    score = len(wanted & words) / len(wanted)
                    if score >= OLD_THRESHOLD and (best is None or score > best[0]):
                        best = (score, {"fact_id": candidate.fact_id, "start": start, "end": end})
            if best is not None and best[1] not in chosen:
                chosen.append(best[1])
        chosen += [{"fact_id": c.fact_id} for c in candidates if c.kind == "value"]
        return json.dumps({"facts": chosen})

    def judge(self, *, items: list, weights: TermWeights) -> list[float]:
        return [1.0] * len(items)

    def plan(self, *, question: str, history: list[str], datasets: list[DatasetInfo]) -> Plan:
        return plan_question(question=question, history=history, datasets=datasets)


class SequentialProvider(ExtractiveProvider):
    """The selection of the first retrained judge (session 9), kept as the baseline of the
    judge-aware one: the best covered span first; after the judge rejects it, the next best
    covered, one after another (each try another chance to release a near miss)."""

    name = "extractive-sequential"

    def choose(self, part_texts, spans, refused, weights):
        return next((span for span in spans if span.key not in refused), None)


# --- corpora and questions ------------------------------------------------------------


@dataclass(frozen=True)
class Asked:
    question: str
    answers: tuple[str, ...]  # empty: unanswerable


def ingest(space, user, title: str, text: str, number: int) -> None:
    result = document_upload(
        user=user, filename=f"doc-{number}.txt", data=text.encode(), space=space, title=title
    )
    revision_extract(revision_id=result.revision.pk)


def load_squad(space, user, quick: bool) -> list[Asked]:
    data = json.loads(SQUAD_FILE.read_text())
    asked: list[Asked] = []
    number = 0
    for article in data["data"]:
        for index, paragraph in enumerate(article["paragraphs"]):
            number += 1
            ingest(space, user, f"{article['title']} ({index + 1})", paragraph["context"], number)
            for qa in paragraph["qas"]:
                answers = () if qa.get("is_impossible") else tuple(a["text"] for a in qa["answers"])
                asked.append(Asked(qa["question"], answers))
    return asked[::4] if quick else asked


def read_rows(path: Path) -> list[dict]:
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle]


def load_squad_jsonl(space, user, path: Path, every: int, first: int) -> list[Asked]:
    """A SQuAD 2.0 split of the shared data (one row per question): each paragraph a
    document; every `every`-th question asked (a fixed sample)."""
    rows = read_rows(path)
    documents: dict[tuple[str, str], int] = {}
    for row in rows:
        key = (row["group"], row["paragraph_id"])
        if key not in documents:
            documents[key] = first + len(documents)
            title = f"{row['title']} ({row['paragraph_id']})"
            ingest(space, user, title, row["context"], documents[key])
    asked = [
        Asked(r["question"], () if r.get("is_impossible") else tuple(r["answers"])) for r in rows
    ]
    return asked[::every]


def load_nq(space, user, quick: bool) -> list[Asked]:
    records = list(nq_records(NQ_FILE))
    seen: set[tuple[str, str]] = set()
    for number, record in enumerate(records):
        key = (record.title, record.text)
        if key in seen:
            continue
        seen.add(key)
        ingest(space, user, record.title, record.text, 100_000 + number)
    asked = [Asked(r.question, r.answers) for r in records if is_heldout(r.question)]
    return asked[::4] if quick else asked


# --- measuring ---------------------------------------------------------------------


@dataclass
class Tally:
    answerable: int = 0
    impossible: int = 0
    supported: int = 0
    wrong: int = 0
    abstained_impossible: int = 0
    answered_impossible: int = 0
    quotes: int = 0
    verbatim: int = 0
    label_quotes: int = 0
    judge_ms: list[float] = field(default_factory=list)
    total_ms: list[float] = field(default_factory=list)

    def row(self) -> dict:
        def share(n: int, d: int) -> float | None:
            return round(n / d, 3) if d else None

        judge = sorted(self.judge_ms) or [0.0]
        total = sorted(self.total_ms) or [0.0]
        return {
            "supported": share(self.supported, self.answerable),
            "wrong": share(self.wrong, self.answerable),
            "abstention": share(self.abstained_impossible, self.impossible),
            "verbatim": share(self.verbatim, self.quotes),
            "label_quotes": self.label_quotes,
            "judge_p50_ms": round(statistics.median(judge), 2),
            "judge_p95_ms": round(judge[int(0.95 * (len(judge) - 1))], 2),
            "answer_p50_ms": round(statistics.median(total), 1),
        }


DETAILS: list[Path] = []  # --details: one JSON line per question asked


def timed_provider(provider):
    """The provider, with the seconds its judge spends inside `select` added up (a
    judge-aware selection scores spans there; the judgement step is timed by the trace)."""
    spent, selecting = [0.0], [False]
    judge, select = provider.judge, provider.select

    def timed_judge(**kwargs):
        started = time.perf_counter()
        try:
            return judge(**kwargs)
        finally:
            if selecting[0]:
                spent[0] += time.perf_counter() - started

    def timed_select(**kwargs):
        selecting[0] = True
        try:
            return select(**kwargs)
        finally:
            selecting[0] = False

    provider.judge, provider.select = timed_judge, timed_select
    return provider, spent


def measure(user, space, asked: list[Asked], provider_factory: Callable, texts: dict) -> Tally:
    tally = Tally()
    details = DETAILS[0].open("a", encoding="utf-8") if DETAILS else None
    for item in asked:
        request = answer_request_parse(
            {"query": item.question, "mode": "debug", "space_ids": [space.pk]}
        )
        provider, selecting_judge_s = timed_provider(provider_factory())
        started = time.perf_counter()
        body = answer_create(user=user, request=request, provider=provider)
        tally.total_ms.append((time.perf_counter() - started) * 1000)
        steps = body["trace"]["steps"]
        # The judge's time wherever it ran: the judgement steps, and the judge calls a
        # judge-aware selection makes to choose among its spans.
        tally.judge_ms.append(
            sum(s["ms"] for s in steps if s["step"] == "judgement") + 1000 * selecting_judge_s[0]
        )
        status = body["evidence"]["answer_status"]
        answered = status in ("evidence_backed", "partial")
        quotes = [c for c in body["answer"]["citations"] if c["kind"] == "quote"]
        for citation in quotes:
            tally.quotes += 1
            text, title = texts[citation["revision_id"]]
            tally.verbatim += citation["quote"] in text
            headings = citation["locator"].get("headings", [])
            tally.label_quotes += is_label(citation["quote"], headings=headings, title=title)
        if item.answers:
            tally.answerable += 1
            if answered:
                if any(contains_answer(c["quote"], item.answers) for c in quotes):
                    tally.supported += 1
                else:
                    tally.wrong += 1
        else:
            tally.impossible += 1
            tally.abstained_impossible += not answered
            tally.answered_impossible += answered
        if details is not None:
            verdicts = [
                {"attempt": s.get("attempt"), "verdicts": s.get("verdicts")}
                for s in steps
                if s["step"] == "judgement"
            ]
            rounds = sum(1 for s in steps if s["step"] == "retrieval")
            row = {
                "question": item.question,
                "answers": item.answers,
                "status": status,
                "quotes": [c["quote"] for c in quotes],
                "rounds": rounds,
                "judgements": verdicts,
                "provider": provider.name,
            }
            details.write(json.dumps(row) + "\n")
    if details is not None:
        details.close()
    return tally


def admitted_texts() -> dict[int, tuple[str, str]]:
    titles = dict(Document.objects.values_list("pk", "title"))
    return {
        e.revision_id: (e.text, titles[e.revision.document_id])
        for e in Extraction.objects.filter(serves_passages=True).select_related("revision")
    }


def plot(path: Path, curves: dict[str, list[tuple[float, dict]]]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, len(curves), figsize=(5.5 * len(curves), 4.2), squeeze=False)
    for axis, (name, points) in zip(axes[0], curves.items(), strict=True):
        thresholds = [t for t, _ in points]
        for key, style in (("supported", "o-"), ("wrong", "s-"), ("abstention", "^-")):
            values = [row[key] for _, row in points]
            if all(v is not None for v in values):
                axis.plot(thresholds, values, style, label=key)
        axis.set_title(name)
        axis.set_xlabel("support judge threshold")
        axis.set_ylim(0, 1)
        axis.grid(alpha=0.3)
        axis.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="every 4th question only")
    parser.add_argument(
        "--thresholds", default="", help="pipeline thresholds (default: the setting's value)"
    )
    parser.add_argument("--plot", type=Path, default=ROOT / "docs" / "quality-curve.png")
    parser.add_argument(
        "--corpus",
        default="eval,squad,nq",
        help="comma-separated: eval (squad2-dev-eval, every 3rd question: 818), squad (the "
        "SQuAD sample), nq (NQ held-out), dev (the dev articles of squad2-dev-train: for "
        "choosing a threshold, never eval)",
    )
    parser.add_argument(
        "--no-baseline", action="store_true", help="skip the old selector (the baseline)"
    )
    parser.add_argument(
        "--sequential",
        action="store_true",
        help="also the sequential selection (the best covered span, then the next) at each "
        "threshold: the baseline of the judge-aware selection",
    )
    parser.add_argument(
        "--provider",
        choices=("extractive", "openai"),
        default="extractive",
        help="whose select and judge the new pipeline uses",
    )
    parser.add_argument(
        "--sample",
        type=int,
        default=40,
        help="with openai: questions per corpus (every k-th, deterministic)",
    )
    parser.add_argument(
        "--fp32-embeddings",
        action="store_true",
        help="embed as before the int8 kernels (fp32 MatMuls): the baseline of that change",
    )
    parser.add_argument(
        "--judged-spans",
        default="",
        help="comma-separated values of ExtractiveProvider.judged_spans to measure (default: "
        "the shipped value)",
    )
    parser.add_argument("--details", type=Path, help="write one JSON line per question here")
    parser.add_argument(
        "--without-answer-type",
        action="store_true",
        help="also measure each threshold with the answer-type gate off "
        "(answers.pipeline.answer_type: the baseline of issue 47, item 2)",
    )
    parser.add_argument(
        "--no-plot",
        action="store_true",
        help="with eval: skip the judge-only sweep over all 2,453 questions and the plot",
    )
    parser.add_argument(
        "--judge-threads",
        default="",
        help="comma-separated thread counts of the judge's cross-encoder to measure the default "
        "selection with, e.g. 1,2 (default: KOINON_JUDGE_THREADS)",
    )
    args = parser.parse_args()
    if args.details:
        DETAILS.append(args.details)
    from answers.pipeline.judgement import policy_floor

    thresholds = [float(t) for t in args.thresholds.split(",") if t.strip()] or [
        policy_floor("auto")
    ]
    args.corpus = {name.strip() for name in args.corpus.split(",")}
    if args.fp32_embeddings:
        from common.fp32_embedding import use_fp32_matmuls

        use_fp32_matmuls()
        print("embeddings: fp32 MatMuls, length-sorted batches (before the int8 kernels)")
    with embedded_services(BENCH_DIR) as postgres:
        if args.provider == "openai":
            from tests.services import model_server_process

            BENCH_DIR.mkdir(parents=True, exist_ok=True)
            with model_server_process(BENCH_DIR / "model-server.log") as url:
                run_openai(postgres, args, url)
            return
        run_extractive(postgres, args, thresholds)


def corpora_ingest(args: argparse.Namespace) -> dict:
    from django.contrib.auth import get_user_model

    from tools.judge.data import SQUAD2_DEV_MODULUS, is_dev_group

    started = time.perf_counter()
    corpora = {}

    def space(name: str):
        return _second_space(name, get_user_model()) if corpora else bench_space(name)

    if "eval" in args.corpus:
        bench = space("squad2-dev-eval")
        every = 12 if args.quick else 3
        corpora["squad2-dev-eval"] = (
            bench,
            load_squad_jsonl(bench.space, bench.curator, SQUAD2_EVAL_FILE, every, 200_000),
        )
    if "dev" in args.corpus:
        bench = space("squad2-dev-train dev")
        asked = load_squad_jsonl(bench.space, bench.curator, SQUAD2_TRAIN_FILE, 1, 300_000)
        dev_questions = {
            row["question"]
            for row in read_rows(SQUAD2_TRAIN_FILE)
            if is_dev_group(row["group"], SQUAD2_DEV_MODULUS)
        }
        asked = [a for a in asked if a.question in dev_questions]
        corpora["squad2-dev-train dev articles"] = (bench, asked[:: 8 if args.quick else 2])
    if "squad" in args.corpus:
        bench = space("SQuAD")
        corpora["SQuAD 2.0 sample"] = (bench, load_squad(bench.space, bench.curator, args.quick))
    if "nq" in args.corpus:
        bench = space("NQ-open")
        corpora["NQ-open held-out"] = (bench, load_nq(bench.space, bench.curator, args.quick))
    print(f"ingested in {time.perf_counter() - started:.0f} s")
    return corpora


def run_openai(postgres, args: argparse.Namespace, url: str) -> None:
    """The local model (SmolLM2-135M on llama.cpp) as the new pipeline's provider, next to
    the extractive one at the default threshold, on a deterministic sample of each corpus.
    The model is tiny: the figures say what the contract costs and keeps, not what a real
    model would reach."""
    from answers.pipeline.providers.llm import ChatClient
    from answers.pipeline.providers.openai import OpenAIProvider

    def local_model() -> OpenAIProvider:
        return OpenAIProvider(
            client=ChatClient(base_url=url, model="local", timeout=120.0, retries=1)
        )

    recreate_database(postgres, clear_media=True)
    corpora = corpora_ingest(args)
    texts = admitted_texts()
    for name, (bench, asked) in corpora.items():
        step = max(1, len(asked) // args.sample)
        sample = asked[::step][: args.sample]
        print(f"\n== {name}: {len(sample)} of {len(asked)} questions (every {step}th)")
        header = None
        for label, factory in (
            ("extractive, default", ExtractiveProvider),
            ("openai (SmolLM2-135M)", local_model),
        ):
            row = measure(bench.reader, bench.space, sample, factory, texts).row()
            if header is None:
                header = f"{'pipeline':<22} " + " ".join(f"{k:>13}" for k in row)
                print(header)
            print(f"{label:<22} " + " ".join(f"{v!s:>13}" for v in row.values()))


@contextlib.contextmanager
def answer_type_gate_off():
    """The pipeline as before answer-type agreement: every quote agrees with every part."""
    from answers.pipeline import judgement
    from answers.pipeline.providers import extractive

    kept = judgement.answer_type_agrees, extractive.answer_type_agrees

    def agrees(question: str, unit: str) -> bool:
        return True

    judgement.answer_type_agrees = extractive.answer_type_agrees = agrees
    try:
        yield
    finally:
        judgement.answer_type_agrees, extractive.answer_type_agrees = kept


@contextlib.contextmanager
def threshold_fixed(threshold: float):
    """Every run judged at `threshold`, whatever its policy and spaces: the sweep measures
    below the pinned floor too, which the product never judges at."""
    from answers.pipeline import judgement

    kept = judgement.policy_floor
    judgement.policy_floor = lambda mode: threshold
    try:
        yield
    finally:
        judgement.policy_floor = kept


@contextlib.contextmanager
def judge_pool(threads: int | None):
    """The local judge's cross-encoder running `threads` pairs at once (None: as configured)."""
    from concurrent.futures import ThreadPoolExecutor

    from answers.judge.model import local_judge

    encoder = local_judge().cross_encoder
    if threads is None or encoder is None:
        yield
        return
    kept = encoder.pool
    encoder.pool = ThreadPoolExecutor(threads) if threads > 1 else None
    try:
        yield
    finally:
        if encoder.pool is not None:
            encoder.pool.shutdown()
        encoder.pool = kept


def run_extractive(postgres, args: argparse.Namespace, thresholds: list[float]) -> None:
    judge_threads = [int(t) for t in args.judge_threads.split(",") if t.strip()]
    judged_spans = [int(k) for k in args.judged_spans.split(",") if k.strip()] or [
        ExtractiveProvider.judged_spans
    ]
    recreate_database(postgres, clear_media=True)
    corpora = corpora_ingest(args)
    texts = admitted_texts()
    curves: dict[str, list[tuple[float, dict]]] = {}
    for name, (bench, asked) in corpora.items():
        print(f"\n== {name}: {len(asked)} questions")
        if not args.no_baseline:
            old = measure(bench.reader, bench.space, asked, OldExtractiveProvider, texts).row()
            print(f"{'pipeline':<22} " + " ".join(f"{k:>13}" for k in old))
            print(f"{'old selector':<22} " + " ".join(f"{v!s:>13}" for v in old.values()))
        curves[name] = []
        if args.no_baseline:
            print(f"{'pipeline':<22} " + " ".join(f"{k:>13}" for k in Tally().row()))
        for threshold in thresholds:
            if args.without_answer_type:
                with threshold_fixed(threshold), answer_type_gate_off():
                    row = measure(bench.reader, bench.space, asked, ExtractiveProvider, texts).row()
                label = f"no type gate, {threshold}"
                print(f"{label:<22} " + " ".join(f"{v!s:>13}" for v in row.values()), flush=True)
            if args.sequential:
                with threshold_fixed(threshold):
                    row = measure(bench.reader, bench.space, asked, SequentialProvider, texts).row()
                label = f"sequential, {threshold}"
                print(f"{label:<22} " + " ".join(f"{v!s:>13}" for v in row.values()), flush=True)
            for spans in judged_spans:
                factory = type("Judged", (ExtractiveProvider,), {"judged_spans": spans})
                for threads in judge_threads or [None]:
                    with threshold_fixed(threshold), judge_pool(threads):
                        row = measure(bench.reader, bench.space, asked, factory, texts).row()
                    last = judge_threads[-1] if judge_threads else None
                    if spans == ExtractiveProvider.judged_spans and threads == last:
                        curves[name].append((threshold, row))
                    label = f"new, threshold {threshold}"
                    if judged_spans != [ExtractiveProvider.judged_spans]:
                        label += f" k={spans}"
                    if threads is not None:
                        label += f" t={threads}"
                    print(
                        f"{label:<22} " + " ".join(f"{v!s:>13}" for v in row.values()), flush=True
                    )
    if "eval" in args.corpus and not args.no_plot:
        sweep = judge_only(SQUAD2_EVAL_FILE)
        curves = {"squad2-dev-eval, judge only (all 2,453)": sweep} | {
            f"{name}, pipeline": points for name, points in curves.items() if len(points) > 1
        }
        plot(args.plot, curves)
        print(f"\nplot: {args.plot.name}")


def judge_only(path: Path) -> list[tuple[float, dict]]:
    """The shipped judge alone over every question of a SQuAD 2.0 split: each candidate
    sentence of the question's paragraph is scored (with its title and the sentence before
    it), the best one released when it reaches the threshold. No retrieval, no selection."""
    from answers.judge.features import JudgeItem
    from answers.judge.model import local_judge
    from tools.judge.data import squad_records
    from tools.judge.pairs import (
        PairConfig,
        best_per_question,
        operating_points,
        squad_pairs,
    )

    records = list(squad_records(path))
    pairs = squad_pairs(records, source="eval", config=PairConfig(), rng=None, every_sentence=True)
    weights = TermWeights.from_texts(dict.fromkeys(r.text for r in records).keys())
    started = time.perf_counter()
    scores = local_judge().score(
        [JudgeItem(p.question, p.sentence, p.context, p.before) for p in pairs], weights
    )
    seconds = time.perf_counter() - started
    best = best_per_question(pairs, scores)
    thresholds = [round(0.05 * i, 2) for i in range(2, 20)]
    print(
        f"\n== judge only, {path.name}: {len(best)} questions, {len(pairs)} pairs "
        f"({1000 * seconds / len(pairs):.2f} ms a pair)"
    )
    print(f"{'threshold':>9} {'supported':>9} {'wrong':>7} {'abstention':>10}")
    points = operating_points(best, thresholds)
    for point in points:
        print(
            f"{point['threshold']:>9} {point['supported']:>9.3f} {point['wrong']:>7.3f} "
            f"{point['abstention']:>10.3f}"
        )
    return [(p["threshold"], p) for p in points]


def _second_space(name: str, users):
    """Another space with its own reader, the same curator (bench_space creates both)."""
    from common.corpus import BenchSpace

    from knowledge.services import space_create, space_member_set

    curator = users.objects.get(username="bench-curator")
    reader = users.objects.create_user(username=f"reader-{name.lower()}", password=None)
    space = space_create(name=name, created_by=curator)
    space_member_set(space=space, username=reader.username, role="reader")
    return BenchSpace(curator, reader, space)


if __name__ == "__main__":
    main()
