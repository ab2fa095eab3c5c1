"""The answer log (issue 33): every output release integrated, after its publication has
committed, as one entry of an RFC 9162 Merkle tree (audit.merkle), and a checkpoint of the
tree signed with the log's key (audit.checkpoint) after each integration batch.

Publication takes no lock and writes nothing here: it queues the integration after commit
(audit.services.release_record), and the worker integrates whatever is not yet in the
log, under one advisory lock, so every release gets exactly one dense index. The same
transaction stores the hash of every complete, aligned subtree its entries complete
(audit_logsubtree), from which checkpoints and proofs are built in O(log n) rows."""

import base64
import logging
import os
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass
from datetime import datetime
from functools import cache, partial, reduce
from itertools import islice
from operator import or_
from pathlib import Path
from typing import TypedDict

from django.conf import settings
from django.db import connection, transaction
from django.db.models import OuterRef, Q, Subquery
from django.utils import timezone

from audit.checkpoint import Checkpoint, checkpoint_open, checkpoint_sign
from audit.merkle import (
    MerkleTree,
    ProofInvalid,
    SubtreeTree,
    Tree,
    frontier,
    leaf_hash,
    subtrees_completed,
    subtrees_needed,
    verify_inclusion,
)
from audit.models import LogCheckpoint, LogEntry, LogSubtree, OutputRelease
from audit.receipts import canonical_jcs
from audit.signed_note import KeyMalformed, NoteMalformed, NoteSigner, SignatureInvalid
from core.errors import UnprocessableError

logger = logging.getLogger(__name__)

# pg_advisory_xact_lock key of the integration: the one writer of the log at a time.
LOG_LOCK = 0x6B6F_696E_6C6F_6733  # "koinlog3"
INTEGRATE_BATCH = 1000
SUBTREE_FILL_BATCH = 5000
SUBTREE_INSERT = (
    "INSERT INTO audit_logsubtree (level, index, hash) "
    "SELECT * FROM unnest(%s::smallint[], %s::bigint[], %s::varchar[])"
)
# Filling a log from before the table: keep whatever is stored (log verify checks it).
SUBTREE_INSERT_FILLING = SUBTREE_INSERT + " ON CONFLICT (level, index) DO NOTHING"


class LogKeyUnavailable(Exception):
    """KOINON_LOG_KEY_FILE is unset, unreadable or not one note signer key."""


class LogEntryRecord(TypedDict):
    """What the log records of one release (`log_entry`)."""

    release: str
    run: str
    generation: int | None
    kind: str
    reset_context: int
    publication_sequence: int
    policy_version: str
    source_refs: object  # the release's stored JSON, hashed as it is
    text_sha256: str
    citations_sha256: str
    cards_sha256: str
    policy_sha256: str
    sealed_at: str


class CheckpointSummary(TypedDict):
    """What is served of a checkpoint (`log_checkpoint_summary`)."""

    size: int
    root_hash: str
    note: str
    verifier_key: str


class LogPosition(TypedDict):
    """Where an integrated release stands in the log (`log_positions`)."""

    index: int
    tree_size: int | None
    checkpoint: str | None


class InclusionProof(TypedDict):
    """An entry's inclusion proof (`log_inclusion_proof`); hashes in base64."""

    index: int
    tree_size: int
    entry: str
    leaf_hash: str
    proof: list[str]
    checkpoint: str | None


# `from` is a keyword, so this one is declared by call.
ConsistencyProof = TypedDict("ConsistencyProof", {"from": int, "to": int, "proof": list[str]})


class ExportedProof(TypedDict):
    index: int
    proof: list[str]


class ExportProofs(TypedDict):
    """What an export carries of the log (`log_export_proofs`), keyed by release id."""

    tree_size: int
    checkpoint: str
    proofs: dict[str, ExportedProof]


