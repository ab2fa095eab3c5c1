"""The judge's data: the held-out split of NQ-open, candidate sentences of a passage, and
whether a sentence contains a gold answer. Shared by training, evaluation and the quality
benchmark so that all three read the same units. Nothing here imports Django.

The split is by a hash of the question, so it does not depend on file order and a
question never moves between parts: about one question in five is held out, and no
training step ever reads a held-out question or its passage's sentences as a pair.
"""

import gzip
import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from knowledge.normalise import normalised_key
from knowledge.sentences import is_label, sentence_spans

HELDOUT_MODULUS = 5


def is_heldout(question: str) -> bool:
    digest = hashlib.sha256(question.strip().encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") % HELDOUT_MODULUS == 0


def jsonl_rows(path: Path) -> Iterator[dict]:
    """The rows of a gzipped JSON Lines file, one dict a line."""
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        for line in handle:
            yield json.loads(line)


def file_sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


@dataclass(frozen=True)
class NQRecord:
    question: str
    answers: tuple[str, ...]
    title: str
    text: str  # the gold passage's text, without its title


def nq_records(path: Path) -> Iterator[NQRecord]:
    for record in jsonl_rows(path):
        gold = record["ctxs"][0]
        yield NQRecord(
            record["question"].strip(),
            tuple(record["answers"]),
            gold["title"].strip(),
            gold["text"].strip(),
        )


def candidate_sentences(text: str, *, title: str = "") -> list[str]:
    """The sentences a quote may be made of: labels (headings, titles) left out."""
    sentences = (text[a:b] for a, b in sentence_spans(text))
    return [s for s in sentences if not is_label(s, title=title)]


def contains_answer(sentence: str, answers: tuple[str, ...] | list[str]) -> bool:
    """A gold answer's words occur, in order and as whole words, in the sentence."""
    key = normalised_key(sentence)
    return any((answer_key := normalised_key(a)) and answer_key in key for a in answers)


# --- SQuAD (1.1 train, 2.0 dev split by article) -----------------------------------------

DATA_DIR = Path(__file__).resolve().parents[2].parent / "shared" / "data"
NQ_PATH = DATA_DIR / "nq-open-oracle.jsonl.gz"
SQUAD11_PATH = DATA_DIR / "squad11-train.jsonl.gz"
SQUAD2_TRAIN_PATH = DATA_DIR / "squad2-dev-train.jsonl.gz"
SQUAD2_EVAL_PATH = DATA_DIR / "squad2-dev-eval.jsonl.gz"  # measuring only: never trained on
SQUAD2_DEV_MODULUS = 5  # 4 of squad2-dev-train's 22 articles are the dev slice
SQUAD11_DEV_MODULUS = 20  # about 22 of SQuAD 1.1 train's 442 articles


@dataclass(frozen=True)
class QARecord:
    """One question over one paragraph; `group` is the article (the unit of every split)."""

    question: str
    answers: tuple[str, ...]
    title: str
    text: str
    group: str
    impossible: bool


def squad_records(path: Path) -> Iterator[QARecord]:
    for row in jsonl_rows(path):
        yield QARecord(
            row["question"].strip(),
            tuple(row.get("answers") or ()),
            row["title"].strip(),
            row["context"],
            row["group"],
            bool(row.get("is_impossible")),
        )


def is_dev_group(group: str, modulus: int) -> bool:
    """The dev slice: whole articles (or passages), chosen by a hash of their name."""
    digest = hashlib.sha256(f"dev:{group}".encode()).digest()
    return int.from_bytes(digest[:8], "big") % modulus == 0


@dataclass(frozen=True)
class Sentence:
    """A candidate sentence of a passage with the sentence just before it (the subject of
    "It closes at noon." is often there); `start`/`end` are offsets in the passage."""

    text: str
    before: str
    start: int
    end: int


def passage_sentences(text: str, *, title: str = "") -> list[Sentence]:
    """The candidate sentences of a passage (labels left out), each with its predecessor."""
    spans = sentence_spans(text)
    result = []
    for number, (start, end) in enumerate(spans):
        sentence = text[start:end]
        if is_label(sentence, title=title):
            continue
        before = text[slice(*spans[number - 1])] if number else ""
        result.append(Sentence(sentence, before, start, end))
    return result


# --- Other domains (../shared/data/domains: see its README for which file is for what) ------

DOMAINS_DIR = DATA_DIR / "domains"
COVIDQA_PATH = DOMAINS_DIR / "covidqa-train.jsonl.gz"  # papers: train, and a dev slice
EMANUAL_PATH = DOMAINS_DIR / "emanual-train.jsonl.gz"  # manuals: train, and a dev slice
# RAGBench validation splits: train, and a dev slice by question. Their -test files, and
# policyqa-dev, are for measuring only: nothing here reads them.
RAGBENCH_TRAIN_PATHS = tuple(
    DOMAINS_DIR / f"ragbench-{subset}-validation.jsonl.gz"
    for subset in ("expertqa", "hagrid", "hotpotqa")
)
# Whole papers (covidqa `group`) and manual sections (emanual `section`) kept apart as the
# dev slice; bench/quality.py measures on exactly these groups (it must use the same moduli).
COVIDQA_DEV_MODULUS = 5
EMANUAL_DEV_MODULUS = 5
RAGBENCH_DEV_MODULUS = 5  # by question: one question can recur in HAGRID with other labels


@dataclass(frozen=True)
class ParagraphRecord:
    """A question with one paragraph (or manual section) and whether that paragraph holds
    its answer (`label`); covidqa's positive rows carry the answer strings, emanual's none."""

    question: str
    text: str
    label: int
    answers: tuple[str, ...]
    group: str  # the unit of the split: the paper (covidqa) or the manual section (emanual)


def paragraph_records(path: Path, *, group_key: str) -> Iterator[ParagraphRecord]:
    for row in jsonl_rows(path):
        yield ParagraphRecord(
            row["question"].strip(),
            row["context"],
            int(row["label"]),
            tuple(row.get("answers") or ()),
            str(row[group_key]),
        )


@dataclass(frozen=True)
class RagbenchRecord:
    """One RAGBench row: its documents' sentences in order, keyed `0a` (document 0, sentence
    a); `utilized` are the sentences the reference response used, `relevant` a wider set."""

    question: str
    sentences: tuple[tuple[str, str], ...]
    relevant: frozenset[str]
    utilized: frozenset[str]
    subset: str


def ragbench_records(path: Path) -> Iterator[RagbenchRecord]:
    for row in jsonl_rows(path):
        yield RagbenchRecord(
            row["question"].strip(),
            tuple((key, text) for key, text in row["sentences"]),
            frozenset(row["relevant"]),
            frozenset(row["utilized"]),
            row["subset"],
        )


def training_files() -> tuple[Path, ...]:
    """Every file the cross-encoder trains on (`make train-judge`): pinned by hash in its
    manifest."""
    paths = (SQUAD11_PATH, SQUAD2_TRAIN_PATH, NQ_PATH, COVIDQA_PATH, EMANUAL_PATH)
    return (*paths, *RAGBENCH_TRAIN_PATHS)


def ragbench_document(key: str) -> str:
    """The document a sentence key belongs to: `12c` → `12`."""
    return key.rstrip("abcdefghijklmnopqrstuvwxyz")
