"""The keyword channel ranks only the passages that share several of the query's words
when there are enough of them, and every passage with any of the words otherwise.

Ranking every passage that shares any word with the question costs as many rows as match,
which grows with the corpus; `knowledge.retrieval.keyword_search` first asks the GIN index
for the passages sharing three (then two) of the words. These tests read the executed plan
to see how many rows were ranked, and check the fallbacks and the odd queries.
"""

import json
import multiprocessing
import threading

import numpy as np
import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.db import connection, transaction
from django.db.models import F, Func
from django.test import override_settings
from django.test.utils import CaptureQueriesContext

from knowledge.embeddings import get_embedding_provider
from knowledge.models import Passage, Space
from knowledge.retrieval import (
    CHANNEL_THREAD,
    NAMED_SCAN,
    _coordination_filters,
    _quoted,
    query_lexemes,
    retrieve,
)
from knowledge.scope import access_scope_build
from knowledge.services import space_create
from tests.knowledge.test_vector_filter import load_passages

pytestmark = pytest.mark.django_db

QUERY = "Which harbour pilots inspect the lighthouse lanterns?"
SHARED = 40  # passages that share three of the query's words
ONE_WORD = 400  # passages that share one word only, many times


def _load(space: Space, user: AbstractBaseUser, texts: list[str]) -> None:
    vectors = np.random.default_rng(3).normal(size=(len(texts), 384)).tolist()
    load_passages([space], user, texts, vectors, get_embedding_provider().model_id)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE knowledge_passage")


def _keyword(user: AbstractBaseUser, query: str, limit: int = 10):
    with CaptureQueriesContext(connection) as queries:
        result = retrieve(
            scope=access_scope_build(user=user), query=query, tools=("keyword_search",), limit=limit
        )
    ranked = [q["sql"] for q in queries.captured_queries if "ts_rank" in q["sql"]]
    return result, ranked


def _rows_read(sql: str) -> int:
    """Rows of knowledge_passage that the executed plan produced (what was ranked)."""
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + sql)
        (plan,) = cursor.fetchone()
    plan = json.loads(plan) if isinstance(plan, str) else plan

    def walk(node: dict) -> int:
        own = node["Actual Rows"] * node["Actual Loops"]
        rows = own if node.get("Relation Name") == "knowledge_passage" else 0
        return rows + sum(walk(child) for child in node.get("Plans", []))

    return walk(plan[0]["Plan"])


def test_only_passages_sharing_three_words_are_ranked_when_there_are_enough(
    space: Space, staff: AbstractBaseUser, member: AbstractBaseUser
) -> None:
    shared = [f"Harbour pilots inspect the lanterns of berth {n}." for n in range(SHARED)]
    one_word = [f"Lighthouse {n}: lighthouse, lighthouse and lighthouse." for n in range(ONE_WORD)]
    _load(space, staff, shared + one_word)

    result, ranked = _keyword(member, QUERY)

    # limit 10 asks each channel for 20: the three-word passages are enough
    assert result.outcomes[0].result_count == 20
    assert all("pilots inspect the lanterns" in c.text for c in result.candidates)
    (sql,) = ranked  # one ranked query: no fallback ran
    assert _rows_read(sql) == SHARED  # not SHARED + ONE_WORD


def test_two_shared_words_are_the_next_filter(
    space: Space, staff: AbstractBaseUser, member: AbstractBaseUser
) -> None:
    three = [f"Harbour pilots inspect berth {n}." for n in range(5)]
    two = [f"Harbour pilots rest at berth {n}." for n in range(30)]
    one = [f"Lighthouse keeper number {n}." for n in range(100)]
    _load(space, staff, three + two + one)

    result, ranked = _keyword(member, QUERY)

    assert len(ranked) == 2  # three words: too few; two words: enough
    assert _rows_read(ranked[-1]) == 35
    texts = [c.text for c in result.candidates]
    assert all("inspect" in text for text in texts[:5])  # three shared words rank first
    assert not any("keeper" in t for t in texts)


def test_every_passage_with_any_word_is_ranked_when_few_share_more(
    space: Space, staff: AbstractBaseUser, member: AbstractBaseUser
) -> None:
    few = ["Harbour pilots inspect the quay.", "Lighthouse lanterns burn oil."]
    one = [f"The lighthouse of bay {n}." for n in range(12)]
    _load(space, staff, [*few, *one, "Nothing in common here."])

    result, ranked = _keyword(member, QUERY)

    assert len(ranked) == 3  # three words, two words, then any word
    assert _rows_read(ranked[-1]) == 14
    assert result.outcomes[0].result_count == 14
    assert {c.text for c in result.candidates[:2]} == set(few)


