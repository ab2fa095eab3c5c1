"""Hybrid retrieval: pgvector similarity + PostgreSQL full text, fused by reciprocal rank.

The permission filter is part of every SQL query (never a post-filter), and a hidden
document is indistinguishable from no document: both give `empty_corpus`.
"""

import os
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from itertools import combinations

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.contrib.postgres.search import SearchQueryField, SearchRank
from django.db import connection, transaction
from django.db.models import BooleanField, F, Func, Q, QuerySet, Value
from django.db.models.functions import Cast
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
# The filter of a large corpus: passages that share at least COORDINATION of the query's
# first FILTER_LEXEMES distinct lexemes (at least two when it has two or three).
COORDINATION = 3
FILTER_LEXEMES = 8


def query_lexemes(query: str) -> list[str]:
    """The query's distinct search lexemes in query order: English stemming without stop
    words, exactly as the passages' search vectors were made."""
    words = list(dict.fromkeys(normalised_words(query)))[:MAX_KEYWORDS]
    if not words:
        return []
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT lexeme FROM unnest(to_tsvector('english', %s)) ORDER BY positions[1]",
            [" ".join(words)],
        )
        return [lexeme for (lexeme,) in cursor.fetchall()]


def _quoted(lexeme: str) -> str:
    """A tsquery operand: quotes doubled and backslashes escaped inside single quotes."""
    return "'" + lexeme.replace("\\", "\\\\").replace("'", "''") + "'"


def _tsquery(lexemes: tuple[str, ...] | list[str], operator: str) -> str:
    """A tsquery's text of lexemes taken as they are (cast, never parsed or stemmed again)."""
    return f" {operator} ".join(_quoted(lexeme) for lexeme in lexemes)


class _MatchesAny(Func):
    """`search_vector @@ q1 OR search_vector @@ q2 …`: one GIN index condition per tsquery,
    which PostgreSQL combines in a bitmap (BitmapOr). One node however many queries, so
    that building and compiling it costs next to nothing."""

    output_field = BooleanField()

    def __init__(self, tsqueries: list[str]) -> None:
        super().__init__(F("search_vector"))
        self.tsqueries = tsqueries

    def as_sql(self, compiler, connection, **extra):
        vector, params = compiler.compile(self.get_source_expressions()[0])
        conditions = " OR ".join(f"{vector} @@ %s::tsquery" for _ in self.tsqueries)
        return f"({conditions})", (*params, *self.tsqueries)


def _coordination_filters(lexemes: list[str]) -> list[_MatchesAny]:
    """Filters from the most to the least selective, for passages that share several of
    the query's lexemes.

    Ranking every passage that shares any word costs as many rows as match; passages that
    share three (then two) of the words are few, and each group of words is a GIN
    condition of its own that PostgreSQL combines in a bitmap, so the candidate set is
    found in the index and only its rows are ranked.
    """
    lexemes = lexemes[:FILTER_LEXEMES]
    levels = [COORDINATION, 2] if len(lexemes) > COORDINATION else [2]
    return [
        _MatchesAny([_tsquery(group, "&") for group in combinations(lexemes, size)])
        for size in levels
        if len(lexemes) >= size
    ]


def keyword_search(scope: QuerySet[Passage], query: str, limit: int) -> tuple[list, ToolOutcome]:
    """Passages ranked by ts_rank against any of the query's words.

    A natural question rarely has every word in one passage, so requiring all of them
    (websearch_to_tsquery's AND) misses most relevant passages. The top of that ranking
    is almost always among the passages that share several of the words, so those are
    ranked first (`_coordination_filters`) and the full ranking of every passage with any
    of the words runs only when they are fewer than `limit`; the relevance threshold and
    the selector decide what is good enough.
    """
    lexemes = query_lexemes(query)
    if not lexemes:
        return [], ToolOutcome(KEYWORD_SEARCH, "succeeded", "no_relevant_hit")
    search = _tsquery(lexemes, "|")
    rank = SearchRank(F("search_vector"), Cast(Value(search), SearchQueryField()))
    ranked = scope.annotate(rank=rank).filter(rank__gt=settings.KOINON_KEYWORD_MIN_RANK)
    for condition in [*_coordination_filters(lexemes), _MatchesAny([search])]:
        scored = _scored_rows(ranked.filter(condition).order_by("-rank", "pk")[:limit], "rank")
        if len(scored) >= limit:
            break
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
    nearest = (
        embedded.filter(embedding_model=provider.model_id)
        .annotate(distance=CosineDistance("embedding", vector))
        .order_by("distance", "pk")[:limit]
    )
    with transaction.atomic(), connection.cursor() as cursor:
        # A filtered HNSW scan stops at ef_search rows unless it may continue (pgvector 0.8).
        cursor.execute(
            "SELECT set_config('hnsw.iterative_scan', 'relaxed_order', true), "
            "set_config('hnsw.ef_search', %s, true)",
            [str(max(100, limit * 4))],
        )
        rows = _scored_rows(nearest, "distance")
    if not rows and not embedded.filter(embedding_model=provider.model_id).exists():
        # Why nothing came back (checked only then, not on every search):
        if embedded.exists():
            # Vectors of another model are not comparable: refuse rather than mislead.
            return [], ToolOutcome(VECTOR_SEARCH, "failed", "embedding_configuration_invalid")
        return [], ToolOutcome(VECTOR_SEARCH, "failed", "embedding_unavailable", 0, True)
    # relaxed_order may return rows slightly out of order: sort them.
    rows.sort(key=lambda item: (item[1], item[0].passage_id))
    scored = [(row, 1 - distance) for row, distance in rows
              if 1 - distance >= settings.KOINON_VECTOR_MIN_SIMILARITY]  # fmt: skip
    code = "matched" if scored else "no_relevant_hit"
    return scored, ToolOutcome(VECTOR_SEARCH, "succeeded", code, len(scored))


