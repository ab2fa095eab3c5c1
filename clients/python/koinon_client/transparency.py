"""Verify koinon's answer log outside the server, trusting only the log's public key
(docs/releases.md, "The answer log").

Everything a verifier needs is here, with no part of the server: C2SP signed notes with
Ed25519 keys (the checkpoint's signature), the C2SP tlog-checkpoint body (origin, size,
root hash, extension lines), and RFC 9162 §2.1 hashing with its inclusion and consistency
proof verification. The server's own implementation (audit.merkle, audit.signed_note,
audit.checkpoint) is independent of this one; the suite checks that they agree.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from koinon_client.errors import KoinonError

HASH_SIZE = 32
_ED25519 = 1
_SIGNATURE_PREFIX = "— "
_DECIMAL = re.compile(r"0|[1-9][0-9]*")
# The fields of a log entry (the server's audit.log.log_entry); a client rebuilds the
# entry from the receipt and takes from the served entry only those a receipt lacks.
ENTRY_FROM_RECEIPT = (
    "release",
    "run",
    "kind",
    "reset_context",
    "publication_sequence",
    "policy_version",
    "text_sha256",
    "citations_sha256",
    "cards_sha256",
    "policy_sha256",
)
ENTRY_FROM_LOG = ("generation", "source_refs", "sealed_at")


class LogVerificationError(KoinonError):
    """The answer log does not vouch for what was checked: a checkpoint the trusted key did
    not sign (or malformed), a proof that does not lead to the signed root, an entry that
    is not the receipt's, or two checkpoints of forked trees. `code` says which."""

    def __init__(self, message: str, *, code: str = "log_unverified") -> None:
        super().__init__(message, code=code)


def _b64decode(text: str) -> bytes:
    """Standard padded base64 in its one canonical spelling."""
    try:
        data = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise LogVerificationError("not base64", code="malformed") from None
    if base64.b64encode(data).decode() != text:
        raise LogVerificationError("not canonical base64", code="malformed")
    return data


@dataclass(frozen=True)
class Verifier:
    """A trusted Ed25519 note key: `<name>+<hex key id>+<base64(0x01 ‖ public key)>`."""

    name: str
    key_id: bytes
    public_key: bytes

    @classmethod
    def from_key(cls, vkey: str) -> Verifier:
        name, _, rest = vkey.strip().partition("+")
        hex_id, _, encoded = rest.partition("+")
        data = _b64decode(encoded)
        try:
            claimed = bytes.fromhex(hex_id)
        except ValueError:
            raise LogVerificationError("a key id is hex", code="malformed") from None
        if (
            not name
            or "+" in name
            or any(c.isspace() for c in name)
            or len(claimed) != 4
            or len(data) != 33
            or data[0] != _ED25519
        ):
            raise LogVerificationError("not an Ed25519 verifier key", code="malformed")
        public = data[1:]
        digest = hashlib.sha256(f"{name}\n".encode() + bytes([_ED25519]) + public).digest()
        if digest[:4] != claimed:
            raise LogVerificationError("the key id does not match the key", code="malformed")
        return cls(name=name, key_id=claimed, public_key=public)

    def verifies(self, message: bytes, signature: bytes) -> bool:
        try:
            Ed25519PublicKey.from_public_bytes(self.public_key).verify(signature, message)
        except InvalidSignature:
            return False
        return True


@dataclass(frozen=True)
class Checkpoint:
    """A checkpoint the trusted key signed: the log's tree of `size` entries has `root`.
    `extensions` are the body's further lines (koinon writes `timestamp <unix seconds>`);
    `note` is the signed note as received, to keep (a witness keeps these)."""

    origin: str
    size: int
    root: bytes
    extensions: tuple[str, ...]
    note: str

    @property
    def timestamp(self) -> int | None:
        """The `timestamp <unix seconds>` extension, when the log wrote one."""
        for line in self.extensions:
            name, _, value = line.partition(" ")
            if name == "timestamp" and _DECIMAL.fullmatch(value):
                return int(value)
        return None