def test_a_hidden_passage_is_never_ranked_by_the_filter(
    space: Space, staff: AbstractBaseUser, member: AbstractBaseUser
) -> None:
    from knowledge.services import space_create

    hidden = space_create(name="Hidden", created_by=staff)
    vectors = np.random.default_rng(5).normal(size=(SHARED, 384)).tolist()
    texts = [f"Harbour pilots inspect the lanterns of pier {n}." for n in range(SHARED)]
    load_passages([hidden], staff, texts, vectors, get_embedding_provider().model_id)
    _load(space, staff, ["Harbour pilots inspect one lighthouse."])

    result, _ = _keyword(member, QUERY)

    assert [c.text for c in result.candidates] == ["Harbour pilots inspect one lighthouse."]


def test_a_retrieval_filters_by_the_scopes_ids_and_reads_no_permission_row(
    space: Space, staff: AbstractBaseUser, member: AbstractBaseUser
) -> None:
    from knowledge.services import space_create

    space_create(name="Hidden", created_by=staff)
    _load(space, staff, ["Harbour pilots inspect the lanterns.", "Lighthouse lanterns."])
    scope = access_scope_build(user=member)
    assert scope.space_ids == {space.pk}  # the hidden space is not in it

    with CaptureQueriesContext(connection) as queries:
        result = retrieve(scope=scope, query=QUERY, tools=("keyword_search",))

    statements = [q["sql"] for q in queries.captured_queries]
    assert [sql for sql in statements if "to_tsvector" in sql]  # the lexeme statement ran
    assert [sql for sql in statements if "ts_rank" in sql]
    assert not any("guardian" in sql for sql in statements)  # the scope's ids, read before
    assert len(result.candidates) == 2


@pytest.mark.parametrize(
    "query",
    [
        "the of and which",
        "",
        "¿?!",
        "pilot pilots piloting",
        "O'Neil's \\ lantern'; DROP --",
        "Do -a and --the inspect lanterns?",  # names whose words are all stop words
        "Is it_'%s'; DROP.table_x -- pilots?",
    ],
)
def test_odd_queries_are_answered_without_error(
    space: Space, staff: AbstractBaseUser, member: AbstractBaseUser, query: str
) -> None:
    _load(space, staff, ["Harbour pilots inspect the lanterns.", "O'Neil owns a lantern."])
    result, _ = _keyword(member, query)
    (outcome,) = result.outcomes
    assert outcome.state == "succeeded"
    assert outcome.code in {"matched", "no_relevant_hit"}


def test_query_lexemes_are_the_search_vectors_lexemes() -> None:
    assert query_lexemes("Which pilots, piloting the pilot boats, inspect?").lexemes == [
        "pilot",
        "boat",
        "inspect",
    ]
    assert query_lexemes("the of and").lexemes == []
    assert query_lexemes("").lexemes == []


def test_query_lexemes_carry_the_scopes_document_frequencies(
    space: Space, staff: AbstractBaseUser, member: AbstractBaseUser
) -> None:
    from knowledge.services import space_create

    other = space_create(name="Elsewhere", created_by=staff)
    vectors = np.random.default_rng(4).normal(size=(7, 384)).tolist()
    load_passages(
        [other],
        staff,
        [f"Pilot boats {n}." for n in range(7)],
        vectors,
        get_embedding_provider().model_id,
    )
    _load(space, staff, ["Harbour pilots inspect boats.", "Pilots rest.", "Nothing here."])

    counted = query_lexemes("pilots inspect lanterns", access_scope_build(user=member).space_ids)

    # the member sees only `space` (3 passages); the other space's 7 are not counted
    assert (counted.lexemes, counted.passages) == (["pilot", "inspect", "lantern"], 3)
    assert counted.passages_with == {"pilot": 2, "inspect": 1, "lantern": 0}
    # no space in scope: nothing counted
    assert query_lexemes("pilots").passages == 0


