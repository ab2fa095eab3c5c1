"""The cross-encoder judge's training and dev pairs, built from the shared QA data.

No torch here: training (its own venv) builds its pairs with this module, and the app venv
uses the same dev slice to fit the judge's regression and to pick the threshold.

Every split is by article (SQuAD) or gold passage (NQ), never by question:

* SQuAD 1.1 train: the sentence holding a gold answer is positive; the paragraph's other
  sentences most like the question, and the best-matching sentence of another paragraph of
  the same article, are negatives; now and then the answer sentence is read together with
  the one before it (a two-sentence quote), also positive;
* squad2-dev-train: its answerable questions as above; every sentence of an unanswerable
  question's paragraph is a hard negative (written to look answerable);
* NQ-open, training part only: positive, the passage's other sentences, a sentence of a
  similar passage, and the positive read with a perturbed question.

Each pair carries where its sentence stands (the title) and the sentence before it: the
model reads them as the rest of its second segment (`answers.judge.segment.judge_segment`).
"""

import hashlib
import json
import math
import random
import re
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import astuple, dataclass, replace

from knowledge.normalise import normalised_key
from tools.judge.data import (
    COVIDQA_DEV_MODULUS,
    COVIDQA_PATH,
    EMANUAL_DEV_MODULUS,
    EMANUAL_PATH,
    NQ_PATH,
    RAGBENCH_DEV_MODULUS,
    RAGBENCH_TRAIN_PATHS,
    SQUAD2_DEV_MODULUS,
    SQUAD2_TRAIN_PATH,
    SQUAD11_DEV_MODULUS,
    SQUAD11_PATH,
    ParagraphRecord,
    QARecord,
    RagbenchRecord,
    Sentence,
    contains_answer,
    is_dev_group,
    is_heldout,
    nq_records,
    paragraph_records,
    passage_sentences,
    ragbench_document,
    ragbench_records,
    squad_records,
)

STOPWORDS = frozenset(
    """
    a an the of in on at to for from by with and or but is are was were be been being who
    whom whose what which when where why how do does did done has have had having it its
    this that these those there their they them he she his her him i you we our your as than
    then so not no yes into out up down over under about after before during between through
    all any some many much most more first last one two new name called known s
    """.split()  # noqa: SIM905 - a word list reads better as text
)
WORD = re.compile(r"[a-z0-9]+")
NUMBER = re.compile(r"\d+")
TOKEN_CORE = re.compile(r"^(\W*)(.*?)(\W*)$")


def words(text: str) -> list[str]:
    return WORD.findall(text.casefold())


def content_words(text: str) -> set[str]:
    return {w for w in words(text) if w not in STOPWORDS and len(w) > 2}


class SentenceIndex:
    """An inverted index over candidate sentences, scored by summed IDF of shared words."""

    def __init__(self, entries: list[tuple[int, str]], idf: dict[str, float]) -> None:
        self.entries = entries  # (record number, sentence)
        self.idf = idf
        self.postings: dict[str, list[int]] = defaultdict(list)
        for number, (_, sentence) in enumerate(entries):
            for word in content_words(sentence):
                self.postings[word].append(number)

    def top(self, text: str, k: int, exclude_record: int) -> list[tuple[int, str]]:
        scores: Counter[int] = Counter()
        for word in sorted(content_words(text)):  # a fixed order: float sums do not commute
            weight = self.idf.get(word, 0.0)
            for number in self.postings.get(word, ()):
                scores[number] += weight
        ranked = sorted(scores.items(), key=lambda item: (-item[1], item[0]))
        hits = [self.entries[n] for n, _ in ranked if self.entries[n][0] != exclude_record]
        return hits[:k]


def replacement_pool(sentences: list[str], avoid: set[str], *, capitalised: bool) -> list[str]:
    """Content words of `sentences` not in `avoid`, of the same kind (proper noun or not)."""
    pool: list[str] = []
    for sentence in sentences:
        for raw in re.findall(r"[A-Za-z][A-Za-z\-]+", sentence):
            word = raw.casefold()
            if word in STOPWORDS or len(word) < 4 or word in avoid or word in pool:
                continue
            if raw[0].isupper() == capitalised:
                pool.append(word)
    return pool


