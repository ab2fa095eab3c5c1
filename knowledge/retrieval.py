"""Hybrid retrieval: pgvector similarity + PostgreSQL full text, fused by reciprocal rank.

The permission filter is part of every SQL query (never a post-filter), and a hidden
document is indistinguishable from no document: both give `empty_corpus`.
"""

from dataclasses import dataclass, field

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.contrib.postgres.search import SearchQuery, SearchRank
from django.db import connection, transaction
from django.db.models import F, Q, QuerySet
from pgvector.django import CosineDistance

from knowledge.models import EmbeddingStatus, Passage
from knowledge.normalise import normalised_words
from knowledge.selectors import spaces_visible_to

VECTOR_SEARCH = "vector_search"
KEYWORD_SEARCH = "keyword_search"
RETRIEVAL_TOOLS = (VECTOR_SEARCH, KEYWORD_SEARCH)
RRF_K = 60


@dataclass(frozen=True)
class ToolOutcome:
    tool: str
    state: str  # succeeded | failed
    code: str  # matched | empty_corpus | no_relevant_hit | embedding_* | timeout
    result_count: int = 0
    retryable: bool = False

    def as_dict(self) -> dict:
        return self.__dict__.copy()


@dataclass
class Candidate:
    passage_id: int
    document_id: int
    revision_id: int
    extraction_id: int
    char_start: int
    char_end: int
    text: str
    locator: dict
    score: float = 0.0
    contributions: dict[str, dict] = field(default_factory=dict)


@dataclass
class RetrievalResult:
    candidates: list[Candidate]
    outcomes: list[ToolOutcome]


def passages_visible_to(
    *,
    user: AbstractBaseUser,
    space_ids: list[int] | None = None,
    selected_sources: list[int] | None = None,
) -> QuerySet[Passage]:
    """Passages of current revisions the user may read in this scope.

    Space passages: spaces the user can view (narrowed to space_ids when given).
    Private passages: the user's own files, and only those in selected_sources.
    """
    spaces = spaces_visible_to(user=user)
    if space_ids:
        spaces = spaces.filter(pk__in=space_ids)
    scope = Q(space__in=spaces.values("pk"))
    if selected_sources:
        scope |= Q(owner=user, document_id__in=selected_sources)
    return Passage.objects.filter(scope, is_current=True)


_CANDIDATE_FIELDS = ("pk", "document_id", "revision_id", "extraction_id", "char_start",
                     "char_end", "text", "locator")  # fmt: skip


def _scored_rows(queryset: QuerySet[Passage], score: str) -> list[tuple[Candidate, float]]:
    """Candidates with the annotated score, read in one query."""
    return [
        (Candidate(*row[:-1]), row[-1]) for row in queryset.values_list(*_CANDIDATE_FIELDS, score)
    ]


MAX_KEYWORDS = 16


def keyword_query(query: str) -> SearchQuery | None:
    """Any of the query's words, ranked by how many match and how often (ts_rank).

    A natural question rarely has every word in one passage, so requiring all of them
    (websearch_to_tsquery's AND) misses most relevant passages; the relevance
    threshold and the selector decide what is good enough.
    """
    words = list(dict.fromkeys(normalised_words(query)))[:MAX_KEYWORDS]
    if not words:
        return None
    search = SearchQuery(words[0], search_type="plain", config="english")
    for word in words[1:]:
        search |= SearchQuery(word, search_type="plain", config="english")
    return search


def keyword_search(scope: QuerySet[Passage], query: str, limit: int) -> tuple[list, ToolOutcome]:
    search = keyword_query(query)
    if search is None:
        return [], ToolOutcome(KEYWORD_SEARCH, "succeeded", "no_relevant_hit")
    ranked = (
        scope.filter(search_vector=search)
        .annotate(rank=SearchRank(F("search_vector"), search))
        .filter(rank__gt=settings.KOINON_KEYWORD_MIN_RANK)
        .order_by("-rank", "pk")[:limit]
    )
    scored = _scored_rows(ranked, "rank")
    code = "matched" if scored else "no_relevant_hit"
    return scored, ToolOutcome(KEYWORD_SEARCH, "succeeded", code, len(scored))


