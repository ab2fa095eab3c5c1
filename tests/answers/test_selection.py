"""Adversarial or malformed provider output rejects the whole selection (scripted provider)."""

import json

import pytest

from answers.models import AnswerRun, CandidateFact, Citation, Message
from answers.pipeline.texts import explanation
from answers.pipeline.vocabulary import Plan
from tests.answers.helpers import ask, ingest
from tests.answers.providers import ScriptedProvider

pytestmark = pytest.mark.django_db

PLAN = Plan(
    standalone="Who owns service reviews and what is the total amount?",
    searches=["Who owns service reviews"],
    dataset_queries=[],
)


def first_quote(candidates) -> dict:
    sentence = "The platform operations team owns service reviews."
    quote = next(c for c in candidates if c.kind == "quote" and sentence in c.text)
    start = quote.text.index(sentence)
    return {"fact_id": quote.fact_id, "start": start, "end": start + len(sentence)}


def first_value(candidates) -> dict:
    return {"fact_id": next(c for c in candidates if c.kind == "value").fact_id}


def with_value_plan(library) -> Plan:
    snapshot = library["snapshot"]
    return Plan(
        standalone=PLAN.standalone,
        searches=PLAN.searches,
        dataset_queries=[
            {
                "dataset_id": snapshot.dataset_id,
                "snapshot_id": snapshot.pk,
                "sql": "SELECT SUM(amount), SUM(amount) * 1.1 AS adjusted FROM orders",
            }
        ],
    )


def assert_abstained(body: dict, issue: str) -> None:
    assert body["evidence"]["answer_status"] == "abstained"
    assert body["answer"]["text"] == explanation("insufficient_evidence", "en")
    assert body["answer"]["citations"] == [] and body["answer"]["cards"] == []
    assert issue in body["quality"]["issues"]
    assert "selection_rejected" in body["quality"]["issues"]
    run = AnswerRun.objects.get(pk=body["run_id"])
    assert not Citation.objects.filter(run=run).exists()
    assert run.generations.get().attempts == 3  # the first try and two retries


def test_a_valid_scripted_selection_publishes(library, member):
    provider = ScriptedProvider(
        [lambda c: {"facts": [first_quote(c), first_value(c)]}], plan=with_value_plan(library)
    )
    body = ask(member, "q", provider=provider)
    assert body["evidence"]["answer_status"] == "evidence_backed"
    assert "“The platform operations team owns service reviews.”" in body["answer"]["text"]


def test_a_synthetic_sibling_column_never_becomes_a_candidate(library, member):
    provider = ScriptedProvider(
        [lambda c: {"facts": [first_value(c)]}], plan=with_value_plan(library)
    )
    body = ask(member, "q", provider=provider)
    values = CandidateFact.objects.filter(run_id=body["run_id"], kind="value")
    assert [v.label for v in values] == ["SUM(orders.amount)"]
    assert (
        "4,400" not in body["answer"]["text"]
        and "SUM(orders.amount) = 4,000" in body["answer"]["text"]
    )


@pytest.mark.parametrize(
    ("selection", "issue"),
    [
        (lambda c: {"facts": [first_quote(c), {"fact_id": "q999"}]}, "selection_unknown_fact"),
        (
            lambda c: {"facts": [first_quote(c), {**first_value(c), "value": 5000}]},
            "selection_unexpected_content",
        ),
        (
            lambda c: {
                "facts": [{**first_quote(c), "text": "The sales team owns service reviews."}]
            },
            "selection_unexpected_content",
        ),
        (
            lambda c: {"facts": [first_quote(c)], "answer": "Reviews are owned by Bob."},
            "selection_unexpected_content",
        ),
        (
            lambda c: {"facts": [{**first_quote(c), "end": 10_000}]},
            "selection_span_outside_candidate",
        ),
        (lambda c: "{not json", "selection_invalid_json"),
        (lambda c: json.dumps({"facts": []}), "selection_empty"),
        (lambda c: {"facts": [first_quote(c), first_quote(c)]}, "selection_duplicate"),
    ],
    ids=[
        "invented-id",
        "changed-number",
        "changed-quote",
        "extra-prose",
        "span-outside",
        "invalid-json",
        "empty",
        "duplicate",
    ],
)
def test_adversarial_output_rejects_the_whole_selection(library, member, selection, issue):
    provider = ScriptedProvider([selection], plan=with_value_plan(library))
    assert_abstained(ask(member, "q", provider=provider), issue)


def test_a_quote_whose_admitted_text_changed_fails_the_primary_check(library, member):
    from knowledge.models import Extraction

    def tamper(attempt: int) -> None:
        # The stored admitted text no longer says what the recorded candidate says.
        for extraction in Extraction.objects.filter(role="primary"):
            Extraction.objects.filter(pk=extraction.pk).update(
                text=extraction.text.replace("operations team", "sales team")
            )

    provider = ScriptedProvider(
        [lambda c: {"facts": [first_quote(c)]}], plan=PLAN, on_select=tamper
    )
    assert_abstained(ask(member, "q", provider=provider), "quote_not_in_admitted_text")


def test_a_quote_missing_from_the_secondary_extraction_is_rejected(library, member):
    from knowledge.models import Extraction

    Extraction.objects.filter(role="secondary").update(norm_text=" something else entirely ")
    provider = ScriptedProvider([lambda c: {"facts": [first_quote(c)]}], plan=PLAN)
    assert_abstained(ask(member, "q", provider=provider), "quote_not_in_secondary_extraction")


def test_a_citation_to_another_users_document_is_an_unknown_fact(space, owner, member, outsider):
    ingest(owner, space, "ops.md", "The platform operations team owns service reviews.")
    private = ingest(
        outsider,
        None,
        "diary.txt",
        "The platform operations team owns service reviews.",
        private=True,
    )
    # The member never sees the outsider's file, so no candidate points at it: a
    # selection naming a fact outside this run's candidates is refused.
    other_run = ask(outsider, "Who owns service reviews?", selected_sources=[private.document.pk])
    foreign = CandidateFact.objects.filter(run_id=other_run["run_id"]).first()
    provider = ScriptedProvider([{"facts": [{"fact_id": "x" + foreign.fact_id}]}], plan=PLAN)
    assert_abstained(ask(member, "q", provider=provider), "selection_unknown_fact")


def test_a_second_attempt_may_succeed_after_a_rejection(library, member):
    provider = ScriptedProvider(["{broken", lambda c: {"facts": [first_quote(c)]}], plan=PLAN)
    body = ask(member, "q", provider=provider)
    assert body["evidence"]["answer_status"] == "evidence_backed"
    assert "selection_invalid_json" in body["quality"]["issues"]
    assert AnswerRun.objects.get(pk=body["run_id"]).generations.get().attempts == 2


def test_a_provider_exception_never_leaks_its_text(library, member):
    def explode(candidates):
        raise RuntimeError("secret upstream detail sk-123")

    body = ask(member, "q", provider=ScriptedProvider([explode], plan=PLAN))
    assert body["evidence"]["answer_status"] == "abstained"
    assert "provider_error" in body["quality"]["issues"]
    assert "sk-123" not in json.dumps(body)
    assert not Message.objects.filter(text__contains="sk-123").exists()
