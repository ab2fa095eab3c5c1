"""One run lifecycle: run_start writes the run whole, run_execute reads stored state, and
every failure ends the run `failed` with a typed reason (issue 11)."""

import pytest

from answers.models import AnswerRun, Conversation, Message
from answers.pipeline.lifecycle import (
    RunFailed,
    answer_create,
    answer_mode_check,
    answer_retry,
    answer_stream_start,
    run_execute,
    run_start,
)
from answers.pipeline.request import answer_request_parse
from audit.models import OutputRelease, StreamEvent
from core.errors import ForbiddenError
from tests.answers.helpers import ingest
from tests.answers.providers import ScriptedProvider
from tests.helpers import client_for

pytestmark = pytest.mark.django_db


class PlanExplodes(ScriptedProvider):
    def plan(self, **kwargs):
        raise RuntimeError("secret provider text /etc/koinon")


def test_a_provider_exception_in_plan_ends_the_run_failed_with_a_typed_reason(member):
    run = run_start(
        user=member,
        request=answer_request_parse({"query": "Who owns it?"}),
        provider=PlanExplodes([]),
    )
    with pytest.raises(RunFailed) as failure:
        run_execute(run_id=run.pk, generation=1, provider=PlanExplodes([]))
    assert failure.value.reason == "provider_error"
    assert "secret" not in str(failure.value.detail)
    run.refresh_from_db()
    assert run.status == AnswerRun.Status.FAILED
    assert run.generations.get().status == "failed"
    assert run.response is None
    assert not OutputRelease.objects.filter(run=run).exists()
    events = list(StreamEvent.objects.filter(run=run).values_list("sequence", "event", "data"))
    assert events == [
        (1, "started", {"run_id": str(run.pk), "generation": 1}),
        (2, "step", {"step": "model"}),  # the model was being waited for when it failed
        (3, "failed", {"code": "provider_error"}),
    ]


def test_a_scope_that_cannot_be_read_ends_the_run_failed_not_executing(member, monkeypatch):
    from django.db import OperationalError

    from answers.pipeline import lifecycle

    def unreadable(**kwargs):
        raise OperationalError("the permission rows could not be read")

    monkeypatch.setattr(lifecycle, "access_scope_build", unreadable)
    run = run_start(user=member, request=answer_request_parse({"query": "Who owns it?"}))
    with pytest.raises(RunFailed) as failure:
        run_execute(run_id=run.pk, generation=1)
    # The database failed it: typed as such, and worth trying again (issue 46).
    assert failure.value.reason == "database_unavailable"
    assert failure.value.retry_after
    run.refresh_from_db()
    assert run.status == AnswerRun.Status.FAILED
    assert run.generations.get().status == "failed"


def test_the_answer_api_maps_a_failed_run_to_a_typed_503(member, monkeypatch):
    from answers.pipeline import lifecycle as run_module

    monkeypatch.setattr(run_module, "get_model_provider", lambda: PlanExplodes([]))
    response = client_for(member).post("/v1/answer", {"query": "Who owns it?"}, format="json")
    assert response.status_code == 503
    error = response.json()["error"]
    assert error["code"] == "run_failed" and error["fields"]["reason"] == "provider_error"
    assert "secret" not in response.content.decode()
    run = AnswerRun.objects.get(pk=error["fields"]["run_id"])
    assert run.status == AnswerRun.Status.FAILED


def test_run_start_writes_conversation_run_message_and_generation_together(member):
    run = run_start(
        user=member,
        request=answer_request_parse({"query": "Who owns it?"}),
        provider=ScriptedProvider([]),
    )
    assert run.status == AnswerRun.Status.RUNNING
    assert run.generations.get().number == 1
    assert Message.objects.filter(run=run, role="user", text="Who owns it?").count() == 1
    assert run.conversation.user == member


