"""Checkpoints of the answer log in the C2SP tlog-checkpoint format: the body of a signed
note, three lines — the log's origin, the tree size in decimal, the base64 root hash —
then optional extension lines; signed by the log's key whose name is the origin.

A client that keeps a checkpoint can hold the log to it: any later tree must be
consistent with it (audit.merkle.verify_consistency), and a release it was shown must be
included in it (audit.merkle.verify_inclusion)."""

import base64
import re
from collections.abc import Iterable
from dataclasses import dataclass

from audit.merkle import HASH_SIZE
from audit.signed_note import (
    NoteMalformed,
    NoteSigner,
    NoteVerifier,
    SignatureInvalid,
    b64decode_canonical,
    open_note,
    sign_note,
)

_DECIMAL = re.compile(r"0|[1-9][0-9]*")


class CheckpointMalformed(NoteMalformed):
    """A note whose text is not a checkpoint body."""


@dataclass(frozen=True)
class Checkpoint:
    origin: str
    size: int
    root: bytes
    extensions: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.origin or any(ord(c) < 0x20 for c in self.origin):
            raise CheckpointMalformed("a checkpoint's origin is one non-empty line")
        if self.size < 0:
            raise CheckpointMalformed("a tree size is not negative")
        if len(self.root) != HASH_SIZE:
            raise CheckpointMalformed(f"a root hash has {HASH_SIZE} bytes")
        if any(not line or any(ord(c) < 0x20 for c in line) for line in self.extensions):
            raise CheckpointMalformed("an extension is one non-empty line")

    def text(self) -> str:
        """The note text that is signed."""
        lines = [self.origin, str(self.size), base64.b64encode(self.root).decode()]
        return "".join(f"{line}\n" for line in (*lines, *self.extensions))


def parse_checkpoint(text: str) -> Checkpoint:
    """The checkpoint a note's text holds; CheckpointMalformed when it holds none."""
    if not text.endswith("\n"):
        raise CheckpointMalformed("a checkpoint's text ends in a newline")
    lines = text[:-1].split("\n")
    if len(lines) < 3:
        raise CheckpointMalformed("a checkpoint has an origin, a size and a root hash")
    origin, size, encoded, *extensions = lines
    if not _DECIMAL.fullmatch(size):
        raise CheckpointMalformed("a tree size is decimal, without leading zeros")
    try:
        root = b64decode_canonical(encoded)
    except ValueError as error:
        raise CheckpointMalformed("a root hash is base64") from error
    return Checkpoint(origin=origin, size=int(size), root=root, extensions=tuple(extensions))


def checkpoint_sign(checkpoint: Checkpoint, *, signer: NoteSigner) -> str:
    """The signed note of a checkpoint. The signer's key name is the log's origin."""
    if checkpoint.origin != signer.name:
        raise CheckpointMalformed("a checkpoint is signed by the key named for its origin")
    return sign_note(checkpoint.text(), [signer])


def checkpoint_open(
    note: str | bytes,
    *,
    verifier: NoteVerifier,
    origin: str | None = None,
    cosigners: Iterable[NoteVerifier] = (),
) -> Checkpoint:
    """The checkpoint of a signed note, when the log's key (verifier) signed it and it is
    of the expected origin (the key's name unless given: Go's sumdb, for one, signs
    "go.sum database tree" as sum.golang.org); further trusted keys (witnesses) may cosign.

    Raises NoteMalformed (CheckpointMalformed for the body) for a malformed note, and
    SignatureInvalid when the log's key did not sign it, a trusted signature fails or the
    origin is another log's."""
    opened = open_note(note, [verifier, *cosigners])
    if not any(s.name == verifier.name and s.key_id == verifier.key_id for s in opened.verified):
        raise SignatureInvalid("the log's key did not sign this checkpoint")
    checkpoint = parse_checkpoint(opened.text)
    expected = verifier.name if origin is None else origin
    if checkpoint.origin != expected:
        raise SignatureInvalid(f"the checkpoint is of {checkpoint.origin!r}, not of {expected!r}")
    return checkpoint
