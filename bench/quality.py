"""Answer quality on QA data this project did not write: does a released quote answer?

Every set in its own space (PolicyQA: one space per website), ingested through the real upload
and extraction path (document_upload + revision_extract: both extractors, the sentence
segmenter, chunking, local embeddings); the sets, their documents and their rule for
"supported" are in common/quality_sets.py (docs/quality.md, "Per domain"):
- Wikipedia: squad2-dev-eval (`eval`), the SQuAD 2.0 sample (`squad`), NQ-open held-out
  (`nq`), and the tuning articles of squad2-dev-train (`dev`, never for reporting);
- domains: the covidqa and emanual dev slices (papers and sections the judge's training holds
  out), policyqa-dev, the RAGBench ExpertQA / HAGRID / HotpotQA test splits, and the
  hand-made structured-document questions of tests/data/structured_docs.

Pipelines, side by side in one run, each asked every question through `answer_create`
(mode "debug", to read the steps' timings; the same pipeline as "ask"):
- `old`: the selector before the judge (share of a search's content words, sentences cut
  at every full stop, headings allowed, no judge);
- `new`: the segmenter, label filter, IDF-weighted stems and the support judge with its
  bounded reselection, at each threshold of --thresholds.

Figures (answerable questions for supported/wrong, unanswerable ones for abstention):
supported = evidence_backed or partial with a quote the set's rule counts as support;
wrong = evidence_backed or partial with no such quote; abstention = an unanswerable
question abstained; precision = supported / answered, coverage = answered / answerable;
verbatim = quotes that are exact slices of their document's admitted text (must be 1.00);
label quotes = quotes that are a heading or title on their own (must be 0); judge ms = the
judgement steps per answer. With two sets or more, or two thresholds or more, the per-domain
table and precision/coverage plot are written to --domain-report (.md and .png).

With `--provider openai`: the local model (SmolLM2-135M on llama.cpp, core.llm_server) is
the provider, next to the extractive one at the default threshold, on `--sample` questions
per set (every k-th; 40 by default); no old selector, no threshold sweep.

Run: .venv/bin/python bench/quality.py [--quick] [--thresholds 0.3,0.5] [--plot PATH]
     [--corpus eval,squad,nq|all|domains|ragbench|<set>,...] [--sample 40]
     [--provider extractive|openai] [--domain-report PATH]
Uses embedded services under var/bench-quality (database recreated each run).
"""

import argparse
import contextlib
import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from common.bootstrap import ROOT, django_setup

BENCH_DIR = ROOT / "var" / "bench-quality"
django_setup(BENCH_DIR, KOINON_MODEL_PROVIDER="extractive")

from common.corpus import BenchSpace, bench_space  # noqa: E402
from common.quality_report import Tally, domain_report, plot, print_header, print_row  # noqa: E402
from common.quality_sets import (  # noqa: E402
    DOMAIN_SAMPLE,
    QUICK_DOMAIN_SAMPLE,
    SQUAD2_EVAL_FILE,
    Asked,
    QualitySet,
    SourceDocument,
    quality_set,
    set_names,
)
from common.services import embedded_services, recreate_database  # noqa: E402

from answers.judge.lexical import PLAN_STOPWORDS, TermWeights, content_words  # noqa: E402
from answers.pipeline.lifecycle import answer_create  # noqa: E402
from answers.pipeline.planner import plan_question  # noqa: E402
from answers.pipeline.providers.extractive import ExtractiveProvider  # noqa: E402
from answers.pipeline.request import answer_request_parse  # noqa: E402
from answers.pipeline.vocabulary import CandidateView, DatasetInfo, Plan  # noqa: E402
from knowledge.documents.extraction import revision_extract  # noqa: E402
from knowledge.documents.upload import document_upload  # noqa: E402
from knowledge.models import Document, Extraction, Space  # noqa: E402
from knowledge.sentences import is_label  # noqa: E402
from knowledge.services import space_create, space_member_set  # noqa: E402

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
            wanted = set(content_words(search, stopwords=PLAN_STOPWORDS))
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
                    words = set(content_words(candidate.text[start:end], stopwords=PLAN_STOPWORDS))
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


# --- sets in spaces ---------------------------------------------------------------------


