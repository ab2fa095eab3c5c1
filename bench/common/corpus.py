"""The NQ-open corpus of the benchmarks and its bulk load into the knowledge tables.

Real passages: the Natural Questions gold passages of ../shared/data/nq-open-oracle.jsonl.gz
("title\\ntext", deduplicated by text), embedded with the local model and cached. Filler
passages: text sampled from the real passages' words, random unit vectors as embeddings.

Import after `common.bootstrap.django_setup`.
"""

import gzip
import hashlib
import json
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.db import connection
from django.db.models import Index

from common.bootstrap import NQ_FILE, ROOT
from knowledge.embeddings import get_embedding_provider
from knowledge.frequencies import lexeme_frequencies_rebuild
from knowledge.models import (
    Document,
    DocumentRevision,
    EmbeddingStatus,
    Extraction,
    ExtractionRole,
    ExtractionStatus,
    Passage,
    Space,
)
from knowledge.normalise import normalised_key
from knowledge.services import space_create, space_member_set

LOAD_BATCH = 2000  # rows per INSERT of the bulk load
HNSW_INDEX = "passage_embedding_hnsw"
# Without enough memory the HNSW build spills out of RAM and slows several-fold; this is
# the standard pgvector advice for a bulk build, applied to the build statement only.
BUILD_MAINTENANCE_WORK_MEM = "4GB"  # 1M passages: ~2.2 GB of graph
# The embedding cache is invalid when the passage text recipe changes, not just the file.
TEXT_RECIPE = "title-newline-text-v1"
EMBEDDING_DIMENSION = 384  # of the filler vectors: the local model's


# --- NQ-open -----------------------------------------------------------------------


@dataclass(frozen=True)
class Question:
    """An NQ-open question with its gold passage."""

    text: str
    gold: str  # the text of its gold passage (ctxs[0]), "title\ntext"
    answers: tuple[str, ...]  # the gold short answers


def nq_records() -> Iterator[dict[str, Any]]:
    """The records of NQ_FILE, in file order (question, answers, ctxs[0] = gold passage)."""
    with gzip.open(NQ_FILE, "rt", encoding="utf-8") as handle:
        for line in handle:
            yield json.loads(line)


def read_nq() -> tuple[list[str], list[Question]]:
    """Distinct gold passages ("title\\ntext", first occurrence order) and all questions."""
    passages: dict[str, None] = {}
    questions = []
    for record in nq_records():
        gold = record["ctxs"][0]
        text = f"{gold['title']}\n{gold['text'].strip()}"
        passages.setdefault(text, None)
        questions.append(Question(record["question"], text, tuple(record["answers"])))
    return list(passages), questions


def nq_embeddings(
    texts: list[str], cache_dirs: Sequence[Path], *, print_rate: bool = True
) -> np.ndarray:
    """Embeddings of the real passages, cached by the source file's sha256 and the model.

    Each of `cache_dirs` is tried in turn (nq_embeddings.npy + .json, the key in the
    .json); a miss embeds `texts` and writes the cache to the first of them. `print_rate`
    adds the embeddings per second to the line that reports a computation.
    """
    provider = get_embedding_provider()
    key = {
        "source_sha256": hashlib.sha256(NQ_FILE.read_bytes()).hexdigest(),
        "model_id": provider.model_id,
        "recipe": TEXT_RECIPE,
        "count": len(texts),
    }
    for directory in cache_dirs:
        cache, meta = directory / "nq_embeddings.npy", directory / "nq_embeddings.json"
        try:
            if json.loads(meta.read_text()) == key:
                vectors = np.load(cache)
                print(f"NQ embeddings: cached ({cache.relative_to(ROOT)})")
                return vectors
        except (OSError, ValueError):
            continue  # absent, being written by another run, or unreadable: next place
    started = time.perf_counter()
    vectors = np.asarray(provider.embed(texts), dtype=np.float32)
    seconds = time.perf_counter() - started
    rate = f" ({len(texts) / seconds:.0f}/s)" if print_rate else ""
    print(f"NQ embeddings: computed {len(texts)} in {seconds:.1f} s{rate}, cached for the next run")
    np.save(cache_dirs[0] / "nq_embeddings.npy", vectors)
    (cache_dirs[0] / "nq_embeddings.json").write_text(json.dumps(key))
    return vectors


