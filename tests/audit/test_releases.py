"""Sealed releases: append-only in PostgreSQL, complete or absent, recomputable hashes."""

import copy
import hashlib
import json

import pytest
import rfc8785
from django.contrib.auth import get_user_model
from django.db import DatabaseError, IntegrityError, connection, transaction
from django.db.models import ProtectedError
from koinon_client import Release

from answers.models import AnswerRun, Card, Citation, Conversation, Generation, Message
from answers.pipeline.lifecycle import RunFailed, answer_retry
from audit.models import AnswerAudit, OutputRelease, StreamEvent
from audit.receipts import body_hashes
from conversations.services import export_verify
from datasets.services import dataset_upload
from tests.answers.helpers import MIXED_QUESTION, ask
from tests.helpers import client_for

pytestmark = pytest.mark.django_db

RELEASE_COLUMNS = [
    "run_id",
    "message_id",
    "generation_id",
    "kind",
    "reset_context",
    "policy_version",
    "publication_sequence",
    "selected_fact_ids",
    "source_refs",
    "result_hashes",
    "text_sha256",
    "citations_sha256",
    "cards_sha256",
    "policy_sha256",
    "searched",
    "created_at",
]
NEW_VALUE = {
    "run_id": "run_id",
    "message_id": "message_id",
    "generation_id": "NULL",
    "kind": "'refusal'",
    "reset_context": "reset_context + 1",
    "policy_version": "'2'",
    "publication_sequence": "publication_sequence + 1000",
    "selected_fact_ids": "'[]'",
    "source_refs": "'[]'",
    "result_hashes": "'{}'",
    "text_sha256": "'x'",
    "citations_sha256": "'x'",
    "cards_sha256": "'x'",
    "policy_sha256": "'x'",
    "searched": "'{}'",
    "created_at": "now()",
}


def refused_in_savepoint(sql: str, params: list | None = None) -> str:
    """Run sql in its own savepoint; return the database's error text (it must fail)."""
    with pytest.raises(DatabaseError) as failure, transaction.atomic(), connection.cursor() as c:
        c.execute("SET CONSTRAINTS ALL IMMEDIATE")
        c.execute(sql, params or [])
    return str(failure.value)


def test_the_body_carries_a_release_whose_hashes_recompute(published):
    release = published["release"]
    answer, policy = published["answer"], published["evidence"]["policy"]

    def canonical(value: object) -> bytes:  # RFC 8785, as docs/releases.md specifies
        return rfc8785.dumps(value)

    assert release["kind"] == "answer" and release["policy_version"] == "2"
    assert release["text_sha256"] == hashlib.sha256(answer["text"].encode("utf-8")).hexdigest()
    assert release["citations_sha256"] == hashlib.sha256(canonical(answer["citations"])).hexdigest()
    assert release["cards_sha256"] == hashlib.sha256(canonical(answer["cards"])).hexdigest()
    assert release["policy_sha256"] == hashlib.sha256(canonical(policy)).hexdigest()
    row = OutputRelease.objects.get(pk=release["id"])
    assert row.text_sha256 == release["text_sha256"] and row.policy_version == "2"
    assert sorted(row.selected_fact_ids) == sorted(c["fact_id"] for c in answer["citations"])
    assert {r["type"] for r in row.source_refs} == {"revision", "snapshot"}
    assert row.result_hashes["queries"]  # the SUM's governed query result hash


def test_a_version_1_release_keeps_its_version_and_verifies_the_old_way(
    space, owner, member, monkeypatch
):
    """A release sealed before version 2 (here: sealed as version 1 was) is read, shown,
    exported and verified by the recipe of its own version, by the server and the client."""
    samples = b"sample,weight\nS-1,0.0000001\nS-2,0.00000005\n"
    dataset_upload(user=owner, space=space, filename="s.csv", data=samples, table="samples")
    question = "What is the total weight of the samples?"
    monkeypatch.setattr("audit.services.POLICY_VERSION", "1")
    old = ask(member, question)
    monkeypatch.undo()
    new = ask(member, question, conversation_id=old_conversation(old))
    assert (old["release"]["policy_version"], new["release"]["policy_version"]) == ("1", "2")

    def legacy(value: object) -> bytes:  # version 1's recipe in docs/releases.md
        return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()

    row = OutputRelease.objects.get(pk=old["release"]["id"])
    assert row.policy_version == "1"
    assert row.cards_sha256 == hashlib.sha256(legacy(old["answer"]["cards"])).hexdigest()
    assert row.policy_sha256 == hashlib.sha256(legacy(old["evidence"]["policy"])).hexdigest()
    # The two recipes differ on this body (1.5e-07 against 1.5e-7), so each is checked.
    assert body_hashes(old, policy_version="2") != body_hashes(old, policy_version="1")
    client = client_for(member)
    for body in (old, new):
        served = client.get(f"/v1/runs/{body['run_id']}").json()
        assert Release.from_body(served).verify(served)
        assert served["release"] == body["release"]
    export = client.get(f"/v1/conversations/{old_conversation(old)}/export").json()
    assert export_verify(export).problems == []
    forged = copy.deepcopy(export)
    forged["messages"][1]["body"]["answer"]["cards"][0]["value"] = 1.6e-07
    assert export_verify(forged).problems == [
        f"message 2: cards_sha256 does not match release {old['release']['id']}"
    ]
    client.force_login(member)
    page = client.get(f"/runs/{old['run_id']}/receipt/1/").content.decode()
    assert "does not match" not in page and "ensure_ascii=False" in page
    page = client.get(f"/runs/{new['run_id']}/receipt/1/").content.decode()
    assert "does not match" not in page and "rfc8785.dumps(x)" in page


