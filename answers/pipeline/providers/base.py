"""What the answer pipeline asks of a model provider (`ModelProvider`) and the values it
shows and gets back: a provider plans, selects quotes as data (fact ids and optional
sub-spans), judges whether they answer, and — a generative one — analyses comparisons and
answers generally. Everything a provider returns is validated before use."""

from dataclasses import dataclass
from typing import Protocol, TypedDict

from answers.judge.features import JudgeItem
from answers.judge.lexical import TermWeights
from answers.pipeline.planner import DatasetInfo
from answers.pipeline.vocabulary import Plan
from knowledge.sentences import sentence_spans


@dataclass(frozen=True)
class CandidateView:
    """What a provider is shown of a candidate fact."""

    fact_id: str
    kind: str
    text: str
    label: str
    searches: tuple[int, ...]  # the plan's searches that found it (for a value: its part)
    score: float
    headings: tuple[str, ...] = ()  # the heading path of a quote's passage
    title: str = ""  # the title of a quote's document
    # A quote's structured units (knowledge.units): (start, end, alone_start, alone_end) in
    # `text`; the part from alone_start to alone_end is never quoted without the rest.
    units: tuple[tuple[int, int, int, int], ...] = ()


@dataclass(frozen=True)
class Rejection:
    """A selected item that failed, and why, as a typed code: what a provider is told
    when it selects again. Never the document's text."""

    fact_id: str
    start: int | None
    end: int | None
    reason: str  # judge_unsupported | label_only | …


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


def context_line(title: str, headings: "list[str] | tuple[str, ...]") -> str:
    """A quote's title and heading path, as the judge reads them: what it is about."""
    return " › ".join([title, *headings]).strip(" ›")


def sentence_before(text: str, start: int | None) -> str:
    """The sentence just before offset `start` of a candidate's text ("" at its start): the
    subject of "It is kept for twelve years." is often there."""
    if not start:
        return ""
    spans = sentence_spans(text, 0, start)
    return text[slice(*spans[-1])].strip() if spans else ""
