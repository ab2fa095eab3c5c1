"""A judge that reads (issue 25): plain answers are released — the literal statement, the
passive one, a paraphrase — and near misses from the right document are not; a sentence is
judged with the sentence before it, and two adjacent sentences can be one quote."""

import json

import pytest

from answers.judge.features import JudgeItem
from answers.pipeline.judgement import judge_item
from answers.pipeline.providers.extractive import ExtractiveProvider, is_block, quote_spans
from answers.pipeline.quote_context import sentence_before
from answers.pipeline.validation import SelectedFact
from answers.pipeline.vocabulary import CandidateView, Plan
from tests.answers.helpers import ask, ingest

HARBOUR = (
    "# Harbour guide\n\n## Opening hours\n\n"
    "The harbour gate opens at dawn every day of the year. "
    "It closes two hours before low tide. "
    "Pilots may request a late passage by radio.\n\n"
    "## Approvals\n\n"
    "Berth changes for vessels over forty metres are approved by the harbour master. "
    "Fuel deliveries are scheduled by the port office.\n"
)
RECORDS = (
    "# Records policy\n\n## Archive\n\n"
    "Signed contracts are kept for twelve years after they expire. "
    "The archive is stored in the basement of the north building.\n"
)
HISTORY = (
    "# About the cooperative\n\n"
    "The Lakeside Cooperative was established in 1952 by eleven fishing families. "
    "Its first office stood next to the old ferry pier.\n"
)
CONFIG = (
    "# Client configuration\n\n## Credentials\n\n"
    "The client supports loading credentials from a dotfile in the home directory. "
    "Tokens are refreshed an hour before they expire.\n\n"
    "## The timeout field\n\n"
    "Tools that read the timeout field cope with it being set to zero by waiting forever. "
    "Many deployments set it in their configuration file.\n"
)


def quotes(body: dict) -> list[str]:
    return [c["quote"] for c in body["answer"]["citations"] if c["kind"] == "quote"]


def released(body: dict) -> bool:
    return body["evidence"]["answer_status"] in ("evidence_backed", "partial")


@pytest.fixture
def handbooks(space, owner):
    for name, text in (
        ("harbour.md", HARBOUR),
        ("records.md", RECORDS),
        ("history.md", HISTORY),
        ("client.md", CONFIG),
    ):
        ingest(owner, space, name, text)


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("When does the harbour gate close?", "It closes two hours before low tide."),
        ("Who approves berth changes?", "are approved by the harbour master."),
        ("How long are signed contracts retained?", "kept for twelve years"),
        ("When was the Lakeside Cooperative founded?", "was established in 1952"),
        ("How many families founded the Lakeside Cooperative?", "eleven fishing families"),
        ("Can the client load credentials from a dotfile?", "loading credentials from a dotfile"),
    ],
    ids=[
        "literal",
        "passive",
        "paraphrase-kept",
        "paraphrase-established",
        "number-in-words",
        "supports",
    ],
)
def test_a_plain_answer_is_released(handbooks, member, question, expected):
    body = ask(member, question)
    assert released(body), body["evidence"]
    assert any(expected in quote for quote in quotes(body)), quotes(body)


@pytest.mark.django_db
@pytest.mark.parametrize(
    "question",
    [
        "What is the default value of the timeout field?",
        "What is the timeout field's maximum value?",
        "Who delivers fuel to the harbour?",
    ],
)
def test_a_near_miss_from_the_right_document_is_not_released(handbooks, member, question):
    body = ask(member, question)
    assert not released(body), quotes(body)


@pytest.mark.django_db
def test_the_subject_in_one_sentence_and_the_fact_in_the_next_make_one_verified_quote(
    space, owner, member
):
    ingest(
        owner,
        space,
        "pumps.md",
        "# Plant notes\n\n"
        "The north pumping station was rebuilt after the flood of 2019. "
        "Its two pumps lift 400 litres of water a second into the upper canal.\n",
    )
    body = ask(member, "How much water does the north pumping station lift?")
    assert released(body), body["evidence"]
    [quote] = quotes(body)
    assert quote == (
        "The north pumping station was rebuilt after the flood of 2019. "
        "Its two pumps lift 400 litres of water a second into the upper canal."
    )
    # Released means both quote checks held for the span as a whole.


def view(text: str, title: str = "Notes") -> CandidateView:
    return CandidateView("f1", "quote", text, "Notes", (0,), 1.0, (), title)


def test_two_adjacent_sentences_are_one_span_and_each_stays_a_span_of_its_own():
    text = "The north station was rebuilt in 2019. Its pumps lift 400 litres a second."
    spans = quote_spans(view(text))
    first_end = text.index(" Its")
    second = text.index("Its")
    assert (0, first_end, 0) in spans
    assert (second, len(text), second) in spans
    assert (0, len(text), second) in spans  # one verbatim span over both


def test_a_code_or_label_block_is_never_glued_into_prose():
    text = (
        "Settings\n"
        "timeout = 30\n"
        "retries = 3\n"
        "verbose = false\n\n"
        "The loader reads the timeout at start and never again."
    )
    assert is_block("timeout = 30\nretries = 3\nverbose = false")
    for start, end, own in quote_spans(view(text)):
        if start != own:
            assert "timeout = 30" not in text[start:end]
    provider = ExtractiveProvider()
    plan = Plan(
        standalone="When does the loader read the timeout?",
        searches=["When does the loader read the timeout?"],
    )
    chosen = json.loads(
        provider.select(question=plan.standalone, plan=plan, candidates=[view(text)], attempt=0)
    )["facts"]
    assert chosen
    for fact in chosen:
        assert "retries" not in text[fact["start"] : fact["end"]]


def test_a_sentence_is_judged_with_the_one_before_it():
    text = "The north station was rebuilt in 2019. Its pumps lift 400 litres a second."
    start = text.index("Its")
    assert sentence_before(text, start) == "The north station was rebuilt in 2019."
    assert sentence_before(text, 0) == ""

    class Fact:
        kind = "quote"
        source = {"title": "Plant notes", "locator": {"headings": ["Pumps"]}}

    Fact.text = text
    item = judge_item("How much water do the pumps lift?", SelectedFact(Fact, start, len(text)))
    assert item == JudgeItem(
        "How much water do the pumps lift?",
        "Its pumps lift 400 litres a second.",
        "Plant notes › Pumps",
        "The north station was rebuilt in 2019.",
        text,
    )
