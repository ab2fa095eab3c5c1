/**
 * Typed views of koinon's answer bodies (SPEC §5, docs/releases.md). Nothing is inferred:
 * a body without an `evidence` report has `evidence === undefined` — never success — and a
 * body without `release` has no verified release.
 */

import { canonicalize, canonicalV1, parseJson } from "./canonical.js";
import {
  type Checkpoint,
  checkpointOpen,
  entryFromReceipt,
  leafHash,
  LogVerificationError,
  proofHashes,
  verifyInclusion,
} from "./transparency.js";

/** What `Release.verifyInclusion` asks of a client: one JSON request. `Client` is one; the
 * models never import it (the client builds models from what it reads). */
export interface ProofSource {
  request(method: string, path: string, options?: { query?: [string, string][] }): Promise<unknown>;
}

/** Options of `Release.verifyInclusion`: the log's public key, obtained out of band, and a
 * checkpoint you kept (a signed note, or one opened before); else the latest one served. */
export interface InclusionOptions {
  verifierKey: string;
  checkpoint?: string | Checkpoint;
}

export type EvidenceMode = "auto" | "strict" | "general_knowledge";
export type ToolName =
  | "vector_search"
  | "keyword_search"
  | "dataset_query"
  | "retrieval_endpoint"
  | "federated_rag"
  | "web_search"
  | "fetch_url"
  | "mcp_search";

/** What evidence an answer may and must use; `allowed_tools` omitted: the server's default. */
export interface EvidencePolicy {
  mode: EvidenceMode;
  allowed_tools?: ToolName[];
  required_tools?: ToolName[];
}

/** One retrieval tool's outcome (`code`: `matched`, `empty_corpus`, `no_relevant_hit`, …). */
export interface RetrievalOutcome {
  tool: string;
  state: "succeeded" | "failed" | (string & {});
  code: string;
  result_count: number;
  retryable: boolean;
}

export type EvidenceStatus =
  | "available"
  | "absent"
  | "partial"
  | "unavailable"
  | "not_requested"
  | "unknown";
export type AnswerStatus =
  | "evidence_backed"
  | "partial"
  | "general_knowledge"
  | "unverified"
  | "abstained";

/** The answer's evidence report. HTTP 200 proves nothing; read this. */
export interface EvidenceReport {
  status: EvidenceStatus | (string & {});
  answer_status: AnswerStatus | (string & {});
  policy?: EvidencePolicy;
  sources: Record<string, unknown>[];
  outcomes: RetrievalOutcome[];
}

export type AnswerMode = "ask" | "quick" | "pro" | "deep" | "agent" | "plan" | "debug" | "raw";

/** Options of `answer.create` and `answer.start` (`POST /v1/answer`). */
export interface AnswerOptions {
  evidence_policy?: EvidencePolicy;
  space_ids?: number[];
  selected_sources?: number[];
  language?: string;
  mode?: AnswerMode;
  conversation_id?: number;
}

export type Citation = { number: number; fact_id: string; kind: "quote" | "value" } & Record<string, unknown>;
export type Card = { kind: string } & Record<string, unknown>;

/** The response body of `POST /v1/answer` and `GET /v1/runs/<id>`, as the server sent it. */
export interface AnswerBody {
  run_id: string;
  generation: number | null;
  mode?: string;
  answer: { text: string; language?: string; citations: Citation[]; cards: Card[] };
  evidence?: unknown;
  quality?: { completeness?: string; degraded?: boolean; issues?: unknown[] };
  release?: unknown;
}

const HASHES = ["text_sha256", "citations_sha256", "cards_sha256", "policy_sha256"] as const;
export type HashName = (typeof HASHES)[number];
/** Release policy versions this client verifies (docs/releases.md). */
export const POLICY_VERSIONS = ["1", "2"] as const;

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** The body's evidence report, or `undefined` when the body carries none (an older
 * server, a malformed report): absence is never read as success. */
export function evidenceReport(body: unknown): EvidenceReport | undefined {
  const evidence = isObject(body) ? body.evidence : undefined;
  if (!isObject(evidence)) return undefined;
  const { status, answer_status: answerStatus } = evidence;
  if (typeof status !== "string" || typeof answerStatus !== "string") return undefined;
  const policy = isObject(evidence.policy) ? (evidence.policy as unknown as EvidencePolicy) : undefined;
  const outcomes = Array.isArray(evidence.outcomes) ? evidence.outcomes.filter(isObject) : [];
  return {
    status,
    answer_status: answerStatus,
    policy,
    sources: Array.isArray(evidence.sources) ? evidence.sources.filter(isObject) : [],
    outcomes: outcomes.map((o) => ({
      tool: String(o.tool ?? "unknown"),
      state: String(o.state ?? "unknown"),
      code: String(o.code ?? "unknown"),
      result_count: typeof o.result_count === "number" ? o.result_count : 0,
      retryable: o.retryable === true,
    })),
  };
}

