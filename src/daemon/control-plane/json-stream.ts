// Incremental JSON parser: bytes go in chunk by chunk as they arrive, the
// value comes out at the end, equal to what JSON.parse would give for the
// whole text. Used for large plans (16 MB of JSON at 100 000 files; the
// control client's STREAM_JSON_ABOVE) so that neither the body nor its text
// exists whole next to the parsed objects and the tree built from them.
//
// Strict like JSON.parse: one value, whitespace around it, no trailing commas,
// no control characters inside strings, JSON's number grammar. Strings
// without escapes are decoded straight from the chunk; the rare string with
// an escape, and numbers that are not plain integers, are handed to
// JSON.parse / Number as one small token. A token cut by a chunk boundary
// is carried over (only its bytes are copied) and finished on the start of
// the next chunk; one longer than MAX_TOKEN_BYTES is refused so a server
// cannot make the rescans quadratic.

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COMMA = 0x2c;
const COLON = 0x3a;
const OPEN_BRACE = 0x7b;
const CLOSE_BRACE = 0x7d;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACKET = 0x5d;
const MINUS = 0x2d;
const ZERO = 0x30;
const NINE = 0x39;

const NUMBER = /^-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?$/;
/** Digits that always make an exact double (< 2^53). */
const SAFE_DIGITS = 15;
/** Deeper nesting than any answer of the control plane: refused rather than grown without bound. */
export const MAX_JSON_DEPTH = 64;
/** Bytes of a new chunk joined to a cut token to finish it (plan tokens are far shorter). */
const HEAD_BYTES = 8192;
/** Short keys are decoded once and reused (a plan repeats the same four per file). */
const MAX_CACHED_KEY = 32;
const MAX_CACHED_KEYS = 256;
/** Longest token (string or number) that may span chunks; plan strings are paths (≤ 4 KiB) and hashes. */
export const MAX_TOKEN_BYTES = 1024 * 1024;

const enum Expect {
  /** A value (top level, after `:`, after `,` in an array). */
  Value,
  /** A value or `]` (just after `[`). */
  ValueOrEnd,
  /** A key or `}` (just after `{`). */
  KeyOrEnd,
  /** A key (after `,` in an object). */
  Key,
  Colon,
  /** `,` or the container's closing bracket. */
  CommaOrEnd,
  /** The top-level value is complete: only whitespace may follow. */
  Done,
}

interface Frame {
  readonly container: Record<string, unknown> | unknown[];
  readonly isArray: boolean;
  key: string;
}

const isSpace = (c: number) => c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;

function setKey(obj: Record<string, unknown>, key: string, value: unknown): void {
  // As JSON.parse: "__proto__" is an own property, never the prototype.
  if (key === '__proto__') Object.defineProperty(obj, key, { value, writable: true, enumerable: true, configurable: true });
  else obj[key] = value;
}

/** Whether `buf` holds `bytes` at `at` (a short key: a loop beats a native call here). */
function sameBytes(bytes: Buffer, buf: Buffer, at: number): boolean {
  for (let k = 0; k < bytes.length; k++) if (bytes[k] !== buf[at + k]) return false;
  return true;
}

export class JsonStreamParser {
  private readonly stack: Frame[] = [];
  private expect = Expect.Value;
  private result: unknown = undefined;
  /** Bytes of a token that the previous chunk cut. */
  private carry: Buffer | undefined;
  private offset = 0;

  write(chunk: Buffer): void {
    let buf = chunk;
    let from = 0;
    const carry = this.carry;
    if (carry !== undefined) {
      this.carry = undefined;
      // Finish the cut token on the carry plus the chunk's first bytes, then go on in the chunk itself.
      const head = Buffer.concat([carry, chunk.subarray(0, Math.min(chunk.length, HEAD_BYTES))]);
      const stop = this.parse(head, 0, false);
      if (stop >= carry.length) {
        this.offset += carry.length;
        from = stop - carry.length;
      } else {
        buf = Buffer.concat([carry, chunk]); // a token longer than the head: rare
      }
    }
    const end = this.parse(buf, from, false);
    if (end < buf.length) {
      if (buf.length - end > MAX_TOKEN_BYTES) throw this.error(`token longer than ${MAX_TOKEN_BYTES} bytes`, end);
      this.carry = Buffer.from(buf.subarray(end));
    }
    this.offset += end;
  }

  /** The parsed value; throws a SyntaxError when the text is not one complete JSON value. */
  end(): unknown {
    if (this.carry !== undefined) {
      const buf = this.carry;
      this.carry = undefined;
      const end = this.parse(buf, 0, true);
      this.offset += end;
    }
    if (this.expect !== Expect.Done) throw this.error('unexpected end of JSON');
    return this.result;
  }

  private error(message: string, at = 0): SyntaxError {
    return new SyntaxError(`${message} at byte ${this.offset + at}`);
  }

