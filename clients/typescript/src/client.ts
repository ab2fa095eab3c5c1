/**
 * The koinon REST client: `new Client(baseUrl, { apiKey })`. Uses only the platform's
 * `fetch`, streams, `TextDecoder` and WebCrypto: Node 20 and browsers alike.
 */

import { parseJson } from "./canonical.js";
import { errorFromResponse, KoinonError, RunFailedError, StreamError } from "./errors.js";
import {
  Answer,
  type AnswerOptions,
  FINAL_EVENTS,
  type KoinonEvent,
  type RetrievalOutcome,
  type SearchResults,
  type ToolName,
} from "./models.js";
import { type Checkpoint, checkpointOpen, LogVerificationError, proofHashes, verifyConsistency } from "./transparency.js";

export const STREAM_VERSION = "1";

export interface ClientOptions {
  apiKey: string;
  /** Milliseconds until a response starts (default 60 s). */
  timeoutMs?: number;
  /** A `fetch` to use instead of the global one (a proxy, a test's). */
  fetch?: typeof fetch;
}

interface RequestOptions {
  json?: unknown;
  form?: FormData;
  query?: [string, string][];
  headers?: Record<string, string>;
}

export class Client {
  readonly answer: AnswerApi;
  readonly runs: RunsApi;
  readonly documents: DocumentsApi;
  readonly log: LogApi;
  private readonly baseUrl: string;
  private readonly headers: Record<string, string>;
  private readonly timeoutMs: number;
  private readonly fetchImpl: typeof fetch;

  constructor(baseUrl: string, options: ClientOptions) {
    this.baseUrl = baseUrl.replace(/\/+$/, "");
    // Browsers keep their own User-Agent; Node sends this one (the origin `client`).
    this.headers = { Authorization: `Bearer ${options.apiKey}`, "User-Agent": "koinon-client/0.1 (typescript)" };
    this.timeoutMs = options.timeoutMs ?? 60_000;
    this.fetchImpl = options.fetch ?? globalThis.fetch.bind(globalThis);
    this.answer = new AnswerApi(this);
    this.runs = new RunsApi(this);
    this.documents = new DocumentsApi(this);
    this.log = new LogApi(this);
  }

  /** One HTTP request; the response when it succeeded, else the typed error. */
  async send(method: string, path: string, options: RequestOptions = {}): Promise<Response> {
    const url = new URL(this.baseUrl + path);
    for (const [name, value] of options.query ?? []) url.searchParams.append(name, value);
    const headers: Record<string, string> = { ...this.headers, ...options.headers };
    let body: BodyInit | undefined;
    if (options.json !== undefined) {
      headers["Content-Type"] = "application/json";
      body = JSON.stringify(options.json);
    } else if (options.form) {
      body = options.form;
    }
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(), this.timeoutMs);
    try {
      const response = await this.fetchImpl(url, { method, headers, body, signal: controller.signal });
      if (!response.ok) throw await errorFromResponse(response);
      return response;
    } finally {
      clearTimeout(timer); // a stream's body may take longer: only the response's start is timed
    }
  }

  /** One JSON request; the decoded body (numbers keep their text: see `parseJson`). */
  async request(method: string, path: string, options: RequestOptions = {}): Promise<unknown> {
    const response = await this.send(method, path, options);
    const text = await response.text();
    return text ? parseJson(text) : undefined;
  }

  /** Raw retrieval candidates (`GET /v1/search`), labelled `unverified`. */
  async search(query: string, options: { spaces?: number[]; tools?: ToolName[]; limit?: number } = {}): Promise<SearchResults> {
    const params: [string, string][] = [["q", query]];
    for (const space of options.spaces ?? []) params.push(["space", String(space)]);
    if (options.tools?.length) params.push(["tools", options.tools.join(",")]);
    if (options.limit !== undefined) params.push(["limit", String(options.limit)]);
    const body = (await this.request("GET", "/v1/search", { query: params })) as Record<string, unknown>;
    return {
      label: String(body.label ?? "unknown"),
      results: Array.isArray(body.results) ? body.results : [],
      outcomes: (Array.isArray(body.outcomes) ? body.outcomes : []) as RetrievalOutcome[],
    };
  }
}

function requestBody(query: string, options: AnswerOptions): Record<string, unknown> {
  const body: Record<string, unknown> = { query };
  for (const [name, value] of Object.entries(options)) if (value !== undefined) body[name] = value;
  return body;
}

/** `client.answer`: ask (`create`), start a streamed run (`start`), follow its events
 * (`events`), or wait for its sealed body (`collect`). */
export class AnswerApi {
  constructor(private readonly client: Client) {}

