"""Document frequencies of words in the corpus a user may see: the selector's IDF weights.

Counting, per answer, the visible passages that contain each of the plan's words grew with
the corpus (at 100k passages ~50 ms of PostgreSQL per answer, most of it the passage count
and the common words). Spaces' counts are kept instead, per lexeme, in LexemeFrequency and
moved in the same transaction as `Passage.is_current` (document_set_current), so an answer
reads a few index rows per word and space. Private files have no space: the few a run
selects are counted live.
"""

from django.contrib.postgres.search import SearchQuery
from django.core.exceptions import EmptyResultSet
from django.db import connection, connections, transaction
from django.db.models import QuerySet

from knowledge.models import Document, DocumentRevision, LexemeFrequency, Passage
from knowledge.scope import AccessScope

DOCUMENT_FREQUENCY_CAP = 5000  # past this a word is common; its weight stays that of 5000

_FREQUENCIES = LexemeFrequency._meta.db_table
_PASSAGES = Passage._meta.db_table
# Each passage counts once for each lexeme of its search vector and once for "" (the
# space's passages); a tsvector's lexemes are distinct and never empty.
_PASSAGE_LEXEMES = (
    "CROSS JOIN LATERAL unnest(array_append(tsvector_to_array(p.search_vector), '')) AS l(lexeme)"
)


def lexeme_frequencies_shift(*, document: Document, revision: DocumentRevision | None) -> None:
    """Count `revision`'s passages in and the document's other current passages out
    (None: every current passage out, as the document is withdrawn).

    Called by document_set_current before it moves `is_current`, in its transaction and
    under the document's row lock; idempotent (passages already current are left alone).
    Rows are upserted in lexeme order, so two documents of one space never deadlock.
    """
    if document.space_id is None:
        return
    revision_id = revision.pk if revision is not None else 0  # 0: no revision's id
    delta = "sum(CASE WHEN p.revision_id = %s THEN 1 ELSE -1 END)"
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {_FREQUENCIES} (space_id, lexeme, passages) "  # noqa: S608
            f"SELECT p.space_id, l.lexeme, {delta} FROM {_PASSAGES} p {_PASSAGE_LEXEMES} "
            "WHERE p.document_id = %s AND p.space_id IS NOT NULL "
            "AND (p.revision_id = %s) <> p.is_current "
            f"GROUP BY p.space_id, l.lexeme HAVING {delta} <> 0 "
            "ORDER BY p.space_id, l.lexeme "
            "ON CONFLICT (space_id, lexeme) "
            f"DO UPDATE SET passages = {_FREQUENCIES}.passages + EXCLUDED.passages",
            [revision_id, document.pk, revision_id, revision_id],
        )


def lexeme_frequencies_rebuild(*, space_id: int) -> None:
    """Count a space's current passages afresh (after a bulk load that set `is_current`
    itself, as the benches do; or to repair), and give the planner the table's new size:
    every retrieval and answer reads these rows, and a plan made before autovacuum has
    seen a bulk of new rows scans the table instead of its index (measured: the keyword
    channel ~3 ms slower at 10k passages)."""
    with transaction.atomic(), connection.cursor() as cursor:
        LexemeFrequency.objects.filter(space_id=space_id).delete()
        cursor.execute(
            f"INSERT INTO {_FREQUENCIES} (space_id, lexeme, passages) "  # noqa: S608
            f"SELECT p.space_id, l.lexeme, count(*) FROM {_PASSAGES} p {_PASSAGE_LEXEMES} "
            "WHERE p.space_id = %s AND p.is_current GROUP BY p.space_id, l.lexeme",
            [space_id],
        )
        cursor.execute(f"ANALYZE {_FREQUENCIES}")


def document_frequencies(*, scope: AccessScope, words: list[str]) -> tuple[dict[str, int], int]:
    """How many passages in scope contain each word (English stemming, as the search vectors
    do), and how many passages the scope has: the IDF weights of "the visible corpus".

    The same scope as retrieval: the scope's spaces, plus its private files. A word of
    several lexemes ("e-mail") counts as its rarest one; a stop word counts 0. Counts are
    capped at DOCUMENT_FREQUENCY_CAP. One statement for the spaces; one more when the
    scope holds private files. Read on the scope's database (a replica that fails gives
    way to the primary).
    """
    return scope.read(lambda scope: _document_frequencies(scope, words))


def _document_frequencies(scope: AccessScope, words: list[str]) -> tuple[dict[str, int], int]:
    unique = list(dict.fromkeys(words))
    counts, total = dict.fromkeys(unique, 0), 0
    if scope.space_ids:
        spaces = sorted(scope.space_ids)
        in_spaces = "f.space_id = ANY(%s)"
        with connections[scope.database].cursor() as cursor:
            cursor.execute(
                # Per word: its lexemes, each summed over the spaces; the word takes the
                # smallest (no lexeme: a stop word, 0). The last row: the passages.
                "SELECT w.word, (SELECT coalesce(min(n.passages), 0) FROM "  # noqa: S608
                "unnest(tsvector_to_array(to_tsvector('english', w.word))) AS l(lexeme) "
                "CROSS JOIN LATERAL (SELECT coalesce(sum(f.passages), 0) AS passages "
                f"FROM {_FREQUENCIES} f WHERE f.lexeme = l.lexeme AND {in_spaces}) n) "
                "FROM unnest(%s::text[]) AS w(word) "
                f"UNION ALL SELECT NULL, (SELECT coalesce(sum(f.passages), 0) FROM "
                f"{_FREQUENCIES} f WHERE f.lexeme = '' AND {in_spaces})",
                [spaces, unique, spaces],
            )
            for word, count in cursor.fetchall():
                if word is None:
                    total = count
                else:
                    counts[word] = count
    if scope.file_ids:
        private, private_total = _private_frequencies(scope, unique)
        counts = {word: counts[word] + private[word] for word in unique}
        total += private_total
    return {word: min(count, DOCUMENT_FREQUENCY_CAP) for word, count in counts.items()}, total


def _private_frequencies(scope: AccessScope, words: list[str]) -> tuple[dict[str, int], int]:
    """Live counts over the scope's private files (few passages, no space)."""
    files = scope.passages().filter(space__isnull=True).order_by()
    parts = [
        _compiled_sql(
            files.filter(
                search_vector=SearchQuery(word, search_type="plain", config="english")
            ).values("pk")
        )
        for word in words
    ]
    parts.append(_compiled_sql(files.values("pk")))
    # Django compiled each part; every value in them is a parameter.
    columns = [f"(SELECT count(*) FROM ({part[0]}) AS m)" if part else "0" for part in parts]  # noqa: S608
    with connections[scope.database].cursor() as cursor:
        cursor.execute(
            "SELECT " + ", ".join(columns),
            [param for part in parts if part for param in part[1]],
        )
        *found, total = cursor.fetchone()
    return dict(zip(words, found, strict=True)), total


def _compiled_sql(queryset: QuerySet) -> tuple[str, tuple] | None:
    """The queryset's SQL and parameters as the ORM compiles them, for a statement that
    embeds it as a subquery; None for one that can match nothing."""
    try:
        return queryset.query.sql_with_params()
    except EmptyResultSet:
        return None