def log_entry(release: OutputRelease) -> LogEntryRecord:
    """What the log records of a release: its identifying fields and hashes, never text."""
    return {
        "release": str(release.pk),
        "run": str(release.run_id),
        "generation": release.generation_id,
        "kind": release.kind,
        "reset_context": release.reset_context,
        "publication_sequence": release.publication_sequence,
        "policy_version": release.policy_version,
        "source_refs": release.source_refs,
        "text_sha256": release.text_sha256,
        "citations_sha256": release.citations_sha256,
        "cards_sha256": release.cards_sha256,
        "policy_sha256": release.policy_sha256,
        "sealed_at": release.created_at.isoformat(),
    }


def log_entry_json(release: OutputRelease) -> str:
    """The canonical JSON the leaf hash is taken over: RFC 8785 (JCS), as receipts of
    release policy 2 (docs/releases.md), so every client can recompute it."""
    return canonical_jcs(log_entry(release)).decode()


@cache
def _signer_from(path: str) -> NoteSigner:
    try:
        text = Path(path).read_text(encoding="utf-8").strip()
    except OSError as error:
        raise LogKeyUnavailable(f"the log key file cannot be read: {error.strerror}") from None
    try:
        return NoteSigner.from_key(text)
    except KeyMalformed as error:
        raise LogKeyUnavailable(f"the log key file holds no note signer key: {error}") from None


def log_key_ensure(path: Path, *, origin: str) -> tuple[NoteSigner, bool]:
    """The note signer key in the file at path, created there (readable by its owner only,
    never overwritten) when there is none: (the key, whether it was created). For local use
    (`koinon_up`); a deployment provisions its key itself. Raises LogKeyUnavailable for a
    file that holds no key, KeyMalformed for an origin that cannot name one."""
    signer = NoteSigner.generate(origin)
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return _signer_from(str(path)), False
    with os.fdopen(descriptor, "w", encoding="utf-8") as out:
        out.write(signer.key_string() + "\n")
    return signer, True


def log_signer() -> NoteSigner:
    """The log's signing key, from KOINON_LOG_KEY_FILE. Raises LogKeyUnavailable."""
    if not settings.KOINON_LOG_KEY_FILE:
        raise LogKeyUnavailable("KOINON_LOG_KEY_FILE is not set")
    return _signer_from(settings.KOINON_LOG_KEY_FILE)


def log_tree() -> MerkleTree:
    """The whole tree, from every stored leaf hash in index order: O(n) reads. For whoever
    must not trust the stored subtrees (`log witness`, tests); proofs and checkpoints use
    `log_subtree_hashes` instead."""
    hashes = LogEntry.objects.order_by("index").values_list("leaf_hash", flat=True)
    return MerkleTree(bytes.fromhex(value) for value in hashes.iterator(chunk_size=10_000))


def _stored_subtrees(keys: Iterable[tuple[int, int]]) -> dict[tuple[int, int], bytes]:
    """The stored hashes (audit_logsubtree) of the subtrees above the leaves among keys,
    in one statement; a key with no row is left out."""
    by_level: dict[int, list[int]] = {}
    for level, index in keys:
        if level > 0:
            by_level.setdefault(level, []).append(index)
    if not by_level:
        return {}
    where = reduce(or_, (Q(level=lv, index__in=ix) for lv, ix in sorted(by_level.items())))
    rows = LogSubtree.objects.filter(where).order_by().values_list("level", "index", "hash")
    return {(level, index): bytes.fromhex(value) for level, index, value in rows}


def log_subtree_hashes(keys: Collection[tuple[int, int]]) -> dict[tuple[int, int], bytes]:
    """The hashes of the complete subtrees keyed (level, index): leaves (level 0) from the
    entries, the levels above from audit_logsubtree, in two statements whatever their
    number. A subtree not stored (a log integrated before the table existed, until its next
    integration fills it) is computed from its leaves.

    Precondition: every key is a complete subtree of the log as it stands."""
    found = _stored_subtrees(keys)
    leaves = [index for level, index in keys if level == 0]
    if leaves:
        rows = (
            LogEntry.objects.filter(index__in=leaves).order_by().values_list("index", "leaf_hash")
        )
        found.update(((0, index), bytes.fromhex(value)) for index, value in rows)
    for level, index in set(keys) - found.keys():
        hashes = LogEntry.objects.filter(
            index__gte=index << level, index__lt=(index + 1) << level
        ).order_by("index")
        found[(level, index)] = MerkleTree(
            bytes.fromhex(value) for value in hashes.values_list("leaf_hash", flat=True)
        ).root()
    return found


