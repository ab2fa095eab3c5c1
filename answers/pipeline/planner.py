"""Rule-based planning (the `extractive` provider's `plan`): standalone question,
1–3 searches, a comparison flag, and governed queries for questions about data."""

import re
from dataclasses import dataclass

from answers.judge.lexical import PLAN_STOPWORDS
from answers.pipeline.question_parts import searches_for
from answers.pipeline.restrictions import Restriction, restrictions_named, where_clause
from answers.pipeline.vocabulary import DatasetInfo, DatasetQuery, Plan, RestrictionRecord
from knowledge.normalise import normalised_words

COMPARISON = re.compile(r"\b(compare|comparison|versus|vs\.?|differ(s|ence)?|contrast)\b", re.I)
# Requests for a recursive (RLM) analysis across sources, which needs a generative model.
ANALYSIS = re.compile(r"\b(rlm|recursive analysis|analy[sz]e (all|every|across))\b", re.I)
AGGREGATES = (
    ("SUM", re.compile(r"\b(total|sum|overall)\b", re.I)),
    ("AVG", re.compile(r"\b(average|mean)\b", re.I)),
    ("COUNT", re.compile(r"\b(how many|number of|count)\b", re.I)),
    ("MAX", re.compile(r"\b(max(imum)?|highest|largest|biggest)\b", re.I)),
    ("MIN", re.compile(r"\b(min(imum)?|lowest|smallest)\b", re.I)),
)
NUMERIC_TYPES = ("INT", "BIGINT", "DOUBLE", "DECIMAL", "FLOAT", "REAL", "HUGEINT", "SMALLINT")
MAX_DATASET_QUERIES = 3


# Follow-ups (SPEC §5 planner): a question is rewritten from the conversation only when it
# refers back or names no subject of its own; a complete question is planned alone.
CONNECTIVE = re.compile(r"^\s*(?:and|also|but|so|then|what about|how about)\b[\s,]*", re.I)
REFERS_BACK = re.compile(r"\b(?:it|its|they|them|their|theirs|those|these|the same)\b", re.I)
DEMONSTRATIVE = re.compile(r"\b(?:that|this)\b", re.I)
QUESTION_WORDS = frozenset(["who", "whom", "whose", "what", "when", "where", "which", "why", "how"])
# Words that are never the subject a follow-up refers to (auxiliaries, quantifiers …).
FUNCTION_WORDS = PLAN_STOPWORDS | frozenset(
    [
        "am",
        "been",
        "being",
        "had",
        "may",
        "might",
        "must",
        "shall",
        "not",
        "no",
        "if",
        "than",
        "then",
        "so",
        "also",
        "but",
        "all",
        "any",
        "some",
        "each",
        "same",
        "long",
        "often",
        "old",
        "far",
        "else",
        "just",
        "only",
        "please",
    ]
)
PREPOSITIONS = frozenset(
    [
        "for",
        "in",
        "of",
        "on",
        "at",
        "by",
        "from",
        "with",
        "during",
        "over",
        "under",
        "to",
        "before",
        "after",
        "since",
        "per",
        "without",
        "between",
    ]
)
TOKEN = re.compile(r"\w+(?:[-'’]\w+)*")


def _is_content(token: str) -> bool:
    words = normalised_words(token)
    return bool(words) and all(word not in FUNCTION_WORDS for word in words)


def subject_span(question: str) -> tuple[int, int] | None:
    """Where the question names its subject, by rule: the last run of content words, less
    a verb right after a leading question word ("Who *owns* service reviews?" → "service
    reviews", "What is our retention period?" → "retention period"). None: no subject."""
    tokens = list(TOKEN.finditer(question))
    runs: list[list[re.Match[str]]] = []
    previous = -2
    for index, token in enumerate(tokens):
        if not _is_content(token.group()):
            continue
        if index == previous + 1 and runs:
            runs[-1].append(token)
        else:
            runs.append([token])
        previous = index
    leading = tokens[0].group().casefold() if tokens else ""
    for run in runs:
        if leading in QUESTION_WORDS and len(tokens) > 1 and run[0] is tokens[1]:
            run.pop(0)  # "who owns …": the verb of the question word
    runs = [run for run in runs if run]
    if not runs:
        return None
    return runs[-1][0].start(), runs[-1][-1].end()


def refers_back(question: str) -> bool:
    """A question that needs the earlier turn: it starts with "and …", "what about …" or
    refers back (it, they, those, the same, "that" standing alone), or names no subject."""
    if CONNECTIVE.match(question) or REFERS_BACK.search(question):
        return True
    if any(_pointing(question, match) for match in DEMONSTRATIVE.finditer(question)):
        return True
    return subject_span(question) is None


def _pointing(text: str, match: re.Match[str]) -> bool:
    """ "that"/"this" pointing back ("who approved that?", "when was this decided?"), not
    a relative clause ("the policy that applies")."""
    before = TOKEN.findall(text[: match.start()])
    alone = not text[match.end() :].strip(" ?.!")
    return alone or not before or not _is_content(before[-1])


def _sentence(text: str) -> str:
    text = " ".join(text.split())
    return text[:1].upper() + text[1:] if text else text


