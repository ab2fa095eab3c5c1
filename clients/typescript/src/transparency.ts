/**
 * Verify koinon's answer log outside the server, trusting only the log's public key
 * (docs/releases.md, "The answer log"): C2SP signed notes with Ed25519 keys (the
 * checkpoint's signature), the C2SP tlog-checkpoint body (origin, size, root hash,
 * extension lines), and RFC 9162 §2.1 hashing with its inclusion and consistency proof
 * verification. The same checks as the Python client's `koinon_client.transparency`, written
 * anew on WebCrypto (SHA-256, Ed25519) and `atob`/`btoa`: Node 20 and browsers alike, no
 * dependency. Sizes and indices are numbers: exact up to 2^53, far beyond any log.
 */

import { KoinonError } from "./errors.js";

export const HASH_SIZE = 32;
const ED25519 = 1;
const SIGNATURE_PREFIX = "— ";
const DECIMAL = /^(?:0|[1-9][0-9]*)$/;
const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;
/** The fields of a log entry (the server's `audit.log.log_entry`): a client rebuilds the
 * entry from the receipt and takes from the served entry only those a receipt lacks. */
export const ENTRY_FROM_RECEIPT = [
  "release",
  "run",
  "kind",
  "reset_context",
  "publication_sequence",
  "policy_version",
  "text_sha256",
  "citations_sha256",
  "cards_sha256",
  "policy_sha256",
] as const;
export const ENTRY_FROM_LOG = ["generation", "source_refs", "sealed_at"] as const;

export type LogVerificationCode =
  | "malformed"
  | "forged"
  | "proof_invalid"
  | "inconsistent"
  | "receipt"
  | "no_checkpoint"
  | (string & {});

/** The answer log does not vouch for what was checked: a checkpoint the trusted key did not
 * sign (or malformed), a proof that does not lead to the signed root, an entry that is not
 * the receipt's, or two checkpoints of forked trees. `code` says which. */
export class LogVerificationError extends KoinonError {
  constructor(message: string, code: LogVerificationCode = "log_unverified") {
    super(message, { code });
  }
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

const utf8 = (text: string): Uint8Array => new TextEncoder().encode(text);

function concat(...parts: Uint8Array[]): Uint8Array {
  const joined = new Uint8Array(parts.reduce((total, part) => total + part.length, 0));
  let at = 0;
  for (const part of parts) {
    joined.set(part, at);
    at += part.length;
  }
  return joined;
}

/** Whether two byte strings are equal, reading every byte of both (no early exit). */
function same(left: Uint8Array, right: Uint8Array): boolean {
  let difference = left.length ^ right.length;
  for (let i = 0; i < Math.max(left.length, right.length); i++) difference |= (left[i] ?? 0) ^ (right[i] ?? 0);
  return difference === 0;
}

/** Standard padded base64 in its one canonical spelling. */
export function base64Decode(text: string): Uint8Array {
  if (!BASE64.test(text)) throw new LogVerificationError("not base64", "malformed");
  const data = Uint8Array.from(atob(text), (c) => c.charCodeAt(0));
  if (base64Encode(data) !== text) throw new LogVerificationError("not canonical base64", "malformed");
  return data;
}

export function base64Encode(data: Uint8Array): string {
  return btoa(Array.from(data, (byte) => String.fromCharCode(byte)).join(""));
}

async function sha256(...parts: Uint8Array[]): Promise<Uint8Array> {
  return new Uint8Array(await globalThis.crypto.subtle.digest("SHA-256", concat(...parts) as BufferSource));
}

function partition(text: string, separator: string): [string, string] {
  const at = text.indexOf(separator);
  return at < 0 ? [text, ""] : [text.slice(0, at), text.slice(at + separator.length)];
}

/** A trusted Ed25519 note key: `<name>+<hex key id>+<base64(0x01 ‖ public key)>`. */
export class Verifier {
  private constructor(
    readonly name: string,
    readonly keyId: Uint8Array,
    readonly publicKey: Uint8Array,
  ) {}

  static async fromKey(vkey: string): Promise<Verifier> {
    const [name, rest] = partition(vkey.trim(), "+");
    const [hexId, encoded] = partition(rest, "+");
    const data = base64Decode(encoded);
    if (!/^(?:[0-9a-fA-F]{2})*$/.test(hexId)) throw new LogVerificationError("a key id is hex", "malformed");
    const claimed = Uint8Array.from(hexId.match(/../g) ?? [], (pair) => parseInt(pair, 16));
    if (!name || /\s/.test(name) || claimed.length !== 4 || data.length !== 33 || data[0] !== ED25519) {
      throw new LogVerificationError("not an Ed25519 verifier key", "malformed");
    }
    const publicKey = data.slice(1);
    const digest = await sha256(utf8(`${name}\n`), Uint8Array.of(ED25519), publicKey);
    if (!same(digest.slice(0, 4), claimed)) {
      throw new LogVerificationError("the key id does not match the key", "malformed");
    }
    return new Verifier(name, claimed, publicKey);
  }