def _from_subtrees[T](size: int, compute: Callable[[Tree], T]) -> T:
    """compute (a tree head, proofs) on the log's tree of `size` entries, reading only the
    stored subtrees it needs: O(log n) rows for one tree head or proof."""
    needed = subtrees_needed(size, compute)
    return compute(SubtreeTree(size, log_subtree_hashes(needed)))


def log_root(size: int) -> bytes:
    """The tree head of the log's first `size` entries, from O(log n) stored subtrees."""
    return _from_subtrees(size, lambda tree: tree.root(size))


def _subtrees_integrate(start: int, leaves: list[bytes]) -> None:
    """Store the subtrees that appending `leaves` at index `start` completes. First, when
    any subtree of the tree of `start` entries is not stored (a log integrated before the
    table existed), fill every missing one from the leaves, once.

    Precondition: the caller holds the log's advisory lock."""
    keys = frontier(start)
    if len(_stored_subtrees(keys)) < sum(1 for level, _ in keys if level > 0):
        logger.info("answer log: filling the stored subtrees of its first %d entries", start)
        hashes = LogEntry.objects.filter(index__lt=start).order_by("index")
        values = hashes.values_list("leaf_hash", flat=True).iterator(chunk_size=10_000)
        _subtrees_store(
            subtrees_completed(0, {}, (bytes.fromhex(value) for value in values)),
            ignore_conflicts=True,
        )
    _subtrees_store(subtrees_completed(start, log_subtree_hashes(keys), leaves))


def _subtrees_store(
    subtrees: Iterable[tuple[int, int, bytes]], *, ignore_conflicts: bool = False
) -> None:
    """Insert (level, index, hash) rows, SUBTREE_FILL_BATCH per statement, from arrays
    (unnest) rather than model instances: a batch of 1,000 entries completes ~1,000."""
    statement = SUBTREE_INSERT_FILLING if ignore_conflicts else SUBTREE_INSERT
    rows = iter(subtrees)
    with connection.cursor() as cursor:
        while batch := list(islice(rows, SUBTREE_FILL_BATCH)):
            levels, indices, hashes = zip(*batch, strict=True)
            cursor.execute(
                statement, [list(levels), list(indices), [value.hex() for value in hashes]]
            )