async function sha256Hex(text: string): Promise<string> {
  const digest = await globalThis.crypto.subtle.digest("SHA-256", new TextEncoder().encode(text));
  return Array.from(new Uint8Array(digest), (byte) => byte.toString(16).padStart(2, "0")).join("");
}

/** The canonical text a release of `policyVersion` hashes; throws for an unknown version. */
export function canonical(value: unknown, policyVersion: string = "2"): string {
  if (policyVersion === "2") return canonicalize(value);
  if (policyVersion === "1") return canonicalV1(value);
  throw new RangeError(`unknown release policy version ${JSON.stringify(policyVersion)}`);
}

/** The output release (receipt) of a published answer or refusal. */
export class Release {
  constructor(
    readonly id: string,
    readonly kind: string,
    readonly text_sha256: string,
    readonly citations_sha256: string,
    readonly cards_sha256: string,
    readonly policy_sha256: string,
    /** Absent on receipts from before versions were reported: version 1. */
    readonly policy_version: string | undefined,
    readonly publication_sequence?: number,
    readonly reset_context?: number,
  ) {}

  /** The body's release, or `undefined`: no verified release was recorded for it. */
  static fromBody(body: unknown): Release | undefined {
    const release = isObject(body) ? body.release : undefined;
    if (!isObject(release)) return undefined;
    const fields = ["id", "kind", ...HASHES].map((name) => release[name]);
    if (!fields.every((value) => typeof value === "string")) return undefined;
    const [id, kind, text, citations, cards, policy] = fields as string[];
    return new Release(
      id as string,
      kind as string,
      text as string,
      citations as string,
      cards as string,
      policy as string,
      typeof release.policy_version === "string" ? release.policy_version : undefined,
      typeof release.publication_sequence === "number" ? release.publication_sequence : undefined,
      typeof release.reset_context === "number" ? release.reset_context : undefined,
    );
  }

  /**
   * Names of the hashes that do not match `body` (empty: it verifies), recomputed with
   * WebCrypto SHA-256 by the canonical form of the receipt's `policy_version`. Pass the body
   * as received (`answer.body`, or parsed with `parseJson`): a version 1 receipt needs each
   * number as the server wrote it. A version this client does not know verifies nothing.
   */
  async mismatches(body: unknown): Promise<HashName[]> {
    const version = this.policy_version ?? "1";
    if (!isObject(body) || !(POLICY_VERSIONS as readonly string[]).includes(version)) return [...HASHES];
    const answer = isObject(body.answer) ? body.answer : {};
    const evidence = isObject(body.evidence) ? body.evidence : {};
    const wrong: HashName[] = [];
    const text = answer.text;
    if (typeof text !== "string" || (await sha256Hex(text)) !== this.text_sha256) wrong.push("text_sha256");
    const parts: [HashName, unknown][] = [
      ["citations_sha256", answer.citations],
      ["cards_sha256", answer.cards],
      ["policy_sha256", evidence.policy],
    ];
    for (const [name, value] of parts) {
      let digest: string | undefined;
      try {
        digest = value === undefined ? undefined : await sha256Hex(canonical(value, version));
      } catch {
        digest = undefined; // no JSON value (NaN, a function …): it cannot match
      }
      if (digest !== this[name]) wrong.push(name);
    }
    return wrong;
  }

  /** True when every hash of the receipt matches the body. */
  async verify(body: unknown): Promise<boolean> {
    return (await this.mismatches(body)).length === 0;
  }

  private sameAs(other: Release | undefined): boolean {
    return (
      other !== undefined &&
      (Object.keys(this) as (keyof Release)[]).every((name) => this[name] === other[name])
    );
  }

