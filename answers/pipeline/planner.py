"""Rule-based planning (the `extractive` provider's `plan`): standalone question,
1–3 searches, a comparison flag, and governed queries for questions about data."""

import re
from dataclasses import asdict, dataclass, field

from knowledge.normalise import normalised_words

STOPWORDS = frozenset(
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
FOLLOW_UP = re.compile(
    r"^(and|also|what about|how about|then|so)\b|\b(it|its|they|them|that|this)\b"
)
COMPARISON = re.compile(r"\b(compare|comparison|versus|vs\.?|differ(s|ence)?|contrast)\b", re.I)
# Requests for a recursive (RLM) analysis across sources, which needs a generative model.
ANALYSIS = re.compile(r"\b(rlm|recursive analysis|analy[sz]e (all|every|across))\b", re.I)
SPLIT = re.compile(r"\s*(?:[;?]|,\s*and\b|,|\band\b)\s*", re.I)
AGGREGATES = (
    ("SUM", re.compile(r"\b(total|sum|overall)\b", re.I)),
    ("AVG", re.compile(r"\b(average|mean)\b", re.I)),
    ("COUNT", re.compile(r"\b(how many|number of|count)\b", re.I)),
    ("MAX", re.compile(r"\b(max(imum)?|highest|largest|biggest)\b", re.I)),
    ("MIN", re.compile(r"\b(min(imum)?|lowest|smallest)\b", re.I)),
)
NUMERIC_TYPES = ("INT", "BIGINT", "DOUBLE", "DECIMAL", "FLOAT", "REAL", "HUGEINT", "SMALLINT")
QUOTED_VALUE = re.compile(r"[\"“']([^\"”']{1,80})[\"”']")


@dataclass(frozen=True)
class DatasetInfo:
    dataset_id: int
    snapshot_id: int
    name: str
    table: str
    columns: list[dict]  # [{"name", "type"}]


@dataclass
class Plan:
    standalone: str
    searches: list[str]
    comparison: bool = False
    analysis: bool = False
    rewritten: bool = False
    dataset_queries: list[dict] = field(default_factory=list)
    memory: list[dict] = field(default_factory=list)  # entries that steered the searches

    def as_dict(self) -> dict:
        return asdict(self)


def content_words(text: str) -> list[str]:
    return [word for word in normalised_words(text) if word not in STOPWORDS]


def standalone_question(question: str, history: list[str]) -> tuple[str, bool]:
    """Rewrite a follow-up from the previous question, by rule. History never adds facts:
    it only adds words to search with."""
    if not history:
        return question, False
    short = len(content_words(question)) < 3
    if short or FOLLOW_UP.search(question.lower()):
        return f"{history[-1].rstrip('?. ')} — {question}", True
    return question, False


def searches_for(question: str) -> list[str]:
    parts = [part for part in SPLIT.split(question) if len(content_words(part)) >= 2]
    searches = parts[:3] if len(parts) > 1 else [question]
    return searches


def dataset_queries_for(question: str, datasets: list[DatasetInfo]) -> list[dict]:
    """Map "total amount of invoices" to SELECT SUM(amount) FROM orders, by rule."""
    words = set(normalised_words(question))
    queries = []
    for dataset in datasets:
        for function, pattern in AGGREGATES:
            if not pattern.search(question):
                continue
            for column in dataset.columns:
                numeric = column["type"].upper().startswith(NUMERIC_TYPES)
                if column["name"].lower() in words and (numeric or function == "COUNT"):
                    expression = f"{function}({_ident(column['name'])})"
                    # Identifiers are quoted and the value escaped; the governed engine
                    # still parses and allow-lists the statement before it runs.
                    sql = f"SELECT {expression} FROM {_ident(dataset.table)}"  # noqa: S608
                    sql += _filter(question, dataset)
                    queries.append(
                        {
                            "dataset_id": dataset.dataset_id,
                            "snapshot_id": dataset.snapshot_id,
                            "sql": sql,
                            "pattern": pattern.pattern,
                            "column": column["name"].lower(),
                        }
                    )
    return queries[:3]


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _filter(question: str, dataset: DatasetInfo) -> str:
    """A quoted value in the question filters the first text column it names."""
    match = QUOTED_VALUE.search(question)
    if not match:
        return ""
    words = set(normalised_words(question))
    for column in dataset.columns:
        if column["name"].lower() in words and column["type"].upper().startswith("VARCHAR"):
            value = match.group(1).replace("'", "''")
            return f" WHERE {_ident(column['name'])} = '{value}'"
    return ""


def _attributed(queries: list[dict], searches: list[str]) -> list[dict]:
    """Each governed query with the part of the question it answers: the first search that
    asks for its aggregate over its column (None: no single part, the whole question)."""
    attributed = []
    for query in queries:
        pattern, column = query.pop("pattern"), query.pop("column")
        part = next(
            (
                index
                for index, search in enumerate(searches)
                if re.search(pattern, search, re.I) and column in normalised_words(search)
            ),
            None,
        )
        attributed.append({**query, "part": part})
    return attributed


def plan_question(*, question: str, history: list[str], datasets: list[DatasetInfo]) -> Plan:
    standalone, rewritten = standalone_question(question, history)
    searches = searches_for(standalone)
    return Plan(
        standalone=standalone,
        searches=searches,
        comparison=bool(COMPARISON.search(question)),
        analysis=bool(ANALYSIS.search(question)),
        rewritten=rewritten,
        dataset_queries=_attributed(dataset_queries_for(standalone, datasets), searches),
    )