def perturb_questions(
    question: str,
    positive: str,
    sources: list[str],
    idf: dict[str, float],
    rng: random.Random,
    limit: int,
) -> list[str]:
    """Questions that stay on the topic of `positive` but that it no longer answers.

    A number in the question is swapped for another number (one the sentence does not
    contain); a key word the sentence matches (rarest first) is swapped for a word of the same
    kind from `sources` (the passage's other sentences, then similar passages).
    """
    tokens = question.split()
    positive_words = set(words(positive))
    positive_raw = re.findall(r"[A-Za-z][A-Za-z\-]+", positive)
    question_words = set(words(question))
    results: list[str] = []

    def rebuilt(index: int, core: str) -> str:
        lead, _, trail = TOKEN_CORE.match(tokens[index]).groups()
        return " ".join([*tokens[:index], lead + core + trail, *tokens[index + 1 :]])

    # (1) numbers: years, counts, ordinals' digits.
    for index, token in enumerate(tokens):
        match = NUMBER.search(token)
        if not match or len(results) >= limit:
            continue
        value = match.group()
        others = [
            n
            for s in sources
            for n in NUMBER.findall(s)
            if n != value and n not in positive_words and len(n) == len(value)
        ]
        if others:
            new = others[rng.randrange(len(others))]
        else:
            shift = rng.choice([-3, -2, -1, 1, 2, 3]) if len(value) == 4 else rng.randint(2, 9)
            new = str(max(1, int(value) + shift))
            if new in positive_words:
                continue
        results.append(
            " ".join([*tokens[:index], token.replace(value, new, 1), *tokens[index + 1 :]])
        )

    # (2) key words that the sentence matches, rarest first.
    keyed = []
    for index, token in enumerate(tokens):
        core = TOKEN_CORE.match(token).group(2).casefold()
        if core.isalpha() and core not in STOPWORDS and len(core) > 2 and core in positive_words:
            keyed.append((-idf.get(core, 0.0), index, core))
    for _, index, core in sorted(keyed):
        if len(results) >= limit:
            break
        capitalised = any(r.casefold() == core and r[0].isupper() for r in positive_raw)
        pool = replacement_pool(sources, positive_words | question_words, capitalised=capitalised)
        if not pool:
            continue
        # Prefer words about as rare as the one replaced: the swap should look natural.
        rarity = idf.get(core, 0.0)
        pool.sort(key=lambda w: (abs(idf.get(w, 0.0) - rarity), w))
        new = pool[rng.randrange(min(len(pool), 12))]
        results.append(rebuilt(index, new))
    return results


@dataclass(frozen=True)
class Pair:
    question: str
    sentence: str
    context: str  # the title (and heading path) the sentence stands under
    before: str  # the sentence before it in its passage
    label: int
    kind: str  # positive | merged | passage | other_paragraph | impossible | perturbed | ...
    source: str  # squad11 | squad2 | nq
    group: str  # the article or passage: the unit of the split
    question_id: int  # pairs of one question share it
    # The whole passage the sentence stands in, for the paragraph judge (dev pairs only; a
    # function of the records, so it stays out of `pairs_digest`).
    passage: str = ""


@dataclass(frozen=True)
class PairConfig:
    seed: int = 13
    squad11_questions: int = 14000  # a sample of SQuAD 1.1 train's fit articles
    passage_negatives: int = 2  # the paragraph's sentences most like the question
    other_paragraph_negatives: int = 1  # per question, from the same article
    merged_share: float = 0.15  # answer sentences also read with the one before
    squad11_dev_questions: int = 800
    # Other domains (papers, manuals, web pages): off in the quick check's recorded slice
    # unless asked for, so its figures stay comparable run to run.
    domains: bool = True
    domain_negatives: int = 3  # per question: the sentences of non-answering text most like it
    impossible_negatives: int = 0  # 0: every sentence of an unanswerable question's paragraph


