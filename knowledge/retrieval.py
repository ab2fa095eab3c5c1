"""Hybrid retrieval: pgvector similarity + PostgreSQL full text, fused by reciprocal rank.

The permission filter is part of every SQL query (never a post-filter), and a hidden
document is indistinguishable from no document: both give `empty_corpus`.
"""

import os
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from itertools import combinations

from django.conf import settings
from django.core.exceptions import EmptyResultSet
from django.db import (
    DEFAULT_DB_ALIAS,
    InterfaceError,
    OperationalError,
    connections,
    transaction,
)
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import BooleanField, F, Func, QuerySet
from django.db.models.sql.compiler import SQLCompiler
from pgvector.django import CosineDistance

from core.fields import column_name
from core.outcomes import ToolOutcome
from knowledge import embeddings
from knowledge.models import EmbeddingStatus, LexemeFrequency, Passage
from knowledge.normalise import normalised_words
from knowledge.scope import AccessScope
from knowledge.sentences import code_names

VECTOR_SEARCH = "vector_search"
KEYWORD_SEARCH = "keyword_search"
RETRIEVAL_TOOLS = (VECTOR_SEARCH, KEYWORD_SEARCH)
RRF_K = 60
# The vector channel's outcome while passages in scope still wait for their vectors: it
# searched only those that have one (state `failed`: incomplete, retryable), never an access
# failure.
INDEXING = "indexing"


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
    # Structured units in `text` (knowledge.units): (start, end, alone_start, alone_end).
    units: list[tuple[int, int, int, int]] = field(default_factory=list)


@dataclass
class RetrievalResult:
    candidates: list[Candidate]
    outcomes: list[ToolOutcome]


_CANDIDATE_FIELDS = (
    "pk",
    "document_id",
    "revision_id",
    "extraction_id",
    "char_start",
    "char_end",
    "text",
    "locator",
)


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
# A lexeme in more than this share of the visible passages, and in more than COMMON_MIN of
# them, is common: groups of common lexemes only are tried after the others
# (`_coordination_filters`). The floor keeps a small corpus from splitting levels whose
# every group is cheap to find anyway.
COMMON_SHARE = 0.02
COMMON_MIN = 1000

_FREQUENCIES = LexemeFrequency._meta.db_table


@dataclass(frozen=True)
class QueryLexemes:
    """The query's lexemes in query order, with how many passages of the scope's spaces
    hold each and how many passages those spaces have (kept counts; private files not
    counted)."""

    lexemes: list[str]
    passages_with: dict[str, int] = field(default_factory=dict)
    passages: int = 0

    def common(self, lexeme: str) -> bool:
        passages = self.passages_with.get(lexeme, 0)
        return passages > max(COMMON_SHARE * self.passages, COMMON_MIN)


def query_lexemes(
    query: str, space_ids: frozenset[int] = frozenset(), database: str = DEFAULT_DB_ALIAS
) -> QueryLexemes:
    """The query's distinct search lexemes in query order (English stemming without stop
    words, exactly as the passages' search vectors were made) and their document
    frequencies in the spaces `space_ids`, read in one statement on `database`."""
    words = list(dict.fromkeys(normalised_words(query)))[:MAX_KEYWORDS]
    if not words:
        return QueryLexemes([])
    with connections[database].cursor() as cursor:
        cursor.execute(
            # "" (position 0, first) is the passage count: LexemeFrequency's convention.
            "SELECT t.lexeme, coalesce((SELECT sum(f.passages) "  # noqa: S608
            f"FROM {_FREQUENCIES} f WHERE f.lexeme = t.lexeme AND f.space_id = ANY(%s)), 0) "
            "FROM (SELECT lexeme, positions[1] AS at FROM unnest(to_tsvector('english', %s)) "
            "UNION ALL SELECT '', 0) AS t ORDER BY t.at",
            [sorted(space_ids), " ".join(words)],
        )
        (_, passages), *rows = cursor.fetchall()
    return QueryLexemes(
        [lexeme for lexeme, _ in rows], {lexeme: count for lexeme, count in rows}, passages
    )


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

    def sql(self, vector: str) -> tuple[str, tuple[str, ...]]:
        """The condition on the column `vector` (SQL), with its parameters."""
        conditions = " OR ".join(f"{vector} @@ %s::tsquery" for _ in self.tsqueries)
        return f"({conditions})", tuple(self.tsqueries)

    def as_sql(
        self,
        compiler: SQLCompiler,
        connection: BaseDatabaseWrapper,
        function: str | None = None,
        template: str | None = None,
        arg_joiner: str | None = None,
        **extra_context: object,  # Func's options, which this node does not use
    ) -> tuple[str, tuple[str | int, ...]]:
        vector, params = compiler.compile(self.get_source_expressions()[0])
        condition, tsqueries = self.sql(vector)
        return condition, (*params, *tsqueries)


