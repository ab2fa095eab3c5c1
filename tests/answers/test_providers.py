import json

from answers.pipeline.planner import plan_question
from answers.pipeline.providers import CandidateView, ExtractiveProvider

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


def test_a_rejected_sentence_is_not_selected_again():
    from answers.pipeline.providers import Rejection

    question = "Which class is used for flights?"
    text = "Economy class is used for short flights. Business class is used for long flights."
    plan = plan_question(question=question, history=[], datasets=[])
    candidate = CandidateView("q1", "quote", text, "", (0,), 0.1)
    raw = ExtractiveProvider().select(
        question=question, plan=plan, candidates=[candidate], attempt=0
    )
    [fact] = json.loads(raw)["facts"]
    again = json.loads(
        ExtractiveProvider().select(
            question=question,
            plan=plan,
            candidates=[candidate],
            attempt=1,
            rejected=(Rejection("q1", fact["start"], fact["end"], "judge_unsupported"),),
        )
    )["facts"]
    [other] = again
    assert {text[fact["start"] : fact["end"]], text[other["start"] : other["end"]]} == {
        "Economy class is used for short flights.",
        "Business class is used for long flights.",
    }


def test_a_heading_is_not_offered_as_a_quote():
    plan = plan_question(question="What is the retention period?", history=[], datasets=[])
    candidate = CandidateView("q1", "quote", "Retention", "", (0,), 0.1, ("Policy", "Retention"))
    raw = ExtractiveProvider().select(
        question="What is the retention period?", plan=plan, candidates=[candidate], attempt=0
    )
    assert json.loads(raw)["facts"] == []
