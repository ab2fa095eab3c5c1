// The client against the suite's live Daphne and Celery worker, on the library corpus
// (tests/clients/test_typescript_client.py starts them and sets KOINON_URL and the keys).
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { test } from "node:test";

import {
  AuthenticationError,
  Client,
  type EvidencePolicy,
  NotFoundError,
  parseJson,
  StreamError,
  ValidationError,
} from "../src/index.js";
import { cuttingFetch, oneCharacterChanged, required } from "./helpers.js";

const URL_ = required("KOINON_URL");
const reader = () => new Client(URL_, { apiKey: required("KOINON_KEY") });
const QUESTION = "Who owns service reviews?";
const MIXED =
  "Who owns service reviews, what currency is the invoice dataset in, and what is the total amount of the invoices?";

test("a strict-policy answer verifies, and one changed character is reported by name", async () => {
  const policy: EvidencePolicy = { mode: "strict", required_tools: ["keyword_search"] };
  const answer = await reader().answer.create(MIXED, { evidence_policy: policy });
  assert.equal(answer.evidence?.answer_status, "evidence_backed");
  assert.equal(answer.isEvidenceBacked, true);
  assert.equal(answer.evidence?.policy?.mode, "strict");
  assert.deepEqual(answer.evidence?.policy?.required_tools, ["keyword_search"]);
  assert.ok(answer.evidence?.outcomes.some((o) => o.tool === "keyword_search" && o.state === "succeeded"));
  assert.ok(answer.text.includes("The platform operations team owns service reviews."));
  assert.ok(answer.citations.length >= 2 && answer.cards.length >= 1);
  assert.equal(answer.release?.policy_version, "2");
  assert.equal(await answer.verified(), true);
  const text = JSON.stringify(answer.body);
  for (const part of ["text", "citations", "cards", "policy"]) {
    const changed = oneCharacterChanged(parseJson(text), part);
    assert.deepEqual(await answer.release!.mismatches(changed), [`${part}_sha256`], part);
  }
});

test("a stream interrupted after each event resumes without loss or repeat", async () => {
  const client = reader();
  const runId = (await client.answer.create(QUESTION)).runId;
  const replayed = [];
  for await (const event of client.answer.events(runId)) replayed.push(event);
  const ids = replayed.map((e) => e.id);
  assert.deepEqual(ids, ids.map((_, n) => `${runId}:1:${n + 1}`));
  assert.equal(replayed.at(-1)?.event, "completed");
  assert.ok(replayed.length >= 3);

  const cutting = cuttingFetch();
  const resumed = [];
  const cut = new Client(URL_, { apiKey: required("KOINON_KEY"), fetch: cutting.fetch });
  for await (const event of cut.answer.events(runId)) resumed.push(event);
  assert.deepEqual(resumed.map((e) => e.id), ids);
  assert.deepEqual(resumed.map((e) => e.data), replayed.map((e) => e.data));
  // One connection per event, each resuming after the one before.
  assert.deepEqual(cutting.cursors, [null, ...ids.slice(0, -1)]);
  // A cursor from earlier resumes after it, and only after it.
  const rest = [];
  for await (const event of client.answer.events(runId, { lastEventId: ids[1] })) rest.push(event.id);
  assert.deepEqual(rest, ids.slice(2));
  // The sealed body collected through a cut stream is the stored one, and verifies.
  const collected = await new Client(URL_, { apiKey: required("KOINON_KEY"), fetch: cuttingFetch().fetch }).answer.collect(runId);
  const stored = await client.runs.get(runId);
  assert.deepEqual(collected.body, stored.body);
  assert.equal(await collected.verified(), true);
  const audit = await client.runs.audit(runId);
  assert.equal((audit.generations as any)[0].output_release.id, collected.release?.id);
});

test("a streamed run started by the client is collected from the worker", async () => {
  const client = reader();
  const runId = await client.answer.start(QUESTION);
  const answer = await client.answer.collect(runId);
  assert.equal(answer.runId, runId);
  assert.equal(answer.evidence?.answer_status, "evidence_backed");
  assert.equal(await answer.verified(), true);
});

