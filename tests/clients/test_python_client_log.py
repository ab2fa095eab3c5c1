"""The Python client checks koinon's answer log outside the server, trusting only the log's
public key (issue 33): an answer's inclusion against a signed checkpoint, the consistency
of two checkpoints, against the suite's live Daphne; a receipt a database owner rewrote, a
checkpoint signed by another key and a forked log are each refused. The client's own RFC
9162 and signed-note code agrees with the server's on every size."""

import base64
import hashlib
import json
import subprocess
import sys

import pytest
from koinon_client import Client, Release
from koinon_client.transparency import (
    LogVerificationError,
    checkpoint_open,
    leaf_hash,
    verify_consistency,
    verify_inclusion,
)

from audit.checkpoint import Checkpoint, checkpoint_sign
from audit.log import log_integrate, log_tree
from audit.merkle import MerkleTree
from audit.merkle import leaf_hash as server_leaf_hash
from audit.models import LogCheckpoint
from audit.signed_note import NoteSigner
from tests.audit.helpers import ORIGIN, as_owner, more_releases
from tests.clients.helpers import QUESTION
from tests.services import ROOT


def answered(client: Client):
    answer = client.answer.create(QUESTION)
    assert answer.release is not None and answer.verified
    return answer


@pytest.mark.django_db(transaction=True)
def test_an_answer_verifies_in_the_log_against_the_latest_and_a_kept_checkpoint(
    live_server_url, corpus, reader_key, log_key
):
    public = log_key.verifier().key_string()
    with Client(live_server_url, reader_key) as client:
        answer = answered(client)
        log_integrate()
        kept = LogCheckpoint.objects.get().note  # a checkpoint someone kept (size 1)
        more_releases(4)
        log_integrate()
        run = client.runs.get(answer.run_id)
        assert run.body["release"]["log"]["index"] == 0
        latest = run.release.verify_inclusion(client, run.body, verifier_key=public)
        assert latest.size == 5 and latest.root == log_tree().root()
        older = run.release.verify_inclusion(client, run.body, verifier_key=public, checkpoint=kept)
        assert older.size == 1
        assert client.log.verify_consistency(kept, latest, verifier_key=public).size == 5
        # The body as first received (no log part) verifies alike.
        assert answer.release.verify_inclusion(client, answer.body, verifier_key=public).size == 5


@pytest.mark.django_db(transaction=True)
def test_a_receipt_a_database_owner_rewrote_fails_the_clients_inclusion_check(
    live_server_url, corpus, reader_key, log_key
):
    """The owner rewrites the sealed text and the receipt's text hash alike (row and sealed
    body), so the body still matches its receipt; the log, signed before, does not."""
    public = log_key.verifier().key_string()
    with Client(live_server_url, reader_key) as client:
        answer = answered(client)
        more_releases(2)
        log_integrate()
        assert answer.release.verify_inclusion(client, answer.body, verifier_key=public)
        forged_text = "Nobody owns service reviews."
        forged_hash = hashlib.sha256(forged_text.encode()).hexdigest()
        as_owner(
            (
                "UPDATE audit_outputrelease SET text_sha256 = %s WHERE id = %s",
                [forged_hash, answer.release.id],
            ),
            (
                "UPDATE answers_answerrun SET response = jsonb_set(jsonb_set(response, "
                "'{answer,text}', to_jsonb(%s::text)), '{release,text_sha256}', "
                "to_jsonb(%s::text)) WHERE id = %s",
                [forged_text, forged_hash, answer.run_id],
            ),
        )
        rewritten = client.runs.get(answer.run_id)
        assert rewritten.text == forged_text and rewritten.verified  # the receipt alone agrees
        with pytest.raises(LogVerificationError) as failure:
            rewritten.release.verify_inclusion(client, rewritten.body, verifier_key=public)
        assert failure.value.code == "proof_invalid"
        # Its neighbours, untouched, still verify.
        assert answer.release.verify_inclusion(client, answer.body, verifier_key=public)


@pytest.mark.django_db(transaction=True)
def test_a_checkpoint_signed_by_another_key_is_rejected(
    live_server_url, corpus, reader_key, log_key
):
    public = log_key.verifier().key_string()
    with Client(live_server_url, reader_key) as client:
        answer = answered(client)
        log_integrate()
        genuine = checkpoint_open(LogCheckpoint.objects.get().note, public)
        impostor = NoteSigner.generate(ORIGIN)
        forged = checkpoint_sign(
            Checkpoint(origin=ORIGIN, size=genuine.size, root=genuine.root), signer=impostor
        )
        with pytest.raises(LogVerificationError) as failure:
            answer.release.verify_inclusion(
                client, answer.body, verifier_key=public, checkpoint=forged
            )
        assert failure.value.code == "forged"
        # The server's own checkpoints do not verify under a key the reader does not trust.
        with pytest.raises(LogVerificationError):
            answer.release.verify_inclusion(
                client, answer.body, verifier_key=impostor.verifier().key_string()
            )
        with pytest.raises(LogVerificationError):
            client.log.verify_consistency(genuine, forged, verifier_key=public)