@transaction.atomic
def log_integrate(*, batch: int = INTEGRATE_BATCH) -> int:
    """Append every release not yet in the log (at most batch, oldest publication first)
    at the next dense indices, then sign a checkpoint of the whole tree when a key is set
    and one is due (at most one per KOINON_LOG_CHECKPOINT_SECONDS; a deferred one is signed
    by a later call, with or without new entries). Returns how many were integrated.

    Takes the log's advisory transaction lock first, so concurrent integrations run one
    after another and each sees the entries the one before committed (READ COMMITTED:
    every statement after the lock reads afresh); a worker killed midway rolls back all
    of its batch, which the next integration takes again."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s)", [LOG_LOCK])
    last = LogEntry.objects.order_by("-index").values_list("index", flat=True).first()
    start = 0 if last is None else last + 1
    pending = list(
        OutputRelease.objects.filter(log_entry__isnull=True).order_by("publication_sequence")[
            :batch
        ]
    )
    entries = []
    for offset, release in enumerate(pending):
        entry = log_entry_json(release)
        entries.append(
            LogEntry(
                index=start + offset,
                release=release,
                entry=entry,
                leaf_hash=leaf_hash(entry.encode()).hex(),
            )
        )
    LogEntry.objects.bulk_create(entries)
    _subtrees_integrate(start, [bytes.fromhex(entry.leaf_hash) for entry in entries])
    _checkpoint_if_due(size=start + len(entries))
    return len(entries)


def _checkpoint_if_due(*, size: int) -> None:
    """Sign a checkpoint of the first `size` entries (the whole log) when it has grown since
    the latest checkpoint and that one is at least KOINON_LOG_CHECKPOINT_SECONDS old; else a
    later integration signs it (audit.tasks queues one for when it is due). The checkpoint
    carries its time as the extension line `timestamp <unix seconds>`.

    Precondition: the caller holds the log's advisory lock (one signer per size)."""
    latest = log_checkpoint_latest()
    if size == 0 or (latest is not None and latest.size >= size):
        return
    now = timezone.now()
    if latest is not None and log_checkpoint_wait(latest=latest, now=now) > 0:
        return
    try:
        signer = log_signer()
    except LogKeyUnavailable as error:
        logger.warning("answer log: %s; no checkpoint signed", error)
        return
    checkpoint = Checkpoint(
        origin=signer.name,
        size=size,
        root=log_root(size),
        extensions=(f"timestamp {int(now.timestamp())}",),
    )
    LogCheckpoint.objects.create(
        size=checkpoint.size,
        root_hash=checkpoint.root.hex(),
        note=checkpoint_sign(checkpoint, signer=signer),
    )


def log_checkpoint_wait(
    *, latest: LogCheckpoint | None = None, now: datetime | None = None
) -> float:
    """Seconds until the next checkpoint may be signed (0: now)."""
    latest = latest if latest is not None else log_checkpoint_latest()
    if latest is None:
        return 0.0
    elapsed = ((now or timezone.now()) - latest.created_at).total_seconds()
    return max(0.0, settings.KOINON_LOG_CHECKPOINT_SECONDS - elapsed)


def log_checkpoint_pending() -> bool:
    """Whether the log holds entries no checkpoint covers yet (a checkpoint is deferred)."""
    latest = log_checkpoint_latest()
    return log_size() > (latest.size if latest is not None else 0)


def log_checkpoint_latest() -> LogCheckpoint | None:
    return LogCheckpoint.objects.order_by("-size").first()


def log_verifier_key() -> str | None:
    """The public key that verifies the log's checkpoints (`<origin>+<key id>+<key>`), or
    None when no signing key is configured: what a person copies from a receipt to check
    the log with (docs/releases.md)."""
    try:
        return log_signer().verifier().key_string()
    except LogKeyUnavailable:
        return None


def log_checkpoint_summary(checkpoint: LogCheckpoint) -> CheckpointSummary:
    """What is served of a checkpoint: sizes and hashes only, no release ids or text."""
    return {
        "size": checkpoint.size,
        "root_hash": base64.b64encode(bytes.fromhex(checkpoint.root_hash)).decode(),
        "note": checkpoint.note,
        "verifier_key": log_signer().verifier().key_string(),
    }


def log_integrate_all() -> int:
    """Integrate every release not yet in the log, batch after batch: the task queued after
    each publication, and the worker's sweep (for a release whose queueing was lost, with
    the broker down when it was sealed). Returns how many were integrated."""
    total = 0
    while integrated := log_integrate():
        total += integrated
    return total


def _b64(value: bytes) -> str:
    return base64.b64encode(value).decode()


def log_size() -> int:
    """How many entries the log holds (its indices are dense from 0)."""
    last = LogEntry.objects.order_by("-index").values_list("index", flat=True).first()
    return 0 if last is None else last + 1


