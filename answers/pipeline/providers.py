"""Model providers: `plan` and `select`. A selection is data — fact ids and optional
sub-spans — and everything a provider returns is validated before use."""

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from answers.pipeline.planner import DatasetInfo, Plan, content_words, plan_question


@dataclass(frozen=True)
class CandidateView:
    """What a provider is shown of a candidate fact."""

    fact_id: str
    kind: str
    text: str
    label: str
    searches: tuple[int, ...]  # the plan's searches that found it
    score: float


class ModelProvider(Protocol):
    name: str
    model_id: str
    can_compare: bool
    can_analyse: bool
    can_answer_generally: bool

    def plan(self, *, question: str, history: list[str], datasets: list[DatasetInfo]) -> Plan: ...

    def select(
        self, *, question: str, plan: Plan, candidates: list[CandidateView], attempt: int
    ) -> object: ...


# A sentence runs to . ! or ? (with closing quotes/brackets) or to a blank line; a single
# line break is a wrapped line inside the sentence, not its end.
_SENTENCE = re.compile(r"(?:[^.!?\n]|\n(?!\s*\n))+(?:[.!?]+[\"')\]]*)?")
SELECT_THRESHOLD = 0.34
CANDIDATES_PER_SEARCH = 3


class ExtractiveProvider:
    """Offline and deterministic: the best sentence per search, scored by the share of
    the search's content words it contains (a transparent score with a threshold)."""

    name = "extractive"
    model_id = "extractive-v1"
    can_compare = False
    can_analyse = False
    can_answer_generally = False

    def plan(self, *, question: str, history: list[str], datasets: list[DatasetInfo]) -> Plan:
        return plan_question(question=question, history=history, datasets=datasets)

    def select(
        self, *, question: str, plan: Plan, candidates: list[CandidateView], attempt: int
    ) -> str:
        chosen: list[dict] = []
        for index, search in enumerate(plan.searches):
            wanted = set(content_words(search))
            if not wanted:
                continue
            found = sorted(
                (c for c in candidates if c.kind == "quote" and index in c.searches),
                key=lambda c: -c.score,
            )[:CANDIDATES_PER_SEARCH]
            best: tuple[float, dict] | None = None
            for candidate in found:
                for match in _SENTENCE.finditer(candidate.text):
                    start, end = _trimmed(candidate.text, match.start(), match.end())
                    if end <= start:
                        continue
                    words = set(content_words(candidate.text[start:end]))
                    score = len(wanted & words) / len(wanted)
                    if score >= SELECT_THRESHOLD and (best is None or score > best[0]):
                        best = (score, {"fact_id": candidate.fact_id, "start": start, "end": end})
            if best is not None and best[1] not in chosen:
                chosen.append(best[1])
        chosen += [{"fact_id": c.fact_id} for c in candidates if c.kind == "value"]
        return json.dumps({"facts": chosen})


def _trimmed(text: str, start: int, end: int) -> tuple[int, int]:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


class ScriptedProvider:
    """For tests: returns exactly the selections it is given, one per attempt."""

    name = "scripted"
    model_id = "scripted"
    can_compare = False
    can_analyse = False
    can_answer_generally = False

    def __init__(
        self,
        selections: list[object],
        *,
        plan: Plan | None = None,
        on_select: Callable[[int], None] | None = None,
    ) -> None:
        self.selections = selections
        self.fixed_plan = plan
        self.on_select = on_select
        self.seen: list[list[CandidateView]] = []

    def plan(self, *, question: str, history: list[str], datasets: list[DatasetInfo]) -> Plan:
        if self.fixed_plan is not None:
            return self.fixed_plan
        return plan_question(question=question, history=history, datasets=datasets)

    def select(
        self, *, question: str, plan: Plan, candidates: list[CandidateView], attempt: int
    ) -> object:
        self.seen.append(candidates)
        if self.on_select is not None:
            self.on_select(attempt)
        selection = self.selections[min(attempt, len(self.selections) - 1)]
        return selection(candidates) if callable(selection) else selection


def get_model_provider() -> ModelProvider:
    from django.conf import settings

    if settings.KOINON_MODEL_PROVIDER == "extractive":
        return ExtractiveProvider()
    # The OpenAI-compatible provider is not built yet: fail closed, never guess.
    from core.errors import ApiError

    raise ApiError(
        "The configured model provider is not available.",
        code="provider_unavailable",
        status_code=503,
    )