def _idf(sentences: Iterable[str]) -> dict[str, float]:
    frequency: Counter[str] = Counter()
    count = 0
    for sentence in sentences:
        frequency.update(content_words(sentence))
        count += 1
    return {w: math.log((1 + count) / (1 + df)) for w, df in frequency.items()}


def _weight(words: Iterable[str], idf: dict[str, float]) -> float:
    """The summed IDF of `words`, exactly rounded: a set's order changes with each process's
    string hashing, and a plain float sum with it (which then picked other negatives)."""
    return math.fsum(idf.get(w, 0.0) for w in words)


def _overlap(question: set[str], sentence: str, idf: dict[str, float]) -> float:
    return _weight(question & content_words(sentence), idf)


def _title(record: QARecord) -> str:
    return record.title.replace("_", " ")


def squad_pairs(
    records: list[QARecord],
    *,
    source: str,
    config: PairConfig,
    rng: random.Random,
    every_sentence: bool,
    first_id: int = 0,
) -> list[Pair]:
    """Pairs of SQuAD records. `every_sentence` (the dev slice) pairs each question with
    every candidate sentence of its paragraph, so that its best sentence can be measured."""
    paragraphs: dict[tuple[str, str], list[Sentence]] = {}
    for record in records:
        key = (record.group, record.text)
        if key not in paragraphs:
            paragraphs[key] = passage_sentences(record.text, title=_title(record))
    idf = _idf(s.text for group in paragraphs.values() for s in group)
    by_article: dict[str, list[tuple[int, str]]] = defaultdict(list)
    numbers = {key: n for n, key in enumerate(paragraphs)}
    for key, group in paragraphs.items():
        by_article[key[0]] += [(numbers[key], s.text) for s in group]
    indexes = {article: SentenceIndex(entries, idf) for article, entries in by_article.items()}

    pairs: list[Pair] = []
    for offset, record in enumerate(records):
        qid = first_id + offset
        sentences = paragraphs[(record.group, record.text)]
        title = _title(record)

        def pair(s: Sentence, label: int, kind: str, *, _q=record, _qid=qid, _t=title) -> Pair:
            return Pair(_q.question, s.text, _t, s.before, label, kind, source, _q.group, _qid)

        if record.impossible:
            chosen = sentences
            if config.impossible_negatives and not every_sentence:
                asked = content_words(record.question)
                chosen = sorted(sentences, key=lambda s: (-_overlap(asked, s.text, idf), s.start))[
                    : config.impossible_negatives
                ]
            passage = record.text if every_sentence else ""
            pairs += [replace(pair(s, 0, "impossible"), passage=passage) for s in chosen]
            continue
        positive = [s for s in sentences if contains_answer(s.text, record.answers)]
        if not positive:
            continue  # the answer spans a sentence boundary or sits in a label
        if every_sentence:
            pairs += [
                replace(pair(s, int(s in positive), "dev"), passage=record.text) for s in sentences
            ]
            continue
        pairs += [pair(s, 1, "positive") for s in positive]
        asked = content_words(record.question)
        others = sorted(
            (s for s in sentences if s not in positive),
            key=lambda s: (-_overlap(asked, s.text, idf), s.start),
        )
        pairs += [pair(s, 0, "passage") for s in others[: config.passage_negatives]]
        found = indexes[record.group].top(
            record.question, 6, exclude_record=numbers[(record.group, record.text)]
        )
        far = [text for _, text in found if not contains_answer(text, record.answers)]
        pairs += [
            Pair(record.question, text, title, "", 0, "other_paragraph", source, record.group, qid)
            for text in far[: config.other_paragraph_negatives]
        ]
        first = positive[0]
        index = sentences.index(first)
        if index and rng.random() < config.merged_share:
            previous = sentences[index - 1]
            if previous.end <= first.start:
                merged = record.text[previous.start : first.end]
                pairs.append(
                    pair(Sentence(merged, previous.before, previous.start, first.end), 1, "merged")
                )
    return pairs


