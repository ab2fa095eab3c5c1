"""Lexical matching on stems with IDF weights: "invoices"/"invoice" and "amounts"/"amount"
are the same word, and a rare word ("Australia") counts for more than a common one
("capital"). Nothing here imports Django.

Stems come from the Snowball English stemmer (Porter2), the algorithm behind PostgreSQL's
`english` text search dictionary, so the stems here and the lexemes of the passages'
search vectors agree.
"""

import math
from collections.abc import Iterable, Mapping
from functools import lru_cache

import snowballstemmer

from knowledge.normalise import normalised_words

# Question and function words: they say what is asked, not what it is about.
STOPWORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "been",
        "being",
        "by",
        "did",
        "do",
        "does",
        "for",
        "from",
        "had",
        "has",
        "have",
        "how",
        "i",
        "in",
        "into",
        "is",
        "it",
        "its",
        "me",
        "my",
        "of",
        "on",
        "or",
        "our",
        "so",
        "than",
        "that",
        "the",
        "their",
        "them",
        "then",
        "there",
        "these",
        "they",
        "this",
        "those",
        "to",
        "was",
        "we",
        "were",
        "what",
        "when",
        "where",
        "which",
        "who",
        "whom",
        "whose",
        "why",
        "will",
        "with",
        "you",
        "your",
        "about",
        "tell",
        "can",
        "could",
        "should",
        "would",
        "much",
        "many",
        "also",
        "any",
        "some",
        "such",
        "not",
        "no",
        "nor",
        "own",
        "same",
        "very",
        "just",
        "only",
        "over",
        "under",
        "again",
        "further",
        "once",
        "here",
        "all",
        "both",
        "each",
        "few",
        "more",
        "most",
        "other",
        "own",
        "s",
        "t",
        "don",
        "doesn",
        "isn",
        "wasn",
        "aren",
        "weren",
        "if",
        "but",
        "because",
        "until",
        "while",
        "during",
        "before",
        "after",
        "above",
        "below",
        "up",
        "down",
        "out",
        "off",
        "get",
        "got",
        "name",
        "named",
        "called",
    ]
)

_stemmer = snowballstemmer.stemmer("english")


@lru_cache(maxsize=65536)
def stem(word: str) -> str:
    return _stemmer.stemWord(word)


# Auxiliaries, as a regular-expression alternation: they open a yes/no question
# (answers.pipeline.answer_type) and a question of its own after a comma
# (answers.pipeline.question_parts).
AUXILIARIES = (
    r"is|are|was|were|do|does|did|can|could|will|would|should|shall|may|must|has|have|had|"
    r"isn't|aren't|doesn't|don't|didn't|can't|won't"
)

# The planner's stop list, shorter than the judge's (`STOPWORDS`): a part of a question
# counts as a search, and a search is broadened, with words such as "not", "before" or
# "more" still counted. Passed to the one `content_words`.
PLAN_STOPWORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "by",
        "did",
        "do",
        "does",
        "for",
        "from",
        "has",
        "have",
        "how",
        "i",
        "in",
        "is",
        "it",
        "its",
        "me",
        "my",
        "of",
        "on",
        "or",
        "our",
        "the",
        "their",
        "them",
        "they",
        "this",
        "to",
        "was",
        "we",
        "were",
        "what",
        "when",
        "where",
        "which",
        "who",
        "whom",
        "why",
        "will",
        "with",
        "you",
        "your",
        "about",
        "tell",
        "there",
        "that",
        "these",
        "those",
        "can",
        "could",
        "should",
        "would",
        "much",
        "many",
    ]
)


def content_words(text: str, *, stopwords: frozenset[str] = STOPWORDS) -> list[str]:
    """Normalised words of the text that are not in `stopwords`, in order (repeats kept).

    The one content-word rule of the app. The default list is the judge's: its weights
    were fitted on features read with it, so it changes only with a refit. The planner
    passes its own, shorter list (`PLAN_STOPWORDS`)."""
    return [word for word in normalised_words(text) if word not in stopwords]


def content_stems(text: str) -> list[str]:
    return list(dict.fromkeys(stem(word) for word in content_words(text)))


def idf(document_frequency: int, documents: int) -> float:
    """Smoothed inverse document frequency, always positive."""
    return math.log((documents + 1) / (document_frequency + 0.5)) + 1.0


class TermWeights:
    """IDF per stem for one corpus: `documents` units, `frequencies` stem → units with it.

    An unknown stem (not in the corpus at all) gets the highest weight: it is rare there.
    """

    def __init__(self, frequencies: Mapping[str, int], documents: int) -> None:
        self.frequencies = dict(frequencies)
        self.documents = max(documents, 1)

    def weight(self, stem_: str) -> float:
        return idf(self.frequencies.get(stem_, 0), self.documents)

    @classmethod
    def uniform(cls) -> "TermWeights":
        return cls({}, 1)

    @classmethod
    def from_texts(cls, texts: Iterable[str]) -> "TermWeights":
        frequencies: dict[str, int] = {}
        count = 0
        for text in texts:
            count += 1
            for stem_ in set(content_stems(text)):
                frequencies[stem_] = frequencies.get(stem_, 0) + 1
        return cls(frequencies, count)


def coverage(query_stems: list[str], sentence_stems: set[str], weights: TermWeights) -> float:
    """The IDF-weighted share of the query's stems that the sentence contains (0..1)."""
    total = sum(weights.weight(s) for s in query_stems)
    if not total:
        return 0.0
    return sum(weights.weight(s) for s in query_stems if s in sentence_stems) / total
