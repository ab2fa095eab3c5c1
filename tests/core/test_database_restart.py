"""Issue 46 (4): a database restart loses nothing a person did. A PostgreSQL backend is
terminated in the middle of each person-facing write — inside the write's own
transaction, by a one-shot trigger that makes the backend terminate itself
(`pg_terminate_backend(pg_backend_pid())`: "terminating connection due to administrator
command", as in a restart or a killed backend). Each time: nothing of the write is left,
the person gets a typed, retryable error naming the change (never a generic page or a
500), and the same request again succeeds."""

import hashlib
import time
from collections.abc import Callable, Iterator

import httpx
import pytest
from django.db import connection
from guardian.models import UserObjectPermission

from answers.models import (
    AnswerRun,
    Citation,
    Conversation,
    ConversationSource,
    Generation,
    Message,
)
from answers.pipeline.lifecycle import answer_stream_start
from answers.pipeline.request import answer_request_parse
from audit.models import OutputRelease, StreamEvent
from core.services import api_key_create
from knowledge.models import Document, DocumentRevision, Erasure, Extraction, Passage
from tests.answers.helpers import MIXED_QUESTION, ingest
from tests.guards import no_hang
from tests.helpers import client_for, make_user
from tests.services import daphne_process

pytestmark = pytest.mark.django_db(transaction=True)

TEXT = "The platform operations team owns service reviews and the quarterly audit."
KILLED = "was not saved: the database restarted before it was done"

Arm = Callable[..., None]


@pytest.fixture
def kill_backend_once() -> Iterator[Arm]:
    """`arm(model, events="INSERT", when="")`: the first matching row change on the model's
    table (in any process: the test's, Daphne's, the worker's) terminates its own backend
    inside the transaction; later ones pass. One-shot by a sequence, which a rollback does
    not undo."""
    armed: list[tuple[str, str]] = []

    def arm(model: type, events: str = "INSERT", when: str = "") -> None:
        name, table = f"test_kill_{len(armed)}", model._meta.db_table
        condition = f"WHEN ({when})" if when else ""
        with connection.cursor() as cursor:
            cursor.execute(f"CREATE SEQUENCE {name}")
            cursor.execute(
                f"CREATE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
                f"IF nextval('{name}') = 1 THEN "
                "PERFORM pg_terminate_backend(pg_backend_pid()); PERFORM pg_sleep(30); "
                "END IF; RETURN NULL; END $$"
            )
            cursor.execute(
                f"CREATE TRIGGER {name} AFTER {events} ON {table} FOR EACH ROW {condition} "
                f"EXECUTE FUNCTION {name}()"
            )
        armed.append((name, table))

    yield arm
    connection.close()  # a test that failed half-way may have left it broken
    with connection.cursor() as cursor:
        for name, table in armed:
            cursor.execute(f"SELECT is_called FROM {name}")  # noqa: S608
            fired = cursor.fetchone()[0]
            cursor.execute(f"DROP TRIGGER {name} ON {table}")
            cursor.execute(f"DROP FUNCTION {name}()")
            cursor.execute(f"DROP SEQUENCE {name}")
            assert fired, f"the backend was never killed on {table}"


def assert_lost(response, action: str) -> dict:
    """The typed, retryable answer to a write the database lost."""
    assert response.status_code == 503, response.content
    assert response["Retry-After"] == "5"
    error = response.json()["error"]
    assert error["code"] == "database_unavailable"
    assert error["message"].startswith(action), error["message"]
    assert KILLED in error["message"]
    return error


def rows(*models: type) -> dict[str, int]:
    return {model.__name__: model.objects.count() for model in models}


def media_files(settings) -> list[str]:
    return sorted(p.name for p in (settings.MEDIA_ROOT / "revisions").rglob("*") if p.is_file())