@pytest.mark.parametrize(
    ("rare", "common", "query", "levels"),
    [
        # "harbour" is in 25 of 1,525 passages (rare), the other words in 1,500 (common):
        # within the three-word level, the groups with "harbour" come first.
        (
            "Harbour pilots inspect berth {n}.",
            "Pilots inspect the lighthouse lanterns of cape {n}.",
            QUERY,
            0,
        ),
        # No passage has both words, "pilot" is in 25 passages, "lighthouse" in 1,500: in the
        # last level (after the two-word one), any rare word comes first.
        (
            "Harbour pilots of berth {n}.",
            "The lighthouse of cape {n}.",
            "pilots and lighthouses",
            1,
        ),
    ],
    ids=["coordination level", "any-word level"],
)
def test_passages_with_a_rare_word_are_ranked_before_those_with_common_words_only(
    space: Space, staff: AbstractBaseUser, member: AbstractBaseUser, rare, common, query, levels
) -> None:
    texts = [rare.format(n=n) for n in range(25)] + [common.format(n=n) for n in range(1500)]
    _load(space, staff, texts)

    result, ranked = _keyword(member, query)

    # The rare word's passages gave the 20 asked for: the common words' never ran.
    assert len(ranked) == levels + 1
    assert _rows_read(ranked[-1]) == 25  # not 1,525
    assert all(c.text.startswith(rare[:14]) for c in result.candidates)
    # Fewer passages with the rare word than asked for: the common words join.
    result, ranked = _keyword(member, query, limit=20)
    assert len(ranked) == levels + 2
    assert _rows_read(ranked[-1]) == 1525
    assert result.outcomes[0].result_count == 40


@pytest.mark.parametrize(
    ("name", "question"),
    [
        ("--pages", "Which pages does the --pages argument take?"),
        ("--pages", "Which pages does --PAGES take?"),  # case aside
        ("pdf_page_count", "Which pages does pdf_page_count take?"),
        ("pdfreader.pageRange", "Which pages does pdfreader.pageRange take?"),
    ],
)
def test_a_name_written_as_code_is_matched_verbatim_first(
    space: Space, staff: AbstractBaseUser, member: AbstractBaseUser, name, question
) -> None:
    # Stemmed, "--pages" is "page", which thirty passages say more often; verbatim, it is
    # in one, and that one comes first.
    crowd = [f"Report {n}: the pages, page ranges and page numbers of page {n}." for n in range(30)]
    held = f"{name} [list of entries]"
    _load(space, staff, [*crowd, held])
    hidden = space_create(name="Hidden", created_by=staff)
    hidden_text = [f"{name} in a space the reader cannot see."]
    load_passages([hidden], staff, hidden_text, [[0.1] * 384], get_embedding_provider().model_id)

    result, ranked = _keyword(member, question)

    assert result.candidates[0].text == held
    assert all(name not in c.text for c in result.candidates[1:])  # the hidden one is not found
    assert len(ranked) >= 2  # the verbatim statement, then the levels of words
    # Asked in plain words, the crowd comes first.
    result, _ = _keyword(member, question.replace(name, "it").replace(name.upper(), "it"))
    assert result.candidates[0].text != held


def test_the_verbatim_statement_ranks_at_most_named_scan_passages(
    space: Space, staff: AbstractBaseUser, member: AbstractBaseUser
) -> None:
    # A name every passage holds: the scan stops after NAMED_SCAN of them, not 250.
    _load(
        space, staff, [f"Use --pages on report {n} to print its page ranges." for n in range(250)]
    )

    result, ranked = _keyword(member, "Which pages does --pages print?")

    [named] = [sql for sql in ranked if "AS named" in sql]
    assert _rows_read(named) == NAMED_SCAN
    assert len(result.candidates) == 10
    assert all("--pages" in c.text for c in result.candidates)


WORDS = ["harbour", "pilot", "inspect", "lantern", "berth", "quay", "vessel", "anchor", "tide"]


def test_each_level_finds_exactly_the_passages_sharing_that_many_words(
    space: Space, staff: AbstractBaseUser, member: AbstractBaseUser
) -> None:
    """One GIN condition per driver word finds the same passages as every group of words
    on its own would: those sharing at least three (then two) of the first eight."""
    rng = np.random.default_rng(11)
    texts = [" ".join(rng.choice(WORDS, size=int(rng.integers(1, 6)))) + "." for _ in range(80)]
    _load(space, staff, texts)
    query = query_lexemes(" ".join(WORDS), access_scope_build(user=member).space_ids)
    first = set(query.lexemes[:8])
    assert len(query.lexemes) == 9

    three, two = _coordination_filters(query)  # nothing is common in 80 passages
    scope = Passage.objects.filter(space=space)
    shared = {
        pk: len(first & set(lexemes))
        for pk, lexemes in scope.annotate(
            lexemes=Func(F("search_vector"), function="tsvector_to_array")
        ).values_list("pk", "lexemes")
    }
    for condition, at_least in ((three, 3), (two, 2)):
        found = set(scope.filter(condition).values_list("pk", flat=True))
        assert found == {pk for pk, n in shared.items() if n >= at_least}
        assert found  # the corpus has such passages, or this proves nothing
    # six drivers for three shared words of eight, seven for two
    assert (len(three.tsqueries), len(two.tsqueries)) == (6, 7)


