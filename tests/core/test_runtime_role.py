"""What the runtime role (what Daphne and Celery connect as) may write, table by table
(issue 48, items 1 and 2). Every table the project owns has a declared verdict here, so a
new table without one fails; each verdict is then tried as the role, with UPDATE, DELETE,
TRUNCATE and INSERT, and the temporary-schema trick that once opened the erasure gate."""

import json

import pytest
from django.db import DatabaseError, connection, transaction

from answers.models import AnswerRun
from tests.answers.helpers import ask

pytestmark = pytest.mark.django_db

OPEN = "open"  # the app's working rows: read, insert, update, delete (never TRUNCATE)
RECORD = "record"  # append-only: SELECT and INSERT only
ERASURE_LOG = "erasure log"  # a record whose rows only koinon_erase_revision inserts

VERDICTS = {
    # Sealed body: answers_answerrun.response changes only to the body sealed in a newer
    # generation's `completed` event (a trigger; tried below).
    "answers_answerrun": OPEN,
    "answers_candidatefact": OPEN,
    "answers_card": OPEN,
    "answers_citation": OPEN,
    "answers_conversation": OPEN,
    "answers_conversationsource": OPEN,
    "answers_generation": OPEN,
    "answers_message": OPEN,
    "answers_questionset": OPEN,
    "answers_questionsetrun": OPEN,
    "answers_setquestion": OPEN,
    "answers_setquestionresult": OPEN,
    "audit_answeraudit": RECORD,
    "audit_auditstep": RECORD,
    "audit_logcheckpoint": RECORD,
    "audit_logentry": RECORD,
    "audit_logsubtree": RECORD,
    "audit_outputrelease": RECORD,
    "audit_streamevent": RECORD,
    "auth_group": OPEN,
    "auth_group_permissions": OPEN,
    "auth_permission": OPEN,
    "auth_user": OPEN,
    "auth_user_groups": OPEN,
    "auth_user_user_permissions": OPEN,
    "conversations_conversationshare": OPEN,
    "conversations_publicationintent": OPEN,
    "core_apikey": OPEN,
    "core_loginfailure": OPEN,
    "datasets_dataset": OPEN,
    "datasets_datasetsnapshot": OPEN,
    "datasets_governedquery": OPEN,
    "django_admin_log": OPEN,
    "django_content_type": OPEN,
    "django_migrations": OPEN,
    "django_session": OPEN,
    "guardian_groupobjectpermission": OPEN,
    "guardian_userobjectpermission": OPEN,
    "knowledge_document": OPEN,
    "knowledge_documentrevision": OPEN,
    "knowledge_erasure": ERASURE_LOG,
    "knowledge_extraction": OPEN,
    "knowledge_knowledgeentry": OPEN,
    "knowledge_knowledgeproposal": OPEN,
    "knowledge_knowledgeversion": OPEN,
    "knowledge_lexemefrequency": OPEN,
    "knowledge_passage": OPEN,
    "knowledge_space": OPEN,
    "mcp_server_toolcall": RECORD,
    "outside_channel": OPEN,
    "outside_snapshot": RECORD,
    "outside_spacechannel": OPEN,
    "memory_memoryentry": OPEN,
    "memory_projectmemory": OPEN,
    "worldmodel_worldclaim": OPEN,
    "worldmodel_worldstance": OPEN,
}


def attempt(statement: str, params=None) -> str:
    """Run `statement` in a savepoint that is always rolled back: '' when PostgreSQL took
    it, else its error."""
    try:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(statement, params)
            raise _Taken
    except _Taken:
        return ""
    except DatabaseError as error:
        return str(error)


class _Taken(Exception):
    """Raised to roll back a statement PostgreSQL took."""


def as_role(role: str) -> None:
    with connection.cursor() as cursor:
        cursor.execute(f'SET ROLE "{role}"')


def project_tables() -> set[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
        return {row[0] for row in cursor.fetchall()}


def any_column(table: str) -> str:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_schema = 'public' "
            "AND table_name = %s ORDER BY ordinal_position LIMIT 1",
            [table],
        )
        return cursor.fetchone()[0]


def test_every_table_the_project_owns_has_a_declared_verdict():
    """A new table (a migration) must be placed here: open, record or the erasure log."""
    assert project_tables() == set(VERDICTS)


