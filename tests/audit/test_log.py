"""The answer log (audit.log): integration after commit, dense indices exactly once, signed
checkpoints that the served key verifies, append-only rows, GET /v1/log/checkpoint."""

import json
import logging
import threading

import pytest
import rfc8785
from django.db import DatabaseError, connection, connections, transaction

from audit import log as answer_log
from audit.checkpoint import checkpoint_open, checkpoint_sign
from audit.log import LogKeyUnavailable, log_integrate, log_signer, log_tree
from audit.merkle import MerkleTree, leaf_hash, verify_consistency, verify_inclusion
from audit.models import LogCheckpoint, LogEntry, LogSubtree, OutputRelease
from audit.services import log_integration_queue
from audit.signed_note import NoteSigner, NoteVerifier
from audit.tasks import log_integrate_task
from core.embedded import RECORD_TABLES
from core.queue import QueueUnavailable
from tests.answers.helpers import MIXED_QUESTION, ask
from tests.audit.helpers import ORIGIN, SWAP, as_owner, more_releases
from tests.helpers import client_for

ENTRY_KEYS = {
    "release",
    "run",
    "generation",
    "kind",
    "reset_context",
    "publication_sequence",
    "policy_version",
    "source_refs",
    "text_sha256",
    "citations_sha256",
    "cards_sha256",
    "policy_sha256",
    "sealed_at",
}


LOG_TABLES = ("audit_logentry", "audit_logcheckpoint", "audit_logsubtree")


def refused_in_savepoint(sql: str) -> str:
    """Run sql in its own savepoint; return the database's error text (it must fail)."""
    with pytest.raises(DatabaseError) as failure, transaction.atomic(), connection.cursor() as c:
        c.execute("SET CONSTRAINTS ALL IMMEDIATE")  # deferred FK checks would block TRUNCATE
        c.execute(sql)
    return str(failure.value)


@pytest.mark.django_db
def test_every_release_gets_one_dense_index_in_publication_order(published):
    more_releases(9)
    assert log_integrate() == 10
    assert log_integrate() == 0
    entries = list(LogEntry.objects.select_related("release"))
    assert [e.index for e in entries] == list(range(10))
    sequences = [e.release.publication_sequence for e in entries]
    assert sequences == sorted(sequences)
    assert OutputRelease.objects.filter(log_entry__isnull=True).count() == 0
    for entry in entries:
        assert entry.leaf_hash == leaf_hash(entry.entry.encode()).hex()
        assert set(json.loads(entry.entry)) == ENTRY_KEYS


@pytest.mark.django_db
def test_an_entry_holds_the_receipts_hashes_and_never_answer_text(published):
    log_integrate()
    entry = LogEntry.objects.get()
    record = json.loads(entry.entry)
    release = published["release"]
    assert record["release"] == release["id"]
    assert record["text_sha256"] == release["text_sha256"]
    assert record["policy_sha256"] == release["policy_sha256"]
    assert published["answer"]["text"] not in entry.entry
    # RFC 8785 canonical JSON: what a client recomputes from the receipt (for these
    # values, ASCII keys, strings and integers, the same as sorted compact JSON).
    assert entry.entry == rfc8785.dumps(record).decode()
    assert entry.entry == json.dumps(
        record, sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )


@pytest.mark.django_db
def test_each_batch_signs_a_checkpoint_the_served_key_verifies(published, log_key, member):
    more_releases(4)
    log_integrate()
    more_releases(6)
    log_integrate()
    first, second = LogCheckpoint.objects.order_by("size")
    assert (first.size, second.size) == (5, 11)

    body = client_for(member).get("/v1/log/checkpoint").json()
    verifier = NoteVerifier.from_key(body["verifier_key"])
    assert verifier == log_key.verifier()
    latest = checkpoint_open(body["note"], verifier=verifier)
    old = checkpoint_open(first.note, verifier=verifier)
    assert (latest.size, latest.root) == (11, log_tree().root())
    tree = MerkleTree(bytes.fromhex(e.leaf_hash) for e in LogEntry.objects.all())
    verify_consistency(
        old_size=old.size,
        new_size=latest.size,
        old_root=old.root,
        new_root=latest.root,
        proof=tree.consistency_proof(old.size, latest.size),
    )
    entry = LogEntry.objects.get(index=0)
    verify_inclusion(
        leaf=leaf_hash(entry.entry.encode()),
        index=0,
        tree_size=old.size,
        proof=tree.inclusion_proof(0, old.size),
        root=old.root,
    )


