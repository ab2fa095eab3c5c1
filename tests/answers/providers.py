"""Test doubles for the model provider interface."""

from collections.abc import Callable

from answers.judge.features import JudgeItem
from answers.judge.lexical import TermWeights
from answers.pipeline.planner import plan_question
from answers.pipeline.vocabulary import CandidateView, DatasetInfo, Plan, Rejection


class ScriptedProvider:
    """Returns exactly the selections it is given, one per attempt. Its judge accepts
    every quote unless `scores(part, quote)` says otherwise: tests of the judge itself use
    the extractive provider's real one."""

    name = "scripted"
    model_id = "scripted"
    waits_for_model = True  # it stands in for a model
    can_compare = False
    can_analyse = False
    can_answer_generally = False

    def __init__(
        self,
        selections: list[object],
        *,
        plan: Plan | None = None,
        on_select: Callable[[int], None] | None = None,
        scores: Callable[[str, str], float] | None = None,
    ) -> None:
        self.selections = selections
        self.fixed_plan = plan
        self.on_select = on_select
        self.scores = scores
        self.seen: list[list[CandidateView]] = []
        self.rejections: list[tuple[Rejection, ...]] = []

    def plan(self, *, question: str, history: list[str], datasets: list[DatasetInfo]) -> Plan:
        if self.fixed_plan is not None:
            return self.fixed_plan
        return plan_question(question=question, history=history, datasets=datasets)

    def select(
        self,
        *,
        question: str,
        plan: Plan,
        candidates: list[CandidateView],
        attempt: int,
        rejected: tuple[Rejection, ...] = (),
        weights: TermWeights | None = None,
    ) -> object:
        self.seen.append(candidates)
        self.rejections.append(rejected)
        if self.on_select is not None:
            self.on_select(attempt)
        selection = self.selections[min(attempt, len(self.selections) - 1)]
        return selection(candidates) if callable(selection) else selection

    def judge(self, *, items: list[JudgeItem], weights: TermWeights) -> list[float]:
        return [1.0 if self.scores is None else self.scores(i.part, i.quote) for i in items]
