// The answer log against the suite's live Daphne (issue 51): tests/clients/test_typescript_client.py
// prepares it (tests/clients/conftest.py, `log_scenario`) and names what it made — a genuine
// answer, one a database owner rewrote, a kept checkpoint and a forked one — in KOINON_LOG_*.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";

import { Client, LogVerificationError } from "../src/index.js";
import { required, vectorsPath } from "./helpers.js";

const reader = () => new Client(required("KOINON_URL"), { apiKey: required("KOINON_KEY") });
const verifierKey = () => required("KOINON_LOG_VERIFIER_KEY");

async function refusal(promise: Promise<unknown>): Promise<LogVerificationError> {
  const error = await promise.then(
    () => assert.fail("the log vouched for it"),
    (e: unknown) => e,
  );
  assert.ok(error instanceof LogVerificationError, String(error));
  return error;
}

test("a genuine answer is in the log under the latest and a kept checkpoint, and the latest extends the kept", async () => {
  const client = reader();
  const answer = await client.runs.get(required("KOINON_LOG_RUN"));
  assert.equal(await answer.verified(), true);
  assert.equal(typeof (answer.body.release as { log?: { index?: unknown } }).log?.index, "number");
  const latest = await answer.release!.verifyInclusion(client, answer.body, { verifierKey: verifierKey() });
  const kept = required("KOINON_LOG_KEPT_CHECKPOINT");
  const older = await answer.release!.verifyInclusion(client, answer.body, { verifierKey: verifierKey(), checkpoint: kept });
  assert.ok(0 < older.size && older.size < latest.size, `${older.size} < ${latest.size}`);
  assert.equal(older.note, kept);
  assert.ok(latest.timestamp !== undefined);
  const extended = await client.log.verifyConsistency(kept, latest, { verifierKey: verifierKey() });
  assert.equal(extended.size, latest.size);
  assert.equal((await client.log.verifyConsistency(latest, latest.note, { verifierKey: verifierKey() })).size, latest.size);
});

test("a receipt a database owner rewrote fails the inclusion check", async () => {
  const client = reader();
  const rewritten = await client.runs.get(required("KOINON_LOG_REWRITTEN_RUN"));
  assert.equal(await rewritten.verified(), true); // the receipt alone agrees with the body
  const failure = await refusal(rewritten.release!.verifyInclusion(client, rewritten.body, { verifierKey: verifierKey() }));
  assert.equal(failure.code, "proof_invalid");
  const kept = required("KOINON_LOG_KEPT_CHECKPOINT");
  const against = rewritten.release!.verifyInclusion(client, rewritten.body, { verifierKey: verifierKey(), checkpoint: kept });
  assert.equal((await refusal(against)).code, "proof_invalid");
});

test("a forked log fails the consistency check, and so does a checkpoint older than the one kept", async () => {
  const client = reader();
  const answer = await client.runs.get(required("KOINON_LOG_RUN"));
  const latest = await answer.release!.verifyInclusion(client, answer.body, { verifierKey: verifierKey() });
  const fork = required("KOINON_LOG_FORKED_CHECKPOINT");
  const failure = await refusal(client.log.verifyConsistency(fork, latest, { verifierKey: verifierKey() }));
  assert.equal(failure.code, "inconsistent");
  const kept = required("KOINON_LOG_KEPT_CHECKPOINT");
  assert.equal((await refusal(client.log.verifyConsistency(latest, kept, { verifierKey: verifierKey() }))).code, "inconsistent");
});

test("the server's checkpoints are refused under a key the reader does not trust", async () => {
  const client = reader();
  const answer = await client.runs.get(required("KOINON_LOG_RUN"));
  const { verifier_key: other } = JSON.parse(readFileSync(vectorsPath("log_vectors.json"), "utf-8")).notes;
  const failure = await refusal(answer.release!.verifyInclusion(client, answer.body, { verifierKey: other }));
  assert.equal(failure.code, "forged");
  const kept = required("KOINON_LOG_KEPT_CHECKPOINT");
  await refusal(client.log.verifyConsistency(kept, kept, { verifierKey: other }));
});