@pytest.mark.django_db
def test_the_checkpoint_endpoint_reveals_no_release_ids_or_text(published, log_key, member):
    log_integrate()
    response = client_for(member).get("/v1/log/checkpoint")
    assert response.status_code == 200
    assert set(response.json()) == {"size", "root_hash", "note", "verifier_key"}
    assert published["release"]["id"] not in response.content.decode()
    assert published["answer"]["text"] not in response.content.decode()


@pytest.mark.django_db
def test_the_checkpoint_endpoint_says_why_when_there_is_none(published, member, settings):
    assert client_for(member).get("/v1/log/checkpoint").status_code == 404
    settings.KOINON_LOG_KEY_FILE = ""
    assert log_integrate() == 1
    assert not LogCheckpoint.objects.exists()
    with pytest.raises(LogKeyUnavailable):
        log_signer()


@pytest.mark.django_db
def test_the_checkpoint_endpoint_needs_a_user(client, published, log_key):
    log_integrate()
    assert client.get("/v1/log/checkpoint").status_code in (401, 403)


@pytest.mark.django_db
def test_an_unreadable_or_malformed_key_file_is_a_typed_error(tmp_path, settings):
    settings.KOINON_LOG_KEY_FILE = str(tmp_path / "missing.key")
    with pytest.raises(LogKeyUnavailable):
        log_signer()
    bad = tmp_path / "bad.key"
    bad.write_text("not a key\n")
    settings.KOINON_LOG_KEY_FILE = str(bad)
    with pytest.raises(LogKeyUnavailable):
        log_signer()


@pytest.mark.django_db
def test_an_integration_that_fails_midway_leaves_nothing_and_the_next_completes(
    published, log_key, monkeypatch
):
    more_releases(3)

    def crash(*args, **kwargs):
        raise RuntimeError("worker killed")

    monkeypatch.setattr(answer_log, "checkpoint_sign", crash)
    with pytest.raises(RuntimeError):
        log_integrate()
    assert not LogEntry.objects.exists()
    assert not LogCheckpoint.objects.exists()
    monkeypatch.undo()
    log_integrate_task()
    assert LogEntry.objects.count() == 4
    assert LogCheckpoint.objects.get().size == 4


@pytest.mark.django_db(transaction=True)
def test_concurrent_integrations_give_every_release_exactly_one_index(library, member, log_key):
    ask(member, MIXED_QUESTION)
    more_releases(49)
    errors: list[BaseException] = []
    start = threading.Barrier(8)

    def integrate() -> None:
        try:
            start.wait()
            while log_integrate(batch=3):
                pass
        except BaseException as error:  # reported below, in the test's thread
            errors.append(error)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=integrate) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not errors
    indices = list(LogEntry.objects.values_list("index", flat=True))
    assert indices == list(range(50))
    assert LogEntry.objects.values("release").distinct().count() == 50
    sizes = list(LogCheckpoint.objects.values_list("size", flat=True))
    assert sizes == sorted(set(sizes)) and sizes[-1] == 50
    # One tree: every checkpoint is a prefix of the final one.
    tree = log_tree()
    verifier = log_key.verifier()
    for checkpoint in LogCheckpoint.objects.all():
        assert checkpoint_open(checkpoint.note, verifier=verifier).root == tree.root(
            checkpoint.size
        )


@pytest.mark.django_db
def test_publication_queues_the_integration_after_commit(
    library, member, django_capture_on_commit_callbacks, settings
):
    settings.KOINON_LOG_INTEGRATE_AFTER_COMMIT = True  # the default; off for the suite's worker
    with django_capture_on_commit_callbacks() as callbacks:
        ask(member, MIXED_QUESTION)
    assert log_integration_queue in callbacks
    # Nothing is integrated inside the publication itself.
    assert not LogEntry.objects.exists()


