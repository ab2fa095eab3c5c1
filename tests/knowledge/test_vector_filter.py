"""A permission-filtered HNSW query keeps its recall when the filter keeps 10% of the rows.

The pgvector pitfall: an HNSW index scan yields at most `hnsw.ef_search` candidates and the
WHERE clause is applied afterwards, so a filter that keeps 10% of the rows leaves ~10% of
ef_search rows. pgvector 0.8's `hnsw.iterative_scan` lets the scan continue until LIMIT is
met; `knowledge.retrieval.vector_search` turns it on. These tests go through `retrieve` with
real embeddings, check the plan really uses the HNSW index, and reproduce the pitfall with
the iterative scan switched off.
"""

from collections.abc import Iterator, Sequence

import numpy as np
import pytest
from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import connection, connections, transaction
from django.test.utils import CaptureQueriesContext
from pgvector.django import CosineDistance

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
from knowledge.retrieval import retrieve
from knowledge.scope import access_scope_build
from knowledge.services import space_create

pytestmark = pytest.mark.django_db

SPACES = 10  # one visible to the member: the filter keeps 10% of the rows
ROWS = 3000
LIMIT = 10
QUERY = "How often does the finance team audit the travel budget?"

TEAMS = ("finance", "legal", "sales", "support", "security", "operations", "research", "design")
VERBS = ("audits", "reviews", "approves", "updates", "archives", "discusses", "signs", "checks")
OBJECTS = (
    "travel budget",
    "vendor contracts",
    "customer invoices",
    "hiring plan",
    "server costs",
    "office lease",
    "training schedule",
    "release notes",
    "expense reports",
    "insurance policy",
)
WHEN = ("every week", "each quarter", "once a year", "before launch", "on Fridays", "monthly")


def sentences(count: int, seed: int = 11) -> list[str]:
    """Distinct short sentences: duplicates would tie in distance and blur the top 10."""
    combos = [(t, v, o, w) for t in TEAMS for v in VERBS for o in OBJECTS for w in WHEN]
    assert count <= len(combos)
    order = np.random.default_rng(seed).permutation(len(combos))[:count]
    return ["The {} team {} the {} {}.".format(*combos[i]) for i in order]


def _document_in(space: Space, user: AbstractBaseUser, texts: list[str]) -> Extraction:
    """One document with one admitted revision whose extraction text holds `texts`."""
    document = Document.objects.create(space=space, title=space.name, kind="text", created_by=user)
    revision = DocumentRevision.objects.create(
        document=document,
        number=1,
        sha256=f"{space.pk:064d}",
        file="bench/x.txt",  # retrieval never reads the bytes
        filename="x.txt",
        size=1,
        uploaded_by=user,
    )
    document.current_revision = revision
    document.save(update_fields=["current_revision"])
    return Extraction.objects.create(
        revision=revision,
        role=ExtractionRole.PRIMARY,
        text="\n".join(texts),
        status=ExtractionStatus.ADMITTED,
    )


def load_passages(
    spaces: list[Space],
    user: AbstractBaseUser,
    texts: list[str],
    vectors: Sequence[Sequence[float]],
    model_id: str,
) -> None:
    """Passage i goes to space i % len(spaces): every space holds the same mix of topics,
    so the globally nearest rows are ~90% invisible to the member, as in a real library."""
    rows = []
    for index, space in enumerate(spaces):
        own = list(range(index, len(texts), len(spaces)))
        extraction = _document_in(space, user, [texts[i] for i in own])
        start = 0
        for ordinal, i in enumerate(own):
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
                    embedding_dimension=len(vectors[i]),
                    embedding_status=EmbeddingStatus.EMBEDDED,
                )
            )
            start += len(texts[i]) + 1
    Passage.objects.bulk_create(rows, batch_size=1000)
    for space in spaces:  # set is_current itself: count the spaces' lexemes as a bulk load does
        lexeme_frequencies_rebuild(space_id=space.pk)


@pytest.fixture
def library(space: Space, staff: AbstractBaseUser) -> Iterator[list[Space]]:
    """3000 embedded passages in 10 spaces; only `space` (the first) is the member's."""
    provider = get_embedding_provider()
    texts = sentences(ROWS)
    vectors = provider.embed(texts)
    others = [space_create(name=f"Other {n}", created_by=staff) for n in range(1, SPACES)]
    spaces = [space, *others]
    load_passages(spaces, staff, texts, vectors, provider.model_id)
    with connection.cursor() as cursor:
        # Session-level, undone when the test transaction rolls back. enable_seqscan alone is
        # not enough: the planner then sorts the rows it believes visible (it underestimates
        # them, see bench/retrieval.py) after bitmap scans. With sorts priced out too, the
        # HNSW index is the only way left to produce rows ordered by distance.
        cursor.execute("SET enable_seqscan = off")
        cursor.execute("SET enable_sort = off")
        cursor.execute("ANALYZE knowledge_passage")  # plans from real statistics
    yield spaces


