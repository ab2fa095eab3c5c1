"""The question sets of bench/quality.py: what each puts in a space, what it asks, and when a
released quote counts as supported.

Pure reading: nothing here touches the database (bench/quality.py ingests the documents
through the real upload and extraction path). Each loader returns a `QualitySet`: one or more
`Collection`s (one space each: its documents and the questions asked there). A question's
`gold` says what supports it; `None` means it is not answerable and the right outcome is an
abstention.

What "supported" means, per set (docs/quality.md, "Per domain"):
- SQuAD, NQ, COVID-QA, PolicyQA, the structured documents: a quote holds a gold answer
  string (`tools.judge.data.contains_answer`: its words, in order, as whole words);
- E-Manual (no answer strings): the quote's words lie, in order, inside the question's gold
  section text (its label-1 context);
- RAGBench: the quote, found in one of the row's documents, contains a whole sentence
  RAGBench marks utilized, or at least half of its words lie in utilized sentences.

The domain sets' training halves are the judge's: covidqa and emanual are measured only on
the groups `tools.judge.data.is_dev_group` holds out, with the moduli of the judge's training.
"""

import json
import re
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from common.bootstrap import NQ_FILE, ROOT, SHARED_DATA
from knowledge.normalise import normalised_words
from tools.judge.data import (
    COVIDQA_DEV_MODULUS,
    COVIDQA_PATH,
    EMANUAL_DEV_MODULUS,
    EMANUAL_PATH,
    SQUAD2_DEV_MODULUS,
    contains_answer,
    is_dev_group,
    is_heldout,
    jsonl_rows,
    nq_records,
)

DOMAINS = SHARED_DATA / "domains"
SQUAD_FILE = SHARED_DATA / "squad2-dev-sample.json"
SQUAD2_EVAL_FILE = SHARED_DATA / "squad2-dev-eval.jsonl.gz"  # measuring only
SQUAD2_TRAIN_FILE = SHARED_DATA / "squad2-dev-train.jsonl.gz"  # its dev articles: tuning
POLICYQA_FILE = DOMAINS / "policyqa-dev.jsonl.gz"  # measuring only
STRUCTURED_DIR = ROOT / "tests" / "data" / "structured_docs"  # measuring only
RAGBENCH_SUBSETS = ("expertqa", "hagrid", "hotpotqa")  # their -test files: measuring only
# COVID-QA and E-Manual are training files: only the papers and sections the judge's
# training holds out (tools.judge.data's COVIDQA_DEV_MODULUS / EMANUAL_DEV_MODULUS) are asked.


# --- what a set holds ----------------------------------------------------------------


@dataclass(frozen=True)
class SourceDocument:
    title: str
    text: str
    suffix: str = ".txt"  # of the uploaded file's name: it picks the extractor


class Gold(Protocol):
    def supports(self, quote: str) -> bool: ...

    def shown(self) -> object:
        """What --details writes for the question (JSON)."""
        ...


@dataclass(frozen=True)
class AnswerStrings:
    """Supported: the quote holds one of the answers."""

    answers: tuple[str, ...]

    def supports(self, quote: str) -> bool:
        return contains_answer(quote, self.answers)

    def shown(self) -> object:
        return list(self.answers)


@dataclass(frozen=True)
class GoldPassage:
    """Supported: the quote's words lie, in order and whole, inside the gold passage (a
    quote from any other passage, or running past this one's end, is wrong)."""

    passage: str

    def supports(self, quote: str) -> bool:
        return contains_answer(self.passage, (quote,))

    def shown(self) -> object:
        return self.passage


@dataclass(frozen=True)
class LabelledDocument:
    """One retrieved document of a RAGBench row: its sentences in key order, and which of them
    RAGBench marks utilized."""

    sentences: tuple[str, ...]
    utilized: frozenset[int]

    @property
    def text(self) -> str:
        return " ".join(self.sentences)

    def supports(self, quote_words: list[str]) -> bool:
        """At any place the quote's words occur in this document: the span holds a whole
        utilized sentence, or at least half of its words are utilized sentences' words.

        Words, not characters, so that the segmenter's cuts (which need not be RAGBench's)
        and the extractor's normalisation of spaces and quotes do not matter."""
        words: list[str] = []
        owner: list[int] = []
        for number, sentence in enumerate(self.sentences):
            said = normalised_words(sentence)
            words += said
            owner += [number] * len(said)
        size = len(quote_words)
        for start in range(len(words) - size + 1):
            if words[start : start + size] != quote_words:
                continue
            inside = owner[start : start + size]
            used = sum(1 for number in inside if number in self.utilized)
            whole = any(
                inside.count(number) == len(normalised_words(self.sentences[number]))
                for number in set(inside) & self.utilized
            )
            if whole or 2 * used >= size:
                return True
        return False


