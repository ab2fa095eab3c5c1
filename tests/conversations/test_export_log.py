"""An export carries the answer log's latest checkpoint and each sealed release's inclusion
proof against it, beside the sealed bodies (issue 33); `verify_export` then also checks the
releases against the log: a receipt a database owner rewrote together with its sealed body
— which the hashes alone cannot catch — a bad proof, a dropped proof and a checkpoint signed
by another key are each reported. Its summary states only what verified (issue 48, item 7):
the signed size, the export's own proofs, and the logged releases no proof was there for."""

import base64
import copy
import hashlib
import json
from io import StringIO

import pytest
from django.core.management import call_command

from answers.models import AnswerRun
from audit.checkpoint import checkpoint_open, checkpoint_sign
from audit.log import log_integrate
from audit.signed_note import NoteSigner
from conversations.services import export_verify
from tests.answers.helpers import ingest
from tests.audit.helpers import ORIGIN, as_owner
from tests.helpers import client_for

pytestmark = pytest.mark.django_db

TEXTS = {
    "operations.txt": "The platform operations team owns service reviews.",
    "retention.txt": "Invoices are retained for ten years.",
}


@pytest.fixture
def conversation(space, owner, member) -> dict:
    """Two sealed answers in one conversation: the log's tree has two entries."""
    for name, text in TEXTS.items():
        ingest(owner, space, name, text)
    client = client_for(member)
    body = client.post("/v1/answer", {"query": "Who owns service reviews?"}, format="json").json()
    conversation_id = AnswerRun.objects.get(pk=body["run_id"]).conversation_id
    follow = {"query": "How long are invoices retained?", "conversation_id": conversation_id}
    second = client.post("/v1/answer", follow, format="json").json()
    assert body["release"] and second["release"]
    return {"client": client, "id": conversation_id, "body": body, "second": second}


def export_of(conversation: dict) -> dict:
    return conversation["client"].get(f"/v1/conversations/{conversation['id']}/export").json()


def test_an_export_carries_the_checkpoint_and_a_proof_per_sealed_release(
    conversation, log_key, tmp_path
):
    assert "log" not in export_of(conversation)  # nothing signed yet
    log_integrate()
    export = export_of(conversation)
    release_id = conversation["body"]["release"]["id"]
    second_id = conversation["second"]["release"]["id"]
    assert export["log"]["tree_size"] == 2
    assert checkpoint_open(export["log"]["checkpoint"], verifier=log_key.verifier()).size == 2
    assert set(export["log"]["proofs"]) == {release_id, second_id}
    assert export["log"]["proofs"][release_id]["index"] == 0
    assert export_verify(export).problems == []
    path = tmp_path / "export.json"
    path.write_text(json.dumps(export))
    out = StringIO()
    call_command("verify_export", str(path), stdout=out)
    assert "verified: 2 sealed answers" in out.getvalue()
    assert "2 in the answer log's checkpoint of size 2" in out.getvalue()


def test_a_receipt_rewritten_with_its_sealed_body_is_caught_only_by_the_log(
    conversation, log_key, tmp_path
):
    log_integrate()
    release_id = conversation["body"]["release"]["id"]
    run_id = conversation["body"]["run_id"]
    forged_text = "Nobody owns service reviews."
    forged_hash = hashlib.sha256(forged_text.encode()).hexdigest()
    as_owner(
        (
            "UPDATE audit_outputrelease SET text_sha256 = %s WHERE id = %s",
            [forged_hash, release_id],
        ),
        (
            "UPDATE audit_streamevent SET data = jsonb_set(jsonb_set(data, "
            "'{payload,result,answer,text}', to_jsonb(%s::text)), "
            "'{payload,result,release,text_sha256}', to_jsonb(%s::text)) "
            "WHERE run_id = %s AND event = 'completed'",
            [forged_text, forged_hash, run_id],
        ),
        (
            "UPDATE answers_message SET text = %s WHERE run_id = %s AND role = 'assistant'",
            [forged_text, run_id],
        ),
    )
    export = export_of(conversation)
    sealed = [m for m in export["messages"] if m.get("state") == "sealed"]
    assert sealed[0]["text"] == forged_text
    without_log = {key: value for key, value in export.items() if key != "log"}
    # Every hash agrees with the rewritten receipt: only the log catches it.
    assert export_verify(without_log).problems == []
    problems = export_verify(export).problems
    assert problems == [
        f"release {release_id} is not in the answer log's checkpoint of size 2 as stored "
        "(rewritten since it was logged, or a bad proof)"
    ]
    path = tmp_path / "export.json"
    path.write_text(json.dumps(export))
    with pytest.raises(SystemExit) as exited:
        call_command("verify_export", str(path), stdout=StringIO(), stderr=StringIO())
    assert exited.value.code == 1