class _ChannelThread:
    """The thread (one per process) that runs the keyword channel while the calling thread
    embeds the query and runs the vector channel: hybrid retrieval then costs about the
    slower channel, not both. The thread keeps its own database connection.

    It is borrowed only when free: under load (many requests of one process at once) the
    others run their keyword channel themselves rather than queue for it. Made again in a
    forked child (a Celery prefork worker), where the parent's thread does not exist.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pid: int | None = None
        self._executor: ThreadPoolExecutor | None = None
        self._busy = False

    def _ready(self) -> ThreadPoolExecutor:
        if self._executor is None or self._pid != os.getpid():
            self._executor = ThreadPoolExecutor(1, thread_name_prefix="keyword-channel")
            self._pid = os.getpid()
            self._busy = False
        return self._executor

    def submit(self, function, /, *args: object) -> Future:
        """Run `function` on the thread (queued behind what it runs now)."""
        with self._lock:
            return self._ready().submit(function, *args)

    def borrow(self, function, /, *args: object) -> Future | None:
        """Run `function` on the thread if it is free; None (run it yourself) if not."""
        with self._lock:
            executor = self._ready()
            if self._busy:
                return None
            self._busy = True

            def run() -> object:
                try:
                    return function(*args)
                finally:  # free before the result is seen, so the caller's next call finds it
                    with self._lock:
                        self._busy = False

            return executor.submit(run)

    def close_connection(self) -> None:
        """Close the thread's database connection (tests, before the database goes)."""
        if self._executor is not None and self._pid == os.getpid():
            self._executor.submit(lambda: connection.close()).result()  # the thread's own


CHANNEL_THREAD = _ChannelThread()


def _keyword_in_thread(
    scope: QuerySet[Passage], query: str, limit: int
) -> tuple[list, ToolOutcome]:
    # Nothing closes this thread's connection between calls: check it as a request would.
    if connection.connection is not None and not connection.is_usable():
        connection.close()
    return keyword_search(scope, query, limit)


def _concurrent(wanted: list[str]) -> bool:
    """Whether the keyword channel may run on its own connection: never inside a
    transaction, whose uncommitted rows another connection cannot see."""
    return (
        settings.KOINON_RETRIEVAL_CONCURRENT
        and KEYWORD_SEARCH in wanted
        and len(wanted) > 1
        and not connection.in_atomic_block
    )


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

    Each candidate keeps every tool's rank and score; each tool reports an outcome. With
    both tools the keyword channel runs concurrently (`_ChannelThread`) outside a
    transaction; the result is the same either way.
    """
    scope = passages_visible_to(user=user, space_ids=space_ids, selected_sources=selected_sources)
    wanted = [tool for tool in RETRIEVAL_TOOLS if tool in tools]
    if not scope.exists():
        return RetrievalResult(
            [], [ToolOutcome(tool, "succeeded", "empty_corpus") for tool in wanted]
        )
    keyword: Future | None = None
    if _concurrent(wanted):
        keyword = CHANNEL_THREAD.borrow(_keyword_in_thread, scope.all(), query, limit * 2)
    runners = {KEYWORD_SEARCH: keyword_search, VECTOR_SEARCH: vector_search}
    channels = {
        tool: runners[tool](scope, query, limit * 2)
        for tool in wanted
        if not (keyword and tool == KEYWORD_SEARCH)
    }
    if keyword is not None:
        channels[KEYWORD_SEARCH] = keyword.result()
    fused: dict[int, Candidate] = {}
    outcomes = []
    for tool in wanted:
        scored, outcome = channels[tool]
        outcomes.append(outcome)
        for rank, (candidate, score) in enumerate(scored, start=1):
            entry = fused.setdefault(candidate.passage_id, candidate)
            entry.contributions[tool] = {"rank": rank, "score": round(float(score), 6)}
            entry.score += 1 / (RRF_K + rank)
    candidates = sorted(fused.values(), key=lambda c: (-c.score, c.passage_id))[:limit]
    return RetrievalResult(candidates, outcomes)