@pytest.mark.django_db
def test_a_broker_that_is_down_does_not_fail_the_publication(
    library, member, django_capture_on_commit_callbacks, settings, monkeypatch, caplog
):
    settings.KOINON_LOG_INTEGRATE_AFTER_COMMIT = True  # the default; off for the suite's worker
    tried = []

    def down(task, *args):
        tried.append(task)
        raise QueueUnavailable(task.name)

    monkeypatch.setattr("audit.services.task_enqueue", down)
    with (
        caplog.at_level(logging.WARNING, logger="audit.services"),
        django_capture_on_commit_callbacks(execute=True),
    ):
        body = ask(member, MIXED_QUESTION)  # the after-commit queueing runs, and fails
    assert tried == [log_integrate_task]
    assert OutputRelease.objects.filter(pk=body["release"]["id"]).exists()
    assert [r.getMessage() for r in caplog.records if r.name == "audit.services"] == [
        "answer log: integration not queued; the next one takes this release"
    ]


@pytest.mark.django_db
def test_the_worker_sweep_queues_the_integration_of_a_release_whose_queueing_was_lost(
    published, log_key, monkeypatch
):
    from core.worker import sweep_steps

    assert not LogEntry.objects.exists()  # sealed, never integrated (nothing queued here)
    queued = []
    monkeypatch.setattr("audit.services.task_enqueue", lambda task, *args: queued.append(task))
    for step in sweep_steps:
        if step is log_integration_queue:
            step()
    assert queued == [log_integrate_task]
    log_integrate_task()  # what the worker runs
    assert LogEntry.objects.count() == OutputRelease.objects.count() >= 1


@pytest.mark.django_db
def test_log_rows_are_append_only(published, log_key):
    more_releases(1)  # two entries: one stored subtree
    log_integrate()
    for table in LOG_TABLES:
        assert table in RECORD_TABLES
        assert "append-only (UPDATE refused)" in refused_in_savepoint(
            f"UPDATE {table} SET id = id"  # noqa: S608
        )
        assert "append-only (DELETE refused)" in refused_in_savepoint(
            f"DELETE FROM {table}"  # noqa: S608
        )
        assert "TRUNCATE refused" in refused_in_savepoint(f"TRUNCATE {table} CASCADE")
    assert LogEntry.objects.count() == 2
    assert LogCheckpoint.objects.count() == 1
    assert LogSubtree.objects.count() == 1


@pytest.mark.django_db
def test_the_runtime_role_cannot_change_log_rows_even_without_triggers(published, log_key):
    more_releases(1)
    log_integrate()
    role = f"koinon_log_test_{connection.settings_dict['NAME']}"[:60]
    with connection.cursor() as cursor:
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")  # no pending FK checks: ALTER may run
        cursor.execute(f'CREATE ROLE "{role}" NOLOGIN')
        cursor.execute(f'GRANT USAGE ON SCHEMA public TO "{role}"')
        for table in LOG_TABLES:
            cursor.execute(f'GRANT SELECT, INSERT ON {table} TO "{role}"')
            cursor.execute(f"ALTER TABLE {table} DISABLE TRIGGER USER")
        cursor.execute(f'SET ROLE "{role}"')
        try:
            for table in LOG_TABLES:
                for statement in (
                    f"UPDATE {table} SET id = id",  # noqa: S608
                    f"DELETE FROM {table}",  # noqa: S608
                    f"TRUNCATE {table}",
                ):
                    assert "permission denied" in refused_in_savepoint(statement)
        finally:
            cursor.execute("RESET ROLE")
            for table in LOG_TABLES:
                cursor.execute(f"ALTER TABLE {table} ENABLE TRIGGER USER")
    assert LogEntry.objects.count() == 2
    assert LogSubtree.objects.count() == 1


def _b64(text: str) -> bytes:
    import base64

    return base64.b64decode(text)


@pytest.mark.django_db
def test_a_reader_gets_an_inclusion_proof_that_verifies_against_the_signed_checkpoint(
    published, log_key, member
):
    more_releases(6)
    log_integrate()
    client = client_for(member)
    response = client.get(f"/v1/releases/{published['release']['id']}/proof")
    assert response.status_code == 200, response.content
    body = response.json()
    checkpoint = checkpoint_open(body["checkpoint"], verifier=log_key.verifier())
    assert (body["index"], body["tree_size"]) == (0, checkpoint.size) == (0, 7)
    assert json.loads(body["entry"])["release"] == published["release"]["id"]
    assert _b64(body["leaf_hash"]) == leaf_hash(body["entry"].encode())
    proof = [_b64(node) for node in body["proof"]]
    verify_inclusion(
        leaf=leaf_hash(body["entry"].encode()),
        index=0,
        tree_size=checkpoint.size,
        proof=proof,
        root=checkpoint.root,
    )
    # A smaller tree the log passed through; its proof verifies against that tree's head.
    smaller = client.get(f"/v1/releases/{published['release']['id']}/proof?tree_size=3").json()
    assert smaller["checkpoint"] is None  # no checkpoint was signed at size 3
    verify_inclusion(
        leaf=leaf_hash(body["entry"].encode()),
        index=0,
        tree_size=3,
        proof=[_b64(node) for node in smaller["proof"]],
        root=log_tree().root(3),
    )


