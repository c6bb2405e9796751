/**
 * The golden protocol messages in tests/protocol/ (shared with the Python tests).
 *
 * Each file is `{description, method?, message, buffers}`: `message` is the JSON content
 * of one message (or, for state*.json, the synced traits), `method` names the request
 * a reply answers, and `buffers` holds the binary buffers base64-encoded (on the wire
 * they travel as binary).
 */

import { readdirSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import type { Method } from "../src/protocol";

export const GOLDEN_DIR = join(
  dirname(fileURLToPath(import.meta.url)),
  "..",
  "..",
  "tests",
  "protocol",
);

export interface Golden {
  name: string;
  description: string;
  method?: Method;
  message: Record<string, unknown>;
  buffers: DataView[];
}

export function goldenNames(): string[] {
  return readdirSync(GOLDEN_DIR)
    .filter((f) => f.endsWith(".json"))
    .map((f) => f.slice(0, -".json".length))
    .sort();
}

export function loadGolden(name: string): Golden {
  const doc = JSON.parse(readFileSync(join(GOLDEN_DIR, `${name}.json`), "utf8"));
  const buffers = (doc.buffers as string[]).map((b64) => {
    const bytes = Buffer.from(b64, "base64");
    // A fresh ArrayBuffer, as a kernel message would give.
    const copy = new Uint8Array(bytes.length);
    copy.set(bytes);
    return new DataView(copy.buffer);
  });
  return { ...doc, name, buffers };
}

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/** A deep copy, changed at `path` by `change` (which gets the parent and the key). */
export function mutate(
  value: unknown,
  path: (string | number)[],
  change: (parent: Record<string | number, Json>, key: string | number) => void,
): Record<string, unknown> {
  const copy = structuredClone(value) as Record<string | number, Json>;
  let parent = copy;
  for (const key of path.slice(0, -1)) parent = parent[key] as Record<string | number, Json>;
  const last = path[path.length - 1];
  if (last !== undefined) change(parent, last);
  return copy as Record<string, unknown>;
}

/** Every key path in a JSON value (object keys and array indices), depth first. */
export function keyPaths(value: unknown, prefix: (string | number)[] = []): (string | number)[][] {
  if (Array.isArray(value)) {
    return value.flatMap((v, i) => [[...prefix, i], ...keyPaths(v, [...prefix, i])]);
  }
  if (value !== null && typeof value === "object") {
    return Object.entries(value).flatMap(([k, v]) => [
      [...prefix, k],
      ...keyPaths(v, [...prefix, k]),
    ]);
  }
  return [];
}

export function getAt(value: unknown, path: (string | number)[]): unknown {
  let v = value as Record<string | number, unknown> | undefined;
  for (const key of path) v = v?.[key] as Record<string | number, unknown> | undefined;
  return v;
}