test("an outsider's run id is the not-found error, as a missing one", async () => {
  const theirs = await new Client(URL_, { apiKey: required("KOINON_OUTSIDER_KEY") }).answer.create(QUESTION);
  const client = reader();
  const missing = await client.runs.get(randomUUID()).catch((error: unknown) => error);
  assert.ok(missing instanceof NotFoundError);
  assert.equal(missing.status, 404);
  assert.equal(missing.code, "not_found");
  for (const attempt of [
    () => client.runs.get(theirs.runId),
    () => client.runs.audit(theirs.runId),
    async () => {
      for await (const _ of client.answer.events(theirs.runId)) assert.fail("an event of someone else's run");
    },
  ]) {
    const foreign = await attempt().catch((error: unknown) => error);
    assert.ok(foreign instanceof NotFoundError);
    assert.equal(foreign.code, missing.code);
    assert.equal(foreign.message, missing.message);
  }
});

test("a 422 names its fields, a 401 and a bad cursor are typed", async () => {
  const client = reader();
  const empty = await client.answer.create("   ").catch((error: unknown) => error);
  assert.ok(empty instanceof ValidationError);
  assert.equal(empty.status, 422);
  assert.equal(empty.code, "empty_query");
  assert.ok("query" in empty.fields);
  const unknownTool = { mode: "strict", allowed_tools: ["telepathy"] } as unknown as EvidencePolicy;
  const policy = await client.answer.create(QUESTION, { evidence_policy: unknownTool }).catch((error: unknown) => error);
  assert.ok(policy instanceof ValidationError);
  assert.equal(policy.code, "invalid_policy");
  assert.ok(Object.keys(policy.fields).some((field) => field.startsWith("evidence_policy")), JSON.stringify(policy.fields));
  const stranger = new Client(URL_, { apiKey: "kn_" + "x".repeat(43) });
  const unknown = await stranger.answer.create(QUESTION).catch((error: unknown) => error);
  assert.ok(unknown instanceof AuthenticationError);
  assert.equal(unknown.code, "invalid_credentials");
  const runId = (await client.answer.create(QUESTION)).runId;
  const cursor = await (async () => {
    for await (const _ of client.answer.events(runId, { lastEventId: "not-an-id" })) assert.fail("an event");
  })().catch((error: unknown) => error);
  assert.equal((cursor as { code?: string }).code, "invalid_last_event_id");
});

test("a stream that never progresses ends in a stream error without repeats", async () => {
  let requests = 0;
  const replaying: typeof fetch = async () => {
    requests += 1;
    const body = 'id: r:1:1\nevent: started\ndata: {"run_id": "r", "generation": 1}\n\n';
    return new Response(body, { headers: { "Content-Type": "text/event-stream" } });
  };
  const client = new Client("http://koinon.invalid", { apiKey: "kn_test", fetch: replaying });
  const received: (string | undefined)[] = [];
  const error = await (async () => {
    for await (const event of client.answer.events("r", { maxReconnects: 3 })) received.push(event.id);
  })().catch((e: unknown) => e);
  assert.ok(error instanceof StreamError);
  assert.equal(error.code, "stream_interrupted");
  assert.deepEqual(received, ["r:1:1"]);
  assert.equal(requests, 4);
});

test("upload and search through the client", async () => {
  const client = reader();
  const uploaded = await client.documents.upload("My private note: the quarterly budget meeting moved to Thursday.", {
    filename: "note.txt",
    private: true,
    title: "Budget note",
  });
  assert.equal(uploaded.private, true);
  assert.equal(uploaded.created, true);
  assert.ok(uploaded.revision);
  const found = await client.search("operations team service reviews", { limit: 5 });
  assert.equal(found.label, "unverified");
  assert.ok(found.results.some((r) => String(r.text).includes("The platform operations team owns service reviews.")));
  assert.deepEqual(new Set(found.outcomes.map((o) => o.tool)), new Set(["vector_search", "keyword_search"]));
});