@pytest.mark.parametrize("lexeme", ["o'neil", "back\\slash", "plain", "''"])
def test_a_quoted_operand_means_its_lexeme_verbatim(lexeme: str) -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT array_to_tsvector(ARRAY[%s]) @@ %s::tsquery, "
            "array_to_tsvector(ARRAY['other']) @@ %s::tsquery",
            [lexeme, _quoted(lexeme), _quoted(lexeme)],
        )
        assert cursor.fetchone() == (True, False)


HYBRID = ("vector_search", "keyword_search")


def _fused(result) -> list[tuple[int, dict]]:
    return [(c.passage_id, c.contributions) for c in result.candidates]


@pytest.mark.django_db(transaction=True)
def test_hybrid_runs_the_keyword_channel_on_its_own_connection(
    space: Space, staff: AbstractBaseUser, member: AbstractBaseUser
) -> None:
    texts = [f"Harbour pilots inspect the lanterns of berth {n}." for n in range(30)]
    _load(space, staff, [*texts, "The lighthouse lanterns are inspected at dawn."])

    with CaptureQueriesContext(connection) as here:
        concurrent = retrieve(scope=access_scope_build(user=member), query=QUERY, tools=HYBRID)
    with override_settings(KOINON_RETRIEVAL_CONCURRENT=False):
        sequential = retrieve(scope=access_scope_build(user=member), query=QUERY, tools=HYBRID)

    # This thread ran the vector channel only; the keyword channel ran elsewhere ...
    assert not [q for q in here.captured_queries if "ts_rank" in q["sql"]]
    assert [q for q in here.captured_queries if "<=>" in q["sql"]]
    # ... and the answer is the same as one connection gives.
    assert [o.as_dict() for o in concurrent.outcomes] == [o.as_dict() for o in sequential.outcomes]
    assert _fused(concurrent) == _fused(sequential)
    assert concurrent.outcomes[1].code == "matched"


@pytest.mark.django_db(transaction=True)
def test_while_the_channel_thread_is_busy_the_caller_runs_the_keyword_channel(
    space: Space, staff: AbstractBaseUser, member: AbstractBaseUser
) -> None:
    _load(space, staff, ["Harbour pilots inspect the lanterns."])
    release = threading.Event()
    busy = CHANNEL_THREAD.borrow(release.wait, 30)  # another request's keyword channel
    assert busy is not None
    try:
        with CaptureQueriesContext(connection) as here:
            result = retrieve(scope=access_scope_build(user=member), query=QUERY, tools=HYBRID)
    finally:
        release.set()
    busy.result(timeout=30)
    assert [q for q in here.captured_queries if "ts_rank" in q["sql"]]  # not queued: here
    assert result.outcomes[1].code == "matched"
    # Free again: the next hybrid search borrows it.
    with CaptureQueriesContext(connection) as here:
        retrieve(scope=access_scope_build(user=member), query=QUERY, tools=HYBRID)
    assert not [q for q in here.captured_queries if "ts_rank" in q["sql"]]


@pytest.mark.django_db(transaction=True)
def test_a_dropped_connection_of_the_channel_thread_is_replaced(
    space: Space, staff: AbstractBaseUser, member: AbstractBaseUser
) -> None:
    _load(space, staff, ["Harbour pilots inspect the lanterns."])
    retrieve(scope=access_scope_build(user=member), query=QUERY, tools=HYBRID)

    def backend_pid() -> int:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            return cursor.fetchone()[0]

    before = CHANNEL_THREAD.submit(backend_pid).result()
    with connection.cursor() as cursor:  # as a restarted server or a proxy would
        cursor.execute("SELECT pg_terminate_backend(%s)", [before])

    result = retrieve(scope=access_scope_build(user=member), query=QUERY, tools=HYBRID)

    assert result.outcomes[1].code == "matched"
    assert CHANNEL_THREAD.submit(backend_pid).result() != before


@pytest.mark.django_db(transaction=True)
def test_a_failed_statement_on_a_sound_connection_is_not_run_again(
    space: Space, staff: AbstractBaseUser, member: AbstractBaseUser, monkeypatch
) -> None:
    from django.db import OperationalError

    from knowledge import retrieval

    _load(space, staff, ["Harbour pilots inspect the lanterns."])
    calls = []

    def failing(*args: object, **scope: object) -> None:
        calls.append(args)
        raise OperationalError("canceling statement due to statement timeout")

    monkeypatch.setattr(retrieval, "keyword_search", failing)
    with pytest.raises(OperationalError):
        CHANNEL_THREAD.submit(
            retrieval._keyword_in_thread, QUERY, 10, access_scope_build(user=member)
        ).result()
    assert len(calls) == 1  # the connection was sound: raised, not retried