@dataclass(frozen=True)
class UtilizedSentences:
    """Supported: the quote overlaps what RAGBench marks utilized in the row's documents
    (`LabelledDocument.supports`); a quote from another row's document is wrong."""

    documents: tuple[LabelledDocument, ...]

    def supports(self, quote: str) -> bool:
        words = normalised_words(quote)
        return bool(words) and any(document.supports(words) for document in self.documents)

    def shown(self) -> object:
        return [d.sentences[n] for d in self.documents for n in sorted(d.utilized)]


@dataclass(frozen=True)
class Asked:
    question: str
    gold: Gold | None  # None: not answerable (the right outcome is an abstention)


@dataclass
class Collection:
    """What one space holds and the questions asked in it."""

    documents: list[SourceDocument] = field(default_factory=list)
    asked: list[Asked] = field(default_factory=list)
    label: str = ""  # of its space, beside the set's name, where a set has several


@dataclass(frozen=True)
class QualitySet:
    name: str
    collections: list[Collection]

    @property
    def asked(self) -> int:
        return sum(len(c.asked) for c in self.collections)


def one_space(name: str, documents: list[SourceDocument], asked: list[Asked]) -> QualitySet:
    return QualitySet(name, [Collection(documents, asked)])


def evenly[T](items: Sequence[T], cap: int | None) -> list[T]:
    """At most `cap` of `items`, every k-th from the first (deterministic, spread over the
    file rather than its first topics); all of them when `cap` is None."""
    if cap is None:
        return list(items)
    step = max(1, len(items) // max(1, cap))
    return list(items[::step][:cap])


def read_rows(path: Path) -> list[dict]:
    return list(jsonl_rows(path))


def distinct_documents(texts: Sequence[tuple[str, str]]) -> list[SourceDocument]:
    """One document per distinct (title, text), in first-seen order."""
    return [SourceDocument(title, text) for title, text in dict.fromkeys(texts)]


# --- Wikipedia: SQuAD 2.0 and NQ-open --------------------------------------------------


def squad_sample(*, every: int, cap: int | None) -> QualitySet:
    """squad2-dev-sample.json: every paragraph a document, every `every`-th question."""
    data = json.loads(SQUAD_FILE.read_text())
    documents, asked = [], []
    for article in data["data"]:
        for index, paragraph in enumerate(article["paragraphs"]):
            documents.append(
                SourceDocument(f"{article['title']} ({index + 1})", paragraph["context"])
            )
            for qa in paragraph["qas"]:
                gold = None if qa.get("is_impossible") else answer_strings(qa["answers"])
                asked.append(Asked(qa["question"], gold))
    return one_space("SQuAD 2.0 sample", documents, evenly(asked[::every], cap))


def answer_strings(answers: Sequence[dict | str]) -> AnswerStrings:
    return AnswerStrings(tuple(a["text"] if isinstance(a, dict) else a for a in answers))


def squad_split(
    name: str, path: Path, *, every: int, cap: int | None, dev_only: bool = False
) -> QualitySet:
    """A SQuAD 2.0 split of the shared data (one row per question): each paragraph a
    document; every `every`-th question (of the dev articles only, with `dev_only`)."""
    rows = read_rows(path)
    documents = distinct_documents(
        [(f"{r['title']} ({r['paragraph_id']})", r["context"]) for r in rows]
    )
    asked = [
        Asked(r["question"], None if r.get("is_impossible") else answer_strings(r["answers"]))
        for r in rows
        if not dev_only or is_dev_group(r["group"], SQUAD2_DEV_MODULUS)
    ]
    return one_space(name, documents, evenly(asked[::every], cap))


def nq_heldout(*, every: int, cap: int | None) -> QualitySet:
    """Every distinct NQ-open gold passage a document; only the held-out questions asked
    (tools.judge.data.is_heldout: the judge never trained on them)."""
    records = list(nq_records(NQ_FILE))
    documents = distinct_documents([(r.title, r.text) for r in records])
    asked = [Asked(r.question, AnswerStrings(r.answers)) for r in records if is_heldout(r.question)]
    return one_space("NQ-open held-out", documents, evenly(asked[::every], cap))


# --- domains ---------------------------------------------------------------------------


def covidqa_dev(*, cap: int | None) -> QualitySet:
    """The dev papers of COVID-QA: every paragraph of theirs in the file a document (the
    answer paragraphs and the derived negatives, which are other paragraphs of the same
    paper: distractors for retrieval); each label-1 row asked, its answers the gold."""
    rows = [r for r in read_rows(COVIDQA_PATH) if is_dev_group(r["group"], COVIDQA_DEV_MODULUS)]
    documents = distinct_documents([(f"Paper {r['group']}", r["context"]) for r in rows])
    answers: dict[str, list[str]] = defaultdict(list)
    for row in rows:
        if int(row["label"]) == 1:
            # A question answered in two paragraphs: either paragraph's answer holds.
            answers[row["question"]] += row["answers"]
    asked = [Asked(question, AnswerStrings(tuple(a))) for question, a in answers.items()]
    return one_space("covidqa-dev", documents, evenly(asked, cap))


def emanual_dev(*, cap: int | None) -> QualitySet:
    """The dev sections of E-Manual QA: one document per section (titled with the section's
    own heading), its distinct texts in the file as paragraphs (a text another one contains
    is left out); each label-1 row asked, its context the gold passage."""
    rows = [r for r in read_rows(EMANUAL_PATH) if is_dev_group(r["section"], EMANUAL_DEV_MODULUS)]
    texts: dict[str, list[str]] = defaultdict(list)
    for row in rows:
        if row["context"] not in texts[row["section"]]:
            texts[row["section"]].append(row["context"])
    documents = [
        SourceDocument(
            section.split(">")[-1].strip(),
            "\n\n".join(t for t in parts if not any(t != o and t in o for o in parts)),
        )
        for section, parts in texts.items()
    ]
    asked = [Asked(r["question"], GoldPassage(r["context"])) for r in rows if int(r["label"]) == 1]
    return one_space("emanual-dev", documents, evenly(asked, cap))


def policyqa(*, cap: int | None) -> QualitySet:
    """PolicyQA: one space per website (its policy's segments in the file, one document
    each), because the same question is asked of every site and means that site's policy.
    A question asked twice of one site takes the answers of both rows."""
    rows = read_rows(POLICYQA_FILE)
    answers: dict[tuple[str, str], list[str]] = defaultdict(list)
    for row in rows:
        answers[(row["group"], row["question"])] += row["answers"]
    chosen = evenly(list(answers), cap)
    collections: dict[str, Collection] = {}
    for site, question in chosen:
        if site not in collections:
            site_rows = [r for r in rows if r["group"] == site]
            collections[site] = Collection(
                distinct_documents([(r["title"], r["context"]) for r in site_rows]), label=site
            )
        collections[site].asked.append(
            Asked(question, AnswerStrings(tuple(answers[(site, question)])))
        )
    return QualitySet("policyqa-dev", list(collections.values()))


_KEY = re.compile(r"(\d+)([a-z]+)")


def _key_order(key: str) -> tuple[int, int, str]:
    """RAGBench's sentence keys: document number, then a, b, …, z, aa, ab, …"""
    match = _KEY.fullmatch(key)
    if match is None:
        raise ValueError(f"not a RAGBench sentence key: {key!r}")
    return int(match[1]), len(match[2]), match[2]


def labelled_documents(row: dict) -> tuple[LabelledDocument, ...]:
    """A row's documents rebuilt from its sentences in key order (joined by one space)."""
    by_document: dict[int, list[tuple[str, str]]] = defaultdict(list)
    for key, text in sorted(row["sentences"], key=lambda pair: _key_order(pair[0])):
        by_document[_key_order(key)[0]].append((key, text.strip()))
    utilized = set(row["utilized"])
    return tuple(
        LabelledDocument(
            tuple(text for _, text in sentences),
            frozenset(n for n, (key, _) in enumerate(sentences) if key in utilized),
        )
        for _, sentences in sorted(by_document.items())
    )


def ragbench_test(subset: str, *, cap: int | None) -> QualitySet:
    """A RAGBench test split: `cap` rows (every k-th; one row per question, the first, where
    a question recurs with another response), each row's documents ingested (a document two
    rows share, once) and its question asked. A row with no utilized sentence counts for
    abstention."""
    rows = read_rows(DOMAINS / f"ragbench-{subset}-test.jsonl.gz")
    first = list({row["question"]: row for row in reversed(rows)}.values())[::-1]
    documents: dict[str, SourceDocument] = {}
    asked = []
    for row in evenly(first, cap):
        labelled = labelled_documents(row)
        for document in labelled:
            documents.setdefault(
                document.text, SourceDocument(f"Document {len(documents) + 1}", document.text)
            )
        gold = UtilizedSentences(labelled) if row["utilized"] else None
        asked.append(Asked(row["question"], gold))
    return one_space(f"ragbench-{subset}-test", list(documents.values()), asked)


# --- the hand-made structured-document set ---------------------------------------------


@dataclass(frozen=True)
class StructuredQuestion:
    question: str
    answers: tuple[str, ...]  # empty: not answerable
    document: str | None  # the file holding the answer
    shape: str


def structured_questions(folder: Path = STRUCTURED_DIR) -> Iterator[StructuredQuestion]:
    with (folder / "questions.jsonl").open(encoding="utf-8") as handle:
        for line in handle:
            row = json.loads(line)
            yield StructuredQuestion(
                row["question"], tuple(row["answers"]), row.get("document"), row["shape"]
            )


def structured_files(folder: Path = STRUCTURED_DIR) -> list[Path]:
    """The documents of the set: every file of the folder but its README and questions."""
    return sorted(
        path
        for path in folder.iterdir()
        if path.is_file() and path.name not in {"README.md", "questions.jsonl"}
    )


def structured_docs(*, cap: int | None) -> QualitySet:
    """tests/data/structured_docs: each file uploaded as it is (its suffix picks Markdown,
    HTML or plain text), titled with its name."""
    documents = [
        SourceDocument(path.stem.replace("-", " "), path.read_text(encoding="utf-8"), path.suffix)
        for path in structured_files()
    ]
    asked = [
        Asked(q.question, AnswerStrings(q.answers) if q.answers else None)
        for q in structured_questions()
    ]
    return one_space("structured-docs", documents, evenly(asked, cap))


# --- choosing sets by name -------------------------------------------------------------

DOMAIN_SAMPLE = 60  # questions per domain set by default (every k-th): a bounded run
QUICK_DOMAIN_SAMPLE = 20
RAGBENCH = tuple(f"ragbench-{subset}-test" for subset in RAGBENCH_SUBSETS)
DOMAIN_SETS = ("covidqa-dev", "emanual-dev", "policyqa-dev", *RAGBENCH, "structured-docs")
SET_NAMES = ("eval", "squad", "nq", "dev", *DOMAIN_SETS)
# Other names --corpus takes: a set's long name, or a group of sets. `all` is every set that
# measures (squad2-dev-eval holds the SQuAD sample's articles; `dev` is tuning data).
GROUPS = {
    "squad2-dev-eval": ("eval",),
    "nq-heldout": ("nq",),
    "ragbench": RAGBENCH,
    "domains": DOMAIN_SETS,
    "all": ("eval", "nq", *DOMAIN_SETS),
}


def set_names(chosen: str) -> list[str]:
    """The sets of a --corpus value (comma-separated names or groups), each once, in order."""
    names: dict[str, None] = {}
    for part in (p.strip() for p in chosen.split(",") if p.strip()):
        if part not in SET_NAMES and part not in GROUPS:
            known = ", ".join([*SET_NAMES, *GROUPS])
            raise ValueError(f"unknown corpus {part!r}: one of {known}")
        names.update(dict.fromkeys(GROUPS.get(part, (part,))))
    return list(names)


def quality_set(name: str, *, quick: bool, sample: int | None) -> QualitySet:
    """The set `name` with its questions chosen: the Wikipedia sets keep their fixed slices
    (every 3rd of eval, …; a quarter of those with `quick`), the domain sets take
    DOMAIN_SAMPLE questions; `sample` caps every set (every k-th, deterministic)."""
    cap = sample or (QUICK_DOMAIN_SAMPLE if quick else DOMAIN_SAMPLE)
    match name:
        case "eval":
            return squad_split(
                "squad2-dev-eval", SQUAD2_EVAL_FILE, every=12 if quick else 3, cap=sample
            )
        case "dev":
            return squad_split(
                "squad2-dev-train dev articles",
                SQUAD2_TRAIN_FILE,
                every=8 if quick else 2,
                cap=sample,
                dev_only=True,
            )
        case "squad":
            return squad_sample(every=4 if quick else 1, cap=sample)
        case "nq":
            return nq_heldout(every=4 if quick else 1, cap=sample)
        case "covidqa-dev":
            return covidqa_dev(cap=cap)
        case "emanual-dev":
            return emanual_dev(cap=cap)
        case "policyqa-dev":
            return policyqa(cap=cap)
        case "structured-docs":
            return structured_docs(cap=sample)
        case _ if name in RAGBENCH:
            return ragbench_test(name.removeprefix("ragbench-").removesuffix("-test"), cap=cap)
    raise ValueError(f"unknown set {name!r}")