def test_run_execute_answers_from_the_stored_request(space, owner, member):
    ingest(owner, space, "operations.txt", "The platform operations team owns service reviews.")
    request = answer_request_parse({"query": "Who owns service reviews?", "space_ids": [space.pk]})
    run = run_start(user=member, request=request)
    body = run_execute(run_id=run.pk, generation=1)
    assert body["evidence"]["answer_status"] == "evidence_backed"
    run.refresh_from_db()
    assert run.status == AnswerRun.Status.PUBLISHED and run.response == body


def test_a_generation_executes_once_a_task_delivered_again_changes_nothing(space, owner, member):
    """acks_late redelivers a task whose worker went away: the generation it names is
    taken already, so the second execution writes nothing (one release, one answer)."""
    from answers.pipeline.lifecycle import AlreadyExecuted
    from answers.tasks import run_execute_task

    ingest(owner, space, "operations.txt", "The platform operations team owns service reviews.")
    run = run_start(
        user=member, request=answer_request_parse({"query": "Who owns service reviews?"})
    )
    run_execute_task(str(run.pk), 1)
    run_execute_task(str(run.pk), 1)  # delivered again
    with pytest.raises(AlreadyExecuted):
        run_execute(run_id=run.pk, generation=1)
    run.refresh_from_db()
    assert run.status == AnswerRun.Status.PUBLISHED
    assert OutputRelease.objects.filter(run=run).count() == 1
    assert Message.objects.filter(run=run, role="assistant").count() == 1
    assert [e for (e,) in StreamEvent.objects.filter(run=run).values_list("event")][
        -1
    ] == "completed"


def test_a_generation_whose_execution_was_lost_ends_failed_not_running(member):
    """A worker that died mid-run leaves the generation `executing`; the task delivered
    again ends it `failed` (worker_lost) with a failed event, so nothing stays running."""
    from answers.models import Generation
    from answers.pipeline.lifecycle import AlreadyExecuted

    run = run_start(
        user=member,
        request=answer_request_parse({"query": "Who owns it?"}),
        provider=ScriptedProvider([]),
    )
    Generation.objects.filter(run=run).update(status="executing")  # the lost execution
    with pytest.raises(AlreadyExecuted):
        run_execute(run_id=run.pk, generation=1, provider=ScriptedProvider([]))
    run.refresh_from_db()
    assert run.status == AnswerRun.Status.FAILED
    assert run.generations.get().status == "failed"
    events = list(StreamEvent.objects.filter(run=run).values_list("event", "data"))
    assert events[-1] == ("failed", {"code": "worker_lost"})


# --- debug mode is for staff: a rule of the service (issue 49, item 2) ----------------

DEBUG = {"query": "Who owns service reviews?", "mode": "debug"}


@pytest.mark.parametrize("start", [run_start, answer_create, answer_stream_start])
def test_debug_from_someone_not_staff_is_refused_by_the_service_with_nothing_written(member, start):
    with pytest.raises(ForbiddenError) as refused:
        start(user=member, request=answer_request_parse(DEBUG))
    assert (refused.value.status_code, refused.value.error_code) == (403, "permission_denied")
    assert str(refused.value.detail) == "Debug mode is for staff."
    assert not Conversation.objects.exists() and not AnswerRun.objects.exists()


def test_staff_get_debug_and_retry_it_while_they_are_staff(library, staff):
    body = answer_create(user=staff, request=answer_request_parse(DEBUG))
    assert body["mode"] == "debug" and body["trace"]["candidates"]
    run = AnswerRun.objects.get(pk=body["run_id"])
    assert answer_retry(user=staff, run=run)["trace"]["candidates"]
    staff.is_staff = False
    staff.save(update_fields=["is_staff"])
    with pytest.raises(ForbiddenError) as refused:
        answer_retry(user=staff, run=run)
    assert refused.value.error_code == "permission_denied"
    assert run.generations.count() == 2  # the refused retry wrote nothing


def test_every_other_mode_is_anyones(member):
    for mode in ("ask", "quick", "pro", "deep", "agent", "plan", "raw"):
        answer_mode_check(user=member, mode=mode)