@dataclass(frozen=True)
class SpaceQuestions:
    """One collection of a set, ingested: its space and users, and what is asked there."""

    bench: BenchSpace
    asked: list[Asked]


@dataclass(frozen=True)
class IngestedSet:
    name: str
    parts: list[SpaceQuestions]

    @property
    def asked(self) -> list[Asked]:
        return [item for part in self.parts for item in part.asked]


def ingest(space, user, document: SourceDocument, number: int) -> None:
    result = document_upload(
        user=user,
        filename=f"doc-{number}{document.suffix}",
        data=document.text.encode(),
        space=space,
        title=document.title,
    )
    revision_extract(revision_id=result.revision.pk)


def space_new(name: str) -> BenchSpace:
    """A space with a reader of its own; the first one also creates the bench curator.
    The reader is staff: questions are asked in debug mode, which is for staff (staff
    reads no more than a reader: the space's permission decides what is found)."""
    from django.contrib.auth import get_user_model

    users = get_user_model()
    if not users.objects.filter(username="bench-curator").exists():
        bench = bench_space(name)
    else:
        curator = users.objects.get(username="bench-curator")
        reader = users.objects.create_user(
            username=f"reader-{Space.objects.count()}", password=None
        )
        space = space_create(name=name, created_by=curator)
        space_member_set(space=space, username=reader.username, role="reader")
        bench = BenchSpace(curator, reader, space)
    bench.reader.is_staff = True
    bench.reader.save(update_fields=["is_staff"])
    return bench


def sets_ingest(args: argparse.Namespace) -> list[IngestedSet]:
    """Every chosen set's collections, each in a new space, documents numbered across the run."""
    started = time.perf_counter()
    ingested, number = [], 0
    for name in set_names(args.corpus):
        chosen: QualitySet = quality_set(name, quick=args.quick, sample=args.sample)
        parts = []
        for collection in chosen.collections:
            bench = space_new(f"{chosen.name} {collection.label}".strip())
            for document in collection.documents:
                number += 1
                ingest(bench.space, bench.curator, document, number)
            parts.append(SpaceQuestions(bench, collection.asked))
        ingested.append(IngestedSet(chosen.name, parts))
        print(f"{chosen.name}: {sum(len(c.documents) for c in chosen.collections)} documents")
    print(f"ingested in {time.perf_counter() - started:.0f} s")
    return ingested


# --- measuring ---------------------------------------------------------------------


DETAILS: list[Path] = []  # --details: one JSON line per question asked


def timed_provider(provider):
    """The provider, with the seconds its judge spends inside `select` added up (a
    judge-aware selection scores spans there; the judgement step is timed by the trace),
    and every (part, quote, score) it judged, for --details."""
    spent, selecting = [0.0], [False]
    judge, select = provider.judge, provider.select
    provider.judged = []

    def timed_judge(**kwargs):
        started = time.perf_counter()
        try:
            scores = judge(**kwargs)
        finally:
            if selecting[0]:
                spent[0] += time.perf_counter() - started
        provider.judged += [
            (item.part, item.quote, round(float(score), 3))
            for item, score in zip(kwargs["items"], scores, strict=True)
        ]
        return scores

    def timed_select(**kwargs):
        selecting[0] = True
        try:
            return select(**kwargs)
        finally:
            selecting[0] = False

    provider.judge, provider.select = timed_judge, timed_select
    return provider, spent


def measure(ingested: IngestedSet, provider_factory: Callable, texts: dict) -> Tally:
    """Every question of the set asked by its space's reader, in its space."""
    tally = Tally()
    details = DETAILS[0].open("a", encoding="utf-8") if DETAILS else None
    for part in ingested.parts:
        for item in part.asked:
            row = ask(part.bench, item, provider_factory, texts, tally)
            if details is not None:
                details.write(json.dumps({"set": ingested.name} | row) + "\n")
    if details is not None:
        details.close()
    return tally