@pytest.mark.django_db
@pytest.mark.parametrize("tree_size", ["0", "8", "-1", "many", "1.5"])
def test_a_tree_size_the_log_never_reached_is_a_typed_422(published, log_key, member, tree_size):
    more_releases(6)
    log_integrate()
    path = f"/v1/releases/{published['release']['id']}/proof?tree_size={tree_size}"
    response = client_for(member).get(path)
    assert response.status_code == 422, response.content
    assert "tree_size" in response.json()["error"]["fields"]


@pytest.mark.django_db
def test_someone_elses_release_proof_looks_like_a_missing_one(published, log_key, outsider):
    log_integrate()
    client = client_for(outsider)
    theirs = client.get(f"/v1/releases/{published['release']['id']}/proof?tree_size=999")
    made_up = client.get("/v1/releases/00000000-0000-4000-8000-000000000000/proof")
    not_an_id = client.get("/v1/releases/not-an-id/proof")
    assert theirs.status_code == made_up.status_code == not_an_id.status_code == 404
    assert theirs.json() == made_up.json() == not_an_id.json()


@pytest.mark.django_db
def test_a_reader_who_lost_a_cited_source_gets_no_proof(published, log_key, member, space):
    from knowledge.services import space_member_remove

    log_integrate()
    client = client_for(member)
    path = f"/v1/releases/{published['release']['id']}/proof"
    assert client.get(path).status_code == 200
    space_member_remove(space=space, username=member.username)
    lost = client.get(path)
    made_up = client.get("/v1/releases/00000000-0000-4000-8000-000000000000/proof")
    assert lost.status_code == 404 and lost.json() == made_up.json()


@pytest.mark.django_db
def test_a_release_not_yet_in_the_log_says_so_to_its_reader(published, member):
    response = client_for(member).get(f"/v1/releases/{published['release']['id']}/proof")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_integrated"


@pytest.mark.django_db
def test_a_consistency_proof_verifies_between_two_checkpoints_and_names_no_release(
    published, log_key, member
):
    more_releases(3)
    log_integrate()
    more_releases(5)
    log_integrate()
    first, second = LogCheckpoint.objects.order_by("size")
    client = client_for(member)
    response = client.get(f"/v1/log/consistency?from={first.size}&to={second.size}")
    assert response.status_code == 200, response.content
    body = response.json()
    assert set(body) == {"from", "to", "proof"}
    old = checkpoint_open(first.note, verifier=log_key.verifier())
    new = checkpoint_open(second.note, verifier=log_key.verifier())
    verify_consistency(
        old_size=old.size,
        new_size=new.size,
        old_root=old.root,
        new_root=new.root,
        proof=[_b64(node) for node in body["proof"]],
    )
    assert published["release"]["id"] not in response.content.decode()
    for bad in ("from=0&to=4", "from=5&to=4", "from=1&to=99", "from=x&to=4", "to=4"):
        refused = client.get(f"/v1/log/consistency?{bad}")
        assert refused.status_code == 422, (bad, refused.content)
    from rest_framework.test import APIClient

    assert APIClient().get("/v1/log/consistency?from=1&to=4").status_code in (401, 403)


def _verify(*checkpoint_files) -> tuple[bool, str]:
    from io import StringIO

    from django.core.management import CommandError, call_command

    out = StringIO()
    # The spelling; the witness tests use the singular, both are accepted.
    args = [arg for path in checkpoint_files for arg in ("--checkpoints", str(path))]
    try:
        call_command("log", "verify", *args, stdout=out)
    except CommandError:
        return False, out.getvalue()
    return True, out.getvalue()


