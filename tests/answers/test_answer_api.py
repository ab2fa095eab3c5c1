"""POST /v1/answer, GET /v1/runs/<id>, modes and the `ask` command."""

from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from rest_framework.test import APIClient

from answers.models import AnswerRun, Card, Citation, Message
from answers.pipeline import publication
from answers.pipeline.lifecycle import RunFailed
from audit.services import audit_summary
from core.services import api_key_create, api_key_revoke
from tests.answers.helpers import MIXED_QUESTION, ask
from tests.answers.providers import ScriptedProvider
from tests.core.test_api_keys import assert_error
from tests.helpers import client_for

pytestmark = pytest.mark.django_db


def post(client, **body):
    return client.post("/v1/answer", body, format="json")


def test_the_answer_api_returns_the_sealed_body_and_the_run_replays_it(library, member, outsider):
    client = client_for(member)
    response = post(client, query=MIXED_QUESTION)
    assert response.status_code == 200
    body = response.json()
    assert body["evidence"]["answer_status"] == "evidence_backed"
    assert "SUM(orders.amount) = 4,000" in body["answer"]["text"]
    run = AnswerRun.objects.get(pk=body["run_id"])
    assert run.api_key is not None and run.api_key.user == member
    assert client.get(f"/v1/runs/{body['run_id']}").json() == body
    assert_error(client_for(outsider).get(f"/v1/runs/{body['run_id']}"), 404, "not_found")
    assert_error(client.get("/v1/runs/not-a-uuid"), 404, "not_found")
    assert_error(client.get("/v1/runs/00000000-0000-0000-0000-000000000000"), 404, "not_found")


@pytest.mark.parametrize(
    ("body", "code", "field"),
    [
        ({"query": ""}, "empty_query", "query"),
        ({"query": "   "}, "empty_query", "query"),
        ({"query": "x" * 2001}, "query_too_long", "query"),
        ({}, "empty_query", "query"),
        ({"query": "ok", "mode": "turbo"}, "invalid", "mode"),
        ({"query": "ok", "stream": "yes"}, "invalid", "stream"),
        ({"query": "ok", "stream": 1}, "invalid", "stream"),
        ({"query": "ok", "stream": True, "stream_version": "2"}, "invalid", "stream_version"),
        ({"query": "ok", "stream_version": 1}, "invalid", "stream_version"),
        ({"query": "ok", "language": "xx"}, "invalid", "language"),
        ({"query": "ok", "space_ids": ["1"]}, "invalid", "space_ids"),
        ({"query": "ok", "selected_sources": "all"}, "invalid", "selected_sources"),
        ({"query": "ok", "temperature": 2}, "invalid", "temperature"),
    ],
)
def test_bad_requests_are_422_naming_the_field(member, body, code, field):
    error = assert_error(client_for(member).post("/v1/answer", body, format="json"), 422, code)
    assert field in error["fields"]
    assert not AnswerRun.objects.exists()


def test_a_revoked_key_is_401(member):
    issued = api_key_create(user=member)
    api_key_revoke(prefix=issued.api_key.prefix)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {issued.secret}")
    assert_error(post(client, query="Who owns service reviews?"), 401, "invalid_credentials")


def test_someone_elses_conversation_is_404(library, member, outsider):
    run = AnswerRun.objects.get(pk=ask(member, "Who owns service reviews?")["run_id"])
    response = post(client_for(outsider), query="And backups?", conversation_id=run.conversation_id)
    assert_error(response, 404, "not_found")


def test_raw_mode_returns_unverified_results_and_no_prose(library, member):
    body = post(client_for(member), query="Who owns service reviews?", mode="raw").json()
    assert body["label"] == "unverified"
    assert body["answer"]["text"] == "" and body["answer"]["citations"] == []
    assert body["evidence"]["answer_status"] == "unverified"
    assert any("owns service reviews" in (r["text"] or "") for r in body["results"])


def test_plan_mode_returns_the_plan_only(library, member):
    body = post(client_for(member), query=MIXED_QUESTION, mode="plan").json()
    assert len(body["plan"]["searches"]) == 3
    assert body["plan"]["dataset_queries"][0]["sql"].startswith("SELECT SUM(")
    assert body["answer"]["text"] == "" and body["evidence"]["outcomes"] == []


def test_debug_mode_is_for_staff_and_shows_the_trace(library, member, staff):
    # The service refuses (answer_mode_check); the API passes its typed error on, inline
    # and streamed alike, before anything is written.
    for stream in (False, True):
        error = assert_error(
            post(
                client_for(member), query="Who owns service reviews?", mode="debug", stream=stream
            ),
            403,
            "permission_denied",
        )
        assert error["message"] == "Debug mode is for staff."
    assert not AnswerRun.objects.exists()
    body = post(client_for(staff), query="Who owns service reviews?", mode="debug").json()
    steps = [step["step"] for step in body["trace"]["steps"]]
    assert steps[:4] == ["plan", "retrieval", "term_weights", "selection"]
    assert "judgement" in steps and "rendering" in steps
    audit = client_for(staff).get(f"/v1/runs/{body['run_id']}/audit").json()
    [publication_step] = [s for s in audit["generations"][0]["steps"] if s["step"] == "publication"]
    assert publication_step["ms"] > 0
    assert body["trace"]["candidates"]