def ask(
    bench: BenchSpace, item: Asked, provider_factory: Callable, texts: dict, tally: Tally
) -> dict:
    """One question through `answer_create`, counted in `tally`; its --details row."""
    request = answer_request_parse(
        {"query": item.question, "mode": "debug", "space_ids": [bench.space.pk]}
    )
    provider, selecting_judge_s = timed_provider(provider_factory())
    started = time.perf_counter()
    body = answer_create(user=bench.reader, request=request, provider=provider)
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
    outcome = "abstained"
    if item.gold is not None:
        tally.answerable += 1
        if answered:
            if any(item.gold.supports(c["quote"]) for c in quotes):
                tally.supported += 1
                outcome = "supported"
            else:
                tally.wrong += 1
                outcome = "wrong"
    else:
        tally.impossible += 1
        tally.abstained_impossible += not answered
        tally.answered_impossible += answered
        outcome = "answered_unanswerable" if answered else "abstained"
    return {
        "question": item.question,
        "gold": item.gold.shown() if item.gold is not None else None,
        "status": status,
        "outcome": outcome,
        "quotes": [c["quote"] for c in quotes],
        "judged": [
            {
                "part": part,
                "quote": quote,
                "score": score,
                "supports": item.gold.supports(quote) if item.gold is not None else None,
            }
            for part, quote, score in getattr(provider, "judged", [])
        ],
        "rounds": sum(1 for s in steps if s["step"] == "retrieval"),
        "judgements": [
            {"attempt": s.get("attempt"), "verdicts": s.get("verdicts")}
            for s in steps
            if s["step"] == "judgement"
        ],
        # Why a selection was refused before the judge saw it (a quote not in the text, …).
        "refused": [s["issue"] for s in steps if s["step"] == "validation" and not s.get("ok")],
        "provider": provider.name,
    }