  /** Ask and wait for the sealed answer (`POST /v1/answer`). */
  async create(query: string, options: AnswerOptions = {}): Promise<Answer> {
    return Answer.fromBody(await this.client.request("POST", "/v1/answer", { json: requestBody(query, options) }));
  }

  /** Start a streamed run (executed by the server's worker) and return its run id at once. */
  async start(query: string, options: AnswerOptions = {}): Promise<string> {
    const json = { ...requestBody(query, options), stream: true, stream_version: STREAM_VERSION };
    const response = await this.client.send("POST", "/v1/answer", { json, headers: { Accept: "text/event-stream" } });
    const runId = response.headers.get("Koinon-Run-Id");
    await response.body?.cancel().catch(() => undefined);
    if (!runId) throw new StreamError("The server named no run.", { code: "no_run_id" });
    return runId;
  }

  /**
   * The run's events (`GET /v1/runs/<id>/events`, version 1) up to its final one. When the
   * connection drops, or the stream ends without a final event, it reconnects with
   * `Last-Event-ID` set to the last event received: nothing is lost, and an id seen before
   * is never yielded twice. After `maxReconnects` attempts in a row that bring no new event
   * it throws `StreamError` (`stream_interrupted`). Error answers (404, 400) throw at once.
   */
  async *events(runId: string, options: { lastEventId?: string; maxReconnects?: number } = {}): AsyncGenerator<KoinonEvent> {
    let cursor = options.lastEventId;
    const maxReconnects = options.maxReconnects ?? 5;
    const seen = new Set<string>();
    let failures = 0;
    for (;;) {
      const headers: Record<string, string> = { Accept: "text/event-stream" };
      if (cursor) headers["Last-Event-ID"] = cursor;
      try {
        const response = await this.client.send(
          "GET",
          `/v1/runs/${encodeURIComponent(runId)}/events`,
          { query: [["stream_version", STREAM_VERSION]], headers },
        );
        if (!response.body) throw new StreamError("The server sent no stream.", { code: "no_stream" });
        for await (const event of serverSentEvents(response.body)) {
          if (event.id) {
            if (seen.has(event.id)) continue; // a server or proxy replaying: skip it
            seen.add(event.id);
            cursor = event.id;
          }
          failures = 0; // progress: a new event
          yield event;
          if (FINAL_EVENTS.has(event.event)) return;
        }
      } catch (error) {
        if (error instanceof KoinonError) throw error; // the server's answer, not a drop
      }
      failures += 1; // dropped, or ended without a final event: resume after the cursor
      if (failures > maxReconnects) {
        throw new StreamError(`The event stream of run ${runId} ended without a final event.`, {
          code: "stream_interrupted",
        });
      }
    }
  }

  /** Follow the run's events to the end and return its sealed answer; `RunFailedError` for
   * a failed run, `StreamError` for a stream that timed out or could not be resumed. */
  async collect(runId: string, options: { lastEventId?: string } = {}): Promise<Answer> {
    for await (const event of this.events(runId, options)) {
      const data = (typeof event.data === "object" && event.data !== null ? event.data : {}) as Record<string, unknown>;
      if (event.event === "completed") {
        const payload = data.payload as Record<string, unknown> | undefined;
        return Answer.fromBody(payload?.result);
      }
      if (event.event === "failed") {
        throw new RunFailedError(`Run ${runId} failed.`, { code: String(data.code ?? "failed") });
      }
      if (event.event === "timeout" || event.event === "error") {
        throw new StreamError(`The stream of run ${runId} ended: ${event.event}.`, { code: event.event });
      }
    }
    throw new StreamError(`Run ${runId} ended without an answer.`, { code: "stream_interrupted" });
  }
}

/** `client.runs`: a run's latest sealed body, its audit, and retries. */
export class RunsApi {
  constructor(private readonly client: Client) {}

  /** `GET /v1/runs/<id>`: the latest published body, as you may read it now. */
  async get(runId: string): Promise<Answer> {
    return Answer.fromBody(await this.client.request("GET", `/v1/runs/${encodeURIComponent(runId)}`));
  }

  /** `GET /v1/runs/<id>/audit`: plan, steps, retrieval manifest; `output_release` only where one exists. */
  async audit(runId: string): Promise<Record<string, unknown>> {
    return (await this.client.request("GET", `/v1/runs/${encodeURIComponent(runId)}/audit`)) as Record<string, unknown>;
  }

  /** `POST /v1/runs/<id>/retry`: generation n+1; earlier receipts remain. */
  async retry(runId: string): Promise<Answer> {
    return Answer.fromBody(await this.client.request("POST", `/v1/runs/${encodeURIComponent(runId)}/retry`));
  }
}

/** `client.log`: koinon's answer log (docs/releases.md), checked with only its public key.
 * Keep the checkpoints you verify (their `note`): a later one must extend them. */