def log_positions(release_ids: Iterable[object]) -> dict[str, LogPosition]:
    """Where each integrated release stands in the log, keyed by release id (a release not
    yet integrated has no key): its index, and the first signed checkpoint that covers it
    (`tree_size` and `checkpoint` null while none does). Read beside a sealed body, never
    part of it: the receipt's hashes stay what was sealed. One query for any number."""
    covering = LogCheckpoint.objects.filter(size__gt=OuterRef("index")).order_by("size")[:1]
    rows = (
        LogEntry.objects.filter(release_id__in=list(release_ids))
        .annotate(
            covering_size=Subquery(covering.values("size")),
            covering_note=Subquery(covering.values("note")),
        )
        .values_list("release_id", "index", "covering_size", "covering_note")
    )
    return {
        str(release_id): {"index": index, "tree_size": size, "checkpoint": note}
        for release_id, index, size, note in rows
    }


def log_inclusion_proof(*, entry: LogEntry, tree_size: int | None = None) -> InclusionProof:
    """The proof that `entry` is in the tree of `tree_size` entries (default: the latest
    checkpoint's, else the whole log), with that size's signed checkpoint when there is one.
    Raises UnprocessableError for a size the entry is not in or the log has not reached.

    Precondition: the caller may read the entry's release (answers.selectors)."""
    size = log_size()
    if tree_size is None:
        latest = log_checkpoint_latest()
        tree_size = latest.size if latest is not None and latest.size > entry.index else size
    if not entry.index < tree_size <= size:
        raise UnprocessableError(
            "The tree size must hold this entry and be one the log has reached.",
            code="invalid",
            fields={"tree_size": f"From {entry.index + 1} to {size}."},
        )
    proof = _from_subtrees(tree_size, lambda tree: tree.inclusion_proof(entry.index, tree_size))
    checkpoint = LogCheckpoint.objects.filter(size=tree_size).first()
    return {
        "index": entry.index,
        "tree_size": tree_size,
        "entry": entry.entry,
        "leaf_hash": _b64(bytes.fromhex(entry.leaf_hash)),
        "proof": [_b64(node) for node in proof],
        "checkpoint": checkpoint.note if checkpoint is not None else None,
    }


def log_consistency_proof(*, old_size: int, new_size: int) -> ConsistencyProof:
    """The proof that the log's tree of new_size extends its tree of old_size (sizes and
    hashes only). Raises UnprocessableError unless 1 <= old_size <= new_size <= the log's size."""
    size = log_size()
    if not 1 <= old_size <= new_size <= size:
        raise UnprocessableError(
            "The sizes must satisfy 1 <= from <= to <= the log's size.",
            code="invalid",
            fields={"from": f"From 1 to {size}.", "to": f"From `from` to {size}."},
        )
    proof = _from_subtrees(new_size, lambda tree: tree.consistency_proof(old_size, new_size))
    return {"from": old_size, "to": new_size, "proof": [_b64(node) for node in proof]}


def log_export_proofs(release_ids: Iterable[object]) -> ExportProofs | None:
    """What an export carries of the log (conversations.services): the latest signed
    checkpoint and, for each of the releases it covers, its index and inclusion proof
    against it. None before the first checkpoint. Precondition: the caller may read them."""
    latest = log_checkpoint_latest()
    if latest is None:
        return None
    size = latest.size
    indices = dict(
        LogEntry.objects.filter(release_id__in=list(release_ids), index__lt=size).values_list(
            "release_id", "index"
        )
    )
    needed: set[tuple[int, int]] = set()
    for index in indices.values():
        needed |= subtrees_needed(size, partial(_inclusion, index=index, size=size))
    tree = SubtreeTree(size, log_subtree_hashes(needed))
    proofs: dict[str, ExportedProof] = {
        str(release_id): {
            "index": index,
            "proof": [_b64(node) for node in tree.inclusion_proof(index, size)],
        }
        for release_id, index in indices.items()
    }
    return {"tree_size": latest.size, "checkpoint": latest.note, "proofs": proofs}


def _inclusion(tree: Tree, *, index: int, size: int) -> list[bytes]:
    return tree.inclusion_proof(index, size)