def test_a_bad_dropped_or_malformed_proof_is_reported(conversation, log_key):
    log_integrate()
    export = export_of(conversation)
    release_id = conversation["body"]["release"]["id"]

    bad = copy.deepcopy(export)
    bad["log"]["proofs"][release_id]["proof"] = [base64.b64encode(bytes(32)).decode()]
    assert "is not in the answer log's checkpoint" in export_verify(bad).problems[0]
    dropped = copy.deepcopy(export)
    del dropped["log"]["proofs"][release_id]
    assert export_verify(dropped).problems == [
        f"release {release_id} carries no proof, yet the log holds it"
    ]
    for junk in ({"index": "0", "proof": []}, {"index": 0, "proof": ["%%"]}, "x"):
        malformed = copy.deepcopy(export)
        malformed["log"]["proofs"][release_id] = junk
        assert "is not in the answer log's checkpoint" in export_verify(malformed).problems[0]
    broken = copy.deepcopy(export)
    broken["log"] = "x"
    assert export_verify(broken).problems == ["its answer log part is malformed"]


def test_a_checkpoint_signed_by_another_key_is_reported(conversation, log_key):
    log_integrate()
    export = export_of(conversation)
    assert export_verify(export).problems == []
    genuine = checkpoint_open(export["log"]["checkpoint"], verifier=log_key.verifier())
    export["log"]["checkpoint"] = checkpoint_sign(genuine, signer=NoteSigner.generate(ORIGIN))
    assert export_verify(export).problems == [
        "its answer log checkpoint is not one the log's key signed"
    ]


def verify_command(export: dict, tmp_path) -> tuple[int, str, str]:
    """Run `verify_export` on the export saved as a file: (exit status, stdout, stderr)."""
    path = tmp_path / "export.json"
    path.write_text(json.dumps(export))
    out, err = StringIO(), StringIO()
    try:
        call_command("verify_export", str(path), stdout=out, stderr=err)
    except SystemExit as exited:
        return int(exited.code or 0), out.getvalue(), err.getvalue()
    return 0, out.getvalue(), err.getvalue()


def test_an_export_whose_log_part_was_removed_says_its_logged_releases_went_unchecked(
    conversation, log_key, tmp_path
):
    log_integrate()
    export = export_of(conversation)
    del export["log"]
    status, out, _ = verify_command(export, tmp_path)
    assert status == 0  # an export made before the log existed is legitimate
    assert out.strip() == (
        "verified: 2 sealed answers, every hash matches its stored release; not checked "
        "against the answer log: the export carries no log part, though 2 of its releases "
        "are logged"
    )


def test_a_proof_for_a_release_of_another_conversation_is_reported_not_counted(
    conversation, log_key, tmp_path
):
    other = conversation["client"].post(
        "/v1/answer", {"query": "How long are invoices retained?"}, format="json"
    )
    other_run = AnswerRun.objects.get(pk=other.json()["run_id"])
    other_id = other.json()["release"]["id"]
    log_integrate()
    export = export_of(conversation)
    other_export = conversation["client"].get(
        f"/v1/conversations/{other_run.conversation_id}/export"
    )
    export["log"]["proofs"][other_id] = other_export.json()["log"]["proofs"][other_id]
    status, out, err = verify_command(export, tmp_path)
    assert status == 1 and "3 in the answer log" not in out
    assert err.strip() == (
        f"the answer log part carries a proof for release {other_id!r}, which is not a "
        "sealed release of this export"
    )


def test_an_edited_tree_size_is_reported_and_the_signed_size_is_the_one_said(
    conversation, log_key, tmp_path
):
    log_integrate()
    export = export_of(conversation)
    export["log"]["tree_size"] = 1000
    status, out, err = verify_command(export, tmp_path)
    assert status == 1 and "1000" not in out
    assert err.strip() == (
        "its answer log part gives tree size 1000, but its signed checkpoint is of size 2"
    )
    export["log"]["tree_size"] = 2
    assert verify_command(export, tmp_path)[1].endswith(
        "; 2 in the answer log's checkpoint of size 2\n"
    )


def test_a_release_logged_after_the_exports_checkpoint_is_said_to_carry_no_proof(
    conversation, log_key, tmp_path
):
    log_integrate(batch=1)
    export = export_of(conversation)
    assert export["log"]["tree_size"] == 1
    log_integrate()
    status, out, _ = verify_command(export, tmp_path)
    assert status == 0
    assert out.strip() == (
        "verified: 2 sealed answers, every hash matches its stored release; 1 in the answer "
        "log's checkpoint of size 1; not checked against the answer log: 1 of its releases "
        "is logged after that checkpoint"
    )