def checkpoint_open(note: str, verifier_key: str | Verifier) -> Checkpoint:
    """The checkpoint of a signed note, when the trusted key signed it and it is that log's
    (its origin is the key's name). Raises LogVerificationError otherwise."""
    verifier = (
        verifier_key if isinstance(verifier_key, Verifier) else Verifier.from_key(verifier_key)
    )
    if any(ord(c) < 0x20 and c != "\n" for c in note):
        raise LogVerificationError("a note has no control characters", code="malformed")
    split = note.rfind("\n\n")
    if split < 0 or not note.endswith("\n"):
        raise LogVerificationError("not a signed note", code="malformed")
    text, block = note[: split + 1], note[split + 2 : -1]
    signed = False
    for line in block.split("\n"):
        if not line.startswith(_SIGNATURE_PREFIX):
            raise LogVerificationError("not a signature line", code="malformed")
        name, _, encoded = line[len(_SIGNATURE_PREFIX) :].partition(" ")
        blob = _b64decode(encoded)
        if name != verifier.name or blob[:4] != verifier.key_id:
            continue  # another key's (a witness's cosignature): not trusted here
        if not verifier.verifies(text.encode(), blob[4:]):
            raise LogVerificationError("the log key's signature does not verify", code="forged")
        signed = True
    if not signed:
        raise LogVerificationError("the trusted key did not sign this checkpoint", code="forged")
    lines = text[:-1].split("\n")
    if len(lines) < 3 or not _DECIMAL.fullmatch(lines[1]):
        raise LogVerificationError("not a checkpoint: origin, size, root hash", code="malformed")
    origin, size, encoded, *extensions = lines
    root = _b64decode(encoded)
    if len(root) != HASH_SIZE:
        raise LogVerificationError("a root hash has 32 bytes", code="malformed")
    if origin != verifier.name:
        raise LogVerificationError(f"a checkpoint of {origin!r}, not of this log", code="forged")
    return Checkpoint(origin, int(size), root, tuple(extensions), note)


# RFC 9162 §2.1: leaf SHA-256(0x00 ‖ entry), node SHA-256(0x01 ‖ left ‖ right).


def leaf_hash(entry: bytes) -> bytes:
    return hashlib.sha256(b"\x00" + entry).digest()


def _node(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(b"\x01" + left + right).digest()


def verify_inclusion(
    *, leaf: bytes, index: int, tree_size: int, proof: Sequence[bytes], root: bytes
) -> None:
    """RFC 9162 §2.1.3.2. Raises LogVerificationError unless leaf is at index in the tree
    of tree_size whose head is root."""
    if any(len(h) != HASH_SIZE for h in (leaf, root, *proof)) or not 0 <= index < tree_size:
        raise LogVerificationError("the inclusion proof is malformed", code="proof_invalid")
    fn, sn, r = index, tree_size - 1, leaf
    for p in proof:
        if sn == 0:
            raise LogVerificationError("the inclusion proof is too long", code="proof_invalid")
        if fn & 1 or fn == sn:
            r = _node(p, r)
            while not fn & 1 and fn != 0:
                fn, sn = fn >> 1, sn >> 1
        else:
            r = _node(r, p)
        fn, sn = fn >> 1, sn >> 1
    if sn != 0 or not hmac.compare_digest(r, root):
        raise LogVerificationError(
            "the entry is not in the signed tree (its proof leads elsewhere)", code="proof_invalid"
        )


def verify_consistency(
    *, old_size: int, new_size: int, old_root: bytes, new_root: bytes, proof: Sequence[bytes]
) -> None:
    """RFC 9162 §2.1.4.2. Raises LogVerificationError unless the tree of new_size with head
    new_root extends the tree of old_size with head old_root."""
    fork = LogVerificationError(
        "the newer checkpoint does not extend the older one (a fork)", code="inconsistent"
    )
    if any(len(h) != HASH_SIZE for h in (old_root, new_root, *proof)) or old_size <= 0:
        raise fork
    if old_size > new_size:
        raise fork
    if old_size == new_size:
        if proof or not hmac.compare_digest(old_root, new_root):
            raise fork
        return
    if not proof:
        raise fork
    path = list(proof)
    if old_size & (old_size - 1) == 0:
        path.insert(0, old_root)
    fn, sn = old_size - 1, new_size - 1
    while fn & 1:
        fn, sn = fn >> 1, sn >> 1
    fr = sr = path[0]
    for c in path[1:]:
        if sn == 0:
            raise fork
        if fn & 1 or fn == sn:
            fr, sr = _node(c, fr), _node(c, sr)
            while not fn & 1 and fn != 0:
                fn, sn = fn >> 1, sn >> 1
        else:
            sr = _node(sr, c)
        fn, sn = fn >> 1, sn >> 1
    if sn != 0 or not (hmac.compare_digest(fr, old_root) and hmac.compare_digest(sr, new_root)):
        raise fork


def proof_hashes(proof: Any) -> list[bytes]:
    """A served proof (a list of base64 hashes) decoded; LogVerificationError otherwise."""
    if not isinstance(proof, list) or not all(isinstance(node, str) for node in proof):
        raise LogVerificationError("a proof is a list of base64 hashes", code="malformed")
    return [_b64decode(node) for node in proof]


def entry_from_receipt(body: dict[str, Any], served_entry: dict[str, Any]) -> dict[str, Any]:
    """The log entry of a body's receipt, as the server builds it: the receipt's identifying
    fields and hashes, and of the served entry only what a receipt does not carry (the
    generation's id, the source references, the sealing time), all bound by the leaf."""
    release = body["release"]
    entry = {name: release[name] for name in ENTRY_FROM_RECEIPT if name not in ("run", "release")}
    entry["release"] = release["id"]
    entry["run"] = body["run_id"]
    for name in ENTRY_FROM_LOG:
        if name not in served_entry:
            raise LogVerificationError(f"the served entry has no {name}", code="malformed")
        entry[name] = served_entry[name]
    return entry
