// The answer log's shared vectors (clients/conformance/log_vectors.json): RFC 9162 hashes and
// proofs, C2SP signed checkpoints, log entries rebuilt from receipts. No server needed.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";

import {
  base64Decode,
  base64Encode,
  canonicalize,
  checkpointOpen,
  entryFromReceipt,
  leafHash,
  LogVerificationError,
  parseJson,
  Release,
  Verifier,
  verifyConsistency,
  verifyInclusion,
} from "../src/index.js";
import { vectorsPath } from "./helpers.js";

interface LogVectors {
  leaves: { entry: string; leaf_hash: string }[];
  inclusion: { index: number; tree_size: number; leaf_hash: string; proof: string[]; root: string }[];
  consistency: { old_size: number; new_size: number; old_root: string; new_root: string; proof: string[] }[];
  notes: {
    verifier_key: string;
    valid: { name: string; note: string; size: number; root: string; extensions: string[] }[];
    rejected: { name: string; note: string; code: string }[];
  };
  entries: { name: string; body_json: string; served_entry: string; entry: string; leaf_hash: string }[];
}

const vectors = JSON.parse(readFileSync(vectorsPath("log_vectors.json"), "utf-8")) as LogVectors;
const decoded = (hashes: string[]) => hashes.map(base64Decode);

function flipped(text: string): Uint8Array {
  const data = base64Decode(text);
  data[0] = (data[0] as number) ^ 1;
  return data;
}

async function rejection(promise: Promise<unknown>): Promise<LogVerificationError> {
  const error = await promise.then(
    () => assert.fail("accepted"),
    (e: unknown) => e,
  );
  assert.ok(error instanceof LogVerificationError, String(error));
  return error;
}

test("every leaf hash, and every inclusion proof leads to its root and no other", async () => {
  for (const leaf of vectors.leaves) assert.equal(base64Encode(await leafHash(leaf.entry)), leaf.leaf_hash);
  assert.ok(vectors.inclusion.length >= 91);
  for (const v of vectors.inclusion) {
    const check = { leaf: base64Decode(v.leaf_hash), index: v.index, treeSize: v.tree_size, proof: decoded(v.proof) };
    await verifyInclusion({ ...check, root: base64Decode(v.root) });
    const name = `${v.index} of ${v.tree_size}`;
    assert.equal((await rejection(verifyInclusion({ ...check, root: flipped(v.root) }))).code, "proof_invalid", name);
    if (v.tree_size > 1) {
      const moved = { ...check, index: (v.index + 1) % v.tree_size, root: base64Decode(v.root) };
      await rejection(verifyInclusion(moved));
    }
  }
});

test("every consistency proof holds, and a fork of the newer tree does not", async () => {
  assert.ok(vectors.consistency.length >= 91);
  for (const v of vectors.consistency) {
    const check = { oldSize: v.old_size, newSize: v.new_size, oldRoot: base64Decode(v.old_root), proof: decoded(v.proof) };
    await verifyConsistency({ ...check, newRoot: base64Decode(v.new_root) });
    const fork = await rejection(verifyConsistency({ ...check, newRoot: flipped(v.new_root) }));
    assert.equal(fork.code, "inconsistent", `${v.old_size} → ${v.new_size}`);
    await rejection(verifyConsistency({ ...check, oldRoot: flipped(v.old_root), newRoot: base64Decode(v.new_root) }));
  }
});

test("genuine checkpoints open, and every refused note is refused with its code", async () => {
  const { verifier_key: key } = vectors.notes;
  assert.equal((await Verifier.fromKey(key)).keyString(), key);
  for (const v of vectors.notes.valid) {
    const opened = await checkpointOpen(v.note, key);
    assert.deepEqual([opened.size, base64Encode(opened.root), opened.extensions], [v.size, v.root, v.extensions], v.name);
    assert.equal(opened.note, v.note);
  }
  assert.equal((await checkpointOpen(vectors.notes.valid[0]!.note, key)).timestamp, 1767225600);
  assert.ok(vectors.notes.rejected.length >= 8);
  for (const v of vectors.notes.rejected) {
    assert.equal((await rejection(checkpointOpen(v.note, key))).code, v.code, v.name);
  }
  for (const broken of ["", "koinon.example/answers+00000000+AQ==", key.replace(/\+(..)/, "+ff")]) {
    assert.equal((await rejection(Verifier.fromKey(broken))).code, "malformed", broken);
  }
});

test("the log entry is rebuilt from the receipt, as the server builds it", async () => {
  for (const v of vectors.entries) {
    const entry = canonicalize(entryFromReceipt(parseJson(v.body_json), parseJson(v.served_entry)));
    assert.equal(entry, v.entry, v.name);
    assert.equal(base64Encode(await leafHash(entry)), v.leaf_hash, v.name);
  }
  assert.throws(() => entryFromReceipt(parseJson(vectors.entries[0]!.body_json), {}), LogVerificationError);
});

test("a release whose body does not match is refused before any request", async () => {
  const body = parseJson(vectors.entries[0]!.body_json);
  const client = { request: () => assert.fail("no request for a receipt the body does not match") };
  const error = await rejection(Release.fromBody(body)!.verifyInclusion(client, body, { verifierKey: "unused" }));
  assert.equal(error.code, "receipt");
});
