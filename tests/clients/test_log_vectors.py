"""The answer log's shared vectors (clients/conformance/log_vectors.json, issue 51).

RFC 9162 leaf hashes, tree heads, inclusion and consistency proofs of a small tree (every
index and every pair of sizes up to its size), C2SP signed checkpoints under a fixed key
(genuine ones, a cosigned one, and ones a verifier must refuse, with the Python client's
error code), and log entries rebuilt from a receipt and a served entry. The server's
audit.merkle and audit.checkpoint make them; the Python client must agree with each here,
and the TypeScript and Go clients check every vector in their own suites. This module fails
when the committed file is not what is computed; after a deliberate change rewrite it with
`KOINON_WRITE_VECTORS=1 .venv/bin/python -m pytest tests/clients/test_log_vectors.py`.
"""

import base64
import json
import os

import pytest
from koinon_client import canonical
from koinon_client.transparency import (
    LogVerificationError,
    checkpoint_open,
    entry_from_receipt,
    leaf_hash,
    verify_consistency,
    verify_inclusion,
)

from audit.checkpoint import Checkpoint, checkpoint_sign
from audit.merkle import MerkleTree
from audit.merkle import leaf_hash as server_leaf_hash
from audit.signed_note import NoteSigner, sign_note
from tests.services import ROOT

VECTORS = ROOT / "clients" / "conformance" / "log_vectors.json"
ORIGIN = "koinon.example/answers"
# Fixed seeds: Ed25519 signatures are deterministic, so the notes are too.
LOG_KEY = NoteSigner(name=ORIGIN, seed=bytes(range(32)))
IMPOSTOR = NoteSigner(name=ORIGIN, seed=bytes(range(32, 64)))
WITNESS = NoteSigner(name="witness.example", seed=bytes(range(64, 96)))
OTHER_LOG = NoteSigner(name="other.example/answers", seed=bytes(range(96, 128)))
SIZE = 13
TIMESTAMP = "timestamp 1767225600"


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def tree_vectors() -> dict:
    entries = [json.dumps({"n": n, "text": "é" * n}, ensure_ascii=False) for n in range(SIZE)]
    leaves = [server_leaf_hash(entry.encode()) for entry in entries]
    tree = MerkleTree(leaves)
    return {
        "leaves": [{"entry": e, "leaf_hash": b64(h)} for e, h in zip(entries, leaves, strict=True)],
        "roots": [{"tree_size": n, "root": b64(tree.root(n))} for n in range(1, SIZE + 1)],
        "inclusion": [
            {
                "index": index,
                "tree_size": size,
                "leaf_hash": b64(leaves[index]),
                "proof": [b64(h) for h in tree.inclusion_proof(index, size)],
                "root": b64(tree.root(size)),
            }
            for size in range(1, SIZE + 1)
            for index in range(size)
        ],
        "consistency": [
            {
                "old_size": old,
                "new_size": new,
                "old_root": b64(tree.root(old)),
                "new_root": b64(tree.root(new)),
                "proof": [b64(h) for h in tree.consistency_proof(old, new)],
            }
            for new in range(1, SIZE + 1)
            for old in range(1, new + 1)
        ],
    }


def note_vectors() -> dict:
    root = MerkleTree([server_leaf_hash(b"0"), server_leaf_hash(b"1")]).root()
    checkpoint = Checkpoint(origin=ORIGIN, size=2, root=root, extensions=(TIMESTAMP,))
    genuine = checkpoint_sign(checkpoint, signer=LOG_KEY)
    plain = checkpoint_sign(Checkpoint(origin=ORIGIN, size=0, root=bytes(32)), signer=LOG_KEY)
    cosigned = sign_note(checkpoint.text(), [WITNESS, LOG_KEY])
    signature = genuine.rsplit(" ", 1)[1]
    changed = signature[:10] + ("A" if signature[10] != "A" else "B") + signature[11:]
    rejected = [
        ("signed-text-changed", genuine.replace("\n2\n", "\n3\n", 1), "forged"),
        ("signature-changed", genuine.replace(signature, changed), "forged"),
        (
            "signed-by-another-key-of-the-same-name",
            checkpoint_sign(checkpoint, signer=IMPOSTOR),
            "forged",
        ),
        ("signed-by-a-witness-only", sign_note(checkpoint.text(), [WITNESS]), "forged"),
        (
            "another-logs-origin",
            sign_note(checkpoint.text().replace(ORIGIN, OTHER_LOG.name), [LOG_KEY]),
            "forged",
        ),
        ("no-signature-block", checkpoint.text(), "malformed"),
        (
            "signature-not-canonical-base64",
            genuine.replace(signature, signature[:-2] + "\n"),
            "malformed",
        ),
        (
            "root-not-32-bytes",
            sign_note(f"{ORIGIN}\n2\n{b64(bytes(31))}\n", [LOG_KEY]),
            "malformed",
        ),
        ("size-not-decimal", sign_note(f"{ORIGIN}\n02\n{b64(root)}\n", [LOG_KEY]), "malformed"),
        ("control-character", genuine.replace(TIMESTAMP, TIMESTAMP + "\t"), "malformed"),
    ]
    return {
        "verifier_key": LOG_KEY.verifier().key_string(),
        "valid": [
            {"name": name, "note": note, "size": size, "root": b64(head), "extensions": ext}
            for name, note, size, head, ext in (
                ("with-timestamp", genuine, 2, root, [TIMESTAMP]),
                ("empty-tree-no-extensions", plain, 0, bytes(32), []),
                ("cosigned-by-a-witness", cosigned, 2, root, [TIMESTAMP]),
            )
        ],
        "rejected": [{"name": name, "note": note, "code": code} for name, note, code in rejected],
    }