  /** `<name>+<hex key id>+<base64(0x01 ‖ public key)>`, as published. */
  keyString(): string {
    const hex = Array.from(this.keyId, (byte) => byte.toString(16).padStart(2, "0")).join("");
    return `${this.name}+${hex}+${base64Encode(concat(Uint8Array.of(ED25519), this.publicKey))}`;
  }

  async verifies(message: Uint8Array, signature: Uint8Array): Promise<boolean> {
    const subtle = globalThis.crypto.subtle;
    try {
      const key = await subtle.importKey("raw", this.publicKey as BufferSource, { name: "Ed25519" }, false, ["verify"]);
      return await subtle.verify({ name: "Ed25519" }, key, signature as BufferSource, message as BufferSource);
    } catch {
      return false; // a signature of the wrong length
    }
  }
}

/** A checkpoint the trusted key signed: the log's tree of `size` entries has `root`.
 * `extensions` are the body's further lines (koinon writes `timestamp <unix seconds>`);
 * `note` is the signed note as received, to keep (a witness keeps these). */
export class Checkpoint {
  constructor(
    readonly origin: string,
    readonly size: number,
    readonly root: Uint8Array,
    readonly extensions: readonly string[],
    readonly note: string,
  ) {}

  /** The `timestamp <unix seconds>` extension, when the log wrote one. */
  get timestamp(): number | undefined {
    for (const line of this.extensions) {
      const [name, value] = partition(line, " ");
      if (name === "timestamp" && DECIMAL.test(value)) return Number(value);
    }
    return undefined;
  }
}

/** The checkpoint of a signed note, when the trusted key signed it and it is that log's (its
 * origin is the key's name). Rejects with LogVerificationError otherwise. */
export async function checkpointOpen(note: string, verifierKey: string | Verifier): Promise<Checkpoint> {
  const verifier = verifierKey instanceof Verifier ? verifierKey : await Verifier.fromKey(verifierKey);
  if (/[\u0000-\u0009\u000b-\u001f]/.test(note)) {
    throw new LogVerificationError("a note has no control characters", "malformed");
  }
  const split = note.lastIndexOf("\n\n");
  if (split < 0 || !note.endsWith("\n")) throw new LogVerificationError("not a signed note", "malformed");
  const text = note.slice(0, split + 1);
  const block = note.slice(split + 2, -1);
  let signed = false;
  for (const line of block.split("\n")) {
    if (!line.startsWith(SIGNATURE_PREFIX)) throw new LogVerificationError("not a signature line", "malformed");
    const [name, encoded] = partition(line.slice(SIGNATURE_PREFIX.length), " ");
    const blob = base64Decode(encoded);
    if (name !== verifier.name || !same(blob.slice(0, 4), verifier.keyId)) continue; // a witness's cosignature
    if (!(await verifier.verifies(utf8(text), blob.slice(4)))) {
      throw new LogVerificationError("the log key's signature does not verify", "forged");
    }
    signed = true;
  }
  if (!signed) throw new LogVerificationError("the trusted key did not sign this checkpoint", "forged");
  const [origin, size, encoded, ...extensions] = text.slice(0, -1).split("\n");
  if (encoded === undefined || !DECIMAL.test(size as string)) {
    throw new LogVerificationError("not a checkpoint: origin, size, root hash", "malformed");
  }
  const root = base64Decode(encoded);
  if (root.length !== HASH_SIZE) throw new LogVerificationError("a root hash has 32 bytes", "malformed");
  if (origin !== verifier.name) {
    throw new LogVerificationError(`a checkpoint of ${JSON.stringify(origin)}, not of this log`, "forged");
  }
  return new Checkpoint(origin, Number(size), root, extensions, note);
}

// RFC 9162 §2.1: leaf SHA-256(0x00 ‖ entry), node SHA-256(0x01 ‖ left ‖ right).

export async function leafHash(entry: Uint8Array | string): Promise<Uint8Array> {
  return sha256(Uint8Array.of(0), typeof entry === "string" ? utf8(entry) : entry);
}

const node = (left: Uint8Array, right: Uint8Array): Promise<Uint8Array> => sha256(Uint8Array.of(1), left, right);
// Arithmetic, not bit operators: those cut numbers to 32 bits.
const odd = (n: number): boolean => n % 2 === 1;
const half = (n: number): number => Math.floor(n / 2);

export interface InclusionCheck {
  leaf: Uint8Array;
  index: number;
  treeSize: number;
  proof: readonly Uint8Array[];
  root: Uint8Array;
}

/** RFC 9162 §2.1.3.2. Rejects with LogVerificationError (`proof_invalid`) unless leaf is at
 * index in the tree of treeSize whose head is root. */
export async function verifyInclusion({ leaf, index, treeSize, proof, root }: InclusionCheck): Promise<void> {
  const invalid = (message: string) => new LogVerificationError(message, "proof_invalid");
  if ([leaf, root, ...proof].some((h) => h.length !== HASH_SIZE) || !Number.isSafeInteger(index) || index < 0 || index >= treeSize) {
    throw invalid("the inclusion proof is malformed");
  }
  let fn = index;
  let sn = treeSize - 1;
  let r = leaf;
  for (const p of proof) {
    if (sn === 0) throw invalid("the inclusion proof is too long");
    if (odd(fn) || fn === sn) {
      r = await node(p, r);
      while (!odd(fn) && fn !== 0) [fn, sn] = [half(fn), half(sn)];
    } else {
      r = await node(r, p);
    }
    [fn, sn] = [half(fn), half(sn)];
  }
  if (sn !== 0 || !same(r, root)) throw invalid("the entry is not in the signed tree (its proof leads elsewhere)");
}

export interface ConsistencyCheck {
  oldSize: number;
  newSize: number;
  oldRoot: Uint8Array;
  newRoot: Uint8Array;
  proof: readonly Uint8Array[];
}

/** RFC 9162 §2.1.4.2. Rejects with LogVerificationError (`inconsistent`) unless the tree of
 * newSize with head newRoot extends the tree of oldSize with head oldRoot. */
export async function verifyConsistency({ oldSize, newSize, oldRoot, newRoot, proof }: ConsistencyCheck): Promise<void> {
  const fork = () => new LogVerificationError("the newer checkpoint does not extend the older one (a fork)", "inconsistent");
  if ([oldRoot, newRoot, ...proof].some((h) => h.length !== HASH_SIZE) || oldSize <= 0 || oldSize > newSize) throw fork();
  if (oldSize === newSize) {
    if (proof.length || !same(oldRoot, newRoot)) throw fork();
    return;
  }
  if (!proof.length) throw fork();
  let powerOfTwo = oldSize;
  while (!odd(powerOfTwo)) powerOfTwo = half(powerOfTwo);
  const path = powerOfTwo === 1 ? [oldRoot, ...proof] : [...proof];
  let fn = oldSize - 1;
  let sn = newSize - 1;
  while (odd(fn)) [fn, sn] = [half(fn), half(sn)];
  let fr = path[0] as Uint8Array;
  let sr = fr;
  for (const c of path.slice(1)) {
    if (sn === 0) throw fork();
    if (odd(fn) || fn === sn) {
      [fr, sr] = [await node(c, fr), await node(c, sr)];
      while (!odd(fn) && fn !== 0) [fn, sn] = [half(fn), half(sn)];
    } else {
      sr = await node(sr, c);
    }
    [fn, sn] = [half(fn), half(sn)];
  }
  if (sn !== 0 || !(same(fr, oldRoot) && same(sr, newRoot))) throw fork();
}

/** A served proof (a list of base64 hashes) decoded; LogVerificationError otherwise. */
export function proofHashes(proof: unknown): Uint8Array[] {
  if (!Array.isArray(proof) || !proof.every((h) => typeof h === "string")) {
    throw new LogVerificationError("a proof is a list of base64 hashes", "malformed");
  }
  return proof.map((h: string) => base64Decode(h));
}

/** The log entry of a body's receipt, as the server builds it: the receipt's identifying
 * fields and hashes, and of the served entry only what a receipt does not carry (the
 * generation's id, the source references, the sealing time), all bound by the leaf. */
export function entryFromReceipt(body: unknown, servedEntry: unknown): Record<string, unknown> {
  const release = isObject(body) && isObject(body.release) ? body.release : {};
  const entry: Record<string, unknown> = {};
  for (const name of ENTRY_FROM_RECEIPT) if (name !== "run" && name !== "release") entry[name] = release[name];
  entry.release = release.id;
  entry.run = isObject(body) ? body.run_id : undefined;
  for (const name of ENTRY_FROM_LOG) {
    if (!isObject(servedEntry) || !(name in servedEntry)) {
      throw new LogVerificationError(`the served entry has no ${name}`, "malformed");
    }
    entry[name] = servedEntry[name];
  }
  return entry;
}
