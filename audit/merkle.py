"""The answer log's Merkle tree, hashed as RFC 9162 §2.1 (Certificate Transparency 2.0):
a leaf is SHA-256(0x00 ‖ entry), a node SHA-256(0x01 ‖ left ‖ right), the empty tree
SHA-256(""). Inclusion proofs (§2.1.3) and consistency proofs (§2.1.4) are generated from a
tree of leaf hashes and verified with the RFC's iterative algorithms, so a client needs
nothing of the server but the proof, the sizes and a root it trusts.

Standard library only: the Python client and `manage.py log verify` carry the same
definitions, and a verifier should be readable on its own."""

import hashlib
import hmac
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence

HASH_SIZE = 32
LEAF_PREFIX = b"\x00"
NODE_PREFIX = b"\x01"
EMPTY_ROOT = hashlib.sha256(b"").digest()


class MerkleError(ValueError):
    """A proof or tree head was asked for something the tree cannot answer: an index or
    size out of range, an old size larger than the new one, a hash of the wrong length."""


class ProofInvalid(Exception):
    """A proof does not prove what it was checked against (the verifier's one answer to
    every mismatch: wrong hash, wrong index or size, a proof too short or too long)."""


def leaf_hash(entry: bytes) -> bytes:
    return hashlib.sha256(LEAF_PREFIX + entry).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(NODE_PREFIX + left + right).digest()


def _split(size: int) -> int:
    """The largest power of two smaller than size (size ≥ 2): RFC 9162's k."""
    return 1 << ((size - 1).bit_length() - 1)


class Tree:
    """The RFC 9162 algorithms over the complete, aligned subtrees of a tree of some size:
    `_perfect(level, index)` is the hash of leaves [index·2ˡᵉᵛᵉˡ, (index+1)·2ˡᵉᵛᵉˡ), and
    every tree head of a range and every proof node is a combination of O(log n) of them
    (the RFC's split point k always falls on an aligned boundary)."""

    def __len__(self) -> int:
        raise NotImplementedError

    def _perfect(self, level: int, index: int) -> bytes:
        raise NotImplementedError

    def _subtree(self, start: int, end: int) -> bytes:
        """MTH(D[start:end]) for a range within the tree."""
        size = end - start
        if size == 0:
            return EMPTY_ROOT
        height = size.bit_length() - 1
        if size == 1 << height and start % size == 0:
            return self._perfect(height, start >> height)
        k = _split(size)
        return node_hash(self._subtree(start, start + k), self._subtree(start + k, end))

    def _check_size(self, tree_size: int) -> None:
        if not 0 <= tree_size <= len(self):
            raise MerkleError(f"tree size {tree_size} is outside 0..{len(self)}")

    def root(self, tree_size: int | None = None) -> bytes:
        """The tree head of the first tree_size leaves (all of them by default)."""
        size = len(self) if tree_size is None else tree_size
        self._check_size(size)
        return self._subtree(0, size)

    def inclusion_proof(self, index: int, tree_size: int | None = None) -> list[bytes]:
        """PATH(index, D[tree_size]) (RFC 9162 §2.1.3.1), nearest the leaf first."""
        size = len(self) if tree_size is None else tree_size
        self._check_size(size)
        if not 0 <= index < size:
            raise MerkleError(f"leaf {index} is not in a tree of size {size}")
        proof: list[bytes] = []
        start, end = 0, size
        while end - start > 1:
            k = _split(end - start)
            if index < start + k:
                proof.append(self._subtree(start + k, end))
                end = start + k
            else:
                proof.append(self._subtree(start, start + k))
                start += k
        proof.reverse()
        return proof

    def consistency_proof(self, old_size: int, new_size: int | None = None) -> list[bytes]:
        """PROOF(old_size, D[new_size]) (RFC 9162 §2.1.4.1): empty when the sizes are equal.
        An old size of 0 has no proof (every tree extends the empty one)."""
        size = len(self) if new_size is None else new_size
        self._check_size(size)
        if not 0 < old_size <= size:
            raise MerkleError(f"old size {old_size} is outside 1..{size}")
        proof: list[bytes] = []
        start, end, m, whole = 0, size, old_size, True
        while m != end - start:
            k = _split(end - start)
            if m <= k:
                proof.append(self._subtree(start + k, end))
                end = start + k
            else:
                proof.append(self._subtree(start, start + k))
                start, m, whole = start + k, m - k, False
        if not whole:
            proof.append(self._subtree(start, end))
        proof.reverse()
        return proof


