"""Support judgement (SPEC §5 pipeline): after the quote checks and before the recheck,
does each selected quote answer its part of the question?

Each planned search is a part. A quote is judged against every part that found it and
serves the parts whose score reaches the threshold; a quote that serves none is rejected
with `judge_unsupported` and goes back to selection. A part that asks for a thing of a kind
(a port, a date, a name: answers.pipeline.answer_type) is served only by a quote that holds
one: a quote the judge scored high that holds none serves nothing and is rejected with
`answer_type_missing`. A governed value answers the part
that asked for it (the planner's attribution) and is not judged: it is computed, not
quoted — unless it was computed without a restriction its part names (it answers another
question: refused as `value_restriction_missing`). Scores stay in the audit; they never
reach answer text.
"""

from dataclasses import dataclass
from typing import TYPE_CHECKING

from django.conf import settings

from answers.judge.features import JudgeItem
from answers.judge.lexical import TermWeights
from answers.judge.model import pinned_operating_points
from answers.models import CandidateFact
from answers.pipeline.answer_type import answer_type_agrees
from answers.pipeline.quote_context import context_line, sentence_before
from answers.pipeline.validation import SelectedFact
from answers.pipeline.vocabulary import Plan, Rejection

if TYPE_CHECKING:
    # Only named: the provider is the caller's, passed in to judge with.
    from answers.pipeline.providers.base import ModelProvider


@dataclass(frozen=True)
class QuoteVerdict:
    fact_id: str
    start: int | None
    end: int | None
    scores: dict[int, float]  # part index → probability that the quote answers it
    parts: tuple[int, ...]  # the parts it serves (score ≥ threshold, asked thing held)
    untyped: tuple[int, ...] = ()  # parts scored ≥ threshold whose asked thing it lacks

    @property
    def supported(self) -> bool:
        return bool(self.parts)

    def as_dict(self) -> dict[str, object]:
        return {
            "fact_id": self.fact_id,
            "start": self.start,
            "end": self.end,
            "scores": {str(part): round(score, 4) for part, score in self.scores.items()},
            "supported": self.supported,
            "answer_type_missing": list(self.untyped),
        }


@dataclass(frozen=True)
class Support:
    """The judged selection: what may be published, what goes back, which parts are
    answered."""

    kept: tuple[SelectedFact, ...]
    verdicts: tuple[QuoteVerdict, ...]
    rejected: tuple[Rejection, ...]
    answered: frozenset[int]
    parts: int

    @property
    def unanswered(self) -> tuple[int, ...]:
        return tuple(part for part in range(self.parts) if part not in self.answered)


VALUE_UNMET = "value_restriction_missing"
ANSWER_TYPE_MISSING = "answer_type_missing"


def policy_floor(rule: str) -> float:
    """The lowest threshold a run under a policy of `rule` may judge at: the judge file's pinned
    operating point for that policy (strict's for `strict`, auto's otherwise), raised to
    KOINON_JUDGE_THRESHOLD when the operator set a higher minimum. JudgeUnavailable when the
    pinned file cannot be read (the caller abstains)."""
    floor = pinned_operating_points().of(rule)
    minimum = settings.KOINON_JUDGE_THRESHOLD
    return floor if minimum is None else max(floor, minimum)


def operating_point(*, rule: str, space_point: float | None = None) -> float:
    """The threshold a run judges at: its policy's floor, or the strictest point a curator
    set on the spaces it reads (`AccessScope.operating_point`) when that is higher. Never
    below the floor, whatever is stored."""
    floor = policy_floor(rule)
    return floor if space_point is None else max(floor, space_point)


def quote_context(fact: CandidateFact) -> str:
    """The title and heading path of a quote's passage: what the sentence is about."""
    headings = (fact.source.get("locator") or {}).get("headings") or []
    return context_line(fact.source.get("title", ""), headings)


def judge_item(part: str, item: SelectedFact) -> JudgeItem:
    """What the judge reads of one quote: the quote, where it stands, the sentence before."""
    before = sentence_before(item.fact.text, item.start)
    return JudgeItem(part, item.quote, quote_context(item.fact), before, item.fact.text)


def _quote_parts(item: SelectedFact, parts: int) -> tuple[int, ...]:
    found = tuple(p for p in item.fact.source.get("searches", ()) if 0 <= p < parts)
    return found or tuple(range(parts))


def support_judge(
    *,
    provider: "ModelProvider",
    plan: Plan,
    selected: list[SelectedFact],
    weights: TermWeights,
    threshold: float,
    cache: dict[JudgeItem, float] | None = None,
) -> Support:
    """Judge every quote of a validated selection at `threshold` (`operating_point`).
    Raises JudgeUnavailable from the provider when there is no judge: the caller abstains,
    it never publishes unjudged."""
    parts = max(1, len(plan.searches))
    answered: set[int] = set()
    for item in selected:
        if item.fact.kind == "value" and not item.fact.source.get("unmet"):
            part = item.fact.source.get("part")
            answered.update(range(parts) if part is None else {part})
    quotes = [item for item in selected if item.fact.kind == "quote"]
    # A part is judged on its text and, when rewritten from the conversation, on the part
    # as typed too: the better score counts, so a wrong rewrite cannot hide an answer.
    asked = [
        (item, part, text)
        for item in quotes
        for part in _quote_parts(item, parts)
        for text in plan.part_texts(part)
    ]
    items = [judge_item(text, item) for item, _, text in asked]
    # Within one run a pair is judged once: a reselection keeps its supported quotes.
    cache = {} if cache is None else cache
    fresh = list(dict.fromkeys(i for i in items if i not in cache))
    cache.update(zip(fresh, provider.judge(items=fresh, weights=weights), strict=True))
    scores = [cache[item] for item in items]
    by_item: dict[int, dict[int, float]] = {}
    typed: dict[tuple[int, int], bool] = {}  # (item, part) → a text of the part agrees
    for (item, part, text), score in zip(asked, scores, strict=True):
        item_scores = by_item.setdefault(id(item), {})
        item_scores[part] = max(item_scores.get(part, 0.0), float(score))
        key = (id(item), part)
        typed[key] = typed.get(key, False) or answer_type_agrees(text, item.quote)
    kept, verdicts, rejected = [], [], []
    for item in selected:
        if item.fact.kind == "value":
            if item.fact.source.get("unmet"):
                # Computed without a restriction its part asks for: it answers another
                # question. Never selectable (tools), and refused here all the same.
                rejected.append(Rejection(item.fact.fact_id, None, None, VALUE_UNMET))
            else:
                kept.append(item)
            continue
        item_scores = by_item.get(id(item), {})
        passed = sorted(p for p, s in item_scores.items() if s >= threshold)
        served = tuple(p for p in passed if typed[(id(item), p)])
        untyped = tuple(p for p in passed if not typed[(id(item), p)])
        verdict = QuoteVerdict(
            item.fact.fact_id, item.start, item.end, item_scores, served, untyped
        )
        verdicts.append(verdict)
        if verdict.supported:
            kept.append(item)
            answered.update(served)
        else:
            reason = ANSWER_TYPE_MISSING if untyped else "judge_unsupported"
            rejected.append(Rejection(item.fact.fact_id, item.start, item.end, reason))
    return Support(tuple(kept), tuple(verdicts), tuple(rejected), frozenset(answered), parts)