def receipt_body(generation: int | None) -> dict:
    return {
        "run_id": "00000000-0000-4000-8000-000000000051",
        "generation": generation,
        "answer": {"text": "Die Plattform-Betriebsgruppe 🚀.", "citations": [], "cards": []},
        "release": {
            "id": "00000000-0000-4000-8000-000000000151",
            "kind": "answer" if generation else "refusal",
            "reset_context": 0,
            "publication_sequence": 9007199254740993,
            "policy_version": "2",
            "text_sha256": "1" * 64,
            "citations_sha256": "2" * 64,
            "cards_sha256": "3" * 64,
            "policy_sha256": "4" * 64,
            "log": {"index": 7, "tree_size": 8, "checkpoint": None},
        },
    }


def entry_vectors() -> list[dict]:
    vectors = []
    for name, generation, sources in (
        (
            "answer-with-sources",
            41,
            [{"document_id": 3, "title": "Überprüfung 東京", "score": 0.5}],
        ),
        ("refusal-without-generation", None, []),
    ):
        body = receipt_body(generation)
        served = {
            **{k: v for k, v in body["release"].items() if k not in ("id", "log")},
            "release": body["release"]["id"],
            "run": body["run_id"],
            "generation": generation,
            "source_refs": sources,
            "sealed_at": "2026-01-01T00:00:00.123456+00:00",
        }
        entry = canonical(entry_from_receipt(body, served), "2")
        vectors.append(
            {
                "name": name,
                "body_json": json.dumps(body, ensure_ascii=False),
                "served_entry": canonical(served, "2").decode(),
                "entry": entry.decode(),
                "leaf_hash": b64(leaf_hash(entry)),
            }
        )
    return vectors


def test_the_committed_log_vectors_are_what_the_server_computes():
    document = {
        "about": (
            "koinon's answer log vectors (issue 51): RFC 9162 hashes and proofs, C2SP signed "
            "checkpoints, log entries rebuilt from receipts; generated and checked by "
            "tests/clients/test_log_vectors.py; see docs/releases.md."
        ),
        **tree_vectors(),
        "notes": note_vectors(),
        "entries": entry_vectors(),
    }
    text = json.dumps(document, ensure_ascii=False, indent=1) + "\n"
    if os.environ.get("KOINON_WRITE_VECTORS") == "1":
        VECTORS.write_text(text, encoding="utf-8")
    committed = json.loads(VECTORS.read_text(encoding="utf-8"))
    assert committed == document, (
        "clients/conformance/log_vectors.json is not what the server computes; after a "
        "deliberate change rewrite it with KOINON_WRITE_VECTORS=1 (see this module's docstring)"
    )


def flipped(text: str) -> bytes:
    data = bytearray(base64.b64decode(text))
    data[0] ^= 1
    return bytes(data)


def test_the_python_client_agrees_with_every_log_vector():
    document = json.loads(VECTORS.read_text(encoding="utf-8"))
    for leaf in document["leaves"]:
        assert b64(leaf_hash(leaf["entry"].encode())) == leaf["leaf_hash"]
    for v in document["inclusion"]:
        proof = [base64.b64decode(h) for h in v["proof"]]
        arguments = {
            "leaf": base64.b64decode(v["leaf_hash"]),
            "index": v["index"],
            "tree_size": v["tree_size"],
            "proof": proof,
        }
        verify_inclusion(**arguments, root=base64.b64decode(v["root"]))
        with pytest.raises(LogVerificationError):
            verify_inclusion(**arguments, root=flipped(v["root"]))
    for v in document["consistency"]:
        sizes = {"old_size": v["old_size"], "new_size": v["new_size"]}
        proof = [base64.b64decode(h) for h in v["proof"]]
        old_root = base64.b64decode(v["old_root"])
        verify_consistency(
            **sizes, old_root=old_root, new_root=base64.b64decode(v["new_root"]), proof=proof
        )
        with pytest.raises(LogVerificationError):  # a fork: another tree of the new size
            verify_consistency(
                **sizes, old_root=old_root, new_root=flipped(v["new_root"]), proof=proof
            )
    notes = document["notes"]
    for v in notes["valid"]:
        opened = checkpoint_open(v["note"], notes["verifier_key"])
        assert (opened.size, b64(opened.root), list(opened.extensions)) == (
            v["size"],
            v["root"],
            v["extensions"],
        ), v["name"]
    for v in notes["rejected"]:
        with pytest.raises(LogVerificationError) as failure:
            checkpoint_open(v["note"], notes["verifier_key"])
        assert failure.value.code == v["code"], v["name"]
    for v in document["entries"]:
        entry = entry_from_receipt(json.loads(v["body_json"]), json.loads(v["served_entry"]))
        assert canonical(entry, "2").decode() == v["entry"], v["name"]


def test_the_log_vectors_cover_what_they_promise():
    document = json.loads(VECTORS.read_text(encoding="utf-8"))
    assert len(document["inclusion"]) == len(document["consistency"]) == SIZE * (SIZE + 1) // 2
    assert any(len(v["proof"]) >= 4 for v in document["inclusion"])
    assert any(
        v["old_size"] & (v["old_size"] - 1) == 0 < len(v["proof"]) for v in document["consistency"]
    )
    assert {v["code"] for v in document["notes"]["rejected"]} == {"forged", "malformed"}
    entries = [json.loads(v["entry"]) for v in document["entries"]]
    assert any(e["generation"] is None for e in entries) and any(e["source_refs"] for e in entries)
    assert all(e["publication_sequence"] >= 2**53 for e in entries)  # a double in every client
