"""A witness of the answer log (`manage.py log witness DIR`): keep every signed checkpoint
in a directory outside the database, one file per checkpoint (`<tree size>.checkpoint`),
appending a new one only when the log's tree of its size extends the newest one kept. A
database owner who rewrites, removes or reorders receipts after a kept checkpoint — even
one who re-signs the log with its key — can then never get a new checkpoint past the
witness; and `manage.py log verify --checkpoint DIR/*.checkpoint` checks the log against
everything kept. The directory is only as independent as where it lives
(docs/releases.md, "Witnesses")."""

import os
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from audit.checkpoint import Checkpoint, checkpoint_open
from audit.log import log_signer, log_tree
from audit.merkle import MerkleTree, ProofInvalid, verify_consistency
from audit.models import LogCheckpoint
from audit.signed_note import NoteMalformed, NoteVerifier, SignatureInvalid

_KEPT = re.compile(r"(0|[1-9][0-9]*)\.checkpoint")


@dataclass
class WitnessReport:
    written: list[int] = field(default_factory=list)  # the sizes appended
    newest: int | None = None  # the newest size kept, after this run
    problems: list[str] = field(default_factory=list)


def _open(note: str, verifier: NoteVerifier, what: str, report: WitnessReport) -> Checkpoint | None:
    try:
        return checkpoint_open(note, verifier=verifier)
    except (NoteMalformed, SignatureInvalid) as error:
        report.problems.append(f"{what}: not one the log's key signed ({error})")
        return None


def _write(directory: Path, checkpoint: Checkpoint, note: str) -> None:
    """Write the file whole or not at all (a temporary file renamed into place), never over
    one already there."""
    target = directory / f"{checkpoint.size}.checkpoint"
    handle, temporary = tempfile.mkstemp(dir=directory, prefix=".incoming-")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(note)
            out.flush()
            os.fsync(out.fileno())
        os.link(temporary, target)  # fails if the target exists: a kept file is never replaced
    finally:
        os.unlink(temporary)


def _kept(directory: Path, verifier: NoteVerifier, report: WitnessReport) -> dict[int, Checkpoint]:
    """The checkpoints kept in directory, by size; a file not signed by the log's key, or
    not named for its size, is a problem."""
    kept: dict[int, Checkpoint] = {}
    for path in sorted(directory.iterdir()):
        match = _KEPT.fullmatch(path.name)
        if match is None:
            continue
        checkpoint = _open(path.read_text(encoding="utf-8"), verifier, path.name, report)
        if checkpoint is None:
            continue
        if checkpoint.size != int(match.group(1)):
            report.problems.append(f"{path.name}: holds the checkpoint of {checkpoint.size}")
            continue
        kept[checkpoint.size] = checkpoint
    return kept


def _extends(
    newest: Checkpoint | None, checkpoint: Checkpoint, tree: MerkleTree, report: WitnessReport
) -> bool:
    """Whether the stored entries give checkpoint's root, and their tree of its size extends
    the newest kept one; a problem otherwise."""
    what = f"stored checkpoint of size {checkpoint.size}"
    if checkpoint.size > len(tree) or tree.root(checkpoint.size) != checkpoint.root:
        report.problems.append(f"{what}: the stored entries give another root")
        return False
    if newest is None:
        return True
    try:
        verify_consistency(
            old_size=newest.size,
            new_size=checkpoint.size,
            old_root=newest.root,
            new_root=checkpoint.root,
            proof=tree.consistency_proof(newest.size, checkpoint.size),
        )
    except ProofInvalid:
        report.problems.append(
            f"{what}: not consistent with the kept checkpoint of size {newest.size} "
            "(the log was rewritten since)"
        )
        return False
    return True


def log_witness(*, directory: Path) -> WitnessReport:
    """Append to `directory` every stored checkpoint newer than the newest kept there, each
    after checking that the log's tree of its size extends the newest kept one (RFC 9162
    consistency, from the stored entries) and that its root is the stored entries' own.
    Stops at the first that does not, with a problem, writing none from it on. Checks too
    that every kept checkpoint was signed by the log's key and that no stored checkpoint of
    a kept size has another root (a fork).

    Raises LogKeyUnavailable without a key, OSError when the directory cannot be made or
    written."""
    verifier = log_signer().verifier()
    report = WitnessReport()
    directory.mkdir(parents=True, exist_ok=True)
    kept = _kept(directory, verifier, report)
    stored = [
        (size, note, _open(note, verifier, f"stored checkpoint of size {size}", report))
        for size, note in LogCheckpoint.objects.order_by("size").values_list("size", "note")
    ]
    for size, _note, checkpoint in stored:
        if checkpoint is not None and size in kept and checkpoint.root != kept[size].root:
            report.problems.append(
                f"stored checkpoint of size {size}: another root than the one kept (a fork)"
            )
    newest = kept[max(kept)] if kept else None
    if not report.problems:
        tree = log_tree()
        for size, note, checkpoint in stored:
            if newest is not None and size <= newest.size:
                continue
            if checkpoint is None or not _extends(newest, checkpoint, tree, report):
                break
            _write(directory, checkpoint, note)
            report.written.append(size)
            newest = checkpoint
    report.newest = newest.size if newest is not None else None
    return report