def vector_search(scope: QuerySet[Passage], query: str, limit: int) -> tuple[list, ToolOutcome]:
    from knowledge.embeddings import EmbeddingError, get_embedding_provider

    try:
        provider = get_embedding_provider()
        (vector,) = provider.embed([query])
    except EmbeddingError as error:
        retryable = error.code == "embedding_unavailable"
        return [], ToolOutcome(VECTOR_SEARCH, "failed", error.code, 0, retryable)
    embedded = scope.filter(embedding_status=EmbeddingStatus.EMBEDDED)
    if not embedded.filter(embedding_model=provider.model_id).exists():
        if embedded.exists():
            # Vectors of another model are not comparable: refuse rather than mislead.
            return [], ToolOutcome(VECTOR_SEARCH, "failed", "embedding_configuration_invalid")
        return [], ToolOutcome(VECTOR_SEARCH, "failed", "embedding_unavailable", 0, True)
    nearest = (
        embedded.filter(embedding_model=provider.model_id)
        .annotate(distance=CosineDistance("embedding", vector))
        .order_by("distance", "pk")[:limit]
    )
    with transaction.atomic(), connection.cursor() as cursor:
        # A filtered HNSW scan stops at ef_search rows unless it may continue (pgvector 0.8).
        cursor.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
        cursor.execute("SET LOCAL hnsw.ef_search = %s", [max(100, limit * 4)])
        rows = _scored_rows(nearest, "distance")
    # relaxed_order may return rows slightly out of order: sort them.
    rows.sort(key=lambda item: (item[1], item[0].passage_id))
    scored = [(row, 1 - distance) for row, distance in rows
              if 1 - distance >= settings.KOINON_VECTOR_MIN_SIMILARITY]  # fmt: skip
    code = "matched" if scored else "no_relevant_hit"
    return scored, ToolOutcome(VECTOR_SEARCH, "succeeded", code, len(scored))


def retrieve(
    *,
    user: AbstractBaseUser,
    query: str,
    tools: tuple[str, ...] = RETRIEVAL_TOOLS,
    space_ids: list[int] | None = None,
    selected_sources: list[int] | None = None,
    limit: int = 10,
) -> RetrievalResult:
    """Candidates for query from each allowed tool, fused by reciprocal rank fusion.

    Each candidate keeps every tool's rank and score; each tool reports an outcome.
    """
    scope = passages_visible_to(user=user, space_ids=space_ids, selected_sources=selected_sources)
    wanted = [tool for tool in RETRIEVAL_TOOLS if tool in tools]
    if not scope.exists():
        return RetrievalResult(
            [], [ToolOutcome(tool, "succeeded", "empty_corpus") for tool in wanted]
        )
    runners = {KEYWORD_SEARCH: keyword_search, VECTOR_SEARCH: vector_search}
    fused: dict[int, Candidate] = {}
    outcomes = []
    for tool in wanted:
        scored, outcome = runners[tool](scope, query, limit * 2)
        outcomes.append(outcome)
        for rank, (candidate, score) in enumerate(scored, start=1):
            entry = fused.setdefault(candidate.passage_id, candidate)
            entry.contributions[tool] = {"rank": rank, "score": round(float(score), 6)}
            entry.score += 1 / (RRF_K + rank)
    candidates = sorted(fused.values(), key=lambda c: (-c.score, c.passage_id))[:limit]
    return RetrievalResult(candidates, outcomes)


DOCUMENT_FREQUENCY_CAP = 5000  # past this a word is common; counting further costs only time


def document_frequencies(
    *,
    user: AbstractBaseUser,
    words: list[str],
    space_ids: list[int] | None = None,
    selected_sources: list[int] | None = None,
) -> tuple[dict[str, int], int]:
    """How many visible passages contain each word (English stemming, as the search vectors
    do), and how many visible passages there are: the IDF weights of "the visible corpus".

    Counts are capped at DOCUMENT_FREQUENCY_CAP so that a common word costs a bounded scan;
    a hidden passage never counts (the same scope as retrieval).
    """
    scope = passages_visible_to(user=user, space_ids=space_ids, selected_sources=selected_sources)
    frequencies = {}
    for word in dict.fromkeys(words):
        matching = scope.filter(
            search_vector=SearchQuery(word, search_type="plain", config="english")
        ).values("pk")[:DOCUMENT_FREQUENCY_CAP]
        frequencies[word] = matching.count()
    return frequencies, scope.count()