def nq_pairs(records, *, every_sentence: bool, rng: random.Random, first_id: int) -> list[Pair]:
    """NQ-open training-part pairs: each gold passage is its own group."""
    passages = [passage_sentences(r.text, title=r.title) for r in records]
    idf = _idf(s.text for group in passages for s in group)
    index = SentenceIndex(
        [(number, s.text) for number, group in enumerate(passages) for s in group], idf
    )
    pairs: list[Pair] = []
    for number, record in enumerate(records):
        qid = first_id + number
        group = f"nq:{record.title}"
        sentences = passages[number]
        positive = [s for s in sentences if contains_answer(s.text, record.answers)]
        if not positive:
            continue

        def pair(
            text: str, before: str, label: int, kind: str, *, _r=record, _q=None, _qid=qid, _g=group
        ) -> Pair:
            return Pair(_q or _r.question, text, _r.title, before, label, kind, "nq", _g, _qid)

        if every_sentence:
            pairs += [
                replace(pair(s.text, s.before, int(s in positive), "dev"), passage=record.text)
                for s in sentences
            ]
            continue
        pairs += [pair(s.text, s.before, 1, "positive") for s in positive]
        asked = content_words(record.question)
        others = sorted(
            (s for s in sentences if s not in positive),
            key=lambda s: (-_overlap(asked, s.text, idf), s.start),
        )
        pairs += [pair(s.text, s.before, 0, "passage") for s in others[:3]]
        near = index.top(record.question, 8, exclude_record=number)
        far = [text for _, text in near if not contains_answer(text, record.answers)]
        pairs += [pair(text, "", 0, "other_passage") for text in far[:1]]
        anchor = max(positive, key=lambda s: (len(asked & content_words(s.text)), -len(s.text)))
        sources = [s.text for s in sentences if s not in positive] + [t for _, t in near]
        for question in perturb_questions(record.question, anchor.text, sources, idf, rng, 1):
            if question != record.question:
                pairs.append(pair(anchor.text, anchor.before, 0, "perturbed", _q=question))
    return pairs


def holds_answer(sentence: str, answers: tuple[str, ...]) -> bool:
    """A gold answer is in the sentence, or the sentence is part of a longer gold answer
    (covidqa's answers are often a sentence or two of the paper)."""
    if contains_answer(sentence, answers):
        return True
    key = normalised_key(sentence)
    return len(key.split()) >= 5 and any(key in normalised_key(a) for a in answers)


def _most_like(question: str, sentences: list[Sentence], idf: dict[str, float], k: int):
    asked = content_words(question)
    return sorted(sentences, key=lambda s: (-_overlap(asked, s.text, idf), s.start))[:k]


def paragraph_questions(records: list[ParagraphRecord]) -> dict[str, list[ParagraphRecord]]:
    """Each question with its rows, for the questions that have an answering paragraph."""
    questions: dict[str, list[ParagraphRecord]] = defaultdict(list)
    for record in records:
        questions[record.question].append(record)
    return {q: rows for q, rows in questions.items() if any(r.label == 1 for r in rows)}


