import json

from answers.pipeline.planner import plan_question
from answers.pipeline.providers.extractive import ExtractiveProvider
from answers.pipeline.vocabulary import CandidateView

WRAPPED = (
    "Hotel costs are reimbursed up to 180 euros per night in capital cities and up to\n"
    "120 euros per night elsewhere.\n\nEconomy class is used for short flights."
)


def select(question: str, text: str) -> list[dict]:
    plan = plan_question(question=question, history=[], datasets=[])
    candidate = CandidateView("q1", "quote", text, "", (0,), 0.1)
    raw = ExtractiveProvider().select(
        question=question, plan=plan, candidates=[candidate], attempt=0
    )
    return json.loads(raw)["facts"]


def test_the_extractive_selector_keeps_a_wrapped_sentence_whole():
    [fact] = select("What is the hotel limit in capital cities?", WRAPPED)
    assert WRAPPED[fact["start"] : fact["end"]] == (
        "Hotel costs are reimbursed up to 180 euros per night in capital cities and up to\n"
        "120 euros per night elsewhere."
    )


def test_the_extractive_selector_picks_the_best_sentence_above_its_threshold():
    [fact] = select("Which class is used for short flights?", WRAPPED)
    assert WRAPPED[fact["start"] : fact["end"]] == "Economy class is used for short flights."
    assert select("What colour is the office carpet?", WRAPPED) == []


def test_the_planner_splits_a_compound_question_into_searches():
    plan = plan_question(
        question="Who owns service reviews, and what currency is the invoice dataset in?",
        history=[],
        datasets=[],
    )
    assert plan.searches == ["Who owns service reviews", "what currency is the invoice dataset in"]


FLIGHTS = "Economy class is used for short flights. Business class is used for long flights."


class ScoredBy(ExtractiveProvider):
    """The extractive selector with a judge that scores by a table (one logit per quote)."""

    def __init__(self, scores: dict[str, float]) -> None:
        self.table = scores
        self.judged: list[str] = []

    def judge(self, *, items, weights):
        self.judged += [item.quote for item in items]
        return [self.table.get(item.quote, 0.0) for item in items]


def flights_select(provider, rejected=(), weights=None) -> list[str]:
    question = "Which class is used for flights?"
    plan = plan_question(question=question, history=[], datasets=[])
    candidate = CandidateView("q1", "quote", FLIGHTS, "", (0,), 0.1)
    raw = provider.select(
        question=question,
        plan=plan,
        candidates=[candidate],
        attempt=len(rejected),
        rejected=rejected,
        weights=weights,
    )
    return [FLIGHTS[f["start"] : f["end"]] for f in json.loads(raw)["facts"]]


def test_the_judge_chooses_among_the_best_covered_sentences():
    economy, business = FLIGHTS.split(". ")
    economy += "."
    assert flights_select(ScoredBy({economy: 0.3, business: 0.9})) == [business]
    assert flights_select(ScoredBy({economy: 0.8, business: 0.2})) == [economy]
    # Both were judged together, once each.
    provider = ScoredBy({business: 0.9})
    flights_select(provider)
    assert sorted(provider.judged) == sorted([economy, business])


def test_after_the_best_judged_sentence_is_rejected_no_lower_one_is_offered():
    from answers.pipeline.vocabulary import Rejection

    economy, business = FLIGHTS.split(". ")
    provider = ScoredBy({economy + ".": 0.4, business: 0.3})
    [first] = flights_select(provider)
    assert first == economy + "."
    start = FLIGHTS.index(first)
    rejected = (Rejection("q1", start, start + len(first), "judge_unsupported"),)
    # The judge scored it highest and it did not answer: a lower-scored sentence of the
    # same candidates is not tried after it.
    assert flights_select(provider, rejected) == []
    # A rejected span the judge did not prefer does not block the one it did.
    other = FLIGHTS.index(business)
    rejected = (Rejection("q1", other, other + len(business), "judge_unsupported"),)
    assert flights_select(provider, rejected) == [economy + "."]


def test_the_local_judge_scores_each_pair_once_per_provider(monkeypatch):
    from answers.judge.lexical import TermWeights
    from answers.judge.model import local_judge
    from answers.pipeline.providers import extractive as providers

    scored = []

    class Counting:
        def score(self, items, weights):
            scored.extend(items)
            return local_judge().score(items, weights)

    monkeypatch.setattr(providers, "local_judge", Counting)
    provider = ExtractiveProvider()
    first = flights_select(provider)
    assert len(scored) == 2  # both sentences, in one call
    # Selecting again with the same weights and judging the chosen quote (what support
    # judgement does) reads the scores already computed: the judge runs no pair twice.
    weights = TermWeights.uniform()
    assert flights_select(provider, weights=weights) == first
    assert len(scored) == 4  # other weights: scored again
    judged = list(provider.__dict__["_judged"][1])
    assert provider.judge(items=judged, weights=weights) == local_judge().score(judged, weights)
    assert flights_select(provider, weights=weights) == first
    assert len(scored) == 4


def test_a_heading_is_not_offered_as_a_quote():
    plan = plan_question(question="What is the retention period?", history=[], datasets=[])
    candidate = CandidateView("q1", "quote", "Retention", "", (0,), 0.1, ("Policy", "Retention"))
    raw = ExtractiveProvider().select(
        question="What is the retention period?", plan=plan, candidates=[candidate], attempt=0
    )
    assert json.loads(raw)["facts"] == []


OPTIONS = (
    "The report tool prints the pages of a report. The report tool prints page numbers on "
    "every page of the report. --pages [list]: the page ranges to print."
)


def test_a_sentence_holding_a_name_the_question_writes_as_code_is_judged_and_chosen():
    # Stemmed, "--pages" is "page", and the two sentences before cover more of the
    # question's words; only the one that holds "--pages" verbatim says what it takes.
    question = "What does the --pages option of the report tool print?"
    named = "--pages [list]: the page ranges to print."
    provider = ScoredBy({named: 0.9})
    plan = plan_question(question=question, history=[], datasets=[])
    candidate = CandidateView("q1", "quote", OPTIONS, "", (0,), 0.1)
    raw = provider.select(question=question, plan=plan, candidates=[candidate], attempt=0)
    assert [OPTIONS[f["start"] : f["end"]] for f in json.loads(raw)["facts"]] == [named]
    assert named in provider.judged