  /**
   * Check that this receipt is in koinon's answer log, trusting only the log's public key
   * (`verifierKey`, `<name>+<hex id>+<base64 key>`, obtained out of band): the body must
   * match the receipt (`verify`); the log entry is rebuilt from the receipt as the server
   * builds it (RFC 8785 JSON, leaf SHA-256(0x00 ‖ entry)); the inclusion proof fetched from
   * `GET /v1/releases/<id>/proof` must lead to the root of a checkpoint that key signed —
   * `checkpoint` (a signed note you kept, e.g. a witness's) or, by default, the latest one
   * the server offers. Resolves to that checkpoint; rejects with LogVerificationError (or the
   * server's typed error, e.g. NotFoundError code `not_integrated`) otherwise.
   */
  async verifyInclusion(client: ProofSource, body: unknown, options: InclusionOptions): Promise<Checkpoint> {
    if ((await this.mismatches(body)).length || !this.sameAs(Release.fromBody(body))) {
      throw new LogVerificationError("the body does not match this receipt", "receipt");
    }
    const { verifierKey, checkpoint } = options;
    let trusted =
      checkpoint === undefined
        ? undefined
        : await checkpointOpen(typeof checkpoint === "string" ? checkpoint : checkpoint.note, verifierKey);
    const query: [string, string][] = trusted ? [["tree_size", String(trusted.size)]] : [];
    const path = `/v1/releases/${encodeURIComponent(this.id)}/proof`;
    const served = (await client.request("GET", path, { query })) as Record<string, unknown>;
    if (trusted === undefined) {
      if (typeof served.checkpoint !== "string" || !served.checkpoint) {
        throw new LogVerificationError("no signed checkpoint covers this release yet", "no_checkpoint");
      }
      trusted = await checkpointOpen(served.checkpoint, verifierKey);
    }
    const index = served.index;
    if (served.tree_size !== trusted.size || typeof index !== "number" || !Number.isInteger(index)) {
      throw new LogVerificationError("the proof is for another tree", "proof_invalid");
    }
    let servedEntry: unknown;
    try {
      servedEntry = parseJson(String(served.entry));
    } catch {
      throw new LogVerificationError("the served entry is not JSON", "malformed");
    }
    await verifyInclusion({
      leaf: await leafHash(canonicalize(entryFromReceipt(body, servedEntry))),
      index,
      treeSize: trusted.size,
      proof: proofHashes(served.proof),
      root: trusted.root,
    });
    const log = isObject(body) && isObject(body.release) ? body.release.log : undefined;
    if (isObject(log) && log.index !== index) {
      throw new LogVerificationError("the receipt names another log index", "proof_invalid");
    }
    return trusted;
  }
}

/** A sealed answer body, typed; `body` is the server's JSON as received. */
export class Answer {
  readonly runId: string;
  readonly generation: number | null;
  readonly text: string;
  readonly language: string | undefined;
  readonly citations: Citation[];
  readonly cards: Card[];
  /** `undefined` when the body has no report: never read that as success. */
  readonly evidence: EvidenceReport | undefined;
  readonly release: Release | undefined;

  constructor(readonly body: AnswerBody) {
    const answer = isObject(body.answer) ? body.answer : ({} as Partial<AnswerBody["answer"]>);
    this.runId = String(body.run_id ?? "");
    this.generation = typeof body.generation === "number" ? body.generation : null;
    this.text = typeof answer.text === "string" ? answer.text : "";
    this.language = typeof answer.language === "string" ? answer.language : undefined;
    this.citations = Array.isArray(answer.citations) ? answer.citations : [];
    this.cards = Array.isArray(answer.cards) ? answer.cards : [];
    this.evidence = evidenceReport(body);
    this.release = Release.fromBody(body);
  }

  static fromBody(body: unknown): Answer {
    return new Answer((isObject(body) ? body : {}) as unknown as AnswerBody);
  }

  /** Only when the server said so: fully backed by permitted evidence. */
  get isEvidenceBacked(): boolean {
    return this.evidence?.answer_status === "evidence_backed";
  }

  /** A release exists and its hashes match this body. */
  async verified(): Promise<boolean> {
    return this.release !== undefined && (await this.release.verify(this.body));
  }
}

/** One server-sent event of a run: `id` is `<run_id>:<generation>:<seq>`. */
export interface KoinonEvent {
  id: string | undefined;
  event: string;
  data: unknown;
}

export const FINAL_EVENTS: ReadonlySet<string> = new Set(["completed", "failed", "timeout", "complete", "error"]);

/** Raw retrieval candidates (`GET /v1/search`): `label` is always `unverified`. */
export interface SearchResults {
  label: string;
  results: Record<string, unknown>[];
  outcomes: RetrievalOutcome[];
}
