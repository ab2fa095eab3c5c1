"""audit.merkle against RFC 9162 §2.1: an independent reference written here from the RFC's
recursive definitions (MTH, PATH, SUBPROOF), checked on every tree size 1..300, and the
published RFC 6962 test vectors (certificate-transparency's merkle_tree_test)."""

import hashlib
from functools import cache

import pytest

from audit.merkle import (
    EMPTY_ROOT,
    MerkleError,
    MerkleTree,
    ProofInvalid,
    SubtreeTree,
    frontier,
    leaf_hash,
    node_hash,
    root_hash,
    subtrees_completed,
    subtrees_needed,
    verify_consistency,
    verify_inclusion,
)

MAX_SIZE = 300
# Entries of varied length, the empty one included.
ENTRIES = [hashlib.sha256(str(i).encode()).digest()[: i % 37] for i in range(MAX_SIZE)]


# The reference: RFC 9162 §2.1.1, §2.1.3.1 and §2.1.4.1 written as the RFC writes them, with
# hashlib directly (not the module's helpers). MTH(D[a:b]) does not depend on the tree
# size, so one cache serves every size.
def _ref_k(n: int) -> int:
    k = 1
    while k * 2 < n:
        k *= 2
    return k


@cache
def ref_mth(a: int, b: int) -> bytes:
    if b - a == 0:
        return hashlib.sha256(b"").digest()
    if b - a == 1:
        return hashlib.sha256(b"\x00" + ENTRIES[a]).digest()
    k = _ref_k(b - a)
    return hashlib.sha256(b"\x01" + ref_mth(a, a + k) + ref_mth(a + k, b)).digest()


def ref_path(m: int, a: int, b: int) -> list[bytes]:
    if b - a == 1:
        return []
    k = _ref_k(b - a)
    if m < k:
        return [*ref_path(m, a, a + k), ref_mth(a + k, b)]
    return [*ref_path(m - k, a + k, b), ref_mth(a, a + k)]


def ref_subproof(m: int, a: int, b: int, whole: bool) -> list[bytes]:
    n = b - a
    if m == n:
        return [] if whole else [ref_mth(a, b)]
    k = _ref_k(n)
    if m <= k:
        return [*ref_subproof(m, a, a + k, whole), ref_mth(a + k, b)]
    return [*ref_subproof(m - k, a + k, b, False), ref_mth(a, a + k)]