def admitted_texts() -> dict[int, tuple[str, str]]:
    titles = dict(Document.objects.values_list("pk", "title"))
    return {
        e.revision_id: (e.text, titles[e.revision.document_id])
        for e in Extraction.objects.filter(serves_passages=True).select_related("revision")
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick",
        action="store_true",
        help="a quarter of the Wikipedia sets' questions, "
        f"{QUICK_DOMAIN_SAMPLE} per domain set (structured-docs: all)",
    )
    parser.add_argument(
        "--thresholds", default="", help="pipeline thresholds (default: the setting's value)"
    )
    parser.add_argument("--plot", type=Path, default=ROOT / "docs" / "quality-curve.png")
    parser.add_argument(
        "--corpus",
        default="eval,squad,nq",
        help="comma-separated sets: eval (squad2-dev-eval, every 3rd question: 818), squad "
        "(the SQuAD sample), nq (NQ held-out), dev (the dev articles of squad2-dev-train: for "
        "choosing a threshold, never eval), covidqa-dev, emanual-dev, policyqa-dev, "
        "ragbench-expertqa-test, ragbench-hagrid-test, ragbench-hotpotqa-test, structured-docs; "
        "or groups: ragbench, domains, all (every set that measures)",
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
        help="at most this many questions per set (every k-th, deterministic; default: the "
        f"Wikipedia sets' fixed slices, {DOMAIN_SAMPLE} per domain set, 40 with openai)",
    )
    parser.add_argument(
        "--domain-report",
        type=Path,
        default=ROOT / "docs" / "quality-domains",
        help="where the per-domain table (.md) and precision/coverage plot (.png) go",
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
        "--baseline-judge",
        type=Path,
        help="also measure with this judge file (its models beside it), e.g. the judge "
        "shipped before a retraining: the baseline of that change",
    )
    parser.add_argument(
        "--baseline-thresholds",
        default="",
        help="the baseline judge's thresholds, e.g. its own pinned points (default: --thresholds)",
    )
    parser.add_argument(
        "--judge",
        type=Path,
        help="measure this judge file (its models beside it) instead of the pinned one: a "
        "candidate before it is shipped",
    )
    parser.add_argument(
        "--without-answer-type",
        action="store_true",
        help="also measure each threshold with the answer-type gate off "
        "(answers.pipeline.answer_type: the baseline of issue 47, item 2)",
    )
    parser.add_argument(
        "--no-plot",
        action="store_true",
        help="skip the plots and the per-domain report (with eval: also the judge-only sweep "
        "over all 2,453 questions)",
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
    if args.provider == "openai" and args.sample is None:
        args.sample = 40
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


def run_openai(postgres, args: argparse.Namespace, url: str) -> None:
    """The local model (SmolLM2-135M on llama.cpp) as the new pipeline's provider, next to
    the extractive one at the default threshold, on a deterministic sample of each set.
    The model is tiny: the figures say what the contract costs and keeps, not what a real
    model would reach."""
    from answers.pipeline.providers.llm import ChatClient
    from answers.pipeline.providers.openai import OpenAIProvider

    def local_model() -> OpenAIProvider:
        return OpenAIProvider(
            client=ChatClient(base_url=url, model="local", timeout=120.0, retries=1)
        )

    recreate_database(postgres, clear_media=True)
    ingested = sets_ingest(args)
    texts = admitted_texts()
    for chosen in ingested:
        print(f"\n== {chosen.name}: {len(chosen.asked)} questions")
        print_header()
        for label, factory in (
            ("extractive, default", ExtractiveProvider),
            ("openai (SmolLM2-135M)", local_model),
        ):
            print_row(label, measure(chosen, factory, texts).row())


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
def judge_swapped(path: Path | None):
    """Every run judged by the judge file at `path` (its models beside it), e.g. the judge
    shipped before a retraining, kept as the baseline of the same run. None: the pinned one."""
    import hashlib

    from answers.judge import model as judge_model

    if path is None:
        yield
        return
    kept = judge_model.JUDGE_FILE, judge_model.JUDGE_SHA256
    judge_model.JUDGE_FILE = path
    judge_model.JUDGE_SHA256 = hashlib.sha256(path.read_bytes()).hexdigest()
    judge_model._loaded.clear()
    try:
        yield
    finally:
        judge_model.JUDGE_FILE, judge_model.JUDGE_SHA256 = kept
        judge_model._loaded.clear()


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
    baseline_thresholds = [float(t) for t in args.baseline_thresholds.split(",") if t.strip()]
    judged_spans = [int(k) for k in args.judged_spans.split(",") if k.strip()] or [
        ExtractiveProvider.judged_spans
    ]
    recreate_database(postgres, clear_media=True)
    ingested = sets_ingest(args)
    texts = admitted_texts()
    curves: dict[str, list[tuple[float, dict]]] = {}
    for chosen in ingested:
        print(f"\n== {chosen.name}: {len(chosen.asked)} questions")
        print_header()
        if not args.no_baseline:
            print_row("old selector", measure(chosen, OldExtractiveProvider, texts).row())
        curves[chosen.name] = []
        if args.baseline_judge:
            for threshold in baseline_thresholds or thresholds:
                with threshold_fixed(threshold), judge_swapped(args.baseline_judge):
                    row = measure(chosen, ExtractiveProvider, texts).row()
                print_row(f"baseline judge, {threshold}", row)
        for threshold in thresholds:
            if args.without_answer_type:
                with threshold_fixed(threshold), answer_type_gate_off():
                    row = measure(chosen, ExtractiveProvider, texts).row()
                print_row(f"no type gate, {threshold}", row)
            if args.sequential:
                with threshold_fixed(threshold):
                    row = measure(chosen, SequentialProvider, texts).row()
                print_row(f"sequential, {threshold}", row)
            for spans in judged_spans:
                factory = type("Judged", (ExtractiveProvider,), {"judged_spans": spans})
                for threads in judge_threads or [None]:
                    with (
                        threshold_fixed(threshold),
                        judge_swapped(args.judge),
                        judge_pool(threads),
                    ):
                        row = measure(chosen, factory, texts).row()
                    last = judge_threads[-1] if judge_threads else None
                    if spans == ExtractiveProvider.judged_spans and threads == last:
                        curves[chosen.name].append((threshold, row))
                    label = f"new, threshold {threshold}"
                    if judged_spans != [ExtractiveProvider.judged_spans]:
                        label += f" k={spans}"
                    if threads is not None:
                        label += f" t={threads}"
                    print_row(label, row)
    if args.no_plot:
        return
    if len(curves) > 1 or len(thresholds) > 1:
        domain_report(args.domain_report, curves)
    if "squad2-dev-eval" in curves:
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
        [JudgeItem(p.question, p.sentence, p.context, p.before, p.passage) for p in pairs], weights
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


if __name__ == "__main__":
    main()
