"""The keyword channel ranks a bounded candidate set (issue 16): the passages with one of
the question's rarest words, as many words (rarest first) as the planner's element
statistics say fit in about KEYWORD_CANDIDATES passages, found through the GIN index."""

import pytest
from django.db import connection

from knowledge import retrieval
from knowledge.models import Passage
from knowledge.retrieval import KEYWORD_SEARCH, candidate_words, passages_visible_to, retrieve
from tests.answers.conftest import ingest

pytestmark = pytest.mark.django_db

SECTIONS = 40


@pytest.fixture
def corpus(space, owner, monkeypatch):
    """Every passage says "maintenance"; one of them also says "zeppelin". With a budget
    of 5 candidates, only the rare word fits."""
    monkeypatch.setattr(retrieval, "KEYWORD_CANDIDATES", 5)
    parts = []
    for index in range(SECTIONS):
        extra = " The zeppelin hangar is inspected too." if index == 17 else ""
        parts.append(f"## Section {index}\n\nRoutine maintenance of line {index} happens on "
                     f"weekday {index % 5} in building {index}.{extra}\n")  # fmt: skip
    ingest(owner, space, "maintenance.md", "\n".join(parts))
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE knowledge_passage")
    retrieval._stats["at"] = -retrieval.STATS_SECONDS  # read the fresh statistics
    yield space
    retrieval._stats["at"] = -retrieval.STATS_SECONDS


def test_the_statistics_choose_the_rare_word_for_the_candidates(corpus):
    assert Passage.objects.count() >= SECTIONS
    assert retrieval.lexeme_statistics()["rows"] >= SECTIONS
    assert candidate_words(["maintenance", "zeppelin"]) == ["zeppelin"]


def test_only_the_rare_words_passages_are_ranked_and_the_right_one_wins(corpus, member):
    result = retrieve(user=member, query="maintenance zeppelin", tools=(KEYWORD_SEARCH,))
    assert [o.code for o in result.outcomes] == ["matched"]
    assert len(result.candidates) == 1
    assert "zeppelin" in result.candidates[0].text


def test_the_candidate_set_is_bounded_even_for_common_words(corpus, member, monkeypatch):
    monkeypatch.setattr(retrieval, "KEYWORD_CANDIDATES_MAX", 3)
    scope = passages_visible_to(user=member)
    # Only common words: the rarest one is still used, and the set is capped.
    scored, outcome = retrieval.keyword_search(scope, "routine maintenance", limit=10)
    assert outcome.code == "matched"
    assert len(scored) == 3


def test_without_statistics_every_word_is_used(space, owner, member, monkeypatch):
    ingest(owner, space, "one.txt", "The zeppelin hangar is inspected every spring.")
    never_analysed = {"at": 0.0, "frequencies": {}, "floor": None, "rows": 0}
    monkeypatch.setattr(retrieval, "lexeme_statistics", lambda: never_analysed)
    assert candidate_words(["zeppelin", "hangar"]) == ["zeppelin", "hangar"]
    result = retrieve(user=member, query="zeppelin hangar", tools=(KEYWORD_SEARCH,))
    assert len(result.candidates) == 1
