"""What the judge measures about a (question part, sentence) pair, besides the
cross-encoder: IDF-weighted stem coverage, whether the sentence says anything the question
does not, and answer-type agreement (a "when" question wants a date, "how many" a number,
"who" a name). Nothing here imports Django.
"""

import math
import re
from dataclasses import dataclass

from answers.judge.lexical import TermWeights, content_stems, coverage, stem

MONTHS = "january february march april may june july august september october november december"
_YEAR = re.compile(r"\b(1[0-9]{3}|20[0-9]{2})s?\b")
_DATE_WORDS = re.compile(
    rf"\b({MONTHS.replace(' ', '|')}|century|centuries|decade|bc|ad|bce|ce)\b", re.I
)
_DURATION = re.compile(
    r"\b(seconds?|minutes?|hours?|days?|weeks?|months?|years?|nights?|quarters?)\b", re.I
)
_NUMBER = re.compile(
    r"\d|\b(one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|twenty|thirty|"
    r"forty|fifty|hundred|thousand|million|billion|dozen|half|percent|once|twice)\b",
    re.I,
)
_CAPITALISED = re.compile(r"(?<![\w'’])[A-Z][\w'’\-]+")

QUESTION_TYPES = (
    ("date", re.compile(r"\b(when|what (year|date|day|month|time|century|decade)|which year)\b")),
    (
        "duration",
        re.compile(
            r"\b(how long|(period|duration|term|length|deadline|interval|frequency)\b(?!.*\bof\b))"
        ),
    ),
    (
        "number",
        re.compile(
            r"\b(how (many|much|long|old|far|big|tall|high|large|often|fast)|what (number|"
            r"percentage|amount|size|age|population|rate|price|cost))\b"
        ),
    ),
    ("person", re.compile(r"\b(who|whom|whose)\b")),
    ("place", re.compile(r"\b(where|what (country|city|state|place|region|continent))\b")),
)

# Words that name what is asked for rather than what it is about: "what is the retention
# period" is answered by "ten years", which never says "period".
TARGET_WORDS = {
    "date": {"date", "year", "day", "month", "time", "century", "decade"},
    "duration": {
        "period",
        "duration",
        "term",
        "length",
        "long",
        "deadline",
        "interval",
        "frequency",
        "time",
    },
    "number": {
        "number",
        "amount",
        "count",
        "total",
        "many",
        "much",
        "size",
        "price",
        "cost",
        "rate",
        "percentage",
        "age",
        "population",
        "long",
        "old",
        "far",
    },
    "person": {"name", "person", "people"},
    "place": {"place", "location", "country", "city", "state", "region", "continent"},
}
# Who-questions in an organisation are often answered by a team or a role, not a name.
_ROLES = re.compile(
    r"\b(team|department|office|committee|board|group|unit|division|council|manager|director|"
    r"officer|lead|owner|head|staff|administrator|engineer|chair|president)s?\b",
    re.I,
)

FEATURE_NAMES = (
    "coverage",  # IDF-weighted share of the part's stems in the sentence and its context
    "novelty",  # share of the sentence's stems not in the part: it adds something
    "type_match",  # the part's answer type is known and the sentence has such a token
    "type_miss",  # the part's answer type is known and the sentence has none
    "log_words",  # length of the sentence
    "missing",  # the heaviest of the part's stems the sentence lacks, relative to the heaviest
    "own_coverage",  # as coverage, the sentence's own words only (no title or headings)
    "complete",  # every stem of the part in the sentence itself, plus more, of the asked type
)


def question_type(question: str) -> str | None:
    lowered = question.casefold()
    for name, pattern in QUESTION_TYPES:
        if pattern.search(lowered):
            return name
    return None


def _new_names(sentence: str, question: str) -> bool:
    asked = {word.casefold() for word in _CAPITALISED.findall(question)}
    names = _CAPITALISED.findall(sentence)
    # The sentence's first word is capitalised anyway; it counts only if another follows.
    candidates = names[1:] if names and sentence.lstrip().startswith(names[0]) else names
    return any(name.casefold() not in asked for name in candidates)


def type_agrees(kind: str, sentence: str, question: str) -> bool:
    if kind == "date":
        return bool(_YEAR.search(sentence) or _DATE_WORDS.search(sentence))
    if kind == "number":
        return bool(_NUMBER.search(sentence) or _DURATION.search(sentence))
    if kind == "duration":
        return bool(_DURATION.search(sentence))
    if kind == "person":
        return _new_names(sentence, question) or bool(_ROLES.search(sentence))
    return _new_names(sentence, question)


@dataclass(frozen=True)
class JudgeItem:
    """One question to the judge: does `quote` answer `part`? `context` is where the quote
    stands (document title, heading path) and `before` the sentence just before it: they
    tell what the sentence is about, and they are never quoted."""

    part: str
    quote: str
    context: str = ""
    before: str = ""
    # The whole passage the quote stands in: the paragraph judge reads it (the quote alone
    # where it is not known).
    passage: str = ""


@dataclass(frozen=True)
class PairFeatures:
    values: tuple[float, ...]

    @classmethod
    def of(cls, item: JudgeItem, weights: TermWeights) -> "PairFeatures":
        part, sentence = item.part, item.quote
        kind = question_type(part)
        targets = {stem(word) for word in TARGET_WORDS.get(kind or "", ())}
        part_stems = [s for s in content_stems(part) if s not in targets]
        sentence_stems = content_stems(sentence)
        in_context = set(sentence_stems) | set(content_stems(item.context))
        cover = coverage(part_stems, in_context, weights)
        new = [s for s in sentence_stems if s not in set(part_stems)]
        novelty = len(new) / len(sentence_stems) if sentence_stems else 0.0
        match = kind is not None and type_agrees(kind, sentence, part)
        miss = kind is not None and not match
        words = max(1, len(sentence.split()))
        heaviest = max((weights.weight(s) for s in part_stems), default=0.0)
        lacking = max((weights.weight(s) for s in part_stems if s not in in_context), default=0.0)
        missing = lacking / heaviest if heaviest else 0.0
        own = coverage(part_stems, set(sentence_stems), weights)
        complete = bool(part_stems) and own >= 0.999 and novelty > 0 and not miss
        return cls(
            (
                cover,
                novelty,
                float(match),
                float(miss),
                math.log(words),
                missing,
                own,
                float(complete),
            )
        )
