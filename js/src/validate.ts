/**
 * Small run-time decoders for JSON that crosses the wire.
 *
 * A `Decoder<T>` checks an `unknown` value and returns it typed as `T`, or throws a
 * `ShapeError` naming where in the message the value was wrong (`result.children[3].key`).
 * Objects may carry extra keys (a compatible protocol addition); a missing or mistyped
 * key is an error.
 */

export class ShapeError extends Error {
  override name = "ShapeError";

  constructor(
    readonly at: string,
    readonly expected: string,
    got: unknown,
  ) {
    super(`${at || "message"}: expected ${expected}, got ${describe(got)}`);
  }
}

export type Decoder<T> = (value: unknown, at: string) => T;

type Decoded<S> = { [K in keyof S]: S[K] extends Decoder<infer T> ? T : never };

function describe(value: unknown): string {
  if (value === undefined) return "nothing";
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  if (typeof value === "string") return JSON.stringify(value.slice(0, 40));
  if (typeof value === "object") return "an object";
  return `${typeof value} ${String(value)}`;
}

export function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

export const str: Decoder<string> = (v, at) => {
  if (typeof v !== "string") throw new ShapeError(at, "a string", v);
  return v;
};

export const bool: Decoder<boolean> = (v, at) => {
  if (typeof v !== "boolean") throw new ShapeError(at, "a boolean", v);
  return v;
};

/** A finite number (JSON has no NaN or Infinity; the server sends null instead). */
export const num: Decoder<number> = (v, at) => {
  if (typeof v !== "number" || !Number.isFinite(v)) throw new ShapeError(at, "a number", v);
  return v;
};

/** A non-negative safe integer: counts, sizes, offsets, ids, indices. */
export const count: Decoder<number> = (v, at) => {
  if (typeof v !== "number" || !Number.isSafeInteger(v) || v < 0) {
    throw new ShapeError(at, "a non-negative integer", v);
  }
  return v;
};

/** A safe integer of any sign (a stack dimension may be negative). */
export const int: Decoder<number> = (v, at) => {
  if (typeof v !== "number" || !Number.isSafeInteger(v)) throw new ShapeError(at, "an integer", v);
  return v;
};

export const unknownValue: Decoder<unknown> = (v) => v;

export function literal<const T extends readonly (string | number | boolean | null)[]>(
  ...values: T
): Decoder<T[number]> {
  const expected = values.map((x) => JSON.stringify(x)).join(" | ");
  return (v, at) => {
    if (!values.includes(v as T[number])) throw new ShapeError(at, expected, v);
    return v as T[number];
  };
}

export function nullable<T>(inner: Decoder<T>): Decoder<T | null> {
  return (v, at) => (v === null ? null : inner(v, at));
}

export function array<T>(item: Decoder<T>): Decoder<T[]> {
  return (v, at) => {
    if (!Array.isArray(v)) throw new ShapeError(at, "an array", v);
    return v.map((x, i) => item(x, `${at}[${i}]`));
  };
}

export function pair<A, B>(first: Decoder<A>, second: Decoder<B>): Decoder<[A, B]> {
  return (v, at) => {
    if (!Array.isArray(v) || v.length !== 2) throw new ShapeError(at, "a pair", v);
    return [first(v[0], `${at}[0]`), second(v[1], `${at}[1]`)];
  };
}

export function record<T>(value: Decoder<T>): Decoder<Record<string, T>> {
  return (v, at) => {
    if (!isPlainObject(v)) throw new ShapeError(at, "an object", v);
    const out: Record<string, T> = {};
    for (const [k, x] of Object.entries(v)) out[k] = value(x, `${at}.${k}`);
    return out;
  };
}

/** An object with exactly these keys required (extra keys are allowed and dropped). */
export function object<S extends Record<string, Decoder<unknown>>>(shape: S): Decoder<Decoded<S>> {
  return (v, at) => {
    if (!isPlainObject(v)) throw new ShapeError(at, "an object", v);
    const out: Record<string, unknown> = {};
    for (const [key, decode] of Object.entries(shape)) {
      if (!Object.hasOwn(v, key)) throw new ShapeError(`${at}.${key}`, "a value", undefined);
      out[key] = decode(v[key], `${at}.${key}`);
    }
    return out as Decoded<S>;
  };
}

/** Runs a decoder and returns null instead of throwing. */
export function tryDecode<T>(decode: Decoder<T>, value: unknown, at = ""): T | null {
  try {
    return decode(value, at);
  } catch (e) {
    if (e instanceof ShapeError) return null;
    throw e;
  }
}