def _coordination_filters(query: QueryLexemes) -> list[_MatchesAny]:
    """Filters from the most to the least selective, for passages that share several of
    the query's lexemes.

    Ranking every passage that shares any word costs as many rows as match; passages that
    share three (then two) of the words are few, and the GIN index finds them, so only
    their rows are ranked. Each group of words is counted once, under its rarest word (the
    driver): one GIN condition per driver, `driver & (any two of the words after it in
    that order)`, whose scan walks the driver's posting list and skips through the others'
    — for eight words 6 index scans instead of 56 for every group on its own, the same
    passages. Within a level the conditions of drivers that are not common come first: a
    group of common words only costs the most to find (long posting lists) and is the
    weakest evidence, so it joins only when the others give too few passages.
    """
    lexemes = query.lexemes[:FILTER_LEXEMES]
    levels = [COORDINATION, 2] if len(lexemes) > COORDINATION else [2]
    ordered = sorted(lexemes, key=lambda lexeme: query.passages_with.get(lexeme, 0))
    filters = []
    for size in levels:
        conditions, uncommon = [], []
        for at, driver in enumerate(ordered[: len(ordered) - size + 1]):
            others = " | ".join(
                f"({_tsquery(group, '&')})" for group in combinations(ordered[at + 1 :], size - 1)
            )
            conditions.append(f"{_quoted(driver)} & ({others})")
            if not query.common(driver):
                uncommon.append(conditions[-1])
        if uncommon and len(uncommon) < len(conditions):
            filters.append(_MatchesAny(uncommon))
        if conditions:
            filters.append(_MatchesAny(conditions))
    return filters


def _any_word_filters(query: QueryLexemes) -> list[_MatchesAny]:
    """The last level, every passage with any of the words; first with any word that is
    not common, when some are (a passage sharing only a common word is the weakest match,
    and ranking all of them costs as many rows as the common word has)."""
    uncommon = [lexeme for lexeme in query.lexemes if not query.common(lexeme)]
    filters = [_MatchesAny([_tsquery(query.lexemes, "|")])]
    if uncommon and len(uncommon) < len(query.lexemes):
        filters.insert(0, _MatchesAny([_tsquery(uncommon, "|")]))
    return filters


def _where(scope: QuerySet[Passage]) -> tuple[str, tuple]:
    """The scope's WHERE clause (the permission filter and current revisions) as the ORM
    compiles it, with its parameters: compiled once per keyword search and embedded in
    each of its ranked statements, which are written out (compiling a queryset per
    statement cost that channel more Python than the rest of it)."""
    query = scope.query
    try:
        sql, params = query.get_compiler(scope.db).compile(query.where)
    except EmptyResultSet:  # no space and no file can match (the ORM's way of saying so)
        return "false", ()
    return sql, tuple(params)


_PASSAGES = Passage._meta.db_table
_LOCATOR = Passage._meta.get_field("locator")
_LOCATED = _LOCATOR.cached_col  # the column's expression, which Django reads a value with


def _columns(table: str) -> str:
    """The candidate fields' columns of `table` (the passages, or a subquery of theirs)."""
    names = ("id", *_CANDIDATE_FIELDS[1:])
    return ", ".join(f'{table}."{column_name(Passage, name)}"' for name in names)


_COLUMNS = _columns(_PASSAGES)
_RANKED = (
    f"SELECT {_COLUMNS}, ts_rank({_PASSAGES}.search_vector, %s::tsquery) AS rank "  # noqa: S608
    f"FROM {_PASSAGES} WHERE {{where}} AND {{condition}} "
    f"AND ts_rank({_PASSAGES}.search_vector, %s::tsquery) > %s "
    f"ORDER BY rank DESC, {_PASSAGES}.id LIMIT %s"
)


