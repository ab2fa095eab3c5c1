"""audit.checkpoint: the C2SP tlog-checkpoint body signed as a note by the log's key."""

import base64
import hashlib

import pytest

from audit.checkpoint import (
    Checkpoint,
    CheckpointMalformed,
    checkpoint_open,
    checkpoint_sign,
    parse_checkpoint,
)
from audit.merkle import MerkleTree, leaf_hash, verify_consistency, verify_inclusion
from audit.signed_note import (
    NoteMalformed,
    NoteSigner,
    NoteVerifier,
    SignatureInvalid,
    open_note,
    sign_note,
)

ORIGIN = "koinon.example/answers"
ROOT = hashlib.sha256(b"a root").digest()


@pytest.fixture(scope="module")
def signer() -> NoteSigner:
    return NoteSigner.generate(ORIGIN)


def test_a_checkpoint_round_trips_in_the_c2sp_text_format(signer):
    checkpoint = Checkpoint(origin=ORIGIN, size=5, root=ROOT)
    note = checkpoint_sign(checkpoint, signer=signer)
    body, signature = note.split("\n\n")
    assert body == f"{ORIGIN}\n5\n{base64.b64encode(ROOT).decode()}"
    assert signature.startswith(f"— {ORIGIN} ")
    assert checkpoint_open(note, verifier=signer.verifier()) == checkpoint
    with_extension = Checkpoint(origin=ORIGIN, size=0, root=ROOT, extensions=("ext one",))
    opened = checkpoint_open(
        checkpoint_sign(with_extension, signer=signer), verifier=signer.verifier()
    )
    assert opened == with_extension


def test_a_kept_checkpoint_holds_the_tree_to_its_proofs(signer):
    """What a checkpoint is for: a client that kept one verifies inclusion in it and that a
    later checkpoint's tree extends it."""
    tree = MerkleTree(leaf_hash(f"entry {i}".encode()) for i in range(20))
    old = checkpoint_open(
        checkpoint_sign(Checkpoint(origin=ORIGIN, size=13, root=tree.root(13)), signer=signer),
        verifier=signer.verifier(),
    )
    new = checkpoint_open(
        checkpoint_sign(Checkpoint(origin=ORIGIN, size=20, root=tree.root()), signer=signer),
        verifier=signer.verifier(),
    )
    verify_inclusion(
        leaf=leaf_hash(b"entry 7"),
        index=7,
        tree_size=old.size,
        proof=tree.inclusion_proof(7, old.size),
        root=old.root,
    )
    verify_consistency(
        old_size=old.size,
        new_size=new.size,
        old_root=old.root,
        new_root=new.root,
        proof=tree.consistency_proof(old.size, new.size),
    )


def test_a_checkpoint_signed_by_another_key_is_rejected(signer):
    impostor = NoteSigner.generate(ORIGIN)
    note = checkpoint_sign(Checkpoint(origin=ORIGIN, size=5, root=ROOT), signer=impostor)
    with pytest.raises(SignatureInvalid):
        checkpoint_open(note, verifier=signer.verifier())


def test_a_witness_cosignature_does_not_stand_in_for_the_logs(signer):
    witness = NoteSigner.generate("witness.example")
    text = Checkpoint(origin=ORIGIN, size=5, root=ROOT).text()
    cosigned = open_note(
        sign_note(text, [signer, witness]), [signer.verifier(), witness.verifier()]
    )
    assert [s.name for s in cosigned.verified] == [ORIGIN, "witness.example"]
    assert checkpoint_open(
        sign_note(text, [signer, witness]),
        verifier=signer.verifier(),
        cosigners=[witness.verifier()],
    ) == Checkpoint(origin=ORIGIN, size=5, root=ROOT)
    with pytest.raises(SignatureInvalid):
        checkpoint_open(
            sign_note(text, [witness]), verifier=signer.verifier(), cosigners=[witness.verifier()]
        )


def test_every_changed_byte_of_origin_size_or_root_fails(signer):
    note = checkpoint_sign(Checkpoint(origin=ORIGIN, size=1234, root=ROOT), signer=signer)
    body_length = note.index("\n\n")
    for position in range(body_length):
        if note[position] == "\n":
            continue
        changed = note[:position] + chr(ord(note[position]) ^ 1) + note[position + 1 :]
        # Either no longer a checkpoint at all, or not what the key signed.
        with pytest.raises((SignatureInvalid, NoteMalformed)):
            checkpoint_open(changed, verifier=signer.verifier())


def test_a_checkpoint_of_another_origin_is_rejected(signer):
    other = NoteSigner(name="other.example/log", seed=signer.seed)
    note = checkpoint_sign(Checkpoint(origin="other.example/log", size=5, root=ROOT), signer=other)
    # Signed by the same key material under another name: not our log's key id.
    with pytest.raises(SignatureInvalid):
        checkpoint_open(note, verifier=signer.verifier())
    # Our key, but expected to be another origin.
    ours = checkpoint_sign(Checkpoint(origin=ORIGIN, size=5, root=ROOT), signer=signer)
    with pytest.raises(SignatureInvalid):
        checkpoint_open(ours, verifier=signer.verifier(), origin="elsewhere")
    with pytest.raises(CheckpointMalformed):
        checkpoint_sign(Checkpoint(origin="elsewhere", size=5, root=ROOT), signer=signer)


ROOT_B64 = base64.b64encode(ROOT).decode()


@pytest.mark.parametrize(
    "text",
    [
        pytest.param(f"{ORIGIN}\n5\n", id="no root"),
        pytest.param(f"{ORIGIN}\n5\n{ROOT_B64}", id="no final newline"),
        pytest.param(f"{ORIGIN}\n05\n{ROOT_B64}\n", id="leading zero"),
        pytest.param(f"{ORIGIN}\n-5\n{ROOT_B64}\n", id="negative size"),
        pytest.param(f"{ORIGIN}\n5.0\n{ROOT_B64}\n", id="not decimal"),
        pytest.param(f"{ORIGIN}\n\n{ROOT_B64}\n", id="empty size"),
        pytest.param(f"\n5\n{ROOT_B64}\n", id="empty origin"),
        pytest.param(f"{ORIGIN}\n5\n{ROOT_B64[:-4]}\n", id="short root"),
        pytest.param(f"{ORIGIN}\n5\n{base64.b64encode(ROOT + b'x').decode()}\n", id="long root"),
        pytest.param(f"{ORIGIN}\n5\n{ROOT_B64.rstrip('=')}\n", id="unpadded base64"),
        pytest.param(f"{ORIGIN}\n5\n{ROOT_B64}\n\next\n", id="empty extension line"),
    ],
)
def test_parse_refuses_a_malformed_checkpoint_with_a_typed_error(text):
    with pytest.raises(CheckpointMalformed):
        parse_checkpoint(text)


def test_a_signed_note_that_is_no_checkpoint_is_refused(signer):
    with pytest.raises(CheckpointMalformed):
        checkpoint_open(sign_note(f"{ORIGIN}\nnot a size\n", [signer]), verifier=signer.verifier())


def test_the_served_verifier_key_opens_the_checkpoints(signer):
    """The verifier key string a log publishes (name+hex id+base64 key) is all a client
    needs."""
    published = signer.verifier().key_string()
    note = checkpoint_sign(Checkpoint(origin=ORIGIN, size=9, root=ROOT), signer=signer)
    assert checkpoint_open(note, verifier=NoteVerifier.from_key(published)).size == 9
