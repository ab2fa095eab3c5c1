"""Comparisons, general knowledge and the world model with the `openai` provider (fake
server over real HTTP)."""

import json
from collections.abc import Callable

import pytest
from django.db import connection

from answers.pipeline.texts import explanation, general_knowledge_label
from audit.services import audit_summary
from knowledge.services import space_member_remove
from tests.answers.helpers import ask
from tests.answers.test_openai_provider import (
    RETENTION,
    REVIEWS,
    data,
    model,
    provider_for,
    span_of,
)
from tests.helpers import client_for
from worldmodel.models import WorldClaim

pytestmark = pytest.mark.django_db

QUESTION = "Compare who owns service reviews with the retention period for invoices"
SEARCHES = ["Who owns service reviews", "What is the retention period for invoices"]


def plan(request: dict) -> dict:
    return {"refers_back": False, "standalone": QUESTION, "searches": SEARCHES, "comparison": True}


def claims(*extra: Callable[[dict], dict]) -> Callable[[dict], dict]:
    def analyse(request: dict) -> dict:
        def stance(sentence: str, kind: str = "agrees") -> dict:
            return {**span_of(request, sentence), "stance": kind}

        found = [
            {
                "claim": "Service reviews are owned by the platform operations team.",
                "stances": [stance(REVIEWS)],
            },
            {"claim": "Invoices are kept for ten years.", "stances": [stance(RETENTION)]},
            {
                "claim": "Review ownership and invoice retention are set in different policies.",
                "stances": [stance(REVIEWS, "partly"), stance(RETENTION, "partly")],
            },
        ]
        return {"claims": found + [make(request) for make in extra]}

    return analyse


def unverifiable(request: dict) -> dict:
    item = span_of(request, RETENTION)
    # "nvoices are retained …": inside the candidate, but not a run of whole words.
    return {
        "claim": "Retention is a decade.",
        "stances": [{**item, "start": item["start"] + 1, "stance": "agrees"}],
    }


def test_a_comparison_is_released_as_a_card_and_recorded_in_the_world_model(library, member, fake):
    fake.replies = [model(select=[], plan=plan, analyse=claims(unverifiable))]
    body = ask(member, QUESTION, provider=provider_for(fake))
    assert body["evidence"]["answer_status"] == "evidence_backed", body["quality"]
    assert "comparison_claim_dropped" in body["quality"]["issues"]
    quotes = [c["quote"] for c in body["answer"]["citations"]]
    assert sorted(quotes) == sorted([REVIEWS, RETENTION])
    [card] = [c for c in body["answer"]["cards"] if c["kind"] == "comparison"]
    assert card["label"] == "model_analysis"
    assert [len(c["stances"]) for c in card["claims"]] == [1, 1, 2]  # the decade claim dropped
    assert "Retention is a decade." not in json.dumps(body)
    numbers = {c["number"] for c in body["answer"]["citations"]}
    assert all(s["citation"] in numbers for c in card["claims"] for s in c["stances"])
    [analysis] = [r for r in fake.requests if step(r) == "analyse"]
    assert set(data(analysis)) == {"question", "candidates"}  # documents travel as data
    recorded = WorldClaim.objects.filter(user=member).order_by("id")
    assert [c.text for c in recorded][:2] == [
        "Service reviews are owned by the platform operations team.",
        "Invoices are kept for ten years.",
    ]
    assert {str(c.run_id) for c in recorded} == {body["run_id"]}
    # The comparison's one plan is audited like any round's.
    [generation] = audit_summary(body["run_id"])["generations"]
    assert [p["standalone"] for p in generation["plans"]] == [QUESTION]


def test_fewer_than_three_verified_claims_is_an_unsupported_prerequisite(library, member, fake):
    def two_good_one_bad(request: dict) -> dict:
        good = claims()(request)["claims"][:2]
        return {"claims": [*good, unverifiable(request)]}

    fake.replies = [model(select=[], plan=plan, analyse=two_good_one_bad)]
    body = ask(member, QUESTION, provider=provider_for(fake))
    assert body["evidence"]["answer_status"] == "abstained"
    assert body["answer"]["text"] == explanation("unsupported", "en")
    assert body["answer"]["citations"] == [] and body["answer"]["cards"] == []
    assert {"unsupported_prerequisite:comparison", "comparison_too_few_claims"} <= set(
        body["quality"]["issues"]
    )
    assert not WorldClaim.objects.exists()


def test_an_analysis_that_is_not_the_schema_is_an_unsupported_prerequisite(library, member, fake):
    fake.replies = [model(select=[], plan=plan, analyse=lambda r: {"claims": "all agree"})]
    body = ask(member, QUESTION, provider=provider_for(fake))
    assert body["answer"]["text"] == explanation("unsupported", "en")
    assert "provider_malformed" in body["quality"]["issues"]