def rewrite(question: str, previous: str) -> str | None:
    """The follow-up `question` rewritten with the subject of the `previous` (standalone)
    question, by rule; None when the previous question names no subject.

    "And backups?" / "What about backups?" → the previous question about backups;
    "And for customer zeta?" → the previous question, for customer zeta;
    "And who approves them?" → "Who approves service reviews?";
    "Who approves?" → "Who approves service reviews?"."""
    span = subject_span(previous)
    if span is None:
        return None
    subject = previous[span[0] : span[1]]
    rest = CONNECTIVE.sub("", question, count=1).strip()
    words = [token.casefold() for token in TOKEN.findall(rest)]
    if rest != question.strip() and words and words[0] not in QUESTION_WORDS:
        if REFERS_BACK.search(rest):
            rest = REFERS_BACK.sub(subject, rest, count=1)
        stem = previous.rstrip(" ?.!")
        addition = rest.rstrip(" ?.!")
        if words[0] in PREPOSITIONS:  # "and for customer zeta?" → the previous, for zeta
            return _sentence(f"{stem} {addition}?")
        # "and backups?" → the previous question about backups
        return _sentence(f"{previous[: span[0]]}{addition}{previous[span[1] :]}")
    if REFERS_BACK.search(rest):
        return _sentence(REFERS_BACK.sub(subject, rest, count=1))
    for match in DEMONSTRATIVE.finditer(rest):
        if _pointing(rest, match):
            return _sentence(f"{rest[: match.start()]}{subject}{rest[match.end() :]}")
    if subject_span(rest) is None:
        end = len(rest.rstrip(" ?.!"))
        return _sentence(f"{rest[:end]} {subject}{rest[end:] or '?'}")
    return None


def standalone_question(question: str, history: list[str]) -> tuple[str, bool]:
    """The question to search for, and whether it was rewritten from the conversation.
    Earlier questions are made standalone first, so that a chain of follow-ups keeps its
    subject. History never adds facts: only words to search with."""
    if not history:
        return question, False
    previous, _ = standalone_question(history[-1], history[:-1])
    if not refers_back(question):
        return question, False
    rewritten = rewrite(question, previous)
    if rewritten is None or rewritten.casefold() == question.casefold():
        return question, False
    return rewritten, True


def asked_parts(question: str, searches: list[str]) -> list[str]:
    """Per part of a rewritten question, the part as typed ("" where the same): pairwise
    when the typed question has as many parts, else the whole typed question."""
    typed = searches_for(question)
    if len(typed) != len(searches):
        typed = [question] * len(searches)
    return ["" if a.casefold() == b.casefold() else a for a, b in zip(typed, searches, strict=True)]


# Governed values: each part's aggregate over a column it names, with the restrictions it
# names (answers.pipeline.restrictions).


@dataclass(frozen=True)
class FoundQuery:
    """A governed query found in some words, with the aggregate's pattern and the column
    it was built from (to find the part of the question that asks for it)."""

    dataset_id: int
    snapshot_id: int
    sql: str
    restrictions: list[RestrictionRecord]
    pattern: str
    column: str

    def for_part(self, part: int | None) -> DatasetQuery:
        return {
            "dataset_id": self.dataset_id,
            "snapshot_id": self.snapshot_id,
            "sql": self.sql,
            "restrictions": self.restrictions,
            "part": part,
        }


def dataset_queries_for(question: str, datasets: list[DatasetInfo]) -> list[FoundQuery]:
    """Map "total amount for customer zeta" to SELECT SUM(amount) FROM orders WHERE
    customer = 'zeta', by rule. Each query keeps the aggregate's pattern and column (for
    attribution) and the restrictions it was built with."""
    words = set(normalised_words(question))
    queries = []
    for dataset in datasets:
        restrictions: list[Restriction] | None = None
        for function, pattern in AGGREGATES:
            if not pattern.search(question):
                continue
            for column in dataset.columns:
                numeric = column["type"].upper().startswith(NUMERIC_TYPES)
                if column["name"].lower() in words and (numeric or function == "COUNT"):
                    if restrictions is None:
                        restrictions = restrictions_named(question, dataset)
                    expression = f"{function}({_ident(column['name'])})"
                    # Identifiers are quoted and values escaped; the governed engine still
                    # parses and allow-lists the statement before it runs.
                    sql = f"SELECT {expression} FROM {_ident(dataset.table)}"  # noqa: S608
                    queries.append(
                        FoundQuery(
                            dataset_id=dataset.dataset_id,
                            snapshot_id=dataset.snapshot_id,
                            sql=sql + where_clause(restrictions),
                            restrictions=[r.as_dict() for r in restrictions],
                            pattern=pattern.pattern,
                            column=column["name"].lower(),
                        )
                    )
    return queries


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def planned_queries(
    searches: list[str], standalone: str, datasets: list[DatasetInfo]
) -> list[DatasetQuery]:
    """The governed queries of a plan, each with the part it answers: planned from each
    part's own words (its restrictions are that part's), else from the whole question for
    no single part (`part` None)."""
    if not datasets:
        return []
    queries = [
        found.for_part(part)
        for part, search in enumerate(searches)
        for found in dataset_queries_for(search, datasets)
    ]
    if not queries:
        queries = [
            found.for_part(_part_of(found, searches))
            for found in dataset_queries_for(standalone, datasets)
        ]
    return queries[:MAX_DATASET_QUERIES]


def _part_of(found: FoundQuery, searches: list[str]) -> int | None:
    """The first part that asks for the query's aggregate over its column (None: no single
    part, the whole question)."""
    return next(
        (
            index
            for index, search in enumerate(searches)
            if re.search(found.pattern, search, re.I) and found.column in normalised_words(search)
        ),
        None,
    )


def plan_question(*, question: str, history: list[str], datasets: list[DatasetInfo]) -> Plan:
    standalone, rewritten = standalone_question(question, history)
    searches = searches_for(standalone)
    return Plan(
        standalone=standalone,
        searches=searches,
        comparison=bool(COMPARISON.search(question)),
        analysis=bool(ANALYSIS.search(question)),
        rewritten=rewritten,
        dataset_queries=planned_queries(searches, standalone, datasets),
        asked=asked_parts(question, searches) if rewritten else [],
        question=question,
    )