def _candidates(
    rows: list[tuple], connection: BaseDatabaseWrapper
) -> list[tuple[Candidate, float]]:
    """Candidates and their rank from rows of `_COLUMNS` and a rank, read by hand."""
    return [
        (Candidate(*(*row[:7], _LOCATOR.from_db_value(row[7], _LOCATED, connection))), row[8])
        for row in rows
    ]


def _ranked_rows(
    where: tuple[str, tuple], search: str, condition: _MatchesAny, limit: int, database: str
) -> list[tuple[Candidate, float]]:
    """The passages in scope that meet `condition`, ranked by ts_rank against `search`."""
    condition_sql, tsqueries = condition.sql(f"{_PASSAGES}.search_vector")
    connection = connections[database]
    with connection.cursor() as cursor:
        cursor.execute(
            _RANKED.format(where=where[0], condition=condition_sql),
            [search, *where[1], *tsqueries, search, settings.KOINON_KEYWORD_MIN_RANK, limit],
        )
        rows = cursor.fetchall()
    return _candidates(rows, connection)


MAX_NAMES = 4
# Passages holding a name that are ranked at most: the scan stops there, however common the
# name's words are ("--pages" is "page" to the index, which a PDF library says everywhere).
NAMED_SCAN = 200
_NAMED = (
    f"SELECT {_columns('named')}, ts_rank(named.search_vector, %s::tsquery) AS rank "  # noqa: S608
    f"FROM (SELECT {_COLUMNS}, {_PASSAGES}.search_vector FROM {_PASSAGES} "
    f"WHERE {{where}} AND ({{condition}}) LIMIT %s) AS named "
    f'ORDER BY rank DESC, named."id" LIMIT %s'
)
_NAME_CONDITION = (
    f"({_PASSAGES}.search_vector @@ plainto_tsquery('english', %s) "
    f"AND strpos(lower({_PASSAGES}.text), %s) > 0)"
)


def _named_rows(
    where: tuple[str, tuple], search: str, names: list[str], limit: int, database: str
) -> list[tuple[Candidate, float]]:
    """The passages in scope that hold one of `names` verbatim, ranked by ts_rank against
    `search`: the index finds the passages with the name's lexemes, the text decides; the
    first NAMED_SCAN that hold it are ranked."""
    condition = " OR ".join(_NAME_CONDITION for _ in names)
    params = [value for name in names for value in (name, name.lower())]
    connection = connections[database]
    with connection.cursor() as cursor:
        cursor.execute(
            _NAMED.format(where=where[0], condition=condition),
            [search, *where[1], *params, NAMED_SCAN, limit],
        )
        rows = cursor.fetchall()
    return _candidates(rows, connection)


def keyword_search(query: str, limit: int, *, scope: AccessScope) -> tuple[list, ToolOutcome]:
    """Passages in scope ranked by ts_rank against any of the query's words.

    A natural question rarely has every word in one passage, so requiring all of them
    (websearch_to_tsquery's AND) misses most relevant passages. The top of that ranking
    is almost always among the passages that share several of the words, so those are
    ranked first (`_coordination_filters`) and the full ranking of every passage with any
    of the words runs only when they are fewer than `limit`; the relevance threshold and
    the selector decide what is good enough. The words' document frequencies in the
    scope's spaces order the groups of words.

    A name the query writes as code ("--pages", "ffi_type_uint8": `code_names`) is
    matched verbatim first: the passages that hold it come before the others, which
    stemming would rank by the common word it shares with them ("page").
    """
    lexemes = query_lexemes(query, scope.space_ids, scope.database)
    if not lexemes.lexemes:
        return [], ToolOutcome(KEYWORD_SEARCH, "succeeded", "no_relevant_hit")
    where = _where(scope.passages())
    search = _tsquery(lexemes.lexemes, "|")
    names = code_names(query)[:MAX_NAMES]
    named = _named_rows(where, search, names, limit, scope.database) if names else []
    for condition in [*_coordination_filters(lexemes), *_any_word_filters(lexemes)]:
        scored = _ranked_rows(where, search, condition, limit, scope.database)
        if len(scored) >= limit:
            break
    if named:
        first = {candidate.passage_id for candidate, _ in named}
        scored = [*named, *(row for row in scored if row[0].passage_id not in first)][:limit]
    code = "matched" if scored else "no_relevant_hit"
    return scored, ToolOutcome(KEYWORD_SEARCH, "succeeded", code, len(scored))


