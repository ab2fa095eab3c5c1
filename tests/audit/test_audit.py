"""The run's audit: a row per published generation, written by its publication in one
statement, and the publication step after sealing as a row of its own. A record: neither
is ever changed or deleted (issue 48, item 2)."""

import pytest
from django.db import DatabaseError, connection, transaction
from django.test.utils import CaptureQueriesContext

from answers.models import AnswerRun
from answers.pipeline.lifecycle import answer_retry
from audit.models import AnswerAudit, AuditStep
from audit.services import audit_record, audit_step_append, audit_summary
from tests.answers.helpers import ask

pytestmark = pytest.mark.django_db


def _steps(run_id, number: int) -> list[str]:
    (generation,) = [g for g in audit_summary(run_id)["generations"] if g["number"] == number]
    return [step["step"] for step in generation["steps"]]


def test_every_generation_is_in_the_audit_with_its_own_publication_step(library, member):
    body = ask(member, "Who owns service reviews?")
    run = AnswerRun.objects.get(pk=body["run_id"])
    answer_retry(user=member, run=run)

    audit = audit_summary(run.pk)
    assert [g["number"] for g in audit["generations"]] == [1, 2]
    assert list(AnswerAudit.objects.filter(run=run).values_list("number", flat=True)) == [1, 2]
    for number in (1, 2):
        steps = _steps(run.pk, number)
        assert steps[:2] == ["plan", "retrieval"]
        assert steps.count("publication") == 1 and steps[-1] == "publication"
    assert audit["plan"] == AnswerRun.objects.get(pk=run.pk).plan


def test_each_generation_is_audited_in_one_statement_and_never_rewritten(library, member):
    run = AnswerRun.objects.get(pk=ask(member, "Who owns service reviews?")["run_id"])
    generation = {"number": 2, "steps": [{"step": "plan"}]}
    memory = {"id": 7, "text": "note"}

    with CaptureQueriesContext(connection) as queries:
        assert audit_record(run_id=run.pk, plan={"p": 2}, generation=generation, memories=[memory])
    assert len(queries) == 1
    row = AnswerAudit.objects.get(run=run, number=2)
    assert row.generation == {**generation, "memories": [memory]} and row.plan == {"p": 2}

    # The same generation again: the first row stands (a record is not rewritten).
    again = {"number": 2, "steps": [{"step": "retrieval"}]}
    assert not audit_record(run_id=run.pk, plan={"p": 3}, generation=again)
    audit = audit_summary(run.pk)
    assert [g["number"] for g in audit["generations"]] == [1, 2]
    assert audit["generations"][1]["steps"] == [{"step": "plan"}]
    assert audit["plan"] == {"p": 2}  # the latest generation's plan
    assert audit["memories_used"][-1] == memory


def test_a_step_after_sealing_goes_to_its_generation_only(library, member):
    run = AnswerRun.objects.get(pk=ask(member, "Who owns service reviews?")["run_id"])
    audit_record(run_id=run.pk, plan={}, generation={"number": 2, "steps": [{"step": "plan"}]})

    with CaptureQueriesContext(connection) as queries:
        audit_step_append(run_id=run.pk, generation=2, step={"step": "publication", "ms": 1.5})
    assert len(queries) == 1  # no transaction or read of its own

    assert _steps(run.pk, 2) == ["plan", "publication"]
    assert _steps(run.pk, 1).count("publication") == 1  # generation 1 untouched
    # A generation without an audit: nothing written, nothing raised.
    before = AuditStep.objects.count()
    audit_step_append(run_id=run.pk, generation=3, step={"step": "publication"})
    assert AuditStep.objects.count() == before


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE audit_answeraudit SET plan = '{}'",
        'UPDATE audit_answeraudit SET generation = \'{"number": 1, "steps": []}\'',
        "DELETE FROM audit_answeraudit",
        "TRUNCATE audit_answeraudit CASCADE",
        "UPDATE audit_auditstep SET step = '{}'",
        "DELETE FROM audit_auditstep",
        "TRUNCATE audit_auditstep",
    ],
)
def test_the_audit_is_a_record_even_for_the_tables_owner(library, member, statement):
    """What `/v1/runs/<id>/audit` serves cannot be changed after the fact: the triggers
    refuse the owner too (the runtime role has no UPDATE or DELETE at all:
    tests/core/test_runtime_role.py)."""
    run_id = ask(member, "Who owns service reviews?")["run_id"]
    before = audit_summary(run_id)
    with (
        pytest.raises(DatabaseError, match="append-only"),
        transaction.atomic(),
        connection.cursor() as cursor,
    ):
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")  # the test's own inserts, checked
        cursor.execute(statement)
    assert audit_summary(run_id) == before


@pytest.mark.django_db(transaction=True)
def test_an_audit_kept_as_one_row_per_run_becomes_a_row_per_generation(library, member):
    """Upgrading a database whose audits are one row per run (every generation in a list,
    the publication step inside it) splits them, and going back joins them again."""
    from django.db.migrations.executor import MigrationExecutor

    run = AnswerRun.objects.get(pk=ask(member, "Who owns service reviews?")["run_id"])
    answer_retry(user=member, run=run)
    now = audit_summary(run.pk)
    before, after = [("audit", "0006_log_subtree")], [("audit", "0007_audit_records")]

    executor = MigrationExecutor(connection)
    executor.migrate(before)
    old = executor.loader.project_state(before).apps.get_model("audit", "AnswerAudit")
    (row,) = old.objects.filter(run_id=run.pk)
    assert row.generations == now["generations"]  # publication steps back inside
    assert row.plan == now["plan"] and row.memories_used == now["memories_used"]

    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())
    assert audit_summary(run.pk)["generations"] == now["generations"]
    assert list(AnswerAudit.objects.filter(run=run).values_list("number", flat=True)) == [1, 2]
    assert after[0] in MigrationExecutor(connection).loader.applied_migrations
