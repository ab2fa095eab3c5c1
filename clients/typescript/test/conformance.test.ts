// The shared conformance vectors (clients/conformance/vectors.json), the JCS and version 1
// canonical forms, and bodies without a report. No server needed.
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { test } from "node:test";

import { Answer, canonical, canonicalize, evidenceReport, parseJson, Release } from "../src/index.js";
import { oneCharacterChanged, vectorsPath } from "./helpers.js";

interface Vectors {
  jcs: { name: string; input_json: string; canonical: string; sha256: string }[];
  releases: {
    name: string;
    policy_version: string;
    body_json: string;
    canonical: { citations: string; cards: string; policy: string };
    release: Record<string, string>;
  }[];
}

const vectors = JSON.parse(readFileSync(vectorsPath(), "utf-8")) as Vectors;

test("every JCS vector canonicalizes to the RFC's text and hash", () => {
  assert.ok(vectors.jcs.length >= 28);
  for (const vector of vectors.jcs) {
    for (const parsed of [JSON.parse(vector.input_json), parseJson(vector.input_json)]) {
      const text = canonicalize(parsed);
      assert.equal(text, vector.canonical, vector.name);
      assert.equal(createHash("sha256").update(text, "utf8").digest("hex"), vector.sha256, vector.name);
    }
  }
});

test("every release vector verifies, and one changed character is reported by name", async () => {
  assert.deepEqual(new Set(vectors.releases.map((v) => v.policy_version)), new Set(["1", "2"]));
  for (const vector of vectors.releases) {
    const body = parseJson(vector.body_json) as Record<string, any>;
    const release = Release.fromBody(body);
    assert.ok(release, vector.name);
    assert.equal(release.policy_version, vector.policy_version);
    assert.deepEqual(await release.mismatches(body), [], vector.name);
    const version = vector.policy_version;
    assert.equal(canonical(body.answer.citations, version), vector.canonical.citations, vector.name);
    assert.equal(canonical(body.answer.cards, version), vector.canonical.cards, vector.name);
    assert.equal(canonical(body.evidence.policy, version), vector.canonical.policy, vector.name);
    const parts = ["text", "policy", ...["citations", "cards"].filter((p) => body.answer[p].length)];
    for (const part of parts) {
      const changed = oneCharacterChanged(parseJson(vector.body_json), part);
      assert.deepEqual(await release.mismatches(changed), [`${part}_sha256`], `${vector.name} ${part}`);
    }
  }
  const cards = vectors.releases.filter((v) => JSON.parse(v.body_json).answer.cards.length);
  assert.ok(cards.length >= 6, "the vectors have cards to change");
});

test("a version 1 receipt needs the numbers as the server wrote them", async () => {
  const vector = vectors.releases.find((v) => v.name === "value-integral-double-v1");
  assert.ok(vector && vector.body_json.includes('"value": 2000.0'));
  const kept = parseJson(vector.body_json);
  assert.equal(await Release.fromBody(kept)!.verify(kept), true);
  // JSON.parse turns 2000.0 into 2000, which Python would have written as an int.
  const lost = JSON.parse(vector.body_json);
  assert.deepEqual(await Release.fromBody(lost)!.mismatches(lost), ["citations_sha256", "cards_sha256"]);
  // A number changed after parsing is not read from its old text.
  (kept as any).answer.cards[0].value = 2001.5;
  assert.deepEqual(await Release.fromBody(kept)!.mismatches(kept), ["cards_sha256"]);
  // Version 2 needs no such care: every other vector verifies from JSON.parse too.
  for (const v of vectors.releases.filter((v) => v.policy_version === "2")) {
    const body = JSON.parse(v.body_json);
    assert.equal(await Release.fromBody(body)!.verify(body), true, v.name);
  }
});

test("a receipt without a version is version 1, and an unknown version verifies nothing", async () => {
  const vector = vectors.releases.find((v) => v.policy_version === "1")!;
  const body = parseJson(vector.body_json) as Record<string, any>;
  delete body.release.policy_version;
  assert.equal(await Release.fromBody(body)!.verify(body), true);
  body.release.policy_version = "3";
  assert.deepEqual(await Release.fromBody(body)!.mismatches(body), [
    "text_sha256",
    "citations_sha256",
    "cards_sha256",
    "policy_sha256",
  ]);
});

test("an omitted evidence report stays undefined, never success", async () => {
  const body = { run_id: "r", answer: { text: "Trust me.", citations: [], cards: [] } };
  const answer = Answer.fromBody(body);
  assert.equal(answer.evidence, undefined);
  assert.equal(answer.isEvidenceBacked, false);
  assert.equal(answer.release, undefined);
  assert.equal(await answer.verified(), false);
  for (const evidence of [null, "available", [], { answer_status: null }, { status: "available" }]) {
    assert.equal(evidenceReport({ ...body, evidence }), undefined, JSON.stringify(evidence));
    assert.equal(Answer.fromBody({ ...body, evidence }).isEvidenceBacked, false);
  }
  assert.equal(Release.fromBody({ ...body, release: { id: "x" } }), undefined);
});

test("parseJson is JSON.parse, without prototype keys, with errors for invalid text", () => {
  const text = '{"a": [1, 2.50, -0, 1E3, "é\\u00e9😀"], "__proto__": {"x": 1}, "b": {"c": null, "d": true}}';
  const parsed = parseJson(text) as Record<string, unknown>;
  assert.deepEqual(JSON.stringify(parsed), JSON.stringify(JSON.parse(text)));
  assert.equal(Object.getPrototypeOf(parsed), Object.prototype);
  assert.deepEqual(Object.keys(parsed), ["a", "__proto__", "b"]);
  for (const bad of ["", "{", "[1,]", '{"a" 1}', "01", "1.", '"\u0001"', "nul", "[1] 2", "{'a': 1}"]) {
    assert.throws(() => parseJson(bad), SyntaxError, bad);
  }
});