def test_inside_a_transaction_both_channels_use_its_connection(
    space: Space, staff: AbstractBaseUser, member: AbstractBaseUser
) -> None:
    # Rows not yet committed: another connection could not see them.
    with transaction.atomic():
        _load(space, staff, ["Harbour pilots inspect the lanterns."])
        with CaptureQueriesContext(connection) as here:
            result = retrieve(scope=access_scope_build(user=member), query=QUERY, tools=HYBRID)
    assert [q for q in here.captured_queries if "ts_rank" in q["sql"]]
    assert result.outcomes[1].code == "matched"


def test_a_borrow_returns_once_the_channel_thread_has_begun(monkeypatch) -> None:
    from knowledge import retrieval

    monkeypatch.setattr(retrieval, "BEGIN_WAIT", 30)  # a slow machine still begins in time
    begun = threading.Event()
    for _ in range(20):  # without the wait the thread would still want the GIL held here
        begun.clear()
        future = CHANNEL_THREAD.borrow(begun.set)
        assert begun.is_set()
        future.result(timeout=30)


def test_a_borrow_waits_for_the_thread_to_begin_only_so_long(monkeypatch) -> None:
    from knowledge import retrieval

    monkeypatch.setattr(retrieval, "BEGIN_WAIT", 0.01)
    release, begun = threading.Event(), threading.Event()
    held = CHANNEL_THREAD.submit(release.wait, 30)  # the thread is held by queued work
    timer = threading.Timer(5, release.set)  # an unbounded wait would end only then
    timer.start()
    try:
        future = CHANNEL_THREAD.borrow(begun.set)
        assert future is not None
        assert not begun.is_set()  # returned before its function began
    finally:
        release.set()
        timer.cancel()
    held.result(timeout=30)
    future.result(timeout=30)
    assert begun.is_set()


def _submit_in_child(queue) -> None:
    queue.put(CHANNEL_THREAD.submit(lambda: "ran").result(timeout=10))


# Forking a process with threads is what this test is about (Celery's prefork pool does it).
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
def test_a_forked_child_gets_a_channel_thread_of_its_own() -> None:
    assert CHANNEL_THREAD.submit(lambda: "parent").result() == "parent"  # the thread exists
    context = multiprocessing.get_context("fork")  # as Celery's prefork pool does
    queue = context.Queue()
    child = context.Process(target=_submit_in_child, args=(queue,))
    child.start()
    child.join(30)
    assert child.exitcode == 0
    assert queue.get(timeout=1) == "ran"


def test_document_frequencies_count_visible_passages_only_in_one_statement(
    space: Space, staff: AbstractBaseUser, member: AbstractBaseUser, monkeypatch
) -> None:
    import knowledge.frequencies
    from knowledge.frequencies import document_frequencies
    from knowledge.services import space_create

    _load(space, staff, ["Harbour pilots inspect lanterns.", "Pilots rest.", "Quiet bay."])
    hidden = space_create(name="Hidden", created_by=staff)
    vectors = np.random.default_rng(7).normal(size=(5, 384)).tolist()
    load_passages([hidden], staff, ["Pilots of the hidden space."] * 5, vectors, "m")
    scope = access_scope_build(user=member)

    with CaptureQueriesContext(connection) as queries:
        counts, total = document_frequencies(
            scope=scope, words=["pilots", "lanterns", "pilots", "the", "zeppelin"]
        )
    assert len(queries) == 1
    assert counts == {"pilots": 2, "lanterns": 1, "the": 0, "zeppelin": 0}
    assert total == 3
    monkeypatch.setattr(knowledge.frequencies, "DOCUMENT_FREQUENCY_CAP", 1)
    assert document_frequencies(scope=access_scope_build(user=member), words=["pilots"]) == (
        {"pilots": 1},
        3,
    )
    # Someone who sees no space: nothing counts, and nothing fails.
    outsider = get_user_model().objects.create_user("nobody-here")
    assert document_frequencies(scope=access_scope_build(user=outsider), words=["pilots"]) == (
        {"pilots": 0},
        0,
    )
    assert document_frequencies(scope=access_scope_build(user=member), words=[]) == ({}, 3)