@pytest.mark.django_db(transaction=True)
def test_a_forked_log_fails_the_clients_consistency_check(
    live_server_url, corpus, reader_key, log_key
):
    """A key holder who signs a second history: a checkpoint of the same size with another
    root, and a later one of the real log; the client holding the fork detects it."""
    public = log_key.verifier().key_string()
    with Client(live_server_url, reader_key) as client:
        answered(client)
        more_releases(2)
        log_integrate()
        more_releases(3)
        log_integrate()
        first, latest = (c.note for c in LogCheckpoint.objects.order_by("size"))
        assert client.log.verify_consistency(first, latest, verifier_key=public).size == 6
        fork = checkpoint_sign(
            Checkpoint(origin=ORIGIN, size=3, root=server_leaf_hash(b"another history")),
            signer=log_key,
        )
        with pytest.raises(LogVerificationError) as failure:
            client.log.verify_consistency(fork, latest, verifier_key=public)
        assert failure.value.code == "inconsistent"
        with pytest.raises(LogVerificationError):
            client.log.verify_consistency(latest, first, verifier_key=public)


def test_the_clients_proof_checks_agree_with_the_servers_trees_on_every_size():
    leaves = [server_leaf_hash(str(n).encode()) for n in range(33)]
    tree = MerkleTree(leaves)
    assert leaf_hash(b"7") == leaves[7]
    for size in range(1, 34):
        root = tree.root(size)
        for index in range(size):
            verify_inclusion(
                leaf=leaves[index],
                index=index,
                tree_size=size,
                proof=tree.inclusion_proof(index, size),
                root=root,
            )
        with pytest.raises(LogVerificationError):
            verify_inclusion(
                leaf=leaves[0],
                index=size - 1 if size > 1 else 0,
                tree_size=size,
                proof=tree.inclusion_proof(size - 1, size),
                root=root if size > 1 else leaves[1],
            )
        for old in range(1, size + 1):
            verify_consistency(
                old_size=old,
                new_size=size,
                old_root=tree.root(old),
                new_root=root,
                proof=tree.consistency_proof(old, size),
            )


def test_the_client_reads_the_servers_notes_and_their_extensions():
    signer = NoteSigner.generate(ORIGIN)
    note = checkpoint_sign(
        Checkpoint(origin=ORIGIN, size=9, root=bytes(32), extensions=("timestamp 1700000000",)),
        signer=signer,
    )
    opened = checkpoint_open(note, signer.verifier().key_string())
    assert (opened.size, opened.root, opened.timestamp) == (9, bytes(32), 1700000000)
    for broken in (
        note.replace("\n9\n", "\n10\n"),  # the signed text changed
        note[:-2] + ("A" if note[-2] != "A" else "B") + "\n",  # the signature changed
        "not a note",
    ):
        with pytest.raises(LogVerificationError):
            checkpoint_open(broken, signer.verifier().key_string())
    assert json.loads(base64.b64decode("e30=")) == {}  # the served encodings: padded base64


def test_the_client_imports_nothing_of_the_server():
    code = (
        "import sys, koinon_client, koinon_client.transparency; "
        "server = {'audit', 'core', 'answers', 'koinon', 'django'}; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in server))"
    )
    env = {"PYTHONPATH": str(ROOT / "clients" / "python")}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
    )
    assert out.stdout.strip() == "[]"


def test_a_release_whose_body_does_not_match_is_refused_before_any_request():
    body = {
        "run_id": "r",
        "answer": {"text": "x", "citations": [], "cards": []},
        "evidence": {"policy": {}},
        "release": {
            "id": "x",
            "kind": "answer",
            "text_sha256": "0" * 64,
            "citations_sha256": "0" * 64,
            "cards_sha256": "0" * 64,
            "policy_sha256": "0" * 64,
        },
    }
    release = Release.from_body(body)
    with pytest.raises(LogVerificationError) as failure:
        release.verify_inclusion(None, body, verifier_key="unused")  # type: ignore[arg-type]
    assert failure.value.code == "receipt"
