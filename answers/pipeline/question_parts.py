"""How a question splits into the parts searched for and judged on their own: at most three,
each with at least two content words, else the whole question. Pure; the rule planner plans
with it and the tools reread a plan with it (`tools.restrictions_missing`)."""

import re

from answers.judge.lexical import PLAN_STOPWORDS, content_words

SPLIT = re.compile(r"\s*(?:[;?]|,\s*and\b|,|\band\b)\s*", re.I)


def searches_for(question: str) -> list[str]:
    parts = [
        part
        for part in SPLIT.split(question)
        if len(content_words(part, stopwords=PLAN_STOPWORDS)) >= 2
    ]
    searches = parts[:3] if len(parts) > 1 else [question]
    return searches