def old_conversation(body: dict) -> int:
    return AnswerRun.objects.get(pk=body["run_id"]).conversation_id


@pytest.mark.parametrize("column", RELEASE_COLUMNS)
def test_every_column_update_is_refused_by_the_trigger(published, column):
    error = refused_in_savepoint(
        f"UPDATE audit_outputrelease SET {column} = {NEW_VALUE[column]}"  # noqa: S608
    )
    assert "append-only (UPDATE refused)" in error


def test_delete_and_truncate_are_refused(published):
    assert "append-only (DELETE refused)" in refused_in_savepoint("DELETE FROM audit_outputrelease")
    error = refused_in_savepoint("TRUNCATE audit_outputrelease CASCADE")
    assert "TRUNCATE refused" in error
    assert OutputRelease.objects.count() == 1


def test_the_orm_cannot_change_or_delete_a_release(published):
    release = OutputRelease.objects.get()
    release.kind = "refusal"
    attempts = [
        release.save,
        release.delete,
        lambda: OutputRelease.objects.update(text_sha256="x"),
        lambda: OutputRelease.objects.all().delete(),
    ]
    for attempt in attempts:
        with pytest.raises(DatabaseError), transaction.atomic():
            attempt()
    release.refresh_from_db()
    assert release.kind == "answer"


def test_deleting_anything_a_release_references_fails(published):
    run = AnswerRun.objects.get(pk=published["run_id"])
    message = Message.objects.get(run=run, role="assistant")
    user_id = run.user_id
    for table, pk in [
        ("answers_answerrun", f"'{run.pk}'"),
        ("answers_message", message.pk),
        ("answers_conversation", run.conversation_id),
        ("auth_user", user_id),
        ("answers_generation", run.generations.get().pk),
    ]:
        refused_in_savepoint(f"DELETE FROM {table} WHERE id = {pk}")  # noqa: S608
    for obj in (
        run,
        message,
        Conversation.objects.get(pk=run.conversation_id),
        get_user_model().objects.get(pk=user_id),
    ):
        with pytest.raises((ProtectedError, IntegrityError, DatabaseError)), transaction.atomic():
            obj.delete()
    assert AnswerRun.objects.filter(pk=run.pk).exists() and OutputRelease.objects.count() == 1
    assert Message.objects.filter(pk=message.pk).exists()


def test_one_release_per_generation_and_one_model_free_refusal_per_context(published):
    release = OutputRelease.objects.get()
    columns = ", ".join(c for c in RELEASE_COLUMNS if c != "publication_sequence")
    copy = f"""INSERT INTO audit_outputrelease (id, publication_sequence, {columns})
               SELECT gen_random_uuid(), nextval('audit_publication_sequence'), {columns}
               FROM audit_outputrelease"""  # noqa: S608
    assert "audit_release_run_generation_uniq" in refused_in_savepoint(copy)

    refusal = ask(release.run.user, "Which moons orbit Jupiter?")  # no evidence: no model call
    refusal_row = OutputRelease.objects.get(pk=refusal["release"]["id"])
    assert (refusal_row.kind, refusal_row.generation_id) == ("refusal", None)
    second = copy + f" WHERE id = '{refusal_row.pk}'"
    assert "audit_release_run_context_refusal_uniq" in refused_in_savepoint(second)