  /**
   * Parses `buf` from `from`; returns where it stopped: `buf.length`, or
   * the start of a token that continues in the next chunk (never when `last`).
   */
  private parse(buf: Buffer, from: number, last: boolean): number {
    const len = buf.length;
    let i = from;
    while (i < len) {
      const c = buf[i] as number;
      if (isSpace(c)) {
        i++;
        continue;
      }
      switch (this.expect) {
        case Expect.Done:
          throw this.error('unexpected data after JSON', i);
        case Expect.Colon:
          if (c !== COLON) throw this.error('expected ":"', i);
          this.expect = Expect.Value;
          i++;
          continue;
        case Expect.CommaOrEnd: {
          const top = this.stack[this.stack.length - 1] as Frame;
          if (c === COMMA) {
            this.expect = top.isArray ? Expect.Value : Expect.Key;
            i++;
            continue;
          }
          if (c !== (top.isArray ? CLOSE_BRACKET : CLOSE_BRACE)) throw this.error('expected "," or a closing bracket', i);
          this.close();
          i++;
          continue;
        }
        case Expect.KeyOrEnd:
        case Expect.Key: {
          if (c === CLOSE_BRACE && this.expect === Expect.KeyOrEnd) {
            this.close();
            i++;
            continue;
          }
          if (c !== QUOTE) throw this.error('expected a key', i);
          const next = this.string(buf, i, last, true);
          if (next < 0) return i;
          (this.stack[this.stack.length - 1] as Frame).key = this.token as string;
          this.expect = Expect.Colon;
          i = next;
          continue;
        }
        case Expect.ValueOrEnd:
        case Expect.Value: {
          if (c === CLOSE_BRACKET && this.expect === Expect.ValueOrEnd) {
            this.close();
            i++;
            continue;
          }
          if (c === OPEN_BRACE || c === OPEN_BRACKET) {
            if (this.stack.length >= MAX_JSON_DEPTH) throw this.error(`nested deeper than ${MAX_JSON_DEPTH}`, i);
            const isArray = c === OPEN_BRACKET;
            this.stack.push({ container: isArray ? [] : {}, isArray, key: '' });
            this.expect = isArray ? Expect.ValueOrEnd : Expect.KeyOrEnd;
            i++;
            continue;
          }
          let next: number;
          if (c === QUOTE) next = this.string(buf, i, last);
          else if (c === MINUS || (c >= ZERO && c <= NINE)) next = this.number(buf, i, last);
          else next = this.literal(buf, i, last);
          if (next < 0) return i;
          this.value(this.token);
          i = next;
          continue;
        }
      }
    }
    return len;
  }

  /** The value of the token just read by string/number/literal. */
  private token: unknown = undefined;

  /** Keys seen so far (objects of one shape repeat theirs), reused instead of decoded again. */
  private readonly keys = new Map<number, { readonly bytes: Buffer; readonly text: string }>();

  /** Reads the string starting at the quote `buf[start]`; -1 when the chunk ends first. */
  private string(buf: Buffer, start: number, last: boolean, isKey = false): number {
    const len = buf.length;
    let escaped = false;
    for (let i = start + 1; i < len; i++) {
      const c = buf[i] as number;
      if (c === QUOTE) {
        // Escapes (rare) are decoded by JSON.parse on just this token.
        if (escaped) this.token = JSON.parse(buf.toString('utf8', start, i + 1)) as string;
        else if (isKey && i - start <= MAX_CACHED_KEY) this.token = this.cachedKey(buf, start + 1, i);
        else this.token = buf.toString('utf8', start + 1, i);
        return i + 1;
      }
      if (c === BACKSLASH) {
        escaped = true;
        i++; // the escaped character (a quote or backslash included) never ends the string
        continue;
      }
      if (c < 0x20) throw this.error('control character in string', i);
    }
    if (last) throw this.error('unterminated string', start);
    return -1;
  }

  private cachedKey(buf: Buffer, start: number, end: number): string {
    const id = ((end - start) << 16) | ((buf[start] ?? 0) << 8) | (buf[end - 1] ?? 0);
    const hit = this.keys.get(id);
    if (hit !== undefined && sameBytes(hit.bytes, buf, start)) return hit.text;
    const text = buf.toString('utf8', start, end);
    if (this.keys.size < MAX_CACHED_KEYS) this.keys.set(id, { bytes: Buffer.from(buf.subarray(start, end)), text });
    return text;
  }

  private number(buf: Buffer, start: number, last: boolean): number {
    const len = buf.length;
    let i = start;
    let plain = true; // digits only, so far
    let n = 0;
    if (buf[i] === MINUS) {
      plain = false;
      i++;
    }
    for (; i < len; i++) {
      const c = buf[i] as number;
      if (c >= ZERO && c <= NINE) {
        n = n * 10 + (c - ZERO);
        continue;
      }
      if (c === 0x2e || c === 0x65 || c === 0x45 || c === 0x2b || c === MINUS) {
        plain = false;
        continue;
      }
      break;
    }
    if (i === len && !last) return -1;
    const digits = i - start;
    if (plain && digits <= SAFE_DIGITS && (digits === 1 || buf[start] !== ZERO)) {
      this.token = n;
      return i;
    }
    const text = buf.toString('latin1', start, i);
    if (!NUMBER.test(text)) throw this.error(`invalid number ${JSON.stringify(text.slice(0, 40))}`, start);
    this.token = Number(text);
    return i;
  }

  private literal(buf: Buffer, start: number, last: boolean): number {
    for (const [word, value] of LITERALS) {
      const end = start + word.length;
      if (end > buf.length) {
        if (!last && word.startsWith(buf.toString('latin1', start, buf.length))) return -1;
        continue;
      }
      if (buf.toString('latin1', start, end) === word) {
        this.token = value;
        return end;
      }
    }
    throw this.error('unexpected character', start);
  }

  /** Stores a complete value where the structure says it goes. */
  private value(v: unknown): void {
    const top = this.stack[this.stack.length - 1];
    if (top === undefined) {
      this.result = v;
      this.expect = Expect.Done;
      return;
    }
    if (top.isArray) (top.container as unknown[]).push(v);
    else setKey(top.container as Record<string, unknown>, top.key, v);
    this.expect = Expect.CommaOrEnd;
  }

  private close(): void {
    const frame = this.stack.pop() as Frame;
    this.value(frame.container);
  }
}

const LITERALS: readonly (readonly [string, unknown])[] = [
  ['true', true],
  ['false', false],
  ['null', null],
];
