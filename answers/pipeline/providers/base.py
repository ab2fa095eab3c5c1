"""What the answer pipeline asks of a model provider (`ModelProvider`) and what an analysis
gives back: a provider plans, selects quotes as data (fact ids and optional sub-spans), judges
whether they answer, and — a generative one — analyses comparisons and answers generally.
What it is shown and told (`DatasetInfo`, `CandidateView`, `Rejection`) are the vocabulary's.
Everything a provider returns is validated before use."""

from typing import Protocol, TypedDict

from answers.judge.features import JudgeItem
from answers.judge.lexical import TermWeights
from answers.pipeline.vocabulary import CandidateView, DatasetInfo, Plan, Rejection


class AnalysedStance(TypedDict):
    fact_id: str
    start: int
    end: int
    stance: str  # one of vocabulary.SOURCE_STANCES (as the model wrote it: checked)


class AnalysedClaim(TypedDict):
    claim: str
    stances: list[AnalysedStance]


class Analysis(TypedDict):
    """What `analyse` returns: claims with quote spans, unverified until
    `comparison.comparison_verify`."""

    claims: list[AnalysedClaim]


class ModelProvider(Protocol):
    """Every method and flag the answer pipeline uses of a provider. `analyse` is called
    only when `can_compare`, `answer_generally` only when `can_answer_generally`."""

    name: str
    # Whether planning and selecting wait for a model (the activity list says so); False
    # for the default extractive provider, which computes both itself.
    waits_for_model: bool
    can_compare: bool
    can_analyse: bool
    can_answer_generally: bool

    @property
    def model_id(self) -> str: ...

    def plan(self, *, question: str, history: list[str], datasets: list[DatasetInfo]) -> Plan: ...

    def select(
        self,
        *,
        question: str,
        plan: Plan,
        candidates: list[CandidateView],
        attempt: int,
        rejected: tuple[Rejection, ...] = (),
        weights: TermWeights | None = None,
    ) -> object: ...

    def judge(self, *, items: list[JudgeItem], weights: TermWeights) -> list[float]:
        """For each item: the probability that its quote answers its part of the question.

        Raises JudgeUnavailable when the provider cannot judge."""
        ...

    def analyse(self, *, question: str, plan: Plan, candidates: list[CandidateView]) -> Analysis:
        """3–6 claims with each source's stance and a quote span. Raises ProviderError."""
        ...

    def answer_generally(self, *, question: str, language: str) -> str:
        """A short ungrounded answer (`general_knowledge`). Raises ProviderError."""
        ...