export class LogApi {
  constructor(private readonly client: Client) {}

  /** `GET /v1/log/checkpoint`: the latest checkpoint, verified with `verifierKey` (never
   * with the key the server sends along). */
  async checkpoint(options: { verifierKey: string }): Promise<Checkpoint> {
    const body = (await this.client.request("GET", "/v1/log/checkpoint")) as Record<string, unknown>;
    return checkpointOpen(String(body.note), options.verifierKey);
  }

  /**
   * Check that the log of `newCheckpoint` extends the log of `oldCheckpoint`, both signed
   * notes the key signed (RFC 9162 §2.1.4, the proof from `GET /v1/log/consistency`):
   * nothing the old one covered was rewritten, removed or reordered. Resolves to the new
   * checkpoint; rejects with LogVerificationError (`inconsistent`) for a fork.
   */
  async verifyConsistency(
    oldCheckpoint: string | Checkpoint,
    newCheckpoint: string | Checkpoint,
    options: { verifierKey: string },
  ): Promise<Checkpoint> {
    const [old, latest] = await Promise.all(
      [oldCheckpoint, newCheckpoint].map((c) => checkpointOpen(typeof c === "string" ? c : c.note, options.verifierKey)),
    ) as [Checkpoint, Checkpoint];
    if (old.size > latest.size) throw new LogVerificationError("the newer checkpoint is smaller", "inconsistent");
    if (old.size === 0) return latest; // every tree extends the empty one
    let proof: Uint8Array[] = [];
    if (old.size < latest.size) {
      const query: [string, string][] = [
        ["from", String(old.size)],
        ["to", String(latest.size)],
      ];
      const served = (await this.client.request("GET", "/v1/log/consistency", { query })) as Record<string, unknown>;
      proof = proofHashes(served.proof);
    }
    await verifyConsistency({ oldSize: old.size, newSize: latest.size, oldRoot: old.root, newRoot: latest.root, proof });
    return latest;
  }
}

export interface UploadOptions {
  filename: string;
  space?: number;
  private?: boolean;
  title?: string;
  document?: number;
}

/** `client.documents`: upload files into a space (curators) or as private files. */
export class DocumentsApi {
  constructor(private readonly client: Client) {}

  /** `POST /v1/documents` (multipart). Give `space` or `private: true`. */
  async upload(file: Blob | Uint8Array | string, options: UploadOptions): Promise<Record<string, unknown>> {
    const form = new FormData();
    const blob = file instanceof Blob ? file : new Blob([file as BlobPart]);
    form.append("file", blob, options.filename);
    if (options.space !== undefined) form.append("space", String(options.space));
    if (options.private) form.append("private", "true");
    if (options.title !== undefined) form.append("title", options.title);
    if (options.document !== undefined) form.append("document", String(options.document));
    return (await this.client.request("POST", "/v1/documents", { form })) as Record<string, unknown>;
  }
}

/**
 * The events of a `text/event-stream` body (the WHATWG parsing rules: `\n`, `\r\n` or
 * `\r` line ends, `:` comments, data lines joined by `\n`). A dropped connection rejects
 * the read, which the caller treats as a reason to resume.
 */
export async function* serverSentEvents(body: ReadableStream<Uint8Array>): AsyncGenerator<KoinonEvent> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  let id: string | undefined;
  let name = "";
  let data: string[] = [];
  try {
    for (;;) {
      const { done, value } = await reader.read();
      buffer += done ? decoder.decode() : decoder.decode(value, { stream: true });
      for (;;) {
        const end = buffer.search(/\r\n|\r|\n/);
        // A lone `\r` at the end may be the first half of `\r\n`: wait for the next chunk.
        if (end < 0 || (!done && end === buffer.length - 1 && buffer[end] === "\r")) break;
        const line = buffer.slice(0, end);
        buffer = buffer.slice(end + (buffer.startsWith("\r\n", end) ? 2 : 1));
        if (line === "") {
          if (data.length) yield { id, event: name || "message", data: decodeData(data.join("\n")) };
          id = undefined;
          name = "";
          data = [];
          continue;
        }
        if (line.startsWith(":")) continue;
        const colon = line.indexOf(":");
        const field = colon < 0 ? line : line.slice(0, colon);
        let value = colon < 0 ? "" : line.slice(colon + 1);
        if (value.startsWith(" ")) value = value.slice(1);
        if (field === "id" && !value.includes("\0")) id = value;
        else if (field === "event") name = value;
        else if (field === "data") data.push(value);
      }
      if (done) return;
    }
  } finally {
    await reader.cancel().catch(() => undefined);
  }
}

function decodeData(text: string): unknown {
  try {
    return parseJson(text);
  } catch {
    return text;
  }
}