@pytest.fixture
def media(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"
    return settings


@pytest.fixture
def document(space, owner, media):
    return Document.objects.get(pk=ingest(owner, space, "operations.txt", TEXT).document.pk)


# --- withdraw ---------------------------------------------------------------------------


def test_a_withdrawal_killed_midway_leaves_the_document_as_it_was_and_the_retry_works(
    owner, document, kill_backend_once
):
    current = Passage.objects.filter(document=document, is_current=True).count()
    assert current
    kill_backend_once(Document, "UPDATE")
    client = client_for(owner)

    lost = client.post(f"/v1/documents/{document.pk}/withdraw", {"reason": "outdated"})

    assert_lost(lost, f"The withdrawal of “{document.title}”")
    document.refresh_from_db()
    assert document.withdrawn_at is None
    assert Passage.objects.filter(document=document, is_current=True).count() == current
    again = client.post(f"/v1/documents/{document.pk}/withdraw", {"reason": "outdated"})
    assert again.status_code == 200, again.content
    document.refresh_from_db()
    assert document.withdrawn_at is not None and document.withdrawn_reason == "outdated"
    assert not Passage.objects.filter(document=document, is_current=True).exists()


def test_a_withdrawal_from_the_library_page_names_what_was_not_saved_and_offers_it_again(
    client, owner, space, document, kill_backend_once
):
    kill_backend_once(Document, "UPDATE")
    client.force_login(owner)
    url = f"/spaces/{space.pk}/documents/{document.pk}/withdraw/"

    lost = client.post(url, {"reason": "superseded by the new policy"}, HTTP_REFERER="/x")

    assert lost.status_code == 503 and lost["Retry-After"] == "5"
    assert lost["Content-Type"].startswith("text/html")
    page = lost.content.decode()
    assert f"The withdrawal of “{document.title}” {KILLED}" in page
    # "Try again" posts the same form: what the person typed is kept.
    assert f'<form method="post" action="{url}">' in page
    assert 'name="reason" value="superseded by the new policy"' in page
    document.refresh_from_db()
    assert document.withdrawn_at is None
    again = client.post(url, {"reason": "superseded by the new policy"})
    assert again.status_code == 302
    document.refresh_from_db()
    assert document.withdrawn_reason == "superseded by the new policy"


# --- upload and replace -----------------------------------------------------------------


def test_an_upload_killed_midway_leaves_no_document_no_revision_and_no_file(
    owner, space, media, kill_backend_once
):
    kill_backend_once(DocumentRevision)
    client = client_for(owner)
    before = rows(Document, DocumentRevision, Extraction)
    data = b"Invoices are approved by the finance lead within five working days."

    def upload():
        return client.post(
            "/v1/documents",
            {"file": _file("approvals.txt", data), "space": str(space.pk)},
            format="multipart",
        )

    assert_lost(upload(), "The upload of “approvals.txt”")
    assert rows(Document, DocumentRevision, Extraction) == before
    assert media_files(media) == []  # the bytes stored before the row are deleted again
    again = upload()
    assert again.status_code == 202, again.content
    revision = DocumentRevision.objects.get(pk=again.json()["revision"])
    assert revision.sha256 == hashlib.sha256(data).hexdigest()
    assert media_files(media) == [revision.file.name.rsplit("/", 1)[1]]


def test_a_new_revision_killed_midway_leaves_the_document_on_its_old_revision(
    owner, space, document, media, kill_backend_once
):
    kill_backend_once(DocumentRevision)
    client = client_for(owner)
    old = document.current_revision_id
    files = media_files(media)

    def replace():
        return client.post(
            "/v1/documents",
            {
                "file": _file("operations.txt", b"Reviews are owned by the guild."),
                "space": str(space.pk),
                "document": str(document.pk),
            },
            format="multipart",
        )

    assert_lost(replace(), "The upload of “operations.txt”")
    document.refresh_from_db()
    assert document.current_revision_id == old and document.revisions.count() == 1
    assert media_files(media) == files
    again = replace()
    assert again.status_code == 202, again.content
    assert document.revisions.count() == 2


def test_an_upload_from_the_library_page_says_which_file_was_not_stored(
    client, owner, space, media, kill_backend_once
):
    kill_backend_once(DocumentRevision)
    client.force_login(owner)
    url = f"/spaces/{space.pk}/documents/"
    data = b"Travel is booked through the shared travel desk."

    lost = client.post(url, {"file": _file("travel.txt", data)}, HTTP_ACCEPT="application/json")

    assert lost.status_code == 503, lost.content
    (outcome,) = lost.json()["files"]
    assert outcome["ok"] is False and outcome["code"] == "database_unavailable"
    assert outcome["message"].startswith(f"The upload of “travel.txt” {KILLED}")
    assert not Document.objects.exists() and media_files(media) == []
    page = client.post(url, {"file": _file("travel.txt", data)}, follow=True)
    assert page.status_code == 200
    assert Document.objects.get().title == "travel"


def test_a_private_file_whose_selection_is_killed_is_kept_and_says_only_that_was_lost(
    client, member, media, kill_backend_once
):
    conversation = Conversation.objects.create(user=member)
    kill_backend_once(ConversationSource)
    client.force_login(member)
    data = b"Expenses above the limit need the director's approval."

    def upload():
        return client.post(
            "/files/",
            {"file": _file("expenses.txt", data), "conversation": str(conversation.pk)},
            HTTP_ACCEPT="application/json",
        )

    lost = upload()

    assert lost.status_code == 503, lost.content
    assert lost["Retry-After"] == "5"
    error = lost.json()["error"]
    assert error["code"] == "database_unavailable"
    assert error["message"].startswith(f"Selecting “expenses” in this conversation {KILLED}")
    stored = Document.objects.get()  # the upload itself was saved, whole
    assert not ConversationSource.objects.filter(conversation=conversation).exists()
    again = upload()
    assert again.status_code == 202, again.content
    assert Document.objects.get().pk == stored.pk  # the same bytes: the same file
    assert list(
        ConversationSource.objects.filter(conversation=conversation).values_list(
            "document_id", flat=True
        )
    ) == [stored.pk]


# --- erase ------------------------------------------------------------------------------


def test_an_erasure_killed_midway_keeps_the_text_and_the_file_and_the_retry_erases(
    owner, document, media, kill_backend_once
):
    revision = document.current_revision
    kill_backend_once(Erasure)
    client = client_for(owner)
    url = f"/v1/documents/{document.pk}/revisions/{revision.pk}/erase"

    assert_lost(
        client.post(url, {"reason": "leaked"}), f"The erasure of revision 1 of “{document.title}”"
    )
    assert not Erasure.objects.exists()
    assert Passage.objects.filter(revision=revision).exclude(text="[erased]").exists()
    assert media_files(media)
    again = client.post(url, {"reason": "leaked"})
    assert again.status_code == 200, again.content
    assert Erasure.objects.filter(revision=revision).exists()


# --- membership -------------------------------------------------------------------------


def test_a_membership_change_killed_midway_grants_nothing_and_the_retry_grants_it(
    staff, space, kill_backend_once
):
    newcomer = make_user("newcomer")
    kill_backend_once(UserObjectPermission)
    client = client_for(staff)

    lost = client.post(
        f"/v1/spaces/{space.pk}/members", {"username": "newcomer", "role": "curator"}
    )

    assert_lost(lost, f"Making newcomer a curator of “{space.name}”")
    assert not UserObjectPermission.objects.filter(user=newcomer).exists()
    again = client.post(
        f"/v1/spaces/{space.pk}/members", {"username": "newcomer", "role": "curator"}
    )
    assert again.status_code == 201, again.content
    assert newcomer.has_perm("knowledge.curate_space", space)
    assert newcomer.has_perm("knowledge.view_space", space)


def test_a_member_removal_killed_midway_keeps_every_role_and_the_retry_removes_them(
    staff, member, space, kill_backend_once
):
    kill_backend_once(UserObjectPermission, "DELETE")
    client = client_for(staff)

    lost = client.delete(f"/v1/spaces/{space.pk}/members/{member.username}")

    assert_lost(lost, f"Removing member from “{space.name}”")
    assert member.has_perm("knowledge.view_space", space)
    assert client.delete(f"/v1/spaces/{space.pk}/members/{member.username}").status_code == 204
    assert not UserObjectPermission.objects.filter(user=member).exists()


# --- answers ----------------------------------------------------------------------------


ANSWER_ROWS = (Conversation, AnswerRun, Message, Citation, OutputRelease)


def test_a_question_killed_as_it_is_stored_leaves_no_run_and_asking_again_answers(
    library, member, kill_backend_once
):
    kill_backend_once(AnswerRun)
    client = client_for(member)
    before = rows(*ANSWER_ROWS)

    lost = client.post("/v1/answer", {"query": MIXED_QUESTION}, format="json")

    assert_lost(lost, f"Your question “{MIXED_QUESTION[:80]}”")
    assert rows(*ANSWER_ROWS) == before
    again = client.post("/v1/answer", {"query": MIXED_QUESTION}, format="json")
    assert again.status_code == 200, again.content
    assert again.json()["evidence"]["answer_status"] == "evidence_backed"


def test_an_answer_killed_in_its_publication_is_failed_typed_with_nothing_published(
    library, member, kill_backend_once
):
    kill_backend_once(Message, when="NEW.role = 'assistant'")
    client = client_for(member)

    lost = client.post("/v1/answer", {"query": MIXED_QUESTION}, format="json")

    assert lost.status_code == 503, lost.content
    assert lost["Retry-After"] == "5"
    error = lost.json()["error"]
    assert error["code"] == "run_failed"
    assert error["fields"]["reason"] == "database_unavailable"
    assert error["message"].startswith("The answer was not published: the database restarted")
    run = AnswerRun.objects.get(pk=error["fields"]["run_id"])
    # No half publication: no answer message, citation or receipt; the run says failed.
    assert run.status == "failed" and run.generations.get().status == "failed"
    assert not run.messages.filter(role="assistant").exists()
    assert not Citation.objects.filter(run=run).exists()
    assert not OutputRelease.objects.filter(run_id=run.pk).exists()
    failed = StreamEvent.objects.filter(run_id=run.pk, event="failed").get()
    assert failed.data["code"] == "database_unavailable"
    retried = client.post(f"/v1/runs/{run.pk}/retry")
    assert retried.status_code == 200, retried.content
    assert retried.json()["evidence"]["answer_status"] == "evidence_backed"
    assert OutputRelease.objects.filter(run_id=run.pk).count() == 1


def test_a_retry_killed_as_its_generation_is_stored_leaves_the_run_as_it_was(
    library, member, kill_backend_once
):
    client = client_for(member)
    first = client.post("/v1/answer", {"query": MIXED_QUESTION}, format="json")
    assert first.status_code == 200, first.content
    run = AnswerRun.objects.get(pk=first.json()["run_id"])
    kill_backend_once(Generation, when="NEW.number = 2")

    lost = client.post(f"/v1/runs/{run.pk}/retry")

    assert_lost(lost, f"The new attempt at “{MIXED_QUESTION[:80]}”")
    run.refresh_from_db()
    assert run.reset_context == 0 and run.status == "published"
    assert list(run.generations.values_list("number", flat=True)) == [1]
    assert OutputRelease.objects.filter(run_id=run.pk).count() == 1
    again = client.post(f"/v1/runs/{run.pk}/retry")
    assert again.status_code == 200, again.content
    assert again.json()["evidence"]["answer_status"] == "evidence_backed"
    assert OutputRelease.objects.filter(run_id=run.pk).count() == 2


def test_a_question_asked_in_the_chat_killed_midway_is_kept_in_the_form(
    client, library, member, kill_backend_once
):
    kill_backend_once(AnswerRun)
    client.force_login(member)

    lost = client.post("/", {"query": MIXED_QUESTION})

    assert lost.status_code == 503
    page = lost.content.decode()
    assert f"Your question “{MIXED_QUESTION[:80]}” {KILLED}" in page
    assert MIXED_QUESTION in page.split("</textarea>")[0]  # the question box keeps it
    assert not AnswerRun.objects.exists()
    again = client.post("/", {"query": MIXED_QUESTION})
    assert again.status_code == 302
    assert AnswerRun.objects.get().status == "published"


def test_a_streamed_answer_killed_in_the_workers_publication_ends_failed_and_retries(
    library, member, celery_worker, kill_backend_once
):
    kill_backend_once(Message, when="NEW.role = 'assistant'")
    request = answer_request_parse({"query": MIXED_QUESTION})
    run = answer_stream_start(user=member, request=request)

    with no_hang(120):
        while AnswerRun.objects.get(pk=run.pk).status == "running":
            time.sleep(0.2)

    run.refresh_from_db()
    assert run.status == "failed" and run.generations.get().status == "failed"
    assert not run.messages.filter(role="assistant").exists()
    assert not OutputRelease.objects.filter(run_id=run.pk).exists()
    failed = StreamEvent.objects.filter(run_id=run.pk, event="failed").get()
    assert failed.data["code"] == "database_unavailable"
    retried = client_for(member).post(f"/v1/runs/{run.pk}/retry")
    assert retried.status_code == 200, retried.content
    assert AnswerRun.objects.get(pk=run.pk).status == "published"


# --- a real server with a connection pool -------------------------------------------------


def test_a_pooled_server_discards_the_killed_connection_and_the_retry_works(
    owner, document, kill_backend_once, test_database_name, logs_dir
):
    """Daphne with a pool of one: the killed backend's connection must not be handed out
    again, or the retry would fail on it too."""
    key = api_key_create(user=owner).secret
    env = {"KOINON_DB_POOL": "1", "KOINON_DB_POOL_TIMEOUT": "5"}
    with daphne_process(test_database_name, logs_dir / "daphne-restart.log", env) as base:
        client = httpx.Client(base_url=base, headers={"Authorization": f"Bearer {key}"})
        kill_backend_once(Document, "UPDATE")
        with no_hang(120):
            lost = client.post(f"/v1/documents/{document.pk}/withdraw", json={"reason": "old"})
            again = client.post(f"/v1/documents/{document.pk}/withdraw", json={"reason": "old"})
        assert lost.status_code == 503 and lost.headers["Retry-After"] == "5"
        error = lost.json()["error"]
        assert error["code"] == "database_unavailable"
        assert error["message"].startswith(f"The withdrawal of “{document.title}” {KILLED}")
        assert again.status_code == 200, again.text
    document.refresh_from_db()
    assert document.withdrawn_reason == "old"


def _file(name: str, data: bytes):
    from django.core.files.uploadedfile import SimpleUploadedFile

    return SimpleUploadedFile(name, data, content_type="text/plain")