def test_the_runtime_role_writes_each_table_only_as_its_verdict_allows(runtime_role):
    columns = {table: any_column(table) for table in VERDICTS}
    as_role(runtime_role)
    seen: dict[str, dict[str, bool]] = {}
    for table, verdict in VERDICTS.items():
        column = columns[table]
        errors = {
            "SELECT": attempt(f"SELECT 1 FROM {table} LIMIT 1"),  # noqa: S608
            "INSERT": attempt(
                f"INSERT INTO {table} ({column}) SELECT {column} FROM {table} WHERE false"  # noqa: S608
            ),
            "UPDATE": attempt(f"UPDATE {table} SET {column} = {column} WHERE false"),  # noqa: S608
            "DELETE": attempt(f"DELETE FROM {table} WHERE false"),  # noqa: S608
            "TRUNCATE": attempt(f"TRUNCATE {table}"),
        }
        taken = {name: not error for name, error in errors.items()}
        seen[table] = taken
        expected = {
            "SELECT": True,
            "INSERT": True,
            "UPDATE": verdict == OPEN,
            "DELETE": verdict == OPEN,
            "TRUNCATE": False,
        }
        assert taken == expected, (table, verdict, errors)
        # Refused by the grants themselves: no trigger (which an owner could disable) needed.
        assert all("permission denied" in e for e in errors.values() if e), (table, errors)
    # The erasure log takes no row but the function's: a forged one (blaming someone) is
    # refused by its trigger, before any key is checked.
    refusal = attempt(
        "INSERT INTO knowledge_erasure (revision_id, document_id, erased_by_id, reason, "
        "erased_at, counts) VALUES (1, 1, 1, 'forged', now(), '{}')"
    )
    assert "written by koinon_erase_revision only" in refusal
    assert len(seen) == len(VERDICTS)


def test_the_runtime_role_owns_no_function_and_can_make_none(runtime_role):
    as_role(runtime_role)
    for statement in (
        "CREATE FUNCTION pg_temp.koinon_erase_revision(bigint, integer, text, text[]) "
        "RETURNS bigint LANGUAGE sql AS 'SELECT 1::bigint'",
        "CREATE FUNCTION public.koinon_erasing_too() RETURNS boolean LANGUAGE sql AS 'SELECT true'",
        "CREATE TEMPORARY TABLE audit_streamevent (id int)",
        "CREATE TABLE public.koinon_forged (id int)",
    ):
        assert "permission denied" in attempt(statement), statement
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_proc p JOIN pg_roles r ON r.oid = p.proowner "
            "WHERE r.rolname = current_user"
        )
        assert cursor.fetchone()[0] == 0


def test_a_function_of_the_same_name_does_not_open_the_erasure_gate(runtime_role, library, member):
    """The review's trick, with the temporary schema given back to the role (as on a server
    where PUBLIC keeps TEMPORARY): its own `pg_temp.koinon_erase_revision` and a temporary
    `audit_streamevent` holding a forged `completed` event, then `koinon.erasing` set.
    Neither the sealed body, the stream events, the audit nor the erasure log moves."""
    run = AnswerRun.objects.get(pk=ask(member, "Who owns service reviews?")["run_id"])
    sealed = run.response
    forged = {**sealed, "generation": sealed["generation"] + 1, "text": "forged"}
    database = connection.settings_dict["NAME"]
    with connection.cursor() as cursor:
        cursor.execute(f'GRANT TEMPORARY ON DATABASE "{database}" TO "{runtime_role}"')
    as_role(runtime_role)
    with connection.cursor() as cursor:
        cursor.execute(
            "CREATE FUNCTION pg_temp.koinon_erase_revision(bigint, integer, text, text[]) "
            "RETURNS bigint LANGUAGE sql AS 'SELECT 1::bigint'"
        )
        cursor.execute(
            "CREATE TEMPORARY TABLE audit_streamevent "
            "(run_id uuid, event text, generation int, data jsonb)"
        )
        cursor.execute(
            "INSERT INTO audit_streamevent VALUES (%s, 'completed', %s, %s)",
            [run.pk, forged["generation"], json.dumps({"payload": {"result": forged}})],
        )
        cursor.execute("SELECT set_config('koinon.erasing', 'on', false)")
    forged_json = json.dumps(forged)
    assert "sealed body is written once" in attempt(
        "UPDATE public.answers_answerrun SET response = %s WHERE id = %s", [forged_json, run.pk]
    )
    assert "sealed body is written once" in attempt(
        "UPDATE public.answers_answerrun SET response = jsonb_set(response, '{text}', "
        "'\"forged\"') WHERE id = %s",
        [run.pk],
    )
    assert "written by koinon_erase_revision only" in attempt(
        "INSERT INTO knowledge_erasure (revision_id, document_id, erased_by_id, reason, "
        "erased_at, counts) VALUES (1, 1, 1, 'forged', now(), '{}')"
    )
    for statement in (
        "UPDATE public.audit_streamevent SET data = '{}'",
        "UPDATE audit_answeraudit SET plan = '{}'",
        "DELETE FROM audit_answeraudit",
    ):
        assert "permission denied" in attempt(statement), statement
    with connection.cursor() as cursor:
        cursor.execute("RESET ROLE")
        cursor.execute("SELECT set_config('koinon.erasing', '', false)")
        cursor.execute("DISCARD TEMP")
    assert AnswerRun.objects.get(pk=run.pk).response == sealed