class MerkleTree(Tree):
    """A tree over leaf hashes, appended to in order. Keeps every complete, aligned subtree
    (level h holds the hashes of leaves [i·2ʰ, (i+1)·2ʰ)), so a tree head for any size up
    to the current one, and any proof within it, costs O(log² n) hashes."""

    def __init__(self, leaves: Iterable[bytes] = ()) -> None:
        self._levels: list[list[bytes]] = [[]]
        for leaf in leaves:
            self.append(leaf)

    def __len__(self) -> int:
        return len(self._levels[0])

    def append(self, leaf: bytes) -> int:
        """Add one leaf hash; its index."""
        if len(leaf) != HASH_SIZE:
            raise MerkleError(f"a leaf hash has {HASH_SIZE} bytes, not {len(leaf)}")
        index = len(self._levels[0])
        self._levels[0].append(leaf)
        level, position = 0, index
        while position % 2 == 1:
            below = self._levels[level]
            parent = node_hash(below[position - 1], below[position])
            level, position = level + 1, position // 2
            if level == len(self._levels):
                self._levels.append([])
            self._levels[level].append(parent)
        return index

    def _perfect(self, level: int, index: int) -> bytes:
        return self._levels[level][index]

    def perfect(self, level: int, index: int) -> bytes:
        """The hash of the complete subtree of leaves [index·2ˡᵉᵛᵉˡ, (index+1)·2ˡᵉᵛᵉˡ)."""
        if not (0 <= level < len(self._levels) and 0 <= index < len(self._levels[level])):
            raise MerkleError(f"no complete subtree at level {level}, index {index}")
        return self._levels[level][index]

    def perfect_subtrees(self) -> Iterator[tuple[int, int, bytes]]:
        """Every complete, aligned subtree above the leaves: (level, index, hash)."""
        for level in range(1, len(self._levels)):
            for index, value in enumerate(self._levels[level]):
                yield level, index, value


class SubtreeTree(Tree):
    """A tree of `size` leaves known only by some of its complete, aligned subtrees, keyed
    (level, index): enough of them for what is asked (`subtrees_needed` says which), as
    a log stores them (audit.models.LogSubtree), without reading every leaf."""

    def __init__(self, size: int, subtrees: Mapping[tuple[int, int], bytes]) -> None:
        self._size = size
        self._subtrees = subtrees

    def __len__(self) -> int:
        return self._size

    def _perfect(self, level: int, index: int) -> bytes:
        value = self._subtrees.get((level, index))
        if value is None or len(value) != HASH_SIZE:
            raise MerkleError(f"the subtree at level {level}, index {index} is not known")
        return value


class _Recorder(Tree):
    """A tree of `size` leaves whose every subtree is a placeholder: records which ones a
    computation asks for (the RFC's recursion depends on sizes only, never on hashes)."""

    def __init__(self, size: int) -> None:
        self._size = size
        self.asked: set[tuple[int, int]] = set()

    def __len__(self) -> int:
        return self._size

    def _perfect(self, level: int, index: int) -> bytes:
        self.asked.add((level, index))
        return EMPTY_ROOT


def subtrees_needed(size: int, compute: Callable[[Tree], object]) -> set[tuple[int, int]]:
    """The (level, index) of every complete subtree that `compute`, run on a tree of `size`
    leaves (its root, a proof), reads: O(log n) for one tree head or proof. Raises what
    `compute` raises for sizes or indices out of range."""
    recorder = _Recorder(size)
    compute(recorder)
    return recorder.asked


def frontier(size: int) -> list[tuple[int, int]]:
    """The complete subtrees the tree of `size` leaves is made of, largest first: one per
    set bit of size. Appending to the tree combines new leaves with these only."""
    return [
        (level, (size >> level) - 1)
        for level in reversed(range(size.bit_length()))
        if size >> level & 1
    ]


