/**
 * The canonical JSON that koinon's receipts hash (docs/releases.md).
 *
 * - Release policy version 2: RFC 8785, the JSON Canonicalization Scheme (JCS):
 *   `canonicalize(value)`. Keys sorted by UTF-16 code units, strings as `JSON.stringify`
 *   writes them, numbers as ECMAScript writes doubles.
 * - Release policy version 1: the server's Python serialisation (`json.dumps` with sorted
 *   keys): `canonicalV1(value)`. Keys sorted by code point, numbers as Python wrote them;
 *   a body parsed by `parseJson` keeps each number's text, so `2000.0` stays `2000.0`.
 *
 * No dependency: JSON.stringify already writes strings and numbers as RFC 8785 asks.
 */

export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };

/** Number texts as they appeared in the parsed JSON, per container and member. */
const numberTexts = new WeakMap<object, Map<string, string>>();

/** RFC 8785 (JCS) text of a JSON value; UTF-8 encode it before hashing. */
export function canonicalize(value: unknown): string {
  if (value === null) return "null";
  switch (typeof value) {
    case "boolean":
      return value ? "true" : "false";
    case "string":
      return JSON.stringify(value);
    case "number":
      if (!Number.isFinite(value)) throw new TypeError("JCS has no form for NaN or Infinity");
      return String(value); // ECMAScript's Number-to-String, as RFC 8785 §3.2.2.3 requires
    case "object":
      break;
    default:
      throw new TypeError(`JCS has no form for a ${typeof value}`);
  }
  if (Array.isArray(value)) return `[${value.map(canonicalize).join(",")}]`;
  const object = value as Record<string, unknown>;
  const keys = Object.keys(object)
    .filter((key) => object[key] !== undefined)
    .sort(); // Array.prototype.sort compares UTF-16 code units: RFC 8785 §3.2.3
  return `{${keys.map((key) => `${JSON.stringify(key)}:${canonicalize(object[key])}`).join(",")}}`;
}

/** Release policy version 1's canonical text (Python's `json.dumps(x, sort_keys=True,
 * separators=(",", ":"), ensure_ascii=False)`). */
export function canonicalV1(value: unknown): string {
  return v1(value, undefined);
}

function v1(value: unknown, numberText: string | undefined): string {
  if (value === null) return "null";
  switch (typeof value) {
    case "boolean":
      return value ? "true" : "false";
    case "string":
      return JSON.stringify(value); // Python escapes exactly these characters too
    case "number":
      // The text it was parsed from, unless the value has been changed since.
      return numberText !== undefined && Number(numberText) === value ? numberText : pythonNumber(value);
    case "object":
      break;
    default:
      throw new TypeError(`JSON has no form for a ${typeof value}`);
  }
  const texts = numberTexts.get(value as object);
  if (Array.isArray(value)) {
    return `[${value.map((item, index) => v1(item, texts?.get(String(index)))).join(",")}]`;
  }
  const object = value as Record<string, unknown>;
  const keys = Object.keys(object)
    .filter((key) => object[key] !== undefined)
    .sort(byCodePoint);
  return `{${keys.map((key) => `${JSON.stringify(key)}:${v1(object[key], texts?.get(key))}`).join(",")}}`;
}

function byCodePoint(a: string, b: string): number {
  const left = Array.from(a, (c) => c.codePointAt(0) as number);
  const right = Array.from(b, (c) => c.codePointAt(0) as number);
  for (let i = 0; i < Math.min(left.length, right.length); i++) {
    const difference = (left[i] as number) - (right[i] as number);
    if (difference !== 0) return difference;
  }
  return left.length - right.length;
}

/** How Python writes a number it holds as this double, for a body parsed without its
 * number texts: a safe integer as an int, anything else as `repr(float)`. */