def paragraph_pairs(
    records: list[ParagraphRecord],
    *,
    source: str,
    config: PairConfig,
    every_sentence: bool,
    first_id: int,
) -> list[Pair]:
    """Pairs of a question asked over one answering paragraph (label 1) and others of the same
    paper or manual that do not answer it (label 0, paired by the data set's authors).

    With answer strings (covidqa) the sentences holding one are positive and the answering
    paragraph's others most like the question are negatives. Without (emanual: only which
    section answers) no sentence is labelled positive for training; the other sections'
    sentences most like the question are negatives, and in the dev slice a sentence counts as
    right when it stands in the answering section.
    """
    questions = paragraph_questions(records)
    split = {text: passage_sentences(text) for text in dict.fromkeys(r.text for r in records)}
    idf = _idf(s.text for group in split.values() for s in group)
    pairs: list[Pair] = []
    for offset, (question, rows) in enumerate(questions.items()):
        qid = first_id + offset
        group = next(r.group for r in rows if r.label == 1)

        def pair(s: Sentence, label: int, kind: str, *, _q=question, _g=group, _id=qid) -> Pair:
            return Pair(_q, s.text, "", s.before, label, kind, source, _g, _id)

        gold = [r for r in rows if r.label == 1]
        answers = tuple(a for r in gold for a in r.answers)
        inside = [s for r in gold for s in split[r.text]]
        outside = [s for r in rows if r.label == 0 for s in split[r.text]]
        if every_sentence:
            text_of = {id(s): r.text for r in rows for s in split[r.text]}

            def dev(s: Sentence, label: int, kind: str, *, _text=text_of) -> Pair:
                return replace(pair(s, label, kind), passage=_text[id(s)])

            if answers:
                right = [s for s in inside if holds_answer(s.text, answers)]
                if not right:
                    continue
                pairs += [dev(s, int(s in right), "dev") for s in inside]
            else:
                pairs += [dev(s, 1, "dev_section") for s in inside]
            pairs += [dev(s, 0, "dev") for s in outside]
            continue
        if not answers:
            # No answer strings: the answering section's sentence that shares most of the
            # question's rare words stands for it, when it shares at least half of them.
            asked = content_words(question)
            best = _most_like(question, inside, idf, 1)
            need = _weight(asked, idf) / 2
            if best and need and _overlap(asked, best[0].text, idf) >= need:
                pairs.append(pair(best[0], 1, "section_best"))
        else:
            right = [s for s in inside if holds_answer(s.text, answers)]
            if not right:
                continue
            pairs += [pair(s, 1, "positive") for s in right]
            rest = [s for s in inside if s not in right]
            pairs += [
                pair(s, 0, "passage")
                for s in _most_like(question, rest, idf, config.passage_negatives)
            ]
        outside = [s for s in outside if not (answers and holds_answer(s.text, answers))]
        pairs += [
            pair(s, 0, "other_paragraph")
            for s in _most_like(question, outside, idf, config.domain_negatives)
        ]
    return pairs


def ragbench_pairs(
    records: list[RagbenchRecord], *, config: PairConfig, every_sentence: bool, first_id: int
) -> list[Pair]:
    """RAGBench rows: a sentence the reference response used (`utilized`) is positive; one
    not even relevant is negative (those most like the question, for training); a relevant
    sentence that was not used is left out (it may answer in part). A row with no relevant
    sentence is unanswerable from its documents: its sentences most like the question are
    hard negatives."""
    idf = _idf(text for r in records for _, text in r.sentences)
    pairs: list[Pair] = []
    for offset, record in enumerate(records):
        qid = first_id + offset
        sentences = []
        for number, (key, text) in enumerate(record.sentences):
            previous = record.sentences[number - 1] if number else None
            same = previous and ragbench_document(previous[0]) == ragbench_document(key)
            sentences.append((key, Sentence(text, previous[1] if same else "", 0, 0)))
        source, group = f"ragbench-{record.subset}", f"ragbench:{record.question}"

        def pair(
            s: Sentence, label: int, kind: str, *, _r=record, _g=group, _id=qid, _s=source
        ) -> Pair:
            return Pair(_r.question, s.text, "", s.before, label, kind, _s, _g, _id)

        unused = [s for key, s in sentences if key not in record.relevant]
        if every_sentence:
            documents: dict[str, list[str]] = defaultdict(list)
            for key, text in record.sentences:
                documents[ragbench_document(key)].append(text)
            pairs += [
                replace(
                    pair(
                        s, int(key in record.utilized), "dev" if record.relevant else "impossible"
                    ),
                    passage=" ".join(documents[ragbench_document(key)]),
                )
                for key, s in sentences
                if key in record.utilized or key not in record.relevant
            ]
            continue
        if not record.relevant:
            chosen = _most_like(record.question, unused, idf, config.domain_negatives + 1)
            pairs += [pair(s, 0, "impossible") for s in chosen]
            continue
        pairs += [pair(s, 1, "positive") for key, s in sentences if key in record.utilized]
        pairs += [
            pair(s, 0, "passage")
            for s in _most_like(record.question, unused, idf, config.domain_negatives)
        ]
    return pairs