def _rewrite_receipt_and_entry() -> list[str]:
    """A receipt's text hash rewritten, and its log entry rewritten to match it."""
    entry = LogEntry.objects.get(index=2)
    rewritten = entry.entry.replace(entry.release.text_sha256, "0" * 64)
    return [
        (
            "UPDATE audit_outputrelease SET text_sha256 = repeat('0', 64) WHERE id = %s",
            [entry.release_id],
        ),
        (
            "UPDATE audit_logentry SET entry = %s, leaf_hash = %s WHERE index = 2",
            [rewritten, leaf_hash(rewritten.encode()).hex()],
        ),
    ]


TAMPERING = {
    "a receipt's text hash rewritten": (
        lambda: [
            "UPDATE audit_outputrelease SET text_sha256 = repeat('0', 64) "
            "WHERE id = (SELECT release_id FROM audit_logentry WHERE index = 2)"
        ],
        "entry 2: release",
    ),
    "a receipt and its entry rewritten alike": (_rewrite_receipt_and_entry, "another root"),
    "a release removed": (
        lambda: [
            "DELETE FROM audit_outputrelease "
            "WHERE id = (SELECT release_id FROM audit_logentry WHERE index = 3)",
            "DELETE FROM audit_logentry WHERE index = 3",
        ],
        "entry 3: missing",
    ),
    "two entries swapped": (lambda: [SWAP], "another root"),
}


@pytest.mark.django_db
@pytest.mark.parametrize("tampering", list(TAMPERING))
def test_log_verify_reports_what_a_database_owner_changed(published, log_key, tampering):
    more_releases(5)
    log_integrate()
    assert _verify()[0]  # the untouched log verifies
    statements, expected = TAMPERING[tampering]
    as_owner(*statements())
    ok, report = _verify()
    assert not ok
    assert expected in report, report


@pytest.mark.django_db
def test_a_checkpoint_kept_outside_the_database_catches_an_owner_who_also_rewrote_the_table(
    published, log_key, tmp_path
):
    more_releases(5)
    log_integrate()
    witness = tmp_path / "checkpoint.txt"
    witness.write_text(LogCheckpoint.objects.get().note)
    as_owner(SWAP, "DELETE FROM audit_logcheckpoint")
    ok, report = _verify()  # the stored subtree hashes still tell (they no longer match)
    assert not ok and "stored subtree 1/0: not the hash its entries give" in report, report
    as_owner("DELETE FROM audit_logsubtree")
    assert _verify()[0]  # with those gone too, the tables alone cannot tell
    ok, report = _verify(witness)
    assert not ok and "supplied checkpoint of size 6" in report, report
    # The same checkpoint signed by another key is not the log's.
    stolen = checkpoint_open(witness.read_text(), verifier=log_key.verifier())
    forged = tmp_path / "forged.txt"
    forged.write_text(checkpoint_sign(stolen, signer=NoteSigner.generate(ORIGIN)))
    ok, report = _verify(forged)
    assert not ok and "not one the log's key signed" in report, report


@pytest.mark.django_db
def test_the_receipt_gains_its_log_index_and_checkpoint_once_integrated_its_hashes_unchanged(
    published, log_key, member
):
    from koinon_client import Release

    from answers.models import AnswerRun

    client = client_for(member)
    path = f"/v1/runs/{published['run_id']}"
    before = client.get(path).json()
    assert "log" not in before["release"]  # sealed, not yet integrated
    more_releases(2)
    log_integrate()
    after = client.get(path).json()
    log = after["release"].pop("log")
    assert (log["index"], log["tree_size"]) == (0, 3)
    checkpoint = checkpoint_open(log["checkpoint"], verifier=log_key.verifier())
    assert (checkpoint.size, checkpoint.root) == (3, log_tree().root())
    # Read beside the sealed body: the receipt and what was sealed are exactly as before.
    assert after == before
    assert Release.from_body(after).verify(after)
    stored = AnswerRun.objects.get(pk=published["run_id"]).response
    assert "log" not in stored["release"]
    assert stored["release"] == after["release"]


@pytest.mark.django_db
def test_a_receipt_integrated_before_any_checkpoint_has_its_index_and_no_checkpoint(
    published, member, settings
):
    settings.KOINON_LOG_KEY_FILE = ""
    log_integrate()
    body = client_for(member).get(f"/v1/runs/{published['run_id']}").json()
    assert body["release"]["log"] == {"index": 0, "tree_size": None, "checkpoint": None}