function pythonNumber(value: number): string {
  if (!Number.isFinite(value)) throw new TypeError("JSON has no form for NaN or Infinity");
  if (Number.isSafeInteger(value)) return String(value);
  const [mantissa = "0", exponent = "0"] = value.toExponential().split("e"); // shortest digits
  const negative = mantissa.startsWith("-");
  const digits = mantissa.replace("-", "").replace(".", "");
  const point = Number(exponent) + 1; // value = 0.DIGITS × 10^point
  let text: string;
  if (point > 16 || point <= -4) {
    const power = point - 1;
    const sign = power < 0 ? "-" : "+";
    const rest = digits.length > 1 ? `.${digits.slice(1)}` : "";
    text = `${digits[0]}${rest}e${sign}${String(Math.abs(power)).padStart(2, "0")}`;
  } else if (point <= 0) {
    text = `0.${"0".repeat(-point)}${digits}`;
  } else if (point >= digits.length) {
    text = `${digits}${"0".repeat(point - digits.length)}.0`;
  } else {
    text = `${digits.slice(0, point)}.${digits.slice(point)}`;
  }
  return negative ? `-${text}` : text;
}

/**
 * `JSON.parse` that also remembers each number's text (for version 1 receipts) and never
 * assigns a prototype from a `__proto__` key. Throws `SyntaxError` on invalid JSON.
 */
export function parseJson(text: string): JsonValue {
  const parser = new Parser(text);
  parser.space();
  const value = parser.value();
  parser.space();
  if (parser.at < text.length) parser.fail("unexpected text after the value");
  return value;
}

const NUMBER = /-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?/y;
const STRING = /"(?:[^"\\\u0000-\u001f]|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4}))*"/y;

class Parser {
  at = 0;
  constructor(private readonly text: string) {}

  fail(why: string): never {
    throw new SyntaxError(`invalid JSON at ${this.at}: ${why}`);
  }

  space(): void {
    while (this.at < this.text.length && " \t\n\r".includes(this.text[this.at] as string)) this.at++;
  }

  value(): JsonValue {
    const c = this.text[this.at];
    if (c === "{") return this.object();
    if (c === "[") return this.array();
    if (c === '"') return this.string();
    for (const [word, value] of [["true", true], ["false", false], ["null", null]] as const) {
      if (this.text.startsWith(word, this.at)) {
        this.at += word.length;
        return value;
      }
    }
    return this.number()[0];
  }

  number(): [number, string] {
    NUMBER.lastIndex = this.at;
    const match = NUMBER.exec(this.text);
    if (!match) this.fail("expected a value");
    this.at += match[0].length;
    return [Number(match[0]), match[0]];
  }

  string(): string {
    STRING.lastIndex = this.at;
    const match = STRING.exec(this.text);
    if (!match) this.fail("invalid string");
    this.at += match[0].length;
    return JSON.parse(match[0]) as string;
  }

  member(key: string, texts: Map<string, string>): JsonValue {
    const c = this.text[this.at];
    if (c === "-" || (c !== undefined && c >= "0" && c <= "9")) {
      const [value, text] = this.number();
      texts.set(key, text);
      return value;
    }
    texts.delete(key);
    return this.value();
  }

  object(): JsonValue {
    const object: Record<string, JsonValue> = {};
    const texts = new Map<string, string>();
    this.at++;
    this.space();
    if (this.text[this.at] === "}") {
      this.at++;
      return object;
    }
    for (;;) {
      this.space();
      if (this.text[this.at] !== '"') this.fail("expected a key");
      const key = this.string();
      this.space();
      if (this.text[this.at++] !== ":") this.fail("expected ':'");
      this.space();
      const value = this.member(key, texts);
      Object.defineProperty(object, key, { value, enumerable: true, writable: true, configurable: true });
      this.space();
      const next = this.text[this.at++];
      if (next === "}") break;
      if (next !== ",") this.fail("expected ',' or '}'");
    }
    if (texts.size) numberTexts.set(object, texts);
    return object;
  }

  array(): JsonValue {
    const array: JsonValue[] = [];
    const texts = new Map<string, string>();
    this.at++;
    this.space();
    if (this.text[this.at] === "]") {
      this.at++;
      return array;
    }
    for (;;) {
      this.space();
      array.push(this.member(String(array.length), texts));
      this.space();
      const next = this.text[this.at++];
      if (next === "]") break;
      if (next !== ",") this.fail("expected ',' or ']'");
    }
    if (texts.size) numberTexts.set(array, texts);
    return array;
  }
}