def vector_search(scope: QuerySet[Passage], query: str, limit: int) -> tuple[list, ToolOutcome]:
    try:
        provider = embeddings.get_embedding_provider()
        (vector,) = provider.embed([query])
    except embeddings.EmbeddingError as error:
        retryable = error.code == "embedding_unavailable"
        return [], ToolOutcome(VECTOR_SEARCH, "failed", error.code, 0, retryable)
    embedded = scope.filter(embedding_status=EmbeddingStatus.EMBEDDED)
    nearest = (
        embedded.filter(embedding_model=provider.model_id)
        .annotate(distance=CosineDistance("embedding", vector))
        .order_by("distance", "pk")[:limit]
    )
    if limit * 4 <= settings.HNSW_EF_SEARCH and settings.DATABASE_POOLER != "pgbouncer":
        # The connection's own settings (koinon.settings: HNSW_EF_SEARCH, iterative scan).
        rows = _scored_rows(nearest, "distance")
    else:
        # Behind PgBouncer in transaction mode a connection carries no settings of its own.
        database = scope.db
        with transaction.atomic(using=database), connections[database].cursor() as cursor:
            # A filtered HNSW scan stops at ef_search rows unless it may continue (pgvector
            # 0.8): continue, and look at more candidates for a longer list.
            cursor.execute(
                "SELECT set_config('hnsw.iterative_scan', 'relaxed_order', true), "
                "set_config('hnsw.ef_search', %s, true)",
                [str(max(limit * 4, settings.HNSW_EF_SEARCH))],
            )
            rows = _scored_rows(nearest, "distance")
    # Passages still waiting for their vectors (a fresh start, a large upload): the channel
    # is catching up, not failing; keyword search finds them meanwhile.
    indexing = scope.filter(embedding_status=EmbeddingStatus.PENDING).exists()
    if not rows and not embedded.filter(embedding_model=provider.model_id).exists():
        # Why nothing came back (checked only then, not on every search):
        if embedded.exists():
            # Vectors of another model are not comparable: refuse rather than mislead.
            return [], ToolOutcome(VECTOR_SEARCH, "failed", "embedding_configuration_invalid")
        if indexing:
            return [], ToolOutcome(VECTOR_SEARCH, "failed", INDEXING, 0, True)
        return [], ToolOutcome(VECTOR_SEARCH, "failed", "embedding_unavailable", 0, True)
    # relaxed_order may return rows slightly out of order: sort them.
    rows.sort(key=lambda item: (item[1], item[0].passage_id))
    scored = [
        (row, 1 - distance)
        for row, distance in rows
        if 1 - distance >= settings.KOINON_VECTOR_MIN_SIMILARITY
    ]
    if indexing:
        return scored, ToolOutcome(VECTOR_SEARCH, "failed", INDEXING, len(scored), True)
    code = "matched" if scored else "no_relevant_hit"
    return scored, ToolOutcome(VECTOR_SEARCH, "succeeded", code, len(scored))


def documents_indexing(scope: QuerySet[Passage]) -> int:
    """How many documents in scope have passages still waiting for their vectors."""
    pending = scope.filter(embedding_status=EmbeddingStatus.PENDING)
    return pending.values("document_id").distinct().count()


BEGIN_WAIT = 0.05  # seconds a caller waits at most for the channel thread to begin