def test_a_debug_run_is_retried_only_by_someone_still_staff(library, staff):
    client = client_for(staff)
    body = post(client, query="Who owns service reviews?", mode="debug").json()
    retried = client.post(f"/v1/runs/{body['run_id']}/retry", {}, format="json")
    assert retried.status_code == 200, retried.content
    assert retried.json()["generation"] == 2 and retried.json()["trace"]["candidates"]
    staff.is_staff = False
    staff.save(update_fields=["is_staff"])
    refused = client.post(f"/v1/runs/{body['run_id']}/retry", {}, format="json")
    error = assert_error(refused, 403, "permission_denied")
    assert error["message"] == "Debug mode is for staff."
    assert AnswerRun.objects.get().generations.count() == 2  # nothing written


def test_the_ask_command_passes_on_the_debug_refusal(library, member, staff):
    with pytest.raises(CommandError, match=r"permission_denied: Debug mode is for staff\."):
        call_command("ask", "Who owns service reviews?", "--user", "member", "--mode", "debug")
    out = StringIO()
    call_command(
        "ask",
        "Who owns service reviews?",
        "--user",
        "staff",
        "--mode",
        "debug",
        "--json",
        stdout=out,
    )
    assert '"trace"' in out.getvalue()


@pytest.mark.parametrize("mode", ["quick", "pro", "deep", "agent"])
def test_every_depth_mode_answers_under_the_same_rules(library, member, mode):
    body = post(client_for(member), query="Who owns service reviews?", mode=mode).json()
    assert body["mode"] == mode
    assert body["evidence"]["answer_status"] == "evidence_backed"
    assert "“The platform operations team owns service reviews.”" in body["answer"]["text"]


def test_agent_mode_tries_further_rounds_when_the_first_finds_nothing(library, member):
    calls = []

    def select(candidates):
        calls.append(len(candidates))
        if len(calls) <= 3:  # every attempt of round one comes back empty
            return {"facts": []}
        quote = next(c for c in candidates if "owns service reviews" in c.text)
        return {"facts": [{"fact_id": quote.fact_id}]}

    body = ask(
        member, "Who owns service reviews?", mode="agent", provider=ScriptedProvider([select])
    )
    assert body["evidence"]["answer_status"] == "evidence_backed"
    assert len(calls) == 4  # three attempts in round one, success in round two
    assert AnswerRun.objects.get(pk=body["run_id"]).generations.get().attempts == 4
    # Both rounds are in the audit: each round's retrieval and every selection attempt.
    [generation] = audit_summary(body["run_id"])["generations"]
    steps = generation["steps"]
    assert [s["round"] for s in steps if s["step"] == "retrieval"] == [1, 2]
    assert [s["ok"] for s in steps if s["step"] == "validation"] == [False] * 3 + [True]
    # Every round's plan: the first as stored on the run, then the broadened one.
    run = AnswerRun.objects.get(pk=body["run_id"])
    first, second = generation["plans"]
    assert first == run.plan
    assert second["searches"] == ["owns service reviews"] != first["searches"]


def test_attempts_are_added_to_the_generation_once_when_it_is_published(library, member):
    body = ask(member, "Who owns service reviews?", provider=ScriptedProvider([{"facts": []}] * 3))
    assert body["evidence"]["answer_status"] == "abstained"
    run = AnswerRun.objects.get(pk=body["run_id"])
    assert run.generations.get().attempts == 3  # three selection attempts, counted once
    retried = client_for(member).post(f"/v1/runs/{run.pk}/retry", {}, format="json")
    assert retried.status_code == 200, retried.content
    assert [g.attempts for g in run.generations.order_by("number")] == [3, 1]


def test_publication_is_all_or_nothing(library, member, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(publication.Card.objects, "bulk_create", broken)
    with pytest.raises(RunFailed) as failure:
        ask(member, MIXED_QUESTION)
    assert failure.value.reason == "internal_error"
    assert not Message.objects.filter(role="assistant").exists()
    assert not Citation.objects.exists() and not Card.objects.exists()
    run = AnswerRun.objects.get()
    # Nothing of the publication exists, and the run does not stay "running".
    assert run.response is None and run.status == "failed"


def test_the_ask_command_prints_the_sealed_answer(library, member):
    out = StringIO()
    call_command("ask", "Who owns service reviews?", "--user", "member", stdout=out)
    assert "“The platform operations team owns service reviews.”" in out.getvalue()
    assert "evidence_backed" in out.getvalue()
    out = StringIO()
    call_command("ask", "Who owns service reviews?", "--user", "member", "--json", stdout=out)
    assert '"answer_status": "evidence_backed"' in out.getvalue()
