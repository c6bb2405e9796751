import { describe, expect, it } from "vitest";

import { metadataText } from "../src/file-metadata";
import { parseResult } from "../src/protocol";
import { detailFields } from "../src/render-details";
import { loadGolden } from "./golden";

describe("a file's own metadata on the root", () => {
  const result = (loadGolden("reply_node_metadata").message as { result: unknown }).result;

  it("is decoded from the golden reply of a safetensors root", () => {
    const details = parseResult("node", result);
    expect(details.metadata).toEqual({ format: "pt", note: "tdview test" });
  });

  it("is a field of the details list, one line per entry", () => {
    const fields = detailFields(parseResult("node", result));
    expect(fields).toContainEqual(["Metadata", "format: pt\nnote: tdview test"]);
  });

  it("is absent where the kernel sends none", () => {
    const plain = (loadGolden("reply_node_tensordict").message as { result: unknown }).result;
    const details = parseResult("node", plain);
    expect(details.metadata).toBeUndefined();
    expect(detailFields(details).map(([label]) => label)).not.toContain("Metadata");
  });

  it("writes values that are not strings as JSON, cut when long", () => {
    expect(metadataText({ total_size: 64, dims: [1, 2] })).toBe("total_size: 64\ndims: [1,2]");
    expect(metadataText({ long: "x".repeat(300) }, 10)).toBe(`long: ${"x".repeat(10)}…`);
  });
});
