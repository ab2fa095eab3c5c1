"""The keyword channel ranks a bounded candidate set (issue 16): the passages with one of
the question's rarer words, found through the GIN index; a word is common when the
planner's element statistics of the search vectors say so."""

import pytest
from django.db import connection

from knowledge import retrieval
from knowledge.models import Passage
from knowledge.retrieval import KEYWORD_SEARCH, passages_visible_to, rare_words, retrieve
from tests.answers.conftest import ingest

pytestmark = pytest.mark.django_db

SECTIONS = 40


@pytest.fixture
def corpus(space, owner, monkeypatch):
    """Every passage says "maintenance"; one of them also says "zeppelin" (1 in 40: rare
    at this corpus size once "common" is a fifth of the passages)."""
    monkeypatch.setattr(retrieval, "COMMON_FRACTION", 0.2)
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


def test_the_statistics_tell_common_words_from_rare_ones(corpus):
    assert Passage.objects.count() >= SECTIONS
    assert rare_words(["maintenance", "zeppelin"]) == ["zeppelin"]


def test_only_passages_with_a_rare_word_are_ranked_and_the_right_one_wins(corpus, member):
    result = retrieve(user=member, query="zeppelin maintenance", tools=(KEYWORD_SEARCH,))
    assert [o.code for o in result.outcomes] == ["matched"]
    assert len(result.candidates) == 1  # only the zeppelin passage was a candidate
    assert "zeppelin" in result.candidates[0].text


def test_the_candidate_set_is_bounded(corpus, member, monkeypatch):
    monkeypatch.setattr(retrieval, "KEYWORD_CANDIDATES", 3)
    scope = passages_visible_to(user=member)
    # Only common words: the passages with all of them, at most KEYWORD_CANDIDATES.
    scored, outcome = retrieval.keyword_search(scope, "routine maintenance", limit=10)
    assert outcome.code == "matched"
    assert len(scored) == 3


def test_without_statistics_every_word_counts_as_rare(space, owner, member, monkeypatch):
    ingest(owner, space, "one.txt", "The zeppelin hangar is inspected every spring.")
    monkeypatch.setattr(retrieval, "lexeme_frequencies", dict)  # a corpus never analysed
    assert rare_words(["zeppelin", "hangar"]) == ["zeppelin", "hangar"]
    result = retrieve(user=member, query="zeppelin hangar", tools=(KEYWORD_SEARCH,))
    assert len(result.candidates) == 1