class _ChannelThread:
    """The thread (one per process) that runs the keyword channel while the calling thread
    embeds the query and runs the vector channel: hybrid retrieval then costs about the
    slower channel, not both. The thread keeps its own database connection.

    It is borrowed only when free: under load (many requests of one process at once) the
    others run their keyword channel themselves rather than queue for it. Made again in a
    forked child (a Celery prefork worker), where the parent's thread does not exist.
    """

    def __init__(self) -> None:
        self._forget()
        # As the fork server and the governed watchdog do: a fork may catch the parent's
        # thread holding the lock, and the parent's executor has no thread in the child.
        os.register_at_fork(after_in_child=self._forget)

    def _forget(self) -> None:
        self._lock = threading.Lock()
        self._executor: ThreadPoolExecutor | None = None
        self._busy = False

    def _ready(self) -> ThreadPoolExecutor:
        if self._executor is None:
            self._executor = ThreadPoolExecutor(1, thread_name_prefix="keyword-channel")
        return self._executor

    def submit(self, function: Callable[..., object], /, *args: object, **kwargs: object) -> Future:
        """Run `function` on the thread (queued behind what it runs now)."""
        with self._lock:
            return self._ready().submit(function, *args, **kwargs)

    def borrow(
        self, function: Callable[..., object], /, *args: object, **kwargs: object
    ) -> Future | None:
        """Run `function` on the thread if it is free; None (run it yourself) if not.

        Returns once the thread has begun `function`: otherwise the thread waits for the
        GIL until the caller next blocks (its query embedding releases it only inside
        ONNX Runtime, ~2 ms on), and the keyword channel, the slower one on the questions
        that make hybrid's tail, starts that much later. Begun, the thread holds the GIL
        only until its first statement."""
        begun = threading.Event()
        with self._lock:
            executor = self._ready()
            if self._busy:
                return None
            self._busy = True

            def run() -> object:
                begun.set()
                try:
                    return function(*args, **kwargs)
                finally:  # free before the result is seen, so the caller's next call finds it
                    with self._lock:
                        self._busy = False

            future = executor.submit(run)
        begun.wait(BEGIN_WAIT)
        return future

    def close_connection(self) -> None:
        """Close the thread's database connection (tests, before the database goes)."""
        if self._executor is not None:
            # The thread's own connections.
            self._executor.submit(connections.close_all).result()


CHANNEL_THREAD = _ChannelThread()


def _keyword_in_thread(query: str, limit: int, scope: AccessScope) -> tuple[list, ToolOutcome]:
    # Nothing closes this thread's connection between calls. Not pinged before each search
    # (a round trip on the channel's path): a connection lost since the last call (server
    # restarted, backend killed) fails its first statement, and the search, which only
    # reads, runs once more on a new one. A failed statement on a sound connection is raised.
    connection = connections[scope.database]
    try:
        return keyword_search(query, limit, scope=scope)
    except (InterfaceError, OperationalError):
        if connection.connection is not None and connection.is_usable():
            raise
        connection.close()
        return keyword_search(query, limit, scope=scope)


def _concurrent(wanted: list[str], database: str) -> bool:
    """Whether the keyword channel may run on its own connection: never inside a
    transaction, whose uncommitted rows another connection cannot see."""
    return (
        settings.KOINON_RETRIEVAL_CONCURRENT
        and KEYWORD_SEARCH in wanted
        and len(wanted) > 1
        and not connections[database].in_atomic_block
    )


def retrieve(
    *,
    scope: AccessScope,
    query: str,
    tools: tuple[str, ...] = RETRIEVAL_TOOLS,
    limit: int = 10,
) -> RetrievalResult:
    """Candidates for query from each allowed tool, fused by reciprocal rank fusion.

    Each candidate keeps every tool's rank and score; each tool reports an outcome. With
    both tools the keyword channel runs concurrently (`_ChannelThread`) outside a
    transaction; the result is the same either way. Reads the scope's database; a replica
    that fails the reads gives way to the primary (core.replicas).
    """
    return scope.read(lambda scope: _retrieve(scope=scope, query=query, tools=tools, limit=limit))


def _retrieve(
    *, scope: AccessScope, query: str, tools: tuple[str, ...], limit: int
) -> RetrievalResult:
    passages = scope.passages()
    wanted = [tool for tool in RETRIEVAL_TOOLS if tool in tools]
    keyword: Future | None = None
    if _concurrent(wanted, scope.database):
        keyword = CHANNEL_THREAD.borrow(_keyword_in_thread, query, limit * 2, scope)
    channels = {
        tool: (
            keyword_search(query, limit * 2, scope=scope)
            if tool == KEYWORD_SEARCH
            else vector_search(passages, query, limit * 2)
        )
        for tool in wanted
        if not (keyword and tool == KEYWORD_SEARCH)
    }
    if keyword is not None:
        channels[KEYWORD_SEARCH] = keyword.result()
    # Asked only when nothing came back (a scope with passages usually gives some): no
    # passage at all in scope is `empty_corpus` whatever each channel said.
    if not any(channels[tool][0] for tool in wanted) and not passages.exists():
        return RetrievalResult(
            [], [ToolOutcome(tool, "succeeded", "empty_corpus") for tool in wanted]
        )
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