def test_a_comparison_only_the_model_saw_falls_back_to_an_ordinary_answer(library, member, fake):
    question = "Who owns service reviews and what is the retention period for invoices?"

    def flagged(request: dict) -> dict:
        return {
            "refers_back": False,
            "standalone": question,
            "searches": SEARCHES,
            "comparison": True,
        }

    def both(request: dict) -> dict:
        return {"facts": [span_of(request, REVIEWS), span_of(request, RETENTION)]}

    fake.replies = [model(select=[both], plan=flagged, analyse=lambda r: {"claims": []})]
    body = ask(member, question, provider=provider_for(fake))
    assert body["evidence"]["answer_status"] == "evidence_backed", body["quality"]
    assert [c["quote"] for c in body["answer"]["citations"]] == [REVIEWS, RETENTION]
    assert "comparison_not_made" in body["quality"]["issues"]
    assert body["answer"]["cards"] == []
    assert not WorldClaim.objects.exists()


def test_the_extractive_provider_still_refuses_comparisons(library, member):
    body = ask(member, QUESTION)
    assert body["answer"]["text"] == explanation("unsupported", "en")
    assert "unsupported_prerequisite:comparison" in body["quality"]["issues"]


def test_a_general_knowledge_answer_is_labelled_sealed_and_has_no_sources(library, member, fake):
    fake.replies = [model(select=[], general="Water boils at 100 degrees Celsius at sea level.")]
    body = ask(
        member,
        "At what temperature does water boil?",
        provider=provider_for(fake),
        evidence_policy={"mode": "general_knowledge", "allowed_tools": []},
    )
    assert body["evidence"]["answer_status"] == "general_knowledge"
    assert body["evidence"]["sources"] == [] and body["answer"]["citations"] == []
    assert body["answer"]["text"] == (
        f"{general_knowledge_label('en')}\nWater boils at 100 degrees Celsius at sea level."
    )
    assert body["release"]["id"] and body["release"]["text_sha256"]
    assert all(step(r) == "general" for r in fake.requests)  # no plan, no retrieval


def step(request: dict) -> str:
    return request["response_format"]["json_schema"]["name"]


# --- the world model ---------------------------------------------------------------------


@pytest.fixture
def compared(library, member, fake) -> dict:
    fake.replies = [model(select=[], plan=plan, analyse=claims())]
    return ask(member, QUESTION, provider=provider_for(fake))


def test_only_the_owner_reads_their_world_model(compared, member, owner, outsider):
    mine = client_for(member).get("/v1/world-model")
    assert mine.status_code == 200
    assert len(mine.json()["results"]) == 3
    first = mine.json()["results"][-1]
    assert first["label"] == "model_analysis" and first["run_id"] == compared["run_id"]
    assert first["stances"][0]["quote"] == REVIEWS
    for other in (owner, outsider):
        response = client_for(other).get("/v1/world-model")
        assert response.status_code == 200 and response.json()["results"] == []


def test_the_world_model_list_costs_the_same_queries_for_more_claims(compared, member, fake):
    from django.test.utils import CaptureQueriesContext

    client = client_for(member)
    client.get("/v1/world-model")  # warm: content types, the key's last use
    with CaptureQueriesContext(connection) as three:
        assert len(client.get("/v1/world-model").json()["results"]) == 3
    fake.replies = [model(select=[], plan=plan, analyse=claims())]
    ask(member, QUESTION, provider=provider_for(fake))
    with CaptureQueriesContext(connection) as six:
        assert len(client.get("/v1/world-model").json()["results"]) == 6
    assert len(six.captured_queries) == len(three.captured_queries) <= 8


def test_a_lost_source_removes_its_stances_from_the_world_model(compared, member, space):
    space_member_remove(space=space, username=member.username)
    assert client_for(member).get("/v1/world-model").json()["results"] == []


def test_a_claim_is_hidden_when_any_of_its_sources_is_lost(compared, member, library, staff):
    """Issue 27 (9): a claim was established by all its sources together; its text does
    not outlive any one of them. Claims whose sources all stay visible are still shown."""
    from knowledge.models import Document
    from knowledge.services import space_create

    elsewhere = space_create(name="Finance", created_by=staff)
    accounting = library["accounting"].revision.document_id
    Document.objects.filter(pk=accounting).update(space=elsewhere)
    results = client_for(member).get("/v1/world-model").json()["results"]
    assert [claim["claim"] for claim in results] == [
        "Service reviews are owned by the platform operations team."
    ]
    assert [s["quote"] for s in results[0]["stances"]] == [REVIEWS]
    dumped = json.dumps(results)
    assert RETENTION not in dumped and "Review ownership" not in dumped
    assert "Invoices are kept" not in dumped


def test_the_world_model_needs_credentials():
    from rest_framework.test import APIClient

    assert APIClient().get("/v1/world-model").status_code == 401
    assert connection.vendor == "postgresql"


def test_the_world_model_admin_shows_no_claim_text_or_quote(compared, member):
    """Issue 27 (8): claims and quotes may come from a private file."""
    from django.contrib.auth import get_user_model
    from django.test import Client

    root = Client()
    root.force_login(get_user_model().objects.create_superuser("root", "r@example.invalid", "pw"))
    claim = WorldClaim.objects.filter(user=member).first()
    for path in (
        "/admin/worldmodel/worldclaim/",
        f"/admin/worldmodel/worldclaim/{claim.pk}/change/",
    ):
        page = root.get(path)
        assert page.status_code == 200
        html = page.content.decode()
        assert claim.text not in html and REVIEWS not in html and RETENTION not in html
