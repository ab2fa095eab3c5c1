"""The run's audit: made by its first generation's publication in one statement, added to
by every later generation, and given the publication step after sealing."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from answers.models import AnswerRun
from answers.pipeline.lifecycle import answer_retry
from audit.models import AnswerAudit
from audit.services import audit_record, audit_step_append
from tests.answers.helpers import ask

pytestmark = pytest.mark.django_db


def _steps(audit: AnswerAudit, number: int) -> list[str]:
    (generation,) = [g for g in audit.generations if g["number"] == number]
    return [step["step"] for step in generation["steps"]]


def test_every_generation_is_in_the_audit_with_its_own_publication_step(library, member):
    body = ask(member, "Who owns service reviews?")
    run = AnswerRun.objects.get(pk=body["run_id"])
    answer_retry(user=member, run=run)

    audit = AnswerAudit.objects.get(run=run)
    assert [g["number"] for g in audit.generations] == [1, 2]
    for number in (1, 2):
        steps = _steps(audit, number)
        assert steps[:2] == ["plan", "retrieval"]
        assert steps.count("publication") == 1 and steps[-1] == "publication"
    assert audit.plan == AnswerRun.objects.get(pk=run.pk).plan


def test_the_first_generation_creates_the_audit_in_one_statement(library, member):
    run = AnswerRun.objects.get(pk=ask(member, "Who owns service reviews?")["run_id"])
    AnswerAudit.objects.filter(run=run).delete()
    generation = {"number": 1, "steps": [{"step": "plan"}]}
    memory = {"id": 7, "text": "note"}

    with CaptureQueriesContext(connection) as queries:
        audit_record(run_id=run.pk, plan={"p": 1}, generation=generation, memories=[memory])
    assert len(queries) == 1
    audit = AnswerAudit.objects.get(run=run)
    assert audit.generations == [{**generation, "memories": [memory]}]
    assert (audit.plan, audit.memories_used) == ({"p": 1}, [memory])

    # A second generation (and the first again, replaced) go to the same row.
    again = {"number": 1, "steps": [{"step": "retrieval"}]}
    audit_record(run_id=run.pk, plan={"p": 2}, generation=again, memories=[memory])
    audit_record(run_id=run.pk, plan={"p": 2}, generation={"number": 2, "steps": []})
    audit = AnswerAudit.objects.get(run=run)
    assert [(g["number"], g["steps"]) for g in audit.generations] == [
        (1, [{"step": "retrieval"}]),
        (2, []),
    ]
    assert (audit.plan, audit.memories_used) == ({"p": 2}, [memory])


def test_a_step_after_sealing_goes_to_its_generation_only(library, member):
    run = AnswerRun.objects.get(pk=ask(member, "Who owns service reviews?")["run_id"])
    audit_record(run_id=run.pk, plan={}, generation={"number": 2, "steps": [{"step": "plan"}]})

    with CaptureQueriesContext(connection) as queries:
        audit_step_append(run_id=run.pk, generation=2, step={"step": "publication", "ms": 1.5})
    assert len(queries) == 1  # no transaction or read of its own

    audit = AnswerAudit.objects.get(run=run)
    assert _steps(audit, 2) == ["plan", "publication"]
    assert _steps(audit, 1).count("publication") == 1  # generation 1 untouched
    # A run without an audit: nothing written, nothing raised.
    AnswerAudit.objects.filter(run=run).delete()
    audit_step_append(run_id=run.pk, generation=1, step={"step": "publication"})
    assert not AnswerAudit.objects.filter(run=run).exists()