@pytest.mark.django_db
def test_a_later_checkpoint_does_not_move_the_one_a_receipt_names(published, log_key, member):
    log_integrate()
    more_releases(4)
    log_integrate()
    body = client_for(member).get(f"/v1/runs/{published['run_id']}").json()
    assert body["release"]["log"]["tree_size"] == 1  # the first covering, not the latest
    assert LogCheckpoint.objects.latest().size == 5


@pytest.mark.django_db
def test_the_chat_receipt_shows_the_log_index_and_checkpoint(published, log_key, member):
    from django.test import Client

    browser = Client()
    browser.force_login(member)
    path = f"/runs/{published['run_id']}/receipt/1/"
    assert "not yet in the answer log" in browser.get(path).content.decode()
    more_releases(1)
    log_integrate()
    page = browser.get(path).content.decode()
    assert "entry 0, covered by the signed checkpoint of 2 entries" in page


@pytest.mark.django_db(transaction=True)
def test_fifty_answers_sealed_in_parallel_each_get_exactly_one_index(library, member, log_key):
    """50 answers sealed through the real pipeline by 16 threads at once, each thread
    integrating after each of its publications (as the after-commit task would), so
    integrations overlap publications and each other."""
    errors: list[BaseException] = []
    released: list[str] = []
    start = threading.Barrier(16)

    def seal(count: int) -> None:
        try:
            start.wait()
            for _ in range(count):
                body = ask(member, MIXED_QUESTION)
                released.append(body["release"]["id"])
                log_integrate()
        except BaseException as error:  # reported below, in the test's thread
            errors.append(error)
        finally:
            connections.close_all()

    counts = [4] * 2 + [3] * 14  # 50 in all
    threads = [threading.Thread(target=seal, args=(count,)) for count in counts]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=600)
    assert not errors, errors
    assert len(set(released)) == 50
    log_integrate()  # whatever the last overlapping integration left
    entries = list(LogEntry.objects.values_list("index", "release_id"))
    assert [index for index, _ in entries] == list(range(50))
    assert {str(release) for _, release in entries} == set(released)
    tree = log_tree()
    verifier = log_key.verifier()
    checkpoints = list(LogCheckpoint.objects.all())
    assert checkpoints[-1].size == 50
    for checkpoint in checkpoints:
        assert checkpoint_open(checkpoint.note, verifier=verifier).root == tree.root(
            checkpoint.size
        )


@pytest.mark.django_db
def test_the_conversation_api_and_its_export_return_each_release_with_its_log_place(
    published, log_key, member, tmp_path
):
    """Issue 51, item 2: wherever a release is returned, its place in the log with it."""
    from io import StringIO

    from django.core.management import call_command

    from answers.models import AnswerRun

    client = client_for(member)
    conversation = AnswerRun.objects.get(pk=published["run_id"]).conversation_id

    def sealed(messages: list[dict]) -> dict:
        [message] = [m for m in messages if m["role"] == "assistant"]
        return message["body"]["release"]

    before = client.get(f"/v1/conversations/{conversation}").json()
    assert "log" not in sealed(before["messages"])  # sealed, not yet integrated
    log_integrate()
    run = client.get(f"/v1/runs/{published['run_id']}").json()
    assert run["release"]["log"]["index"] == 0
    after = client.get(f"/v1/conversations/{conversation}").json()
    assert sealed(after["messages"]) == run["release"]
    export = client.get(f"/v1/conversations/{conversation}/export").json()
    assert sealed(export["messages"]) == run["release"]
    path = tmp_path / "export.json"
    path.write_text(json.dumps(export))
    out = StringIO()
    call_command("verify_export", str(path), stdout=out)
    assert "verified" in out.getvalue()


@pytest.mark.django_db
def test_the_log_key_is_served_before_any_checkpoint_and_only_the_public_half(
    log_key, member, settings
):
    response = client_for(member).get("/v1/log/key")
    assert response.status_code == 200
    assert response.json() == {"verifier_key": log_key.verifier().key_string()}
    assert log_key.key_string() not in response.text  # never the signing key
    from rest_framework.test import APIClient

    assert APIClient().get("/v1/log/key").status_code in {401, 403}
    settings.KOINON_LOG_KEY_FILE = ""
    unavailable = client_for(member).get("/v1/log/key")
    assert unavailable.status_code == 404
    assert unavailable.json()["error"]["code"] == "no_log_key"