def _plan(sql: str) -> str:
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN " + sql)
        return "\n".join(row[0] for row in cursor.fetchall())


def exact_top(space: Space, query_vector: list[float], k: int) -> list[int]:
    """Brute-force cosine top-k over the visible rows' stored embeddings."""
    ids, stored = zip(
        *Passage.objects.filter(space=space).values_list("pk", "embedding"), strict=True
    )
    matrix = np.asarray(stored, dtype=np.float64)
    query = np.asarray(query_vector, dtype=np.float64)
    similarity = matrix @ query / (np.linalg.norm(matrix, axis=1) * np.linalg.norm(query))
    return [ids[i] for i in np.argsort(-similarity, kind="stable")[:k]]


def test_filtered_vector_search_keeps_its_recall(
    library: list[Space], member: AbstractBaseUser
) -> None:
    visible = library[0]
    assert Passage.objects.count() == ROWS
    assert access_scope_build(user=member).passages().count() == ROWS // SPACES

    with CaptureQueriesContext(connection) as queries:
        result = retrieve(
            scope=access_scope_build(user=member),
            query=QUERY,
            tools=("vector_search",),
            limit=LIMIT,
        )
    (outcome,) = result.outcomes
    assert (outcome.code, outcome.state) == ("matched", "succeeded")

    # The ordered query must really be an HNSW index scan, or this test proves nothing.
    (nearest_sql,) = [q["sql"] for q in queries.captured_queries if "<=>" in q["sql"]]
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
        plan = _plan(nearest_sql)
    assert "passage_embedding_hnsw" in plan, plan

    # (a) the full number of results (the channel asks for twice the limit), all from the
    # one visible space; at the connection's ef_search of 100 without the iterative scan
    # about a tenth of 100 candidates would be visible
    assert outcome.result_count == 2 * LIMIT
    assert len(result.candidates) == LIMIT
    found = [c.passage_id for c in result.candidates]
    assert set(Passage.objects.filter(pk__in=found).values_list("space_id", flat=True)) == {
        visible.pk
    }

    # (b) recall against the exact answer over the visible rows
    provider = get_embedding_provider()
    (query_vector,) = provider.embed([QUERY])
    exact = exact_top(visible, query_vector, LIMIT)
    overlap = len(set(found) & set(exact)) / LIMIT
    assert overlap >= 0.8, (overlap, found, exact)

    # (c) the pitfall is real: the same filtered query without the iterative scan
    pitfall = (
        access_scope_build(user=member)
        .passages()
        .filter(embedding_status=EmbeddingStatus.EMBEDDED, embedding_model=provider.model_id)
        .annotate(distance=CosineDistance("embedding", query_vector))
        .order_by("distance")[:LIMIT]
    )
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL hnsw.iterative_scan = off")
        cursor.execute("SET LOCAL hnsw.ef_search = 20")
        assert "passage_embedding_hnsw" in pitfall.explain()
        starved = list(pitfall.values_list("pk", flat=True))
    # ef_search=20 candidates, ~10% of them visible: far fewer than LIMIT rows come back.
    assert len(starved) < LIMIT, starved
    # Control: the very same query and ef_search with the iterative scan on is complete.
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
        cursor.execute("SET LOCAL hnsw.ef_search = 20")
        assert len(pitfall.values_list("pk", flat=True)) == LIMIT


def test_every_connection_starts_with_the_vector_search_settings() -> None:
    """The search itself sets nothing (no transaction of its own): the connection's startup
    options carry the iterative scan and ef_search (koinon.settings)."""
    fresh = connections.create_connection("default")
    try:
        with fresh.cursor() as cursor:
            cursor.execute("SHOW hnsw.iterative_scan")
            assert cursor.fetchone() == ("relaxed_order",)
            cursor.execute("SHOW hnsw.ef_search")
            assert cursor.fetchone() == (str(settings.HNSW_EF_SEARCH),)
    finally:
        fresh.close()


def test_vectors_of_another_model_are_refused_while_keywords_still_work(
    space: Space, staff: AbstractBaseUser, member: AbstractBaseUser
) -> None:
    texts = sentences(20)
    rng = np.random.default_rng(3)
    vectors = rng.standard_normal((len(texts), 384))
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    load_passages([space], staff, texts, list(vectors), "openai:text-embedding-3-small")
    assert get_embedding_provider().model_id != "openai:text-embedding-3-small"

    result = retrieve(scope=access_scope_build(user=member), query="travel budget")
    outcomes = {o.tool: (o.state, o.code) for o in result.outcomes}
    assert outcomes == {
        "vector_search": ("failed", "embedding_configuration_invalid"),
        "keyword_search": ("succeeded", "matched"),
    }
    assert result.candidates
    assert all(set(c.contributions) == {"keyword_search"} for c in result.candidates)
    assert all("travel budget" in c.text for c in result.candidates)
