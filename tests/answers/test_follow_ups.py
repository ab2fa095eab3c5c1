"""Follow-ups (issue 26): only a question that needs the earlier turn is rewritten; a
rewritten one is searched and judged as typed too, and the plan, audit, receipt show it."""

import pytest

from answers.models import AnswerRun
from answers.pipeline.planner import plan_question, standalone_question
from answers.pipeline.providers.extractive import ExtractiveProvider
from answers.pipeline.vocabulary import Plan
from audit.models import OutputRelease
from audit.services import audit_summary
from tests.answers.helpers import ask, ingest

REVIEWS = "Who owns service reviews?"
APPROVAL = "Service reviews are approved by the chief technology officer."


@pytest.mark.parametrize(
    "question",
    [
        "What is our retention period?",
        "What is the capital of France?",
        "How long are invoices retained?",
        "What is the policy that governs retention?",
        "Define retention.",
    ],
)
def test_a_complete_question_is_planned_alone_however_short(question):
    plan = plan_question(question=question, history=[REVIEWS], datasets=[])
    assert (plan.standalone, plan.rewritten, plan.asked) == (question, False, [])
    assert [text for _, text, _ in plan.queries()] == [question]


@pytest.mark.parametrize(
    ("history", "question", "standalone"),
    [
        ([REVIEWS], "And who approves them?", "Who approves service reviews?"),
        ([REVIEWS], "Who approves?", "Who approves service reviews?"),
        ([REVIEWS], "Who approved that?", "Who approved service reviews?"),
        ([REVIEWS], "What about backups?", "Who owns backups?"),
        ([REVIEWS], "And backups?", "Who owns backups?"),
        (
            ["What is the total amount?"],
            "And for customer zeta?",
            "What is the total amount for customer zeta?",
        ),
        (
            [REVIEWS, "And who approves them?"],
            "How often are they held?",
            "How often are service reviews held?",
        ),
    ],
)
def test_a_question_that_refers_back_takes_the_earlier_subject(history, question, standalone):
    assert standalone_question(question, history) == (standalone, True)
    plan = plan_question(question=question, history=history, datasets=[])
    # Both are searched: the question as typed first, then the rewritten one.
    assert plan.queries() == [(0, question, "asked"), (0, standalone, "rewritten")]
    assert plan.part_texts(0) == [standalone, question]


def test_a_complete_short_question_after_another_is_searched_as_asked_and_answered(library, member):
    first = ask(member, REVIEWS)
    conversation = AnswerRun.objects.get(pk=first["run_id"]).conversation_id
    body = ask(member, "How long are invoices retained?", conversation_id=conversation)
    plan = AnswerRun.objects.get(pk=body["run_id"]).plan
    assert (plan["standalone"], plan["rewritten"]) == ("How long are invoices retained?", False)
    assert body["evidence"]["answer_status"] == "evidence_backed"
    assert [c["quote"] for c in body["answer"]["citations"]] == [
        "Invoices are retained for ten years."
    ]
    assert body["release"]["searched"]["searched_as"] == ""


def test_a_follow_up_is_searched_with_the_earlier_subject_and_shown(library, space, owner, member):
    ingest(owner, space, "approvals.md", f"# Approvals\n\n{APPROVAL}\n")
    first = ask(member, REVIEWS)
    conversation = AnswerRun.objects.get(pk=first["run_id"]).conversation_id
    body = ask(member, "And who approves them?", conversation_id=conversation)

    assert body["evidence"]["answer_status"] == "evidence_backed"
    assert [c["quote"] for c in body["answer"]["citations"]] == [APPROVAL]
    searched = [
        {"part": 0, "text": "And who approves them?", "origin": "asked"},
        {"part": 0, "text": "Who approves service reviews?", "origin": "rewritten"},
    ]
    audit = audit_summary(body["run_id"])
    assert (
        audit["plan"]["standalone"] == "Who approves service reviews?"
        and audit["plan"]["rewritten"]
    )
    assert audit["plan"]["queries"] == searched
    assert audit["generations"][0]["retrieval"]["queries"] == [s["text"] for s in searched]
    # The receipt (body and append-only row) shows the rewrite and both searches.
    assert body["release"]["searched"]["searched_as"] == "Who approves service reviews?"
    assert body["release"]["searched"]["searches"] == searched
    assert OutputRelease.objects.get(pk=body["release"]["id"]).searched["searches"] == searched


class WrongRewrite(ExtractiveProvider):
    """A planner whose rewrite took the wrong subject, as the old rule did ("What is our
    retention period?" after "Who owns service reviews?" was searched as "Who owns service
    reviews — What is our retention period?")."""

    def __init__(self, *, search_as_typed: bool) -> None:
        self.search_as_typed = search_as_typed

    def plan(self, *, question, history, datasets) -> Plan:
        wrong = f"Who owns service reviews — {question}"
        return Plan(
            standalone=wrong,
            searches=[wrong],
            rewritten=True,
            question=question,
            asked=[question] if self.search_as_typed else [],
        )


def test_a_wrong_rewrite_cannot_turn_an_answerable_question_into_an_abstention(library, member):
    question = "How long are invoices retained?"
    body = ask(member, question, provider=WrongRewrite(search_as_typed=True))
    assert body["evidence"]["answer_status"] == "evidence_backed"
    assert [c["quote"] for c in body["answer"]["citations"]] == [
        "Invoices are retained for ten years."
    ]
    # Without the search as typed, the same wrong rewrite hides the answer.
    hidden = ask(member, question, provider=WrongRewrite(search_as_typed=False))
    assert "Invoices are retained for ten years." not in hidden["answer"]["text"]
