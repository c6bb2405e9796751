/**
 * A file's own metadata, a fact of the root's details: safetensors' `__metadata__` (or a
 * shard index's `metadata`). The kernel sends `metadata` on the root's details only where
 * the file records some; this module decodes it and writes it for the details list.
 */

import type { NodeDetails } from "./protocol";
import { type Decoder, isPlainObject, record, unknownValue } from "./validate";

const decodeMetadata = record(unknownValue);

/** Node details with the root's optional `metadata` (kept when present). */
export function withMetadata(decode: Decoder<NodeDetails>): Decoder<NodeDetails> {
  return (v, at) => {
    const details = decode(v, at);
    const metadata = isPlainObject(v) ? v.metadata : undefined;
    if (metadata !== undefined) details.metadata = decodeMetadata(metadata, `${at}.metadata`);
    return details;
  };
}

/**
 * One `key: value` line per entry, strings as they are, other values as JSON, each cut at
 * `limit` characters.
 *
 * @example metadataText({format: "pt", total_size: 64}) === "format: pt\ntotal_size: 64"
 */
export function metadataText(metadata: Record<string, unknown>, limit = 200): string {
  return Object.entries(metadata)
    .map(([key, value]) => {
      const text = typeof value === "string" ? value : JSON.stringify(value);
      return `${key}: ${text.length > limit ? `${text.slice(0, limit)}…` : text}`;
    })
    .join("\n");
}
