"""How a question splits into the parts searched for and judged on their own: at most three,
each with at least two content words, else the whole question. Pure; the rule planner plans
with it and the tools reread a plan with it (`tools.restrictions_missing`).

A part is a question of its own: one ends at "?" or ";", or where a comma or "and" is
followed by a question word ("Who owns service reviews, and what currency is the invoice
dataset in?"). A comma or "and" inside one question does not split it: "the capital of
Trinidad and Tobago", "launched on June 16, 2015, at Trump Tower", "Which band has more
members, Kitchens of Distinction or Royal Blood?" — a fragment judged on its own is
answered by any sentence about it, and an answer to a fragment is no answer (issue 47).
Nor does anything inside quotation marks ("the author of "Portraits and Prayers"").

A question that ends by asking the same of two things ("What sport is played by both
Justin Gimelstob and Angelique Kerber?") is asked of each ("What sport is played by Justin
Gimelstob", "… by Angelique Kerber"): a sentence rarely names both, and the answer needs
each of them found."""

import re

from answers.judge.lexical import AUXILIARIES, PLAN_STOPWORDS, content_words

_PREPOSITION = r"(?:(?:in|on|at|from|for|to|by|with|since|until|of|about)\s+)?"
_AUXILIARY = r"(?:" + AUXILIARIES + r")\b"
# After "and": any question word. After a bare comma only a question word in a question's
# own order: "what", "how", "why"; "when"/"where" before an auxiliary ("…, where is it
# kept?"); "which" before a noun and an auxiliary ("…, which currency are amounts stated
# in?"). A relative clause is one question with what it follows: "the charter, which was
# signed …", "in 1990, when the war ended, …", "the band, whose album …", "the owner, who …".
_AFTER_AND = _PREPOSITION + r"(?:what|how|why|who|whom|whose|when|where|which)\b"
_AFTER_COMMA = (
    _PREPOSITION + r"(?:what|how|why)\b"
    r"|"
    + _PREPOSITION
    + r"(?:when|where)\s+"
    + _AUXILIARY
    + r"|"
    + _PREPOSITION
    + r"which\s+(?!"
    + _AUXILIARY
    + r")\w+(?:\s+\w+)?\s+"
    + _AUXILIARY
)
SPLIT = re.compile(
    r"\s*(?:[;?]|,?\s*\band\s+(?=" + _AFTER_AND + r")|,\s*(?=" + _AFTER_COMMA + r"))\s*",
    re.I,
)
# Quoted text (straight or curly double quotes, guillemets) is a name, never a boundary.
_QUOTED = re.compile(r"\"[^\"]*\"|“[^”]*”|«[^»]*»")


def _masked(question: str) -> str:
    """The question with its quoted text blanked out, every offset kept."""
    return _QUOTED.sub(lambda m: "x" * len(m.group()), question)


def question_parts(question: str) -> list[str]:
    """The question cut at every boundary between questions of its own (none inside
    quotation marks), in order; empty pieces included."""
    masked = _masked(question)
    parts, start = [], 0
    for match in SPLIT.finditer(masked):
        parts.append(question[start : match.start()])
        start = match.end()
    parts.append(question[start:])
    return parts


# "… both A and B?" at the question's end, A and B without commas or semicolons.
_BOTH = re.compile(
    r"^(?P<head>.*?)\bboth\s+(?P<first>[^,;?]+?)\s+and\s+(?P<second>[^,;?]+?)[\s?.!]*$", re.I
)
# "Are A and B both …?": a yes/no question asking the same of two things it names first.
_BOTH_AFTER = re.compile(
    r"^(?P<head>\s*" + _AUXILIARY + r"\s+)(?P<first>[^,;?]+?)\s+and\s+(?P<second>[^,;?]+?)"
    r"\s+both\s+(?P<tail>[^,;?]+?)[\s?.!]*$",
    re.I,
)


def asked_of_each(question: str) -> list[str]:
    """The question asked of each of two things it names with "both" ("What sport is played
    by both A and B?", "Are A and B both German?"), or the question alone (the same
    quotation-mark rule as `question_parts`)."""
    masked = _masked(question)

    def span(found: re.Match[str], name: str) -> str:
        return question[found.start(name) : found.end(name)]

    if (found := _BOTH.match(masked)) is not None and found["head"].strip():
        head = question[: found.end("head")]
        return [head + span(found, name) for name in ("first", "second")]
    if (found := _BOTH_AFTER.match(masked)) is not None:
        head = question[: found.end("head")]
        return [f"{head}{span(found, name)} {span(found, 'tail')}" for name in ("first", "second")]
    return [question]


def searches_for(question: str) -> list[str]:
    pieces = question_parts(question)
    if len([p for p in pieces if p.strip()]) == 1:
        pieces = asked_of_each(question)
    parts = [part for part in pieces if len(content_words(part, stopwords=PLAN_STOPWORDS)) >= 2]
    searches = parts[:3] if len(parts) > 1 else [question]
    return searches