def test_a_retry_appends_a_generation_and_keeps_earlier_receipts(library, member):
    first = ask(member, "Which moons orbit Jupiter?")
    run = AnswerRun.objects.get(pk=first["run_id"])
    retried = answer_retry(user=member, run=run)
    assert retried["generation"] == 2 and retried["release"]["reset_context"] == 1
    releases = list(OutputRelease.objects.filter(run=run).order_by("publication_sequence"))
    assert [(r.kind, r.reset_context) for r in releases] == [("refusal", 0), ("refusal", 1)]
    assert str(releases[0].pk) == first["release"]["id"]
    # A retry of an answerable run publishes generation 2 beside generation 1's receipt.
    answered = AnswerRun.objects.get(pk=ask(member, "Who owns service reviews?")["run_id"])
    again = answer_retry(user=member, run=answered)
    assert again["evidence"]["answer_status"] == "evidence_backed"
    assert sorted(
        OutputRelease.objects.filter(run=answered).values_list("generation__number", flat=True)
    ) == [1, 2]
    assert client_for(member).get(f"/v1/runs/{answered.pk}").json()["generation"] == 2


def test_publication_writes_events_and_audit_with_the_release(published, member):
    run_id = published["run_id"]
    events = list(StreamEvent.objects.filter(run_id=run_id).order_by("sequence"))
    assert events[0].event == "started" and events[-1].event == "completed"
    assert events[-1].data["payload"]["result"] == published
    assert [e.sequence for e in events] == list(range(1, len(events) + 1))
    audit = client_for(member).get(f"/v1/runs/{run_id}/audit").json()
    [generation] = audit["generations"]
    assert generation["output_release"]["id"] == published["release"]["id"]
    assert {s["step"] for s in generation["steps"]} >= {
        "plan",
        "retrieval",
        "selection",
        "validation",
        "publication",
    }
    assert generation["retrieval"]["candidate_fact_ids"]
    assert generation["sql"] and "SUM" in generation["sql"][0]["planned"]


def test_the_audit_has_no_release_where_none_was_recorded(library, member, outsider):
    body = ask(member, "Who owns service reviews?", mode="raw")
    assert body["release"] is None
    audit = client_for(member).get(f"/v1/runs/{body['run_id']}/audit").json()
    assert "output_release" not in audit["generations"][0]
    assert client_for(outsider).get(f"/v1/runs/{body['run_id']}/audit").status_code == 404


# Each write of the publication transaction; `when` picks the publication's own call
# where the same method is also used earlier in the run.
WRITES = [
    (
        "answers.pipeline.publication.Message.objects",
        "create",
        lambda kwargs: kwargs.get("role") == "assistant",
    ),
    ("answers.pipeline.publication.Citation.objects", "bulk_create", None),
    ("answers.pipeline.publication.Card.objects", "bulk_create", None),
    ("audit.services.OutputRelease.objects", "create", None),
    ("audit.services.StreamEvent.objects", "bulk_create", None),
    ("answers.pipeline.publication", "audit_record", None),
    (
        "answers.pipeline.publication.AnswerRun",
        "save",
        lambda kwargs: "response" in (kwargs.get("update_fields") or ()),
    ),
]


def _resolve(dotted: str) -> object:
    """Import the longest module prefix of a dotted path, then follow attributes."""
    import importlib

    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for name in parts[cut:]:
            found = getattr(found, name)
        return found
    raise LookupError(dotted)


@pytest.mark.parametrize(
    ("target", "method", "when"), WRITES, ids=[f"{t.split('.')[-2]}.{m}" for t, m, _ in WRITES]
)
def test_a_failure_at_any_write_leaves_nothing_partial(
    library, member, monkeypatch, target, method, when
):
    owner = _resolve(target)
    original = getattr(owner, method)

    def fail(*args, **kwargs):
        if when is None or when(kwargs):
            raise DatabaseError("injected failure")
        return original(*args, **kwargs)

    monkeypatch.setattr(owner, method, fail)
    with pytest.raises(RunFailed) as failure:
        ask(member, MIXED_QUESTION)
    assert failure.value.reason == "internal_error"
    assert not Message.objects.filter(role="assistant").exists()
    assert not Citation.objects.exists() and not Card.objects.exists()
    assert not OutputRelease.objects.exists() and not AnswerAudit.objects.exists()
    # Only the failure is there to replay (when the event table itself is not what failed):
    # the steps and tool activity that had happened, never a completed answer.
    events = set(StreamEvent.objects.values_list("event", flat=True))
    assert events <= {"started", "step", "tool", "failed"}
    run = AnswerRun.objects.get()
    assert run.response is None
    assert Generation.objects.get(run=run).status != "published"