DOMAIN_SLICES = ("covidqa", "emanual", "ragbench")


def domain_pairs(config: PairConfig, first_id: int) -> dict[str, list[Pair]]:
    """{"covidqa", "emanual", "ragbench"} fit pairs and their "dev_…" slices: whole papers,
    manual sections and questions kept apart (tools.judge.data's *_DEV_MODULUS)."""
    out: dict[str, list[Pair]] = {}
    ids = first_id
    for name, path, key, modulus in (
        ("covidqa", COVIDQA_PATH, "group", COVIDQA_DEV_MODULUS),
        ("emanual", EMANUAL_PATH, "section", EMANUAL_DEV_MODULUS),
    ):
        questions = paragraph_questions(list(paragraph_records(path, group_key=key)))
        for part, every in ((name, False), (f"dev_{name}", True)):
            # The split follows the answering paragraph's paper or section.
            chosen = [
                r
                for rows in questions.values()
                if is_dev_group(next(r.group for r in rows if r.label == 1), modulus) == every
                for r in rows
            ]
            out[part] = paragraph_pairs(
                chosen, source=name, config=config, every_sentence=every, first_id=ids
            )
            ids += len(questions)
    rows = [r for path in RAGBENCH_TRAIN_PATHS for r in ragbench_records(path)]
    for part, every in (("ragbench", False), ("dev_ragbench", True)):
        chosen = [r for r in rows if is_dev_group(r.question, RAGBENCH_DEV_MODULUS) == every]
        out[part] = ragbench_pairs(chosen, config=config, every_sentence=every, first_id=ids)
        ids += len(chosen)
    return out


def nq_group(record) -> str:
    return f"nq:{record.title}:{record.text[:80]}"


def pairs_digest(slices: dict[str, list[Pair]]) -> str:
    """A SHA-256 of every slice's pairs, in order: two runs built the same pairs exactly when
    their digests agree (whatever the process, its string hashing or the machine)."""
    content = {name: [astuple(p)[:-1] for p in pairs] for name, pairs in sorted(slices.items())}
    return hashlib.sha256(json.dumps(content, ensure_ascii=False).encode()).hexdigest()


def make_pairs(config: PairConfig) -> dict[str, list[Pair]]:
    """{"squad11", "squad2", "nq"} fit pairs and {"dev_squad11", "dev_squad2", "dev_nq"}
    dev pairs, drawn with a generator seeded by `config.seed` in a fixed order; with
    `config.domains` also covidqa's, emanual's and RAGBench's (`domain_pairs`)."""
    rng = random.Random(config.seed)  # noqa: S311 - sampling, not security
    out: dict[str, list[Pair]] = {}
    squad11 = list(squad_records(SQUAD11_PATH))
    fit11 = [r for r in squad11 if not is_dev_group(r.group, SQUAD11_DEV_MODULUS)]
    dev11 = [r for r in squad11 if is_dev_group(r.group, SQUAD11_DEV_MODULUS)]
    fit11 = rng.sample(fit11, min(config.squad11_questions, len(fit11)))
    dev11 = rng.sample(dev11, min(config.squad11_dev_questions, len(dev11)))
    squad2 = list(squad_records(SQUAD2_TRAIN_PATH))
    fit2 = [r for r in squad2 if not is_dev_group(r.group, SQUAD2_DEV_MODULUS)]
    dev2 = [r for r in squad2 if is_dev_group(r.group, SQUAD2_DEV_MODULUS)]
    nq = [r for r in nq_records(NQ_PATH) if not is_heldout(r.question)]
    fit_nq = [r for r in nq if not is_dev_group(nq_group(r), 10)]
    dev_nq = [r for r in nq if is_dev_group(nq_group(r), 10)]
    ids = 0
    for name, records, every in (
        ("squad11", fit11, False),
        ("dev_squad11", dev11, True),
        ("squad2", fit2, False),
        ("dev_squad2", dev2, True),
    ):
        source = "squad11" if name.endswith("squad11") else "squad2"
        out[name] = squad_pairs(
            records, source=source, config=config, rng=rng, every_sentence=every, first_id=ids
        )
        ids += len(records)
    out["nq"] = nq_pairs(fit_nq, every_sentence=False, rng=rng, first_id=ids)
    ids += len(fit_nq)
    out["dev_nq"] = nq_pairs(dev_nq, every_sentence=True, rng=rng, first_id=ids)
    ids += len(dev_nq)
    if config.domains:
        out |= domain_pairs(config, ids)
    return out


