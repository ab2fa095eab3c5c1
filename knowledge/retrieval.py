"""Hybrid retrieval: pgvector similarity + PostgreSQL full text, fused by reciprocal rank.

The permission filter is part of every SQL query (never a post-filter), and a hidden
document is indistinguishable from no document: both give `empty_corpus`.
"""

import time
from dataclasses import dataclass, field
from functools import cache

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
# Keyword search ranks a bounded candidate set: the passages that contain one of the
# question's rarest words — as many of them, rarest first, as the planner's statistics
# (ANALYZE's element frequencies of the search vectors, pg_stats.most_common_elems) say
# fit in about KEYWORD_CANDIDATES passages; at least the rarest one. Candidates are found
# through the GIN index and ranked with every word of the question. Without statistics (a
# new or never analysed corpus) every word is used. KEYWORD_CANDIDATES_MAX caps the set
# where the statistics are stale.
KEYWORD_CANDIDATES = 2000
KEYWORD_CANDIDATES_MAX = 5000
STATS_SECONDS = 300.0
_stats: dict[str, object] = {"at": -STATS_SECONDS, "frequencies": {}, "floor": None, "rows": 0}


def _word_query(words: list[str]) -> SearchQuery:
    search = SearchQuery(words[0], search_type="plain", config="english")
    for word in words[1:]:
        search |= SearchQuery(word, search_type="plain", config="english")
    return search


def keyword_query(query: str) -> SearchQuery | None:
    """Any of the query's words, ranked by how many match and how often (ts_rank).

    A natural question rarely has every word in one passage, so requiring all of them
    (websearch_to_tsquery's AND) misses most relevant passages; the relevance
    threshold and the selector decide what is good enough.
    """
    words = keyword_words(query)
    return _word_query(words) if words else None


def keyword_words(query: str) -> list[str]:
    return list(dict.fromkeys(normalised_words(query)))[:MAX_KEYWORDS]


def lexeme_statistics() -> dict:
    """The planner's statistics of the search vectors, read at most every STATS_SECONDS:
    `frequencies` (share of passages containing each of the most common lexemes),
    `floor` (the lowest listed share: every unlisted lexeme is rarer; None without
    statistics) and `rows` (the estimated number of passages)."""
    now = time.monotonic()
    if now - _stats["at"] < STATS_SECONDS:
        return _stats
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT s.most_common_elems::text::text[], s.most_common_elem_freqs, c.reltuples "
            "FROM pg_stats s JOIN pg_class c ON c.relname = s.tablename "
            "WHERE s.tablename = %s AND s.attname = 'search_vector'",
            [Passage._meta.db_table],
        )
        row = cursor.fetchone()
    frequencies: dict[str, float] = {}
    floor, rows = None, 0
    if row and row[0] and row[1]:
        elements, shares = row[0], row[1]
        frequencies = dict(zip(elements, shares[: len(elements)], strict=True))
        floor = min(shares[: len(elements)])
        rows = max(int(row[2] or 0), 0)
    _stats.update(at=now, frequencies=frequencies, floor=floor, rows=rows)
    return _stats


def candidate_words(words: list[str]) -> list[str]:
    """The rarest words whose passages together fit in about KEYWORD_CANDIDATES (at least
    one word); every word when there are no statistics."""
    stats = lexeme_statistics()
    if stats["floor"] is None or not stats["rows"]:
        return words
    stem = _english_stemmer().stemWord
    share = {w: stats["frequencies"].get(stem(w), stats["floor"]) for w in words}
    budget = KEYWORD_CANDIDATES / stats["rows"]
    chosen: list[str] = []
    total = 0.0
    for word in sorted(words, key=lambda w: share[w]):
        if chosen and total + share[word] > budget:
            break
        chosen.append(word)
        total += share[word]
    return chosen


@cache
def _english_stemmer():
    import snowballstemmer  # Porter2, as PostgreSQL's `english` configuration stems

    return snowballstemmer.stemmer("english")


def keyword_search(scope: QuerySet[Passage], query: str, limit: int) -> tuple[list, ToolOutcome]:
    words = keyword_words(query)
    if not words:
        return [], ToolOutcome(KEYWORD_SEARCH, "succeeded", "no_relevant_hit")
    search = _word_query(words)
    # The GIN index finds the passages with one of the rarest words; only those are ranked.
    candidates = scope.filter(search_vector=_word_query(candidate_words(words))).values("pk")
    scope = Passage.objects.filter(pk__in=candidates[:KEYWORD_CANDIDATES_MAX])
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