def filler(count: int, real: list[str], rng: np.random.Generator) -> tuple[list[str], np.ndarray]:
    """Texts drawn from the real passages' word bag (a real passage's length each) and
    random unit vectors: keyword noise that shares the vocabulary, vector noise that doesn't."""
    words = np.asarray([word for text in real for word in text.split()])
    lengths = rng.choice([len(text.split()) for text in real], size=count)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    drawn = words[rng.integers(0, len(words), size=int(offsets[-1]))]
    texts = [" ".join(drawn[offsets[i] : offsets[i + 1]]) for i in range(count)]
    vectors = rng.standard_normal((count, EMBEDDING_DIMENSION), dtype=np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return texts, vectors


@dataclass(frozen=True)
class Drawn:
    """One size's corpus: the real passages first, then the filler."""

    texts: list[str]
    vectors: np.ndarray
    real: int  # texts[:real] are real NQ passages, texts[real:] filler


@dataclass(frozen=True)
class NQCorpus:
    """The real passages and their embeddings, split into the gold passages of the asked
    questions (loaded at every size) and the rest (in a random order, taken from the front)."""

    passages: list[str]
    vectors: np.ndarray
    gold: list[str]
    rest: list[int]  # indexes into passages

    @classmethod
    def build(
        cls,
        passages: list[str],
        vectors: np.ndarray,
        asked: Sequence[Question],
        rng: np.random.Generator,
    ) -> "NQCorpus":
        """Every asked question's gold passage is in the corpus at every size."""
        gold = list(dict.fromkeys(question.gold for question in asked))
        gold_set = set(gold)
        rest = [int(i) for i in rng.permutation(len(passages)) if passages[i] not in gold_set]
        return cls(passages, vectors, gold, rest)

    def draw(self, size: int, rng: np.random.Generator) -> Drawn:
        """`size` passages: the gold ones, then the rest's first, then filler up to size."""
        index_of = {text: i for i, text in enumerate(self.passages)}
        chosen = [index_of[text] for text in self.gold] + self.rest[: max(0, size - len(self.gold))]
        texts = [self.passages[i] for i in chosen]
        fill_texts, fill_vectors = filler(size - len(texts), self.passages, rng)
        vectors = np.concatenate([self.vectors[chosen], fill_vectors])
        return Drawn(texts + fill_texts, vectors, len(texts))


# --- the knowledge tables ----------------------------------------------------------


@dataclass(frozen=True)
class BenchSpace:
    """The bench's users and space."""

    curator: AbstractBaseUser  # staff, created the space
    reader: AbstractBaseUser  # a reader of the space, not staff: its retrieval is filtered
    space: Space


def bench_curator() -> AbstractBaseUser:
    """Create the staff user bench-curator (no password)."""
    users = get_user_model().objects
    return users.create_user(username="bench-curator", password=None, is_staff=True)


def bench_space(name: str = "Bench") -> BenchSpace:
    """Create bench-curator, bench-reader (not staff) and the space `name` created by the
    curator, with bench-reader as its reader."""
    curator = bench_curator()
    reader = get_user_model().objects.create_user(username="bench-reader", password=None)
    space = space_create(name=name, created_by=curator)
    space_member_set(space=space, username=reader.username, role="reader")
    return BenchSpace(curator, reader, space)


def clear_corpus() -> None:
    """TRUNCATE the corpus tables (passages, extractions, revisions, documents) only.

    Answer runs stay (output releases are append-only, TRUNCATE is refused): bench/answer.py
    reads the quote candidates of the current size's runs by their ids."""
    tables = [m._meta.db_table for m in (Passage, Extraction, DocumentRevision, Document)]
    with connection.cursor() as cursor:
        # One statement: documents and revisions reference each other.
        cursor.execute(f"TRUNCATE {', '.join(tables)} CASCADE")


def groups_of(start: int, stop: int, size: int) -> list[list[int]]:
    """range(start, stop) cut into consecutive groups of `size` (the last may be shorter)."""
    return [list(range(i, min(i + size, stop))) for i in range(start, stop, size)]


def load_passages(
    space: Space,
    user: AbstractBaseUser,
    groups: Sequence[Sequence[int]],
    titles: Sequence[str],
    texts: Sequence[str],
    vectors: np.ndarray,
    *,
    verifiable: bool = False,
) -> list[Passage]:
    """Bulk-create one document per group of passage indexes (titled from `titles`), with a
    current revision, an admitted primary extraction of the group's texts ("\\n"-joined)
    and current (is_current) embedded passages of it, in group order.

    `verifiable` adds what quote verification reads: an admitted secondary extraction of
    the same text per revision, and on both extractions extractor, text_sha256, norm_text
    and progress 100. Returns the created passages.
    """
    model_id = get_embedding_provider().model_id
    documents = Document.objects.bulk_create(
        [Document(space=space, title=title, kind="text", created_by=user) for title in titles],
        batch_size=LOAD_BATCH,
    )
    revisions = DocumentRevision.objects.bulk_create(
        [
            DocumentRevision(
                document=document,
                number=1,
                sha256=f"{document.pk:064d}",
                file="bench/x.txt",
                filename="x.txt",
                size=1,
                uploaded_by=user,
            )
            for document in documents
        ],
        batch_size=LOAD_BATCH,
    )
    for document, revision in zip(documents, revisions, strict=True):
        document.current_revision = revision
    Document.objects.bulk_update(documents, ["current_revision"], batch_size=LOAD_BATCH)
    bodies = ["\n".join(texts[i] for i in group) for group in groups]

    def extraction(revision: DocumentRevision, role: str, body: str) -> Extraction:
        serves = role == ExtractionRole.PRIMARY
        if not verifiable:
            return Extraction(
                revision=revision,
                role=role,
                text=body,
                status=ExtractionStatus.ADMITTED,
                serves_passages=serves,
            )
        return Extraction(
            revision=revision,
            role=role,
            serves_passages=serves,
            extractor="bench",
            text=body,
            text_sha256=hashlib.sha256(body.encode()).hexdigest(),
            norm_text=normalised_key(body),
            status=ExtractionStatus.ADMITTED,
            progress=100,
        )

    roles = [ExtractionRole.PRIMARY] + ([ExtractionRole.SECONDARY] if verifiable else [])
    extractions = [
        Extraction.objects.bulk_create(
            [
                extraction(revision, role, body)
                for revision, body in zip(revisions, bodies, strict=True)
            ],
            batch_size=LOAD_BATCH,
        )
        for role in roles
    ]
    rows = []
    for extraction, group in zip(extractions[0], groups, strict=True):
        start = 0
        for ordinal, i in enumerate(group):
            rows.append(
                Passage(
                    is_current=True,
                    extraction=extraction,
                    revision_id=extraction.revision_id,
                    document_id=extraction.revision.document_id,
                    space=space,
                    ordinal=ordinal,
                    char_start=start,
                    char_end=start + len(texts[i]),
                    text=texts[i],
                    embedding=vectors[i],
                    embedding_model=model_id,
                    embedding_dimension=vectors.shape[1],
                    embedding_status=EmbeddingStatus.EMBEDDED,
                )
            )
            start += len(texts[i]) + 1
    created = Passage.objects.bulk_create(rows, batch_size=LOAD_BATCH)
    # is_current was set here, not by document_set_current: count the space's lexemes.
    lexeme_frequencies_rebuild(space_id=space.pk)
    return created


# --- the HNSW index ----------------------------------------------------------------


def hnsw_index() -> Index:
    """The model's own definition of the passage embedding index (the migration's)."""
    return next(index for index in Passage._meta.indexes if index.name == HNSW_INDEX)


def drop_hnsw() -> None:
    """Drop the HNSW index, so that a bulk load need not maintain it."""
    with connection.schema_editor() as editor:
        editor.remove_index(Passage, hnsw_index())


def build_hnsw() -> float:
    """Recreate the index from the model's own definition (the migration's); seconds taken."""
    with connection.cursor() as cursor:
        cursor.execute(f"SET maintenance_work_mem = '{BUILD_MAINTENANCE_WORK_MEM}'")
    started = time.perf_counter()
    with connection.schema_editor() as editor:
        editor.add_index(Passage, hnsw_index())
    seconds = time.perf_counter() - started
    with connection.cursor() as cursor:
        cursor.execute("RESET maintenance_work_mem")
    return seconds