def _auc(scores, labels) -> float:
    from tools.judge.common import roc_auc

    return roc_auc(scores, labels)


def best_per_question(pairs: list[Pair], scores) -> dict[int, tuple[float, int, bool]]:
    """question id → (its best score, that pair's label, whether the question is answerable)."""
    best: dict[int, tuple[float, int, bool]] = {}
    answerable: dict[int, bool] = defaultdict(bool)
    for pair, score in zip(pairs, scores, strict=True):
        answerable[pair.question_id] |= pair.kind != "impossible"
        if pair.question_id not in best or score > best[pair.question_id][0]:
            best[pair.question_id] = (float(score), pair.label, False)
    return {q: (s, label, answerable[q]) for q, (s, label, _) in best.items()}


def operating_points(best: dict[int, tuple[float, int, bool]], thresholds) -> list[dict]:
    """For each threshold: release the best sentence when it scores at least that.
    supported / wrong over answerable questions, abstention over unanswerable ones."""
    answerable = [v for v in best.values() if v[2]]
    impossible = [v for v in best.values() if not v[2]]
    points = []
    for t in thresholds:
        released = [v for v in answerable if v[0] >= t]
        points.append(
            {
                "threshold": t,
                "supported": sum(v[1] for v in released) / max(1, len(answerable)),
                "wrong": sum(1 - v[1] for v in released) / max(1, len(answerable)),
                "abstention": (
                    sum(v[0] < t for v in impossible) / len(impossible) if impossible else None
                ),
            }
        )
    return points


def dev_metrics(slices: dict[str, list[Pair]], logits: dict[str, list[float]]) -> dict:
    """Per dev slice: pair AUC and how often the best sentence holds the answer; on
    squad2's, the answerability AUC (best score of answerable vs unanswerable questions)."""
    metrics: dict[str, float] = {}
    for name, pairs in slices.items():
        scores = logits[name]
        metrics[f"{name}_pair_auc"] = _auc(scores, [p.label for p in pairs])
        best = best_per_question(pairs, scores)
        answerable = [v for v in best.values() if v[2]]
        metrics[f"{name}_top1"] = sum(v[1] for v in answerable) / max(1, len(answerable))
        if any(not v[2] for v in best.values()):
            metrics[f"{name}_answerability_auc"] = _auc(
                [v[0] for v in best.values()], [int(v[2]) for v in best.values()]
            )
    return metrics


def selection_score(metrics: dict) -> float:
    """What the dev slice prefers: separate answerable from unanswerable, and rank the
    answer sentence first, on Wikipedia and (when trained with them) the other domains."""
    score = metrics["dev_squad2_answerability_auc"] + metrics["dev_squad2_top1"]
    domains = [
        metrics[f"dev_{name}_top1"] for name in DOMAIN_SLICES if f"dev_{name}_top1" in metrics
    ]
    return score + (sum(domains) / len(domains) if domains else 0.0)