def subtrees_completed(
    start: int, known: Mapping[tuple[int, int], bytes], leaves: Iterable[bytes]
) -> Iterator[tuple[int, int, bytes]]:
    """The complete subtrees above the leaves (level ≥ 1) that appending `leaves` at
    indices start, start+1, … completes, as (level, index, hash) in the order completed:
    `known` holds at least `frontier(start)`, the tree's subtrees before the append. Keeps
    O(log n) hashes, however many leaves."""
    try:
        stack = [(level, known[(level, index)]) for level, index in frontier(start)]
    except KeyError as missing:
        raise MerkleError(f"the subtree {missing} of the tree of size {start} is unknown") from None
    for index, leaf in enumerate(leaves, start):
        if len(leaf) != HASH_SIZE:
            raise MerkleError(f"a leaf hash has {HASH_SIZE} bytes, not {len(leaf)}")
        level, value = 0, leaf
        while stack and stack[-1][0] == level:
            value = node_hash(stack.pop()[1], value)
            level += 1
            yield level, index >> level, value
        stack.append((level, value))


def root_hash(leaves: Iterable[bytes]) -> bytes:
    """The tree head over leaf hashes."""
    return MerkleTree(leaves).root()


def _check_hashes(*hashes: bytes) -> None:
    if any(len(value) != HASH_SIZE for value in hashes):
        raise ProofInvalid(f"every hash has {HASH_SIZE} bytes")


def verify_inclusion(
    *, leaf: bytes, index: int, tree_size: int, proof: Sequence[bytes], root: bytes
) -> None:
    """Check that leaf (a leaf hash) is at index in the tree of tree_size whose head is
    root (RFC 9162 §2.1.3.2). Returns nothing; raises ProofInvalid otherwise.

    tree_size and root are one tree head, taken together from one checkpoint: the size only
    steers the path, so a proof can also pass for another size with the same root."""
    _check_hashes(leaf, root, *proof)
    if not 0 <= index < tree_size:
        raise ProofInvalid(f"leaf {index} is not in a tree of size {tree_size}")
    fn, sn, r = index, tree_size - 1, leaf
    for p in proof:
        if sn == 0:
            raise ProofInvalid("the proof is longer than the tree is deep")
        if fn & 1 or fn == sn:
            r = node_hash(p, r)
            while not fn & 1 and fn != 0:
                fn, sn = fn >> 1, sn >> 1
        else:
            r = node_hash(r, p)
        fn, sn = fn >> 1, sn >> 1
    if sn != 0 or not hmac.compare_digest(r, root):
        raise ProofInvalid("the inclusion proof does not lead to the root")


def verify_consistency(
    *, old_size: int, new_size: int, old_root: bytes, new_root: bytes, proof: Sequence[bytes]
) -> None:
    """Check that the tree of new_size with head new_root extends the tree of old_size with
    head old_root (RFC 9162 §2.1.4.2). Returns nothing; raises ProofInvalid otherwise."""
    _check_hashes(old_root, new_root, *proof)
    if not 0 < old_size <= new_size:
        raise ProofInvalid(f"old size {old_size} is outside 1..{new_size}")
    if old_size == new_size:
        if proof or not hmac.compare_digest(old_root, new_root):
            raise ProofInvalid("equal sizes need equal roots and an empty proof")
        return
    if not proof:
        raise ProofInvalid("a consistency proof between different sizes is never empty")
    path = list(proof)
    if old_size & (old_size - 1) == 0:
        path.insert(0, old_root)
    fn, sn = old_size - 1, new_size - 1
    while fn & 1:
        fn, sn = fn >> 1, sn >> 1
    fr = sr = path[0]
    for c in path[1:]:
        if sn == 0:
            raise ProofInvalid("the proof is longer than the tree is deep")
        if fn & 1 or fn == sn:
            fr, sr = node_hash(c, fr), node_hash(c, sr)
            while not fn & 1 and fn != 0:
                fn, sn = fn >> 1, sn >> 1
        else:
            sr = node_hash(sr, c)
        fn, sn = fn >> 1, sn >> 1
    if sn != 0 or not (hmac.compare_digest(fr, old_root) and hmac.compare_digest(sr, new_root)):
        raise ProofInvalid("the consistency proof does not lead to both roots")