@dataclass(frozen=True)
class LogVerification:
    """What an export's log part proved, read only from what verified: `tree_size` is the
    size in the signed checkpoint note (None without a log part, or when it did not open),
    `proven` how many of the export's own releases have a proof that leads to its root, and
    `unproven` how many of them the store's log holds with no proof to check (logged after
    that checkpoint; without a log part, every one logged). `problems`: one line each."""

    problems: list[str]
    tree_size: int | None = None
    proven: int = 0
    unproven: int = 0


def _logged(releases: dict[str, OutputRelease]) -> dict[object, int]:
    return dict(
        LogEntry.objects.filter(release_id__in=[r.pk for r in releases.values()]).values_list(
            "release_id", "index"
        )
    )


def log_export_unverified(releases: dict[str, OutputRelease]) -> LogVerification:
    """For an export that carries no log part (one made before the first checkpoint is
    legitimate): nothing is proven, and how many of its releases the log holds is said."""
    return LogVerification(problems=[], unproven=len(_logged(releases)))


def log_export_verify(log: object, releases: dict[str, OutputRelease]) -> LogVerification:
    """Check the log part of an export against the releases stored for its sealed messages
    (by release id): its checkpoint must be signed by the log's key, its `tree_size` must be
    that checkpoint's, each proof must lead from the entry of the stored release — rebuilt
    here, as integration built it — to that checkpoint's root, and it may carry proofs for
    those releases only. A release the checkpoint covers must carry its proof. Every value
    is checked for its type before use; nothing unsigned reaches the result's figures."""
    if not isinstance(log, dict) or not isinstance(log.get("proofs"), dict):
        return LogVerification(problems=["its answer log part is malformed"])
    try:
        verifier = log_signer().verifier()
    except LogKeyUnavailable:
        return LogVerification(
            problems=[
                "its answer log checkpoint cannot be checked: the log's key is not configured"
            ]
        )
    try:
        checkpoint = checkpoint_open(str(log.get("checkpoint")), verifier=verifier)
    except (NoteMalformed, SignatureInvalid):
        return LogVerification(
            problems=["its answer log checkpoint is not one the log's key signed"]
        )
    problems = []
    stated = log.get("tree_size")
    if type(stated) is not int or stated != checkpoint.size:
        problems.append(
            f"its answer log part gives tree size {stated!r}, but its signed checkpoint is "
            f"of size {checkpoint.size}"
        )
    logged = _logged(releases)
    proven = unproven = 0
    for release_id, release in releases.items():
        item = log["proofs"].get(release_id)
        if item is None:
            logged_at = logged.get(release.pk)
            if logged_at is not None and logged_at < checkpoint.size:
                problems.append(f"release {release_id} carries no proof, yet the log holds it")
            elif logged_at is not None:  # logged after the checkpoint the export carries
                unproven += 1
            continue
        proof = item.get("proof") if isinstance(item, dict) else None
        index = item.get("index") if isinstance(item, dict) else None
        try:
            if type(index) is not int or not isinstance(proof, list):
                raise ProofInvalid("malformed")
            verify_inclusion(
                leaf=leaf_hash(log_entry_json(release).encode()),
                index=index,
                tree_size=checkpoint.size,
                proof=[base64.b64decode(str(node), validate=True) for node in proof],
                root=checkpoint.root,
            )
            proven += 1
        except (ProofInvalid, ValueError):
            problems.append(
                f"release {release_id} is not in the answer log's checkpoint of size "
                f"{checkpoint.size} as stored (rewritten since it was logged, or a bad proof)"
            )
    # A proof of a release from elsewhere verifies against the same root; counted, it would
    # claim more of this export is logged than is.
    problems += [
        f"the answer log part carries a proof for release {key!r}, which is not a sealed "
        "release of this export"
        for key in sorted(map(str, log["proofs"].keys() - releases.keys()))
    ]
    return LogVerification(
        problems=problems, tree_size=checkpoint.size, proven=proven, unproven=unproven
    )