def test_the_runtime_role_cannot_change_releases_even_without_triggers(published):
    """Defence in depth: with only INSERT/SELECT, even disabled triggers change nothing."""
    role = f"koinon_runtime_test_{connection.settings_dict['NAME']}"[:60]
    with connection.cursor() as cursor:
        cursor.execute(f'CREATE ROLE "{role}" NOLOGIN')
        cursor.execute(f'GRANT USAGE ON SCHEMA public TO "{role}"')
        cursor.execute(f'GRANT SELECT, INSERT ON audit_outputrelease TO "{role}"')
        # The owner disables the triggers beforehand: only the grants protect the rows now.
        cursor.execute("ALTER TABLE audit_outputrelease DISABLE TRIGGER USER")
        cursor.execute(f'SET ROLE "{role}"')
        try:
            cursor.execute("SELECT count(*) FROM audit_outputrelease")
            assert cursor.fetchone() == (1,)
            for statement in (
                "UPDATE audit_outputrelease SET kind = 'refusal'",
                "DELETE FROM audit_outputrelease",
                "TRUNCATE audit_outputrelease",
            ):
                assert "permission denied" in refused_in_savepoint(statement)
        finally:
            cursor.execute("RESET ROLE")
            cursor.execute("ALTER TABLE audit_outputrelease ENABLE TRIGGER USER")
    assert OutputRelease.objects.get().kind == "answer"


def test_releases_and_audits_are_read_only_in_admin(published):
    from django.test import Client

    admin = Client()
    admin.force_login(get_user_model().objects.create_superuser("root", "r@example.invalid", "pw"))
    release = OutputRelease.objects.get()
    audit = AnswerAudit.objects.get()
    assert admin.get("/admin/audit/outputrelease/").status_code == 200
    assert admin.get(f"/admin/audit/outputrelease/{release.pk}/change/").status_code == 200
    assert admin.get("/admin/audit/outputrelease/add/").status_code == 403
    assert (
        admin.post(f"/admin/audit/outputrelease/{release.pk}/delete/", {"post": "yes"}).status_code
        == 403
    )
    assert (
        admin.post(f"/admin/audit/answeraudit/{audit.pk}/delete/", {"post": "yes"}).status_code
        == 403
    )
    page = admin.post(f"/admin/audit/outputrelease/{release.pk}/change/", {"kind": "refusal"})
    assert page.status_code == 403
    release.refresh_from_db()
    assert release.kind == "answer"


def test_stream_events_and_mcp_tool_calls_are_append_only(published, member):
    """Issue 27 (10): what replays, exports and the chat serve, and the MCP audit, are
    records — PostgreSQL refuses to change or remove them."""
    from mcp_server.models import ToolCall

    call = ToolCall.objects.create(
        user=member,
        key_prefix="k",
        transport="http",
        tool="search",
        arguments={},
        result_count=1,
        duration_ms=1,
    )
    for statement in (
        "UPDATE audit_streamevent SET data = '{}'::jsonb",
        "DELETE FROM audit_streamevent",
        "TRUNCATE audit_streamevent CASCADE",
        "UPDATE mcp_server_toolcall SET result_count = 0",
        "DELETE FROM mcp_server_toolcall",
        "TRUNCATE mcp_server_toolcall",
    ):
        assert "append-only" in refused_in_savepoint(statement), statement
    assert StreamEvent.objects.filter(run_id=published["run_id"], event="completed").exists()
    assert ToolCall.objects.get(pk=call.pk).result_count == 1


def test_a_runs_sealed_body_is_written_once_per_generation(published, member):
    """Issue 27 (10): the body may only move on to a newer generation's sealed body (the
    one its append-only `completed` event holds); a retry still publishes."""
    run_id = published["run_id"]
    forged = {**published, "answer": {**published["answer"], "text": "Forged."}}
    for statement, params in (
        (
            "UPDATE answers_answerrun SET response = %s::jsonb WHERE id = %s",
            [json.dumps(forged), run_id],
        ),
        ("UPDATE answers_answerrun SET response = NULL WHERE id = %s", [run_id]),
        (
            "UPDATE answers_answerrun SET response = %s::jsonb WHERE id = %s",
            [json.dumps({**forged, "generation": 2}), run_id],
        ),
    ):
        assert "written once" in refused_in_savepoint(statement, params)
    run = AnswerRun.objects.get(pk=run_id)
    assert run.response == published
    answer_retry(user=member, run=run)
    run.refresh_from_db()
    assert run.response["generation"] == 2 and run.response["release"] is not None
    older = StreamEvent.objects.get(run_id=run_id, generation=1, event="completed")
    assert "written once" in refused_in_savepoint(
        "UPDATE answers_answerrun SET response = %s::jsonb WHERE id = %s",
        [json.dumps(older.data["payload"]["result"]), run_id],
    )
