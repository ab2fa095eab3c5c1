// What the tests share: the live server's address and keys, the vectors, body edits.
import { fileURLToPath } from "node:url";

/** An environment value the pytest driver (tests/clients/test_typescript_client.py) sets;
 * missing, the test fails: it never skips. */
export function required(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set: run these tests through tests/clients/test_typescript_client.py`);
  return value;
}

export function vectorsPath(name: string = "vectors.json"): string {
  // dist/test/helpers.js → clients/conformance/<name>
  return fileURLToPath(new URL(`../../../conformance/${name}`, import.meta.url));
}

/** The body with one character changed in its text, first citation, first card or policy
 * (in place: a parsed body keeps the number texts of everything else). */
export function oneCharacterChanged(body: unknown, part: string): unknown {
  const changed = body as Record<string, any>;
  if (part === "text") {
    changed.answer.text = changed.answer.text.slice(0, -1) + "!";
  } else if (part === "policy") {
    changed.evidence.policy.mode = changed.evidence.policy.mode.slice(0, -1) + "X";
  } else {
    const item = changed.answer[part][0];
    const key = "quote" in item ? "quote" : "label";
    item[key] = item[key].slice(0, -1) + "X";
  }
  return changed;
}

/** A `fetch` whose every event stream is cut after its first event, as a dropped
 * connection would be; it records each events request's Last-Event-ID. */
export function cuttingFetch(): { fetch: typeof fetch; cursors: (string | null)[] } {
  const cursors: (string | null)[] = [];
  const cutting: typeof fetch = async (input, init) => {
    const response = await fetch(input, init);
    const url = new URL(input instanceof Request ? input.url : String(input));
    if (!url.pathname.endsWith("/events") || !response.body) return response;
    cursors.push(new Headers(init?.headers).get("Last-Event-ID"));
    const reader = response.body.getReader();
    let seen = new Uint8Array();
    const cut = new ReadableStream<Uint8Array>({
      async pull(controller) {
        const { done, value } = await reader.read();
        if (done) {
          controller.close();
          return;
        }
        const joined = new Uint8Array(seen.length + value.length);
        joined.set(seen);
        joined.set(value, seen.length);
        seen = joined;
        const end = Buffer.from(seen).indexOf("\n\n");
        if (end >= 0) {
          controller.enqueue(seen.slice(0, end + 2));
          await reader.cancel();
          controller.error(new TypeError("connection dropped (test)"));
        }
      },
      cancel: () => reader.cancel(),
    });
    return new Response(cut, { status: response.status, headers: response.headers });
  };
  return { fetch: cutting, cursors };
}
