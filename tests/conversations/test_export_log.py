"""An export carries the answer log's latest checkpoint and each sealed release's inclusion
proof against it, beside the sealed bodies (issue 33); `verify_export` then also checks the
releases against the log: a receipt a database owner rewrote together with its sealed body
— which the hashes alone cannot catch — a bad proof, a dropped proof and a checkpoint signed
by another key are each reported."""

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
    assert export_verify(export) == []
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
    assert export_verify(without_log) == []  # every hash agrees with the rewritten receipt
    problems = export_verify(export)
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
    assert "is not in the answer log's checkpoint" in export_verify(bad)[0]
    dropped = copy.deepcopy(export)
    del dropped["log"]["proofs"][release_id]
    assert export_verify(dropped) == [
        f"release {release_id} carries no proof, yet the log holds it"
    ]
    for junk in ({"index": "0", "proof": []}, {"index": 0, "proof": ["%%"]}, "x"):
        malformed = copy.deepcopy(export)
        malformed["log"]["proofs"][release_id] = junk
        assert "is not in the answer log's checkpoint" in export_verify(malformed)[0]
    broken = copy.deepcopy(export)
    broken["log"] = "x"
    assert export_verify(broken) == ["its answer log part is malformed"]


def test_a_checkpoint_signed_by_another_key_is_reported(conversation, log_key):
    log_integrate()
    export = export_of(conversation)
    assert export_verify(export) == []
    genuine = checkpoint_open(export["log"]["checkpoint"], verifier=log_key.verifier())
    export["log"]["checkpoint"] = checkpoint_sign(genuine, signer=NoteSigner.generate(ORIGIN))
    assert export_verify(export) == ["its answer log checkpoint is not one the log's key signed"]
