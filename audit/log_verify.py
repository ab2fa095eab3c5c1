"""Recompute the answer log from what is stored and check it against signed checkpoints
(`manage.py log verify`): each entry is still what its release says, the indices are dense,
the tree of every checkpoint's size still has that checkpoint's root, and every stored
subtree hash (audit_logsubtree, what proofs are built from) is the one the entries give.
Nothing stored is trusted here: the tree is rebuilt from the entries alone. A database owner
who rewrites, removes or reorders a receipt after a checkpoint was taken is caught here; a
checkpoint kept outside the database (a witness) makes that hold against one who also
rewrote the checkpoint table."""

from collections.abc import Iterable
from dataclasses import dataclass, field

from audit.checkpoint import checkpoint_open
from audit.log import log_entry_json, log_signer
from audit.merkle import MerkleError, MerkleTree, leaf_hash
from audit.models import LogCheckpoint, LogEntry, LogSubtree, OutputRelease
from audit.signed_note import NoteMalformed, SignatureInvalid


@dataclass
class LogReport:
    entries: int = 0
    checkpoints: int = 0  # checked, stored and supplied
    subtrees: int = 0  # stored subtree hashes checked
    subtrees_missing: int = 0  # complete subtrees not stored yet (filled by integration)
    pending: int = 0  # releases not yet integrated (not a problem)
    problems: list[str] = field(default_factory=list)


def log_verify(*, supplied: Iterable[str] = ()) -> LogReport:
    """Check the stored log against its stored checkpoints and the supplied notes (kept
    elsewhere). Raises LogKeyUnavailable when no key is configured to verify them with."""
    verifier = log_signer().verifier()
    report = LogReport()
    leaves: list[bytes] = []
    entries = LogEntry.objects.select_related("release").order_by("index")
    for position, entry in enumerate(entries.iterator(chunk_size=2000)):
        if entry.index != position:
            report.problems.append(f"entry {position}: missing (the next stored is {entry.index})")
        leaf = leaf_hash(entry.entry.encode())
        if leaf.hex() != entry.leaf_hash:
            report.problems.append(f"entry {entry.index}: its leaf hash is not its entry's")
        if log_entry_json(entry.release) != entry.entry:
            report.problems.append(
                f"entry {entry.index}: release {entry.release_id} no longer matches its entry"
            )
        leaves.append(leaf)
    report.entries = len(leaves)
    report.pending = OutputRelease.objects.filter(log_entry__isnull=True).count()
    tree = MerkleTree(leaves)
    _check_subtrees(tree, report)
    notes = [("stored", c.note) for c in LogCheckpoint.objects.order_by("size")]
    notes += [("supplied", note) for note in supplied]
    for origin, note in notes:
        try:
            checkpoint = checkpoint_open(note, verifier=verifier)
        except (NoteMalformed, SignatureInvalid) as error:
            report.problems.append(f"{origin} checkpoint: not one the log's key signed ({error})")
            continue
        report.checkpoints += 1
        if checkpoint.size > len(tree):
            report.problems.append(
                f"{origin} checkpoint of size {checkpoint.size}: the log has only "
                f"{len(tree)} entries (entries were removed)"
            )
        elif tree.root(checkpoint.size) != checkpoint.root:
            report.problems.append(
                f"{origin} checkpoint of size {checkpoint.size}: the stored entries give "
                "another root (an entry was rewritten, removed or reordered)"
            )
    return report


def _check_subtrees(tree: MerkleTree, report: LogReport) -> None:
    """Every stored subtree hash against the one the entries give. A missing one is counted,
    not a problem: proofs compute it from its leaves, and the next integration stores it."""
    rows = LogSubtree.objects.order_by("level", "index").values_list("level", "index", "hash")
    found = 0
    for level, index, value in rows.iterator(chunk_size=10_000):
        report.subtrees += 1
        try:
            if level == 0:  # leaves are the entries' own hashes, never stored here
                raise MerkleError("a leaf")
            expected = tree.perfect(level, index)
        except MerkleError:
            report.problems.append(
                f"stored subtree {level}/{index}: no such subtree above the leaves of a log "
                f"of {len(tree)} entries"
            )
            continue
        found += 1
        if expected.hex() != value:
            report.problems.append(
                f"stored subtree {level}/{index}: not the hash its entries give (proofs and "
                "checkpoints built from it would not verify)"
            )
    # Above the leaves, a tree of n leaves has n - popcount(n) complete subtrees.
    report.subtrees_missing = len(tree) - len(tree).bit_count() - found