def flipped(value: bytes, bit: int) -> bytes:
    """value with one bit flipped (bit counts from the first byte's high bit)."""
    data = bytearray(value)
    data[(bit // 8) % len(data)] ^= 0x80 >> (bit % 8)
    return bytes(data)


@pytest.fixture(scope="module")
def tree() -> MerkleTree:
    return MerkleTree(leaf_hash(entry) for entry in ENTRIES)


def test_the_tree_head_is_the_rfc_mth_for_every_size_0_to_300(tree):
    assert tree.root(0) == EMPTY_ROOT == ref_mth(0, 0)
    for n in range(1, MAX_SIZE + 1):
        assert tree.root(n) == ref_mth(0, n), n
        # Built from just its own leaves, incrementally: the same head.
        assert root_hash(leaf_hash(e) for e in ENTRIES[:n]) == ref_mth(0, n), n


def test_every_leaf_of_every_tree_size_1_to_300_has_the_rfc_inclusion_proof(tree):
    """All 45,150 (leaf, size) pairs: the proof is PATH(m, D[n]) and verifies against the
    reference root."""
    for n in range(1, MAX_SIZE + 1):
        root = ref_mth(0, n)
        for m in range(n):
            proof = tree.inclusion_proof(m, n)
            assert proof == ref_path(m, 0, n), (m, n)
            verify_inclusion(leaf=ref_mth(m, m + 1), index=m, tree_size=n, proof=proof, root=root)


def test_every_pair_of_sizes_up_to_300_has_the_rfc_consistency_proof(tree):
    """All 45,150 pairs 1 ≤ m ≤ n ≤ 300: the proof is PROOF(m, D[n]) and verifies against
    the two reference roots."""
    for n in range(1, MAX_SIZE + 1):
        for m in range(1, n + 1):
            proof = tree.consistency_proof(m, n)
            assert proof == ref_subproof(m, 0, n, True), (m, n)
            verify_consistency(
                old_size=m, new_size=n, old_root=ref_mth(0, m), new_root=ref_mth(0, n), proof=proof
            )


# Sizes around every shape of the recursion: powers of two, one either side, and odd ones.
SAMPLE_SIZES = sorted({1, 2, 3, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33, 100, 127, 128, 129, 255, 300})


def test_a_flipped_bit_in_any_inclusion_proof_hash_entry_or_root_fails(tree):
    """For the sample sizes and every leaf: each proof hash with one bit flipped (a
    different bit per hash), the entry with one bit flipped, the root with one bit flipped."""
    for n in SAMPLE_SIZES:
        root = tree.root(n)
        for m in range(n):
            proof = tree.inclusion_proof(m, n)
            leaf = leaf_hash(ENTRIES[m])
            for position in range(len(proof)):
                bad = [*proof]
                bad[position] = flipped(bad[position], m + position)
                with pytest.raises(ProofInvalid):
                    verify_inclusion(leaf=leaf, index=m, tree_size=n, proof=bad, root=root)
            # An empty entry has no bit to flip: one byte more changes it instead.
            changed = leaf_hash(flipped(ENTRIES[m], m) if ENTRIES[m] else b"\x00")
            with pytest.raises(ProofInvalid):
                verify_inclusion(leaf=changed, index=m, tree_size=n, proof=proof, root=root)
            with pytest.raises(ProofInvalid):
                verify_inclusion(
                    leaf=leaf, index=m, tree_size=n, proof=proof, root=flipped(root, m)
                )


def test_an_inclusion_proof_fails_for_another_index_tree_head_or_length(tree):
    """A tree head is a (size, root) pair taken together from one checkpoint: the proof
    for size n fails against the heads of n - 1 and n + 1. (Against n's root with another
    size it can pass — the size only steers the path — which is why the checkpoint signs
    both.)"""
    n = 100
    root = tree.root(n)
    for m in (0, 1, 50, 63, 64, 98, 99):
        proof = tree.inclusion_proof(m, n)
        leaf = leaf_hash(ENTRIES[m])
        for index in {m - 1, m + 1, n} - {-1}:
            with pytest.raises(ProofInvalid):
                verify_inclusion(leaf=leaf, index=index, tree_size=n, proof=proof, root=root)
        for size in (n - 1, n + 1, m):
            with pytest.raises(ProofInvalid):
                verify_inclusion(
                    leaf=leaf, index=m, tree_size=size, proof=proof, root=tree.root(size)
                )
        for bad in (proof[:-1], [*proof, proof[0]], [proof[0][:31], *proof[1:]]):
            with pytest.raises(ProofInvalid):
                verify_inclusion(leaf=leaf, index=m, tree_size=n, proof=bad, root=root)


def test_a_flipped_bit_in_any_consistency_proof_hash_or_either_root_fails(tree):
    """For every pair of sample sizes with m < n: each proof hash, the old root and the
    new root, each with one bit flipped."""
    for n in SAMPLE_SIZES:
        for m in (size for size in SAMPLE_SIZES if size < n):
            proof = tree.consistency_proof(m, n)
            old, new = tree.root(m), tree.root(n)
            for position in range(len(proof)):
                bad = [*proof]
                bad[position] = flipped(bad[position], m + n + position)
                with pytest.raises(ProofInvalid):
                    verify_consistency(
                        old_size=m, new_size=n, old_root=old, new_root=new, proof=bad
                    )
            with pytest.raises(ProofInvalid):
                verify_consistency(
                    old_size=m, new_size=n, old_root=flipped(old, n), new_root=new, proof=proof
                )
            with pytest.raises(ProofInvalid):
                verify_consistency(
                    old_size=m, new_size=n, old_root=old, new_root=flipped(new, m), proof=proof
                )


def test_a_consistency_proof_fails_for_other_tree_heads_and_lengths(tree):
    """As for inclusion, each size is checked with its own root (one checkpoint's pair)."""
    m, n = 37, 100
    proof = tree.consistency_proof(m, n)
    old, new = tree.root(m), tree.root(n)
    for old_size, new_size in ((m - 1, n), (m + 1, n), (m, n - 1), (m, n + 1), (n, m)):
        with pytest.raises(ProofInvalid):
            verify_consistency(
                old_size=old_size,
                new_size=new_size,
                old_root=tree.root(old_size),
                new_root=tree.root(new_size),
                proof=proof,
            )
    with pytest.raises(ProofInvalid):
        verify_consistency(old_size=0, new_size=n, old_root=EMPTY_ROOT, new_root=new, proof=proof)
    for bad in ([], proof[:-1], [*proof, proof[0]]):
        with pytest.raises(ProofInvalid):
            verify_consistency(old_size=m, new_size=n, old_root=old, new_root=new, proof=bad)
    # Equal sizes: empty proof and equal roots only.
    verify_consistency(old_size=n, new_size=n, old_root=new, new_root=new, proof=[])
    with pytest.raises(ProofInvalid):
        verify_consistency(old_size=n, new_size=n, old_root=old, new_root=new, proof=[])
    with pytest.raises(ProofInvalid):
        verify_consistency(old_size=n, new_size=n, old_root=new, new_root=new, proof=[new])


def test_a_tree_refuses_proofs_it_cannot_give(tree):
    small = MerkleTree(leaf_hash(e) for e in ENTRIES[:10])
    for call in (
        lambda: small.root(11),
        lambda: small.root(-1),
        lambda: small.inclusion_proof(10),
        lambda: small.inclusion_proof(3, 3),
        lambda: small.inclusion_proof(0, 11),
        lambda: small.consistency_proof(0, 5),
        lambda: small.consistency_proof(6, 5),
        lambda: small.consistency_proof(5, 11),
        lambda: small.append(b"short"),
    ):
        with pytest.raises(MerkleError):
            call()


# RFC 6962 test vectors, as published with certificate-transparency's C++ merkle_tree_test
# (its leaf numbers are 1-based; the indices here are 0-based).
CT_ENTRIES = [
    bytes.fromhex(h)
    for h in ("", "00", "10", "2021", "3031", "40414243", "5051525354555657",
              "606162636465666768696a6b6c6d6e6f")
]  # fmt: skip
CT_ROOTS = [
    "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
    "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
    "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
    "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
    "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
    "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
    "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
    "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
]
CT_INCLUSION = [
    (0, 8, ["96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
            "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4"]),
    (5, 8, ["bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
            "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
            "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"]),
    (2, 3, ["fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125"]),
    (1, 5, ["6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
            "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b"]),
]  # fmt: skip
CT_CONSISTENCY = [
    (1, 1, []),
    (1, 8, ["96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
            "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4"]),
    (6, 8, ["0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
            "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
            "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"]),
    (2, 5, ["5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b"]),
]  # fmt: skip


def test_the_published_rfc_6962_vectors_are_reproduced():
    ct = MerkleTree(leaf_hash(entry) for entry in CT_ENTRIES)
    assert ct.root(0).hex() == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    assert [ct.root(n).hex() for n in range(1, 9)] == CT_ROOTS
    for index, size, expected in CT_INCLUSION:
        proof = ct.inclusion_proof(index, size)
        assert [p.hex() for p in proof] == expected, (index, size)
        verify_inclusion(
            leaf=leaf_hash(CT_ENTRIES[index]),
            index=index,
            tree_size=size,
            proof=proof,
            root=bytes.fromhex(CT_ROOTS[size - 1]),
        )
    for old, new, expected in CT_CONSISTENCY:
        proof = ct.consistency_proof(old, new)
        assert [p.hex() for p in proof] == expected, (old, new)
        verify_consistency(
            old_size=old,
            new_size=new,
            old_root=bytes.fromhex(CT_ROOTS[old - 1]),
            new_root=bytes.fromhex(CT_ROOTS[new - 1]),
            proof=proof,
        )


def test_node_hash_is_sha256_of_0x01_left_right():
    left, right = b"\x11" * 32, b"\x22" * 32
    assert node_hash(left, right) == hashlib.sha256(b"\x01" + left + right).digest()
    assert leaf_hash(b"abc") == hashlib.sha256(b"\x00abc").digest()


# Stored subtrees (issue 33): a tree known only by the complete, aligned subtrees a
# computation asks for gives the same heads and proofs as the whole tree, from O(log n) of
# them. The whole tree is the reference here, itself checked against the RFC above.
BIG = 1100
POWER_SIZES = sorted(
    {size for p in range(1, 11) for size in (2**p - 1, 2**p, 2**p + 1) if size <= BIG} | {BIG}
)


@pytest.fixture(scope="module")
def big_tree() -> MerkleTree:
    return MerkleTree(hashlib.sha256(n.to_bytes(4, "big")).digest() for n in range(BIG))


def known_only(tree: MerkleTree, size: int, compute) -> SubtreeTree:
    """A SubtreeTree of size holding just the subtrees compute reads (at most 2 per level)."""
    needed = subtrees_needed(size, compute)
    assert len(needed) <= 2 * size.bit_length(), (size, len(needed))
    return SubtreeTree(size, {(lv, ix): tree.perfect(lv, ix) for lv, ix in needed})


def test_from_stored_subtrees_every_head_and_inclusion_proof_is_the_trees(big_tree):
    """Every size 1..300 with every leaf, and sizes around each power of two to 1,100 with
    every 7th leaf and the last."""
    for n in [*range(1, MAX_SIZE + 1), *POWER_SIZES]:
        assert known_only(big_tree, n, lambda t, n=n: t.root(n)).root(n) == big_tree.root(n)
        step = 1 if n <= MAX_SIZE else 7
        for m in [*range(0, n, step), n - 1]:
            compute = lambda t, m=m, n=n: t.inclusion_proof(m, n)  # noqa: E731
            assert compute(known_only(big_tree, n, compute)) == compute(big_tree), (m, n)


def test_from_stored_subtrees_every_consistency_proof_is_the_trees(big_tree):
    """Every pair of sizes up to 300, and every 7th old size against sizes to 1,100."""
    for n in [*range(1, MAX_SIZE + 1), *POWER_SIZES]:
        step = 1 if n <= MAX_SIZE else 7
        for m in [*range(1, n + 1, step), n]:
            compute = lambda t, m=m, n=n: t.consistency_proof(m, n)  # noqa: E731
            assert compute(known_only(big_tree, n, compute)) == compute(big_tree), (m, n)


def test_a_subtree_the_tree_was_not_given_is_an_error_not_a_guess(big_tree):
    needed = subtrees_needed(300, lambda t: t.root(300))
    missing = sorted(needed)[0]
    partial = {key: big_tree.perfect(*key) for key in needed if key != missing}
    with pytest.raises(MerkleError):
        SubtreeTree(300, partial).root(300)
    with pytest.raises(MerkleError):
        subtrees_needed(300, lambda t: t.inclusion_proof(300, 300))
    with pytest.raises(MerkleError):
        big_tree.perfect(3, BIG // 8)  # leaves 1096..1103: not complete


@pytest.mark.parametrize("batches", [[1] * 40, [3, 5, 1, 64, 7, 300, 1, 679], [BIG], [513, 587]])
def test_appending_in_batches_completes_exactly_the_trees_subtrees(big_tree, batches):
    """Each batch, given only the frontier of the tree before it, completes exactly the
    subtrees above the leaves that the whole tree of its new size has and the old lacked."""
    leaves = [big_tree.perfect(0, i) for i in range(BIG)]
    stored: dict[tuple[int, int], bytes] = {}
    start = 0
    for count in batches:
        end = min(start + count, BIG)
        frontier_known = {key: big_tree.perfect(*key) for key in frontier(start)}
        assert sum(1 << level for level, _ in frontier_known) == start
        completed = list(subtrees_completed(start, frontier_known, leaves[start:end]))
        assert len(completed) == len({(lv, ix) for lv, ix, _ in completed})
        assert not {(lv, ix) for lv, ix, _ in completed} & stored.keys()
        stored.update(((lv, ix), value) for lv, ix, value in completed)
        whole = MerkleTree(leaves[:end])
        assert stored == {(lv, ix): value for lv, ix, value in whole.perfect_subtrees()}
        assert len(stored) == end - end.bit_count()
        start = end
    with pytest.raises(MerkleError):
        list(subtrees_completed(6, {(2, 0): leaves[0]}, leaves[6:8]))  # (1, 2) not known
